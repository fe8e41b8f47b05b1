-- The leases of the tasks listed (one placeholder per id) and their expiry. MySQL has no
-- UPDATE ... RETURNING, so renew reads back here, in its transaction, every task it was
-- asked to renew: the new expiry of the leases held, and for those a fenced write
-- missed, whether an operator cancelled the task or its lease passed to someone else. A
-- checkpoint that missed reads its one row the same way.
SELECT id, state, lease_token, lease_credential, lease_expires_at
FROM tasktable_tasks WHERE id IN ({ids})
