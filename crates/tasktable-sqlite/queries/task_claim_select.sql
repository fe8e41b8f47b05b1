-- Due tasks of one queue in claim order. ?1 queue, ?2 now, ?3 kinds (JSON array), ?4
-- limit, ?5 the claimer's needles (JSON array; core's Target::needles: '|w:<id>|' and
-- '|g:<group>|' for each of its groups). Nothing is locked: the claim runs inside BEGIN
-- IMMEDIATE, which holds the only write lock until task_claim.sql has taken these rows.
--
-- The queue and now are read through scalar sub-selects, `(SELECT ?1)`: the bundled
-- SQLite is built with STAT4, and a statement that compares a bound parameter itself to an
-- indexed column is compiled again at its next run whenever that parameter's value
-- changes (once `ANALYZE` has written statistics), which `now` does at every claim.
--
-- Two lanes, each read in claim order from a partial index that holds only it
-- (tasktable_tasks_claim: untargeted; tasktable_tasks_targeted), each scan stopping after
-- ?4 rows, so tasks aimed at other workers are read only by the targeted lane. The first
-- ?4 of both are taken in claim order, tasks aimed at the claimer first among equal
-- priority (lane 0).
SELECT id FROM (
    SELECT * FROM (
        SELECT id, priority, run_at, 1 AS lane FROM tasktable_tasks
        WHERE state = 'pending' AND target IS NULL AND queue = (SELECT ?1)
          AND run_at <= (SELECT ?2)
          AND kind IN (SELECT value FROM json_each(?3))
        ORDER BY priority DESC, run_at, id
        LIMIT ?4)
    UNION ALL
    SELECT * FROM (
        SELECT id, priority, run_at, 0 AS lane FROM tasktable_tasks
        WHERE state = 'pending' AND target IS NOT NULL AND queue = (SELECT ?1)
          AND run_at <= (SELECT ?2)
          AND kind IN (SELECT value FROM json_each(?3))
          AND EXISTS (SELECT 1 FROM json_each(?5) n WHERE instr(target, n.value) > 0)
        ORDER BY priority DESC, run_at, id
        LIMIT ?4)
)
WHERE NOT EXISTS ({queue_paused})
ORDER BY priority DESC, lane, run_at, id
LIMIT ?4
