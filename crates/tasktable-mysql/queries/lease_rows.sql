-- The leases of the tasks listed (one placeholder per id) and their expiry. MySQL has no
-- UPDATE ... RETURNING, so renew reads back here, in its transaction, every task it was
-- asked to renew: the new expiry of the leases held, and for those a fenced write
-- missed, whether an operator cancelled the task or its lease passed to someone else. A
-- checkpoint that missed reads its one row the same way.
-- A pending task's latest attempt (through tasktable_attempts_task) tells a lease taken
-- back by a new target; it is read for pending rows only.
SELECT t.id, t.state, t.lease_token, t.lease_credential, t.lease_expires_at,
       CASE WHEN t.state = 'pending' THEN (SELECT a.outcome FROM tasktable_attempts a WHERE a.task_id = t.id ORDER BY a.id DESC LIMIT 1) END AS last_outcome
FROM tasktable_tasks t WHERE t.id IN ({ids})
