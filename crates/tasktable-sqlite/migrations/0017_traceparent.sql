-- The W3C traceparent of whoever submitted a task (docs/operations.md, "Traces"): the
-- API records its caller's, the Rust client its current span's, and every attempt of the
-- task, in this process or a worker in another language, continues that trace. Always
-- the 55-character version-00 form; NULL when the submitter had no trace and for tasks
-- submitted before version 17.
ALTER TABLE tasktable_tasks ADD COLUMN traceparent TEXT;
ALTER TABLE tasktable_tasks_archive ADD COLUMN traceparent TEXT;
