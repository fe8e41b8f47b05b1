-- Chooses and locks up to LIMIT due tasks of one queue, in claim order. Binds, in order:
-- for the untargeted lane queue, now, each kind (one placeholder per kind), limit; for
-- the targeted lane the same with each of the claimer's needles (core's
-- Target::needles: '|w:<id>|', '|g:<group>|'; the {needles} marker is one
-- `INSTR(target, ?) > 0` per needle, joined by OR) before the limit; then the limit.
--
-- Two lanes, each a locking read in claim order through tasktable_tasks_claim, whose
-- `targeted` column (generated from target) splits it: tasks aimed at other workers are
-- read only by the targeted lane, which passes over those ahead of the first ones aimed
-- at this claimer. The first LIMIT of both are taken in claim order, tasks aimed at the
-- claimer first among equal priority (lane 0); rows a lane locked and the outer LIMIT
-- left out stay pending and are unlocked at commit.
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
-- FORCE INDEX keeps it on tasktable_tasks_claim, whose order (state, queue, targeted,
-- priority DESC, run_at, id) is the ORDER BY, and the scan stops after LIMIT rows. Rows it reads
-- and leaves out (not yet due, or of a kind this worker lacks) are unlocked at once
-- under READ COMMITTED, which every connection of the store uses.
SELECT id FROM (
    (SELECT id, priority, run_at, 1 AS lane
     FROM tasktable_tasks FORCE INDEX (tasktable_tasks_claim)
     WHERE state = 'pending' AND queue = ? AND targeted = 0 AND run_at <= ?
       AND kind IN ({kinds})
     ORDER BY priority DESC, run_at, id
     LIMIT ?
     FOR UPDATE SKIP LOCKED)
    UNION ALL
    (SELECT id, priority, run_at, 0 AS lane
     FROM tasktable_tasks FORCE INDEX (tasktable_tasks_claim)
     WHERE state = 'pending' AND queue = ? AND targeted = 1 AND run_at <= ?
       AND kind IN ({kinds}) AND ({needles})
     ORDER BY priority DESC, run_at, id
     LIMIT ?
     FOR UPDATE SKIP LOCKED)
) c
ORDER BY priority DESC, lane, run_at, id
LIMIT ?
