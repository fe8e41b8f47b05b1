-- The queues of the tasks a finish gave back without delay (one placeholder per id),
-- which are due at once: the idle workers of this process are woken once the finish
-- commits (MySQL has no NOTIFY; other processes find the work on their next poll). Read
-- inside the finish's transaction, on rows it holds locked.
SELECT DISTINCT queue FROM tasktable_tasks WHERE id IN ({ids}) AND state = 'pending'
