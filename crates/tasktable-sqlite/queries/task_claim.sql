-- Takes the chosen due tasks. Run inside BEGIN IMMEDIATE, so no other writer can claim
-- them between the SELECT that chose them and this UPDATE (SQLite has one writer).
-- ?1 ids (JSON array), ?2 now, ?3 lease expiry, ?4 worker id, ?5 worker host, ?6 a fresh
-- credential for each id (a JSON object keyed by id)
--
-- The SET items are the claim's transition, rendered once for every claim (rules.rs,
-- `claim_write`), over ?2 now, ?3 the lease's end, ?4 and ?5 the worker, and the row's
-- credential looked up in ?6.
UPDATE tasktable_tasks SET
    {claim_write}
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'pending'
RETURNING *
