-- Extends one lease. Binds, in order: new expiry (twice), id, token, credential (the
-- fence, rules.rs, matches NULL to NULL: a task claimed before credentials existed). Never extends past
-- the attempt's deadline (MySQL's LEAST() is NULL if any argument is, hence COALESCE).
UPDATE tasktable_tasks SET
    lease_expires_at = LEAST(?, COALESCE(deadline_at, ?))
WHERE id = ? AND {fence}
