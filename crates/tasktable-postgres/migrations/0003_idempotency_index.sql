-- Only keyed tasks enter the idempotency index. A UNIQUE constraint indexes NULLs too, so
-- every task paid an entry there on submit and again on every claim and finish (an
-- update that changes an indexed column, as those do, writes a new entry into every
-- index of the table). Most tasks have no key.
ALTER TABLE tasktable_tasks DROP CONSTRAINT tasktable_tasks_idempotency_key_key;
CREATE UNIQUE INDEX tasktable_tasks_idempotency ON tasktable_tasks (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
