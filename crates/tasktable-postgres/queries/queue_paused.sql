-- Whether queue $1 is closed to the hot path, paused or limited by a policy (a limited
-- queue is claimed by the shared SQL layer's limited claim): a row here. Part of
-- task_claim_select.sql on PostgreSQL (its NOT EXISTS) rather than a statement of its
-- own, so that a claim stays one statement. A plain sub-select, not locked: FOR UPDATE
-- in task_claim_select.sql locks only the task rows (`OF t`).
SELECT 1 FROM tasktable_queues q WHERE q.name = $1 AND (q.paused OR q.limited)
