-- Version 3 moves PostgreSQL's idempotency key into a partial unique index, so tasks
-- without a key stop paying an index entry on every write. MySQL and MariaDB have no
-- partial indexes, so the schema stays as it is here; the version is recorded so every
-- backend counts versions alike.
SELECT 1;
