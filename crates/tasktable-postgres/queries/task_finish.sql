-- Ends a batch of attempts in one statement: moves each task out of 'running' (`done`),
-- records the attempts in the history (attempt_insert.sql, the `history` CTE) and names
-- the queues to wake (queues_to_wake.sql, the last SELECT). One input row per FinishRow:
-- $1 ids, $2 tokens, $3 new states (NULL for a retry: core's rule picks pending or failed),
-- $4 delays in µs (run_at = now + delay if the task goes back to pending), $5 give the
-- attempt back, $6 results, $7 errors, $8 outcomes; $9 now (NULL: now()), $10 apply only
-- if the lease (which never outlasts the deadline) has passed; $11 credentials.
-- Returns the input positions that applied; the others lost their lease.
WITH clock AS (
    SELECT coalesce($9::timestamptz, now()) AS now
), items AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::boolean[],
                         $6::jsonb[], $7::text[], $8::text[], $11::text[])
        WITH ORDINALITY AS i(id, token, new_state, delay_us, refund, result, error, outcome,
                             credential, ord)
), input AS (
    -- The first item of each task whose fence matches the row as the statement's snapshot
    -- saw it, with the time the task was due (run_at may change below): two items for
    -- the same task cannot both apply, and which one does is the input's order, not the
    -- plan's. The UPDATE checks the fence again on the row it locks.
    SELECT DISTINCT ON (i.id) i.*, b.run_at AS due_at
    FROM items i JOIN tasktable_tasks b ON b.id = i.id AND {fence_as_seen}
    ORDER BY i.id, i.ord
), done AS (
    -- The retry decision reads the row's current max_attempts, so an operator's change
    -- made while the task ran is honoured. SET expressions see the row before the update.
    UPDATE tasktable_tasks t SET
        state = coalesce(input.new_state, {retry_state}),
        run_at = CASE WHEN coalesce(input.new_state, {retry_state}) = 'pending'
                      THEN clock.now + input.delay_us * interval '1 microsecond' ELSE t.run_at END,
        finished_at = CASE WHEN coalesce(input.new_state, {retry_state}) IN ('pending', 'held')
                      THEN NULL ELSE clock.now END,
        attempt = t.attempt - CASE WHEN input.refund THEN 1 ELSE 0 END,
        result = coalesce(input.result, t.result),
        last_error = coalesce(input.error, t.last_error),
        lease_expires_at = NULL,
        deadline_at = NULL,
        updated_at = clock.now,
        -- A retry of a task with an affinity waits for this worker (core's rule, rules.rs).
        {affinity}
    FROM input, clock
    -- The fence (rules.rs) tests the state as `t.state || ''`, which keeps it out of the
    -- plan's choice of index: the planner's statistics, taken when few tasks run, say no
    -- row is 'running', so it would read every running row through a state index and
    -- join the input to each (O(running tasks) a call, and the unnest again per row)
    -- instead of looking the input's ids up by primary key (O(batch)).
    WHERE t.id = input.id AND {fence}
      AND (NOT $10 OR t.lease_expires_at <= clock.now)
    -- RETURNING sees the row after the update: add the refunded attempt back so the
    -- history names the attempt that just ended.
    RETURNING t.id, t.queue, t.kind, t.state, input.due_at, t.attempt + CASE WHEN input.refund THEN 1 ELSE 0 END AS attempt,
              t.worker_id, t.worker_host, t.started_at, clock.now AS finished_at,
              input.outcome, input.error, input.delay_us, input.ord
), history AS (
    {attempt_insert}
)
{queues_to_wake}
