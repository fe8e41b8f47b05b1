-- Leases up to $4 due tasks of queue $1 in one statement: task_claim_select.sql chooses
-- and locks them (its CTEs, ending with `picked`), and the UPDATE takes them.
-- $1 queue, $2 now (NULL: the database's now()), $3 kinds, $4 limit, $5 lease in µs,
-- $6 worker id, $7 worker host, $8 one fresh credential per task that may be claimed
-- ($4 of them; the n-th picked row takes the n-th), $9 the claimer's target needles.
--
-- The MATERIALIZED CTEs are optimisation fences around SKIP LOCKED: the ids are chosen
-- (and locked) once, in index order, and only those rows are updated. Inlined into the UPDATE, the
-- planner could pick and lock rows in another order or more than LIMIT of them. Rows
-- another claimer holds are skipped, so concurrent workers never wait on each other.
-- After the lock, Postgres re-checks the WHERE on the newest row version, so a row
-- claimed by a transaction that committed meanwhile is left out.
WITH clock AS (
    SELECT coalesce($2::timestamptz, now()) AS now
),
{task_claim_select}
, numbered AS (
    -- Apart from `picked`: PostgreSQL allows no window function beside FOR UPDATE.
    SELECT id, row_number() OVER () AS n FROM picked
)
-- The SET items are the claim's transition, rendered once for every claim (rules.rs,
-- `claim_write`): now is clock.now, the lease ends at clock.now + $5 µs, the n-th picked
-- row takes the n-th credential.
UPDATE tasktable_tasks t SET
    {claim_write}
FROM numbered, clock
WHERE t.id = numbered.id
RETURNING t.*
