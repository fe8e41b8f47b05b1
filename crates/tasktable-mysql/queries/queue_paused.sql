-- Whether the queue (bound once) is closed to the hot path, paused or limited by a
-- policy (a limited queue is claimed by the shared SQL layer's limited claim), read
-- first in the claim's transaction. A statement of its own, and a plain read: inside
-- task_claim_select.sql's locking read, SKIP LOCKED would skip the queue's row while
-- someone pauses the queue, and so claim from a queue that is being paused.
SELECT 1 FROM tasktable_queues WHERE name = ? AND (paused OR limited)
