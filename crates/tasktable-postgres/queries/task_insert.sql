-- Inserts submitted tasks. Two statements, separated by a line holding only `;`: the first
-- inserts a batch, the second one task.
--
-- The first inserts a batch of tasks in one statement. One input row per task:
-- $1 kinds, $2 queues, $3 states, $4 payloads, $5 keys, $6 idempotency keys, $7 priorities,
-- $8 run_at (NULL: now + delay), $9 delays in µs, $10 max attempts, $11 backoff initial ms,
-- $12 multipliers, $13 backoff max ms, $14 jitters, $15 timeouts ms, $17 targets (core's
-- stored form, NULL for any worker), $18 affinities ms, $19 who submits each (NULL:
-- unknown), $20 the submitters' traceparents (NULL: none); $16 now (NULL: now()).
--
-- Ids are drawn from the sequence in input order before the insert, so each input row
-- knows its id and the answer can be matched back to the input, and ids grow in submit
-- order. The sequence is looked up once (a MATERIALIZED CTE: inlined, the lookup by name
-- would run once per row).
--
-- The line marked ON_CONFLICT below is empty when no row has an idempotency key (such
-- rows cannot conflict, and ON CONFLICT would cost each a speculative insertion) and
-- otherwise reads `ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO
-- NOTHING`: a row whose key exists (committed, or earlier in this batch) is not
-- inserted, and its id comes back NULL here. ON CONFLICT waits for a concurrent
-- transaction that holds the same key, so racing submits never both create.
WITH seq AS MATERIALIZED (
    SELECT pg_get_serial_sequence('tasktable_tasks', 'id')::regclass AS seq
), clock AS (
    SELECT coalesce($16::timestamptz, now()) AS now
), input AS MATERIALIZED (
    SELECT i.*, nextval(seq.seq) AS id
    FROM seq, unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::text[], $6::text[], $7::int[],
                     $8::timestamptz[], $9::bigint[], $10::int[], $11::bigint[], $12::float8[],
                     $13::bigint[], $14::float8[], $15::bigint[], $17::text[], $18::bigint[],
                     $19::text[], $20::text[])
        WITH ORDINALITY AS i(kind, queue, state, payload, task_key, idempotency_key, priority,
                             run_at, delay_us, max_attempts, backoff_initial_ms, backoff_multiplier,
                             backoff_max_ms, backoff_jitter, timeout_ms, target, affinity_ms,
                             created_by, traceparent, ord)
    ORDER BY i.ord
), inserted AS (
    INSERT INTO tasktable_tasks (
        id, kind, queue, state, payload, task_key, idempotency_key, priority, run_at, max_attempts,
        backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, timeout_ms,
        target, affinity_ms, created_by, traceparent, created_at, updated_at
    ) OVERRIDING SYSTEM VALUE
    SELECT input.id, kind, queue, state, payload, task_key, idempotency_key, priority,
           coalesce(input.run_at, clock.now + delay_us * interval '1 microsecond'), max_attempts,
           backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, timeout_ms,
           target, affinity_ms, created_by, traceparent, clock.now, clock.now
    FROM input, clock
    ORDER BY input.ord
    /* ON_CONFLICT */
    RETURNING id, queue, state = 'pending' AND run_at <= created_at AS due
)
-- Inside a transaction, tasks due now wake idle workers when it commits: the line marked
-- WAKE reads `, CASE WHEN inserted.due THEN pg_notify('tasktable_wake', inserted.queue)
-- END AS woke`. The store's own autocommitted submit leaves it empty and sends the
-- wake-ups after this returns (wake.rs, Notifier), so its commit takes no NOTIFY lock.
SELECT input.ord, inserted.id, inserted.due
       /* WAKE */
FROM input LEFT JOIN inserted ON inserted.id = input.id
ORDER BY input.ord
;
-- The second statement inserts one task: the form a submit of a single task uses, since
-- the batch's machinery above (the input unnested from arrays, ids drawn ahead, the answer
-- joined back to the input) costs a lone row about a third of the statement's CPU
-- (docs/benchmarks.md, section 23). Same parameters, each a single value instead of an
-- array, and the same columns and rules as the batch's, which a conformance case holds
-- them to (a task submitted alone is stored as it is inside a batch); the id comes from
-- the identity column. The ON_CONFLICT and WAKE markers work as the batch's (WAKE reads
-- the inserted row instead of `inserted`): a task whose idempotency key exists is not
-- inserted and returns no row.
INSERT INTO tasktable_tasks (
    kind, queue, state, payload, task_key, idempotency_key, priority, run_at, max_attempts,
    backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, timeout_ms,
    target, affinity_ms, created_by, traceparent, created_at, updated_at
)
SELECT $1::text, $2::text, $3::text, $4::jsonb, $5::text, $6::text, $7::int,
       coalesce($8::timestamptz, clock.now + $9::bigint * interval '1 microsecond'), $10::int,
       $11::bigint, $12::float8, $13::bigint, $14::float8, $15::bigint,
       $17::text, $18::bigint, $19::text, $20::text, clock.now, clock.now
FROM (SELECT coalesce($16::timestamptz, now()) AS now) AS clock
/* ON_CONFLICT */
RETURNING 1::bigint AS ord, id, state = 'pending' AND run_at <= created_at AS due
          /* WAKE */
