-- Chooses and locks up to LIMIT due tasks of one queue, in claim order. Binds, in order:
-- queue, now, each kind (one placeholder per kind), limit.
--
-- MySQL has no UPDATE ... RETURNING, so a claim is this SELECT ... FOR UPDATE SKIP
-- LOCKED and then an UPDATE of exactly the ids it returned (task_claim.sql), in one
-- transaction. Rows other claimers hold are skipped, so claimers never wait for each
-- other.
--
-- InnoDB locks every row it reads, before ORDER BY and LIMIT are applied. If the rows
-- came from anywhere but the claim index in claim order, the server would read (and
-- lock) every due row of the queue and sort them (a filesort), and concurrent claimers
-- would find everything locked. The optimizer does pick that plan when a kind is rare
-- (MariaDB then intersects tasktable_tasks_kind and tasktable_tasks_state and sorts), so
-- FORCE INDEX keeps it on tasktable_tasks_claim, whose order (state, queue, priority
-- DESC, run_at, id) is the ORDER BY, and the scan stops after LIMIT rows. Rows it reads
-- and leaves out (not yet due, or of a kind this worker lacks) are unlocked at once
-- under READ COMMITTED, which every connection of the store uses.
SELECT id FROM tasktable_tasks FORCE INDEX (tasktable_tasks_claim)
WHERE state = 'pending' AND queue = ? AND run_at <= ? AND kind IN ({kinds})
ORDER BY priority DESC, run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED
