-- Takes the tasks task_claim_select.sql chose and locked, in the same transaction. MySQL
-- has no UPDATE ... RETURNING: the claimed rows are read back afterwards, still locked,
-- with the shared layer's query of tasks by id (tasktable_sql::query::get_many).
--
-- The SET items are the claim's transition, rendered once for every claim (rules.rs,
-- `claim_write`, written so that MySQL's left-to-right SET agrees with the other
-- databases). Binds, in order: now, the lease's end (twice), now, worker id, worker host,
-- each chosen id with its fresh credential (the credentials marker is `CASE id WHEN ? THEN
-- ? ... END`), now (twice), each chosen id (one placeholder per id).
UPDATE tasktable_tasks SET
    {claim_write}
WHERE id IN ({ids}) AND state = 'pending'
