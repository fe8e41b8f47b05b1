-- Queue policies (see docs/workers.md, "Queue policies"). `policy` is core's QueuePolicy
-- as JSON, NULL for none; `limited` says whether it limits anything, and sends the
-- queue's claims off the hot path (the claim's test of this row refuses a limited queue
-- as it refuses a paused one). `rate_tat` is the queue's rate bucket: the time its
-- next start is due at the set rate (GCRA), NULL or past for a full bucket.
ALTER TABLE tasktable_queues ADD COLUMN limited INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasktable_queues ADD COLUMN policy TEXT;
ALTER TABLE tasktable_queues ADD COLUMN rate_tat TEXT;
-- A rate bucket per task key of a queue whose policy has a key rate; a row whose tat has
-- passed is a full bucket, the same as no row, and retention deletes it.
CREATE TABLE tasktable_key_buckets (
    queue    TEXT NOT NULL,
    task_key TEXT NOT NULL,
    tat      TEXT NOT NULL,
    PRIMARY KEY (queue, task_key)
);
CREATE INDEX tasktable_key_buckets_tat ON tasktable_key_buckets (tat);
