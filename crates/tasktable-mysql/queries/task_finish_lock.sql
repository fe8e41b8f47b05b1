-- Locks a finish's task rows and reads what decides whether each item applies (token,
-- credential, state, lease expiry) and when each task was due (task_finish.sql may move
-- run_at). Binds each id (one placeholder per id).
--
-- MySQL has no UPDATE ... RETURNING, and a multi-row UPDATE says how many rows it
-- changed, not which. So the fence is checked here, on rows that stay locked until the
-- transaction ends: nothing can change the answer before task_finish.sql writes them.
-- Rows are locked in id order, like every write of this store, so two batches over the
-- same rows cannot deadlock each other.
SELECT id, lease_token, lease_credential, state, lease_expires_at, run_at
FROM tasktable_tasks
WHERE id IN ({ids}) ORDER BY id FOR UPDATE
