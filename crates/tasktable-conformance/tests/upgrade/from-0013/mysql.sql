-- Upgrade fixture, MySQL and MariaDB: a tasktable database as schema version 13 left it
-- (migrations 0001 to 0013, everything before 0014_submitters_and_logs), written by hand
-- from those migrations. The upgrade test (tests/upgrade.rs) applies migrations 1 to 13
-- with the migration runner, runs this file, lets the current code migrate the database,
-- then reads every row back and runs work through it. The three files of this directory
-- hold the same rows; tests/upgrade.rs says what it expects of each.
--
-- The database stands at 2025-01-01 12:00:00 UTC (the test's rescuer and scheduler run at
-- that time); what is not due yet is due in 2100.
--
-- Tasks: 1 archived (succeeded), 2 held, 3 pending and due, 4 pending until 2100,
-- 5 running with an expired lease, 6 running with a live lease, 7 succeeded (fired by
-- schedule 1), 8 failed after three attempts, 9 cancelled, 10 multi-run (one run of two
-- done), 11 batch (items 0 and 1 done, item 1 failed, its runner's lease expired).

-- A paused queue with a policy, and no tasks.
INSERT INTO tasktable_queues (name, paused, updated_at, limited, policy, rate_tat)
VALUES ('reports', TRUE, '2025-01-01 10:00:00.000000', TRUE, '{"max_running": 2}', NULL);

-- The worker registry: old-worker-1 went silent at 11:30 and was marked gone; old-worker-2
-- is live, drained by an operator, and holds task 6.
INSERT INTO tasktable_workers (id, host, address, pid, version, worker_groups, queues,
    capacity, protocol, draining, started_at, last_seen_at, gone_at)
VALUES ('old-worker-1', 'old-host', NULL, 4001, '0.1.0', '["gpu"]', 'null', 10, 'process',
    FALSE, '2025-01-01 09:00:00.000000', '2025-01-01 11:30:20.000000',
    '2025-01-01 11:31:00.000000');
INSERT INTO tasktable_workers (id, host, address, pid, version, worker_groups, queues,
    capacity, protocol, draining, started_at, last_seen_at, gone_at)
VALUES ('old-worker-2', 'old-host', NULL, 4002, '0.1.0', '[]',
    '["default", "runs", "batches"]', 4, 'process', TRUE, '2025-01-01 09:00:00.000000',
    '2025-01-01 11:59:55.000000', NULL);

-- Schedule 1 fires every hour on the hour; it fired the slot of 11:00 (task 7) and is
-- next due at 12:00.
INSERT INTO tasktable_schedules (id, name, recurrence, template, missed, overlap, enabled,
    covered_until, next_run_at, last_task_id, last_slot_at, created_at, updated_at)
VALUES (1, 'upgrade-hourly',
    '{"type": "every", "every_ms": 3600000, "start": "2025-01-01T00:00:00Z"}',
    '{"kind": "echo", "queue": "default", "payload": {"n": 7},
     "key": "upgrade:scheduled", "priority": 0, "max_attempts": 3,
     "backoff": {"initial": 5000, "multiplier": 2.0, "max": 3600000, "jitter": 0.1},
     "timeout_ms": null}',
    '{"policy": "run_latest"}', 'allow', TRUE, '2025-01-01 11:00:00.000000',
    '2025-01-01 12:00:00.000000', 7, '2025-01-01 11:00:00.000000',
    '2025-01-01 10:30:00.000000', '2025-01-01 11:00:00.000000');

-- 1: succeeded the day before and moved to the archive by retention, with its attempt.
INSERT INTO tasktable_tasks_archive (id, kind, queue, state, payload, result, checkpoint,
    progress, task_key, idempotency_key, priority, run_at, attempt, max_attempts,
    backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, timeout_ms,
    lease_token, lease_credential, lease_expires_at, deadline_at, worker_id, worker_host,
    last_error, created_at, updated_at, started_at, finished_at, schedule_id, slot_at,
    target)
VALUES (1, 'echo', 'default', 'succeeded', '{"n": 1}', '{"echo": {"n": 1}}', NULL, NULL,
    'upgrade:archived', NULL, 0, '2024-12-31 09:00:00.000000', 1, 3, 5000, 2.0, 3600000,
    0.1, NULL, 1, '1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a', NULL, NULL, 'old-worker-1',
    'old-host', NULL, '2024-12-31 09:00:00.000000', '2024-12-31 09:00:02.000000',
    '2024-12-31 09:00:01.000000', '2024-12-31 09:00:02.000000', NULL, NULL, NULL);
INSERT INTO tasktable_attempts_archive (id, task_id, attempt, worker_id, worker_host,
    started_at, finished_at, outcome, error, queue, kind, due_at, task_state)
VALUES (1, 1, 1, 'old-worker-1', 'old-host', '2024-12-31 09:00:01.000000',
    '2024-12-31 09:00:02.000000', 'succeeded', NULL, 'default', 'echo',
    '2024-12-31 09:00:00.000000', 'succeeded');

-- 2: held since it was submitted.
INSERT INTO tasktable_tasks (id, kind, queue, state, payload, task_key, run_at,
    max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter,
    created_at, updated_at)
VALUES (2, 'echo', 'default', 'held', '{"n": 2}', 'upgrade:held',
    '2025-01-01 10:00:00.000000', 3, 5000, 2.0, 3600000, 0.1, '2025-01-01 10:00:00.000000',
    '2025-01-01 10:00:00.000000');

-- 3: pending and due, with an idempotency key and a priority.
INSERT INTO tasktable_tasks (id, kind, queue, state, payload, task_key, idempotency_key,
    priority, run_at, max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms,
    backoff_jitter, created_at, updated_at)
VALUES (3, 'echo', 'default', 'pending', '{"n": 3}', 'upgrade:pending', 'upgrade:pending',
    5, '2025-01-01 11:00:00.000000', 3, 5000, 2.0, 3600000, 0.1,
    '2025-01-01 11:00:00.000000', '2025-01-01 11:00:00.000000');

-- 4: pending, not due until 2100, with a timeout.
INSERT INTO tasktable_tasks (id, kind, queue, state, payload, task_key, run_at,
    max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter,
    timeout_ms, created_at, updated_at)
VALUES (4, 'echo', 'default', 'pending', '{"n": 4}', 'upgrade:future',
    '2100-01-01 00:00:00.000000', 3, 5000, 2.0, 3600000, 0.1, 60000,
    '2025-01-01 11:00:00.000000', '2025-01-01 11:00:00.000000');

-- 5: running on old-worker-1, which stopped renewing: its lease ran out at 11:30:30. Its
-- checkpoint and progress stay for the next attempt.
INSERT INTO tasktable_tasks (id, kind, queue, state, payload, checkpoint, progress,
    task_key, run_at, attempt, max_attempts, backoff_initial_ms, backoff_multiplier,
    backoff_max_ms, backoff_jitter, lease_token, lease_credential, lease_expires_at,
    worker_id, worker_host, created_at, updated_at, started_at)
VALUES (5, 'echo', 'default', 'running', '{"n": 5}', '{"step": 2}', '{"done": 0.5}',
    'upgrade:expired', '2025-01-01 11:00:00.000000', 1, 3, 5000, 2.0, 3600000, 0.1, 1,
    '5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e', '2025-01-01 11:30:30.000000', 'old-worker-1',
    'old-host', '2025-01-01 11:00:00.000000', '2025-01-01 11:30:00.000000',
    '2025-01-01 11:30:00.000000');

-- 6: running on old-worker-2, whose lease is live (until 2100).
INSERT INTO tasktable_tasks (id, kind, queue, state, payload, task_key, run_at, attempt,
    max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter,
    lease_token, lease_credential, lease_expires_at, worker_id, worker_host, created_at,
    updated_at, started_at)
VALUES (6, 'echo', 'default', 'running', '{"n": 6}', 'upgrade:live',
    '2025-01-01 11:00:00.000000', 1, 3, 5000, 2.0, 3600000, 0.1, 1,
    '6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e', '2100-01-01 00:00:00.000000', 'old-worker-2',
    'old-host', '2025-01-01 11:00:00.000000', '2025-01-01 11:59:00.000000',
    '2025-01-01 11:59:00.000000');

-- 7: fired by schedule 1 for its slot of 11:00, succeeded with a result.
INSERT INTO tasktable_tasks (id, kind, queue, state, payload, result, task_key,
    idempotency_key, run_at, attempt, max_attempts, backoff_initial_ms, backoff_multiplier,
    backoff_max_ms, backoff_jitter, lease_token, lease_credential, worker_id, worker_host,
    created_at, updated_at, started_at, finished_at, schedule_id, slot_at)
VALUES (7, 'echo', 'default', 'succeeded', '{"n": 7}', '{"echo": {"n": 7}}',
    'upgrade:scheduled', 'schedule:1:2025-01-01T11:00:00.000Z',
    '2025-01-01 11:00:00.000000', 1, 3, 5000, 2.0, 3600000, 0.1, 1,
    '7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e', 'old-worker-1', 'old-host',
    '2025-01-01 11:00:00.000000', '2025-01-01 11:00:02.000000',
    '2025-01-01 11:00:01.000000', '2025-01-01 11:00:02.000000', 1,
    '2025-01-01 11:00:00.000000');
INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at,
    finished_at, outcome, error, queue, kind, due_at, task_state)
VALUES (7, 1, 'old-worker-1', 'old-host', '2025-01-01 11:00:01.000000',
    '2025-01-01 11:00:02.000000', 'succeeded', NULL, 'default', 'echo',
    '2025-01-01 11:00:00.000000', 'succeeded');

-- 8: failed for good at its third attempt: an error, an expired lease, a permanent error.
INSERT INTO tasktable_tasks (id, kind, queue, state, payload, task_key, run_at, attempt,
    max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter,
    lease_token, lease_credential, worker_id, worker_host, last_error, created_at,
    updated_at, started_at, finished_at)
VALUES (8, 'echo', 'default', 'failed', '{"n": 8}', 'upgrade:failed',
    '2025-01-01 10:00:50.000000', 3, 3, 5000, 2.0, 3600000, 0.1, 3,
    '8e8e8e8e8e8e8e8e8e8e8e8e8e8e8e8e', 'old-worker-1', 'old-host', 'invalid address',
    '2025-01-01 10:00:00.000000', '2025-01-01 10:00:51.000000',
    '2025-01-01 10:00:50.000000', '2025-01-01 10:00:51.000000');
INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at,
    finished_at, outcome, error, queue, kind, due_at, task_state)
VALUES (8, 1, 'old-worker-1', 'old-host', '2025-01-01 10:00:01.000000',
    '2025-01-01 10:00:02.000000', 'error', 'connection reset', 'default', 'echo',
    '2025-01-01 10:00:00.000000', 'pending');
INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at,
    finished_at, outcome, error, queue, kind, due_at, task_state)
VALUES (8, 2, 'old-worker-1', 'old-host', '2025-01-01 10:00:07.000000',
    '2025-01-01 10:00:40.000000', 'lease_expired', 'lease expired', 'default', 'echo',
    '2025-01-01 10:00:07.000000', 'pending');
INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at,
    finished_at, outcome, error, queue, kind, due_at, task_state)
VALUES (8, 3, 'old-worker-1', 'old-host', '2025-01-01 10:00:50.000000',
    '2025-01-01 10:00:51.000000', 'failed', 'invalid address', 'default', 'echo',
    '2025-01-01 10:00:50.000000', 'failed');

-- 9: cancelled by an operator before it ran, with the event of the cancel.
INSERT INTO tasktable_tasks (id, kind, queue, state, payload, task_key, run_at,
    max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter,
    created_at, updated_at, finished_at)
VALUES (9, 'echo', 'default', 'cancelled', '{"n": 9}', 'upgrade:cancelled',
    '2025-01-01 13:00:00.000000', 3, 5000, 2.0, 3600000, 0.1, '2025-01-01 10:30:00.000000',
    '2025-01-01 10:45:00.000000', '2025-01-01 10:45:00.000000');

-- 10: a multi-run task of two copies in queue 'runs': old-worker-1 succeeded at run 1, and
-- run 2 is still wanted (no worker succeeds twice). Its target is '|m|' and its lease
-- credential one no claim hands out.
INSERT INTO tasktable_tasks (id, kind, queue, state, payload, task_key, run_at, attempt,
    max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter,
    lease_token, lease_credential, worker_id, worker_host, created_at, updated_at,
    started_at, target, copies, at_once, repeat_runs, joining_runs, max_failed_runs,
    runs_active, runs_succeeded, runs_failed)
VALUES (10, 'echo', 'runs', 'pending', '{"n": 10}', 'upgrade:runs',
    '2025-01-01 11:00:00.000000', 1, 3, 5000, 2.0, 3600000, 0.1, 1,
    'a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0', 'old-worker-1', 'old-host',
    '2025-01-01 11:00:00.000000', '2025-01-01 11:00:02.000000',
    '2025-01-01 11:00:01.000000', '|m|', 2, 2, FALSE, FALSE, 2, 0, 1, 0);
INSERT INTO tasktable_runs (task_id, run, worker_id, worker_host, state, lease_token,
    lease_credential, lease_expires_at, deadline_at, checkpoint, progress, result, error,
    resumed_from, started_at, finished_at)
VALUES (10, 1, 'old-worker-1', 'old-host', 'succeeded', 1,
    'b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1', NULL, NULL, NULL, NULL, '{"echo": {"n": 10}}',
    NULL, NULL, '2025-01-01 11:00:01.000000', '2025-01-01 11:00:02.000000');
INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at,
    finished_at, outcome, error, queue, kind, due_at, task_state)
VALUES (10, 1, 'old-worker-1', 'old-host', '2025-01-01 11:00:01.000000',
    '2025-01-01 11:00:02.000000', 'succeeded', NULL, 'runs', 'echo',
    '2025-01-01 11:00:00.000000', 'pending');

-- 11: a batch of items 0 to 3 in queue 'batches': its runner on old-worker-1 saved items 0
-- and 1 as done (item 1 failed for good, within the error budget of 2), then its lease ran
-- out and the rescuer gave the task back for a retry.
INSERT INTO tasktable_tasks (id, kind, queue, state, payload, task_key, run_at, attempt,
    max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter,
    lease_token, lease_credential, worker_id, worker_host, last_error, created_at,
    updated_at, started_at)
VALUES (11, 'upgrade_items', 'batches', 'pending', '{"prefix": "item"}', 'upgrade:batch',
    '2025-01-01 11:20:05.000000', 1, 3, 5000, 2.0, 3600000, 0.1, 1,
    'c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1', 'old-worker-1', 'old-host', 'lease expired',
    '2025-01-01 11:00:00.000000', '2025-01-01 11:20:00.000000',
    '2025-01-01 11:10:00.000000');
INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at,
    finished_at, outcome, error, queue, kind, due_at, task_state)
VALUES (11, 1, 'old-worker-1', 'old-host', '2025-01-01 11:10:00.000000',
    '2025-01-01 11:20:00.000000', 'lease_expired', 'lease expired', 'batches',
    'upgrade_items', '2025-01-01 11:00:00.000000', 'pending');
INSERT INTO tasktable_batches (task_id, items, parallelism, rate, window_size,
    error_budget, item_retries, item_backoff_ms, prestart_timeout_ms, control, low_water,
    end_at, errors, items_per_second, data_version, saved_at, created_at)
VALUES (11, 4, 1, NULL, 1000, 2, 0, 100, 1800000, 'run', 2, 4, 1, 1.5, 0,
    '2025-01-01 11:15:00.000000', '2025-01-01 11:00:00.000000');
INSERT INTO tasktable_batch_failures (task_id, item, error, tries, failed_at)
VALUES (11, 1, 'item 1 is broken', 1, '2025-01-01 11:15:00.000000');

-- The event log: operators' changes before the upgrade.
INSERT INTO tasktable_events (happened_at, event, task_id, queue, kind, schedule_id,
    worker_id, actor_kind, actor, actor_role, detail)
VALUES ('2025-01-01 10:00:00.000000', 'queue_paused', NULL, 'reports', NULL, NULL, NULL,
    'cli', 'ops', 'admin', NULL);
INSERT INTO tasktable_events (happened_at, event, task_id, queue, kind, schedule_id,
    worker_id, actor_kind, actor, actor_role, detail)
VALUES ('2025-01-01 10:30:00.000000', 'schedule_created', NULL, 'default', 'echo', 1, NULL,
    'token', 'deploy-bot', 'operator', '{}');
INSERT INTO tasktable_events (happened_at, event, task_id, queue, kind, schedule_id,
    worker_id, actor_kind, actor, actor_role, detail)
VALUES ('2025-01-01 10:45:00.000000', 'cancelled', 9, 'default', 'echo', NULL, NULL, 'cli',
    'ops', 'admin', '{"state": {"old": "pending", "new": "cancelled"}}');
INSERT INTO tasktable_events (happened_at, event, task_id, queue, kind, schedule_id,
    worker_id, actor_kind, actor, actor_role, detail)
VALUES ('2025-01-01 11:50:00.000000', 'worker_drained', NULL, NULL, NULL, NULL,
    'old-worker-2', 'token', 'deploy-bot', 'operator', NULL);
