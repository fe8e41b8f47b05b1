-- Ends the attempts attempt_insert.sql has recorded, one statement for the batch. ?1 the
-- chosen items (one per task, read as rows by the finish_items marker, so each task row
-- joins one item), ?2 now, ?3 1 to apply only if the lease or deadline passed. Per item:
-- the new state (NULL for a retry: core's rule picks pending or failed), run_at if it
-- goes back to pending, 1 to give the attempt back, result, error, and the fence (token,
-- credential; `IS`: NULL matches NULL).
--
-- Every SET expression sees the row as it was before this UPDATE, so the new state is
-- written out again wherever run_at and finished_at depend on it, and the retry rule
-- reads the attempt that just ended and the row's current max_attempts (an operator may
-- have changed it while the task ran). The items' columns are named i_* so that the
-- rules' unqualified columns can only mean the task's. `+state` keeps the state out of
-- the choice of index: with statistics taken when few tasks ran, the planner read every
-- running task through the state index and joined each to every item (twice the CPU
-- per drained task), where the items should find their rows by id.
UPDATE tasktable_tasks SET
    state = coalesce(i_state, {retry_state}),
    run_at = CASE WHEN coalesce(i_state, {retry_state}) = 'pending'
                  THEN i_run_at ELSE run_at END,
    finished_at = CASE WHEN coalesce(i_state, {retry_state}) IN ('pending', 'held')
                  THEN NULL ELSE ?2 END,
    attempt = attempt - i_refund,
    result = coalesce(i_result, result),
    last_error = coalesce(i_error, last_error),
    lease_expires_at = NULL,
    deadline_at = NULL,
    updated_at = ?2,
    -- A retry of a task with an affinity waits for this worker (core's rule, rules.rs).
    {affinity}
FROM ({finish_items}) AS items
WHERE id = i_id AND {fence}
  AND (?3 = 0 OR lease_expires_at <= ?2)
