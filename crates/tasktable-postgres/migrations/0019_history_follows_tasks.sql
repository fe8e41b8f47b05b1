-- A task's history still goes with the task (deleted with it, by tasktable's retention or
-- by a user's own DELETE), but through a statement trigger instead of the foreign key of
-- version 1. The key's check ran at every attempt recorded: a lookup of the task and a
-- KEY SHARE lock on its row, written to the WAL, in the finish of every task (about a
-- tenth of PostgreSQL's CPU per task in a drain; docs/benchmarks.md, section 34). The
-- check guarded nothing tasktable needs: history rows are written only in the statement
-- or transaction that moves their task, which holds the task's row. The trigger deletes
-- the history of all the tasks one DELETE removed in one statement; a second one empties
-- the history when the tasks are truncated (TRUNCATE ... CASCADE reached it through the
-- key).
ALTER TABLE tasktable_attempts DROP CONSTRAINT IF EXISTS tasktable_attempts_task_id_fkey;

CREATE OR REPLACE FUNCTION tasktable_attempts_follow_tasks() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM tasktable_attempts a USING tasktable_deleted_tasks d WHERE a.task_id = d.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER tasktable_attempts_follow_tasks AFTER DELETE ON tasktable_tasks
    REFERENCING OLD TABLE AS tasktable_deleted_tasks
    FOR EACH STATEMENT EXECUTE FUNCTION tasktable_attempts_follow_tasks();

CREATE OR REPLACE FUNCTION tasktable_attempts_follow_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE tasktable_attempts;
    RETURN NULL;
END
$$;

CREATE TRIGGER tasktable_attempts_follow_truncate AFTER TRUNCATE ON tasktable_tasks
    FOR EACH STATEMENT EXECUTE FUNCTION tasktable_attempts_follow_truncate();
