-- ?1 checkpoint (JSON or NULL to keep), ?2 progress (JSON or NULL to keep), ?3 id, ?4 token,
-- ?5 credential (the fence, rules.rs: NULL matches NULL)
UPDATE tasktable_tasks SET
    checkpoint = coalesce(?1, checkpoint),
    progress = coalesce(?2, progress)
WHERE id = ?3 AND {fence}
