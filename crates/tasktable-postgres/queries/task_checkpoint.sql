-- $1 checkpoint (NULL keeps it), $2 progress (NULL keeps it), $3 id, $4 token,
-- $5 credential
UPDATE tasktable_tasks SET
    checkpoint = coalesce($1, checkpoint),
    progress = coalesce($2, progress)
WHERE id = $3 AND lease_token = $4 AND state = 'running'
  AND lease_credential IS NOT DISTINCT FROM $5
