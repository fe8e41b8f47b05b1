-- Binds, in order: checkpoint (NULL keeps it), progress (NULL keeps it), id, token,
-- credential (the fence, rules.rs: NULL matches NULL).
UPDATE tasktable_tasks SET
    checkpoint = COALESCE(?, checkpoint),
    progress = COALESCE(?, progress)
WHERE id = ? AND {fence}
