-- Queue policies (see docs/workers.md, "Queue policies"). `policy` is core's QueuePolicy
-- as JSON, NULL for none; `limited` says whether it limits anything, and sends the
-- queue's claims off the hot path (the claim's first read of this row refuses a limited
-- queue as it refuses a paused one). `rate_tat` is the queue's rate bucket: the time its
-- next start is due at the set rate (GCRA), NULL or past for a full bucket.
-- IF NOT EXISTS keeps each statement safe to run again (see 0001).
ALTER TABLE tasktable_queues
    ADD COLUMN IF NOT EXISTS limited BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN IF NOT EXISTS policy JSON,
    ADD COLUMN IF NOT EXISTS rate_tat DATETIME(6);
-- A rate bucket per task key of a queue whose policy has a key rate; a row whose tat has
-- passed is a full bucket, the same as no row, and retention deletes it.
CREATE TABLE IF NOT EXISTS tasktable_key_buckets (
    queue    VARCHAR(255) NOT NULL,
    task_key VARCHAR(255) NOT NULL,
    tat      DATETIME(6)  NOT NULL,
    PRIMARY KEY (queue, task_key),
    KEY tasktable_key_buckets_tat (tat)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_nopad_bin;
