-- ?1 new expiry, ?2 id, ?3 token, ?4 credential (the fence, rules.rs, matches NULL to
-- NULL: a task claimed before credentials existed). Never extends past the attempt's
-- deadline.
UPDATE tasktable_tasks SET
    lease_expires_at = CASE WHEN deadline_at IS NOT NULL AND deadline_at < ?1 THEN deadline_at ELSE ?1 END
WHERE id = ?2 AND {fence}
RETURNING lease_expires_at
