-- Whether queue ?1 is closed to the hot path, paused or limited by a policy (a limited
-- queue is claimed by the shared SQL layer's limited claim): a row here. Part of
-- task_claim_select.sql on SQLite (its NOT EXISTS) rather than a statement of its own:
-- the claim runs in the write transaction, which no pause can enter, so one statement
-- both tests the queue and chooses its tasks.
SELECT 1 FROM tasktable_queues q WHERE q.name = ?1 AND (q.paused OR q.limited)
