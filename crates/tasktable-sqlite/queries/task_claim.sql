-- Takes the chosen due tasks. Run inside BEGIN IMMEDIATE, so no other writer can claim
-- them between the SELECT that chose them and this UPDATE (SQLite has one writer).
-- ?1 ids (JSON array), ?2 now, ?3 lease expiry, ?4 worker id, ?5 worker host, ?6 a fresh
-- credential for each id (a JSON object keyed by id)
UPDATE tasktable_tasks SET
    state = 'running',
    attempt = attempt + 1,
    lease_token = lease_token + 1,
    deadline_at = CASE WHEN timeout_ms IS NULL THEN NULL
                       ELSE strftime('%Y-%m-%dT%H:%M:%fZ', ?2, '+' || (timeout_ms / 1000.0) || ' seconds') END,
    lease_expires_at = CASE
        WHEN timeout_ms IS NULL THEN ?3
        ELSE min(?3, strftime('%Y-%m-%dT%H:%M:%fZ', ?2, '+' || (timeout_ms / 1000.0) || ' seconds')) END,
    worker_id = ?4,
    worker_host = ?5,
    lease_credential = json_extract(?6, '$."' || id || '"'),
    started_at = ?2,
    finished_at = NULL,
    updated_at = ?2
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'pending'
RETURNING *
