-- Chooses and locks up to $4 due tasks of queue $1 in claim order: the CTEs `untargeted`,
-- `targeted` and `picked` of task_claim.sql, so that a claim is one statement; `clock`
-- is that statement's now. $3 kinds, $9 the needles of the claimer (core's
-- Target::needles: '|w:<id>|' and '|g:<group>|' for each of its groups).
--
-- Two lanes, each read in claim order from a partial index that holds only it
-- (tasktable_tasks_claim: untargeted; tasktable_tasks_targeted), each scan stopping after
-- $4 rows: tasks aimed at other workers are read only by the targeted lane, which passes
-- over those ahead of the first ones aimed at this claimer. SKIP LOCKED passes over rows
-- another claimer holds, so concurrent workers never wait on each other. Locking clauses
-- may not stand in a UNION, hence a CTE per lane; `picked` keeps the first $4 of both in
-- claim order, tasks aimed at the claimer first among equal priority (lane 0). Rows a
-- lane locked and `picked` left out stay pending and are unlocked at commit.
--
-- {lane_limit} is $4 written into the text, once per limit a claim asks (each its own
-- prepared statement). With every LIMIT a parameter, PostgreSQL never trusts a generic
-- plan of this statement (it cannot tell how many rows a lane reads) and plans it anew at
-- every call, which costs more than running it; with the lanes' limits in the text, it
-- keeps the generic plan from the sixth call on.
untargeted AS MATERIALIZED (
    SELECT t.id, t.priority, t.run_at, 1 AS lane
    FROM tasktable_tasks t, clock
    WHERE t.state = 'pending' AND t.target IS NULL AND t.queue = $1
      AND t.run_at <= clock.now
      AND t.kind = ANY($3::text[])
      AND NOT EXISTS ({queue_paused})
    ORDER BY t.priority DESC, t.run_at, t.id
    LIMIT {lane_limit}
    FOR UPDATE OF t SKIP LOCKED
), targeted AS MATERIALIZED (
    SELECT t.id, t.priority, t.run_at, 0 AS lane
    FROM tasktable_tasks t, clock
    WHERE t.state = 'pending' AND t.target IS NOT NULL AND t.queue = $1
      AND t.run_at <= clock.now
      AND t.kind = ANY($3::text[])
      AND EXISTS (SELECT 1 FROM unnest($9::text[]) AS n(needle)
                  WHERE strpos(t.target, n.needle) > 0)
      AND NOT EXISTS ({queue_paused})
    ORDER BY t.priority DESC, t.run_at, t.id
    LIMIT {lane_limit}
    FOR UPDATE OF t SKIP LOCKED
), picked AS (
    SELECT id FROM (SELECT * FROM untargeted UNION ALL SELECT * FROM targeted) c
    ORDER BY priority DESC, lane, run_at, id
    LIMIT $4
)
