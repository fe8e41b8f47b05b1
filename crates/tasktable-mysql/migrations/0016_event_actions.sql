-- One operator action, one audit row (docs/events.md): a change to every task a filter
-- matches writes an event per task it changed, for each task's history, and one event
-- without a task that says what was asked (the change, the filter); all of them carry the
-- action's key in `action_key`. The action's own row counts the tasks it changed in
-- `action_tasks` (each chunk of the change adds its own, in its transaction). The audit
-- lists the action's row and leaves the tasks' rows to their histories; an action's tasks
-- are found by tasktable_events_action. NULL for events of a single change and for rows
-- written before version 16.
ALTER TABLE tasktable_events ADD COLUMN IF NOT EXISTS action_key VARCHAR(64),
    ADD COLUMN IF NOT EXISTS action_tasks BIGINT;
ALTER TABLE tasktable_events_archive ADD COLUMN IF NOT EXISTS action_key VARCHAR(64),
    ADD COLUMN IF NOT EXISTS action_tasks BIGINT;
CREATE INDEX IF NOT EXISTS tasktable_events_action ON tasktable_events (action_key, actor);
