-- $1 checkpoint (NULL keeps it), $2 progress (NULL keeps it), $3 id, $4 token,
-- $5 credential
UPDATE tasktable_tasks SET
    checkpoint = coalesce($1, checkpoint),
    progress = coalesce($2, progress)
-- The fence (rules.rs): the row still runs under token $4 and credential $5.
WHERE id = $3 AND {fence}
