-- Version 3 moves PostgreSQL's idempotency key into a partial unique index, so tasks
-- without a key stop paying an index entry on every write. SQLite would have to rebuild
-- the tasks table to drop its inline UNIQUE constraint, so the schema stays as it is here;
-- the version is recorded so every backend counts versions alike.
SELECT 1;
