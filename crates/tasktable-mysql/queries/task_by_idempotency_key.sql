-- The task that holds an idempotency key. A locking read (LOCK IN SHARE MODE, which
-- MySQL 8 and MariaDB both accept) reads the newest committed row whatever the caller's
-- isolation level: under REPEATABLE READ a plain read could miss a row that a racing
-- submit committed after this transaction's snapshot, the very row our insert hit.
SELECT id FROM tasktable_tasks WHERE idempotency_key = ? LOCK IN SHARE MODE
