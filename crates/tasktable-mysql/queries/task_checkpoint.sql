-- Binds, in order: checkpoint (NULL keeps it), progress (NULL keeps it), id, token,
-- credential (`<=>`: NULL matches NULL).
UPDATE tasktable_tasks SET
    checkpoint = COALESCE(?, checkpoint),
    progress = COALESCE(?, progress)
WHERE id = ? AND lease_token = ? AND state = 'running' AND lease_credential <=> ?
