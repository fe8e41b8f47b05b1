-- Heartbeats carry the kinds a worker handles (docs/workers.md): `kinds` is a JSON array
-- of the kinds it has handlers for, so that a pending task can say whether any live
-- worker would take it (docs/api.md, "Why a task waits"). NULL for rows written before
-- version 18 and for workers that do not say: then nothing is concluded from them.
ALTER TABLE tasktable_workers ADD COLUMN IF NOT EXISTS kinds JSON;
