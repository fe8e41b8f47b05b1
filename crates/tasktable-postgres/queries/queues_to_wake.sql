-- Which items applied (their input positions, `ord`), and the queues of the tasks given
-- back without delay, which are due at once: NOTIFY wakes their idle workers when the
-- statement commits (PostgreSQL sends one notification per distinct queue). Part of
-- task_finish.sql on PostgreSQL (its last SELECT, over `done`), so that a finish is one
-- statement.
SELECT ord, queue, (state = 'pending' AND delay_us = 0) AS due,
       CASE WHEN state = 'pending' AND delay_us = 0 THEN pg_notify('tasktable_wake', queue) END AS woke
FROM done
