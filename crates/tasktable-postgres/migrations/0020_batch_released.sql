-- A batch submitted held waits for the business's start [S2] through pauses, stops and
-- resumes: `released_at` says when the business started it (its `start`, or its submit
-- when it was not submitted held), so that a resume knows whether to run the batch or to
-- let it wait again (core's `batch::awaits_start`). Batches from before this version
-- that still wait (held, never run, not paused) keep waiting; the rest count as started
-- at their submit, as they did.
ALTER TABLE tasktable_batches ADD COLUMN released_at TIMESTAMPTZ;
ALTER TABLE tasktable_batches_archive ADD COLUMN released_at TIMESTAMPTZ;
UPDATE tasktable_batches b SET released_at = b.created_at
FROM tasktable_tasks t
WHERE t.id = b.task_id
  AND NOT (t.state = 'held' AND b.control = 'run' AND t.attempt = 0 AND b.saved_at IS NULL);
UPDATE tasktable_batches_archive SET released_at = created_at;
