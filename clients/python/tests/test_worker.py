"""The Python worker against a real `tasktable serve`: each test has its own server and
database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import unittest

from harness import TOKENS, Server, eventually

from tasktable import ApiError, Fail, Snooze, Task, Worker
from tasktable.worker import ahead_count

FAST = {"initial_ms": 0, "multiplier": 1.0, "max_ms": 0, "jitter": 0.0}
HERE = os.path.dirname(os.path.abspath(__file__))


class AheadTest(unittest.TestCase):
    def test_as_many_wait_as_the_slots_start_within_ten_milliseconds(self):
        self.assertEqual(ahead_count(10, None), 0, "none before a handler has run")
        self.assertEqual(ahead_count(10, 0.2), 0)
        self.assertEqual(ahead_count(1, 0.02), 0)
        self.assertEqual(ahead_count(10, 0.005), 20)
        self.assertEqual(ahead_count(10, 0.0005), 200)
        self.assertEqual(ahead_count(2, 0.00001), 160, "80 a slot")
        self.assertEqual(ahead_count(50, 0.0), 800, "800 in all")


class WorkerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.server = Server()
        self.ops = self.server.operator
        self.workers = []

    def tearDown(self) -> None:
        for worker, thread in self.workers:
            worker.stop()
            thread.join(timeout=30)
        self.server.close()

    def start(self, handlers, **options) -> Worker:
        worker = Worker(self.server.client("worker"), handlers, claim_wait_ms=2000, **options)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        self.workers.append((worker, thread))
        return worker

    def finished(self, ids):
        tasks = [self.ops.get(i) for i in ids]
        return tasks if all(t["state"] in ("succeeded", "failed", "cancelled") for t in tasks) else None

    def test_drains_tasks_and_records_results(self):
        ids = self.ops.submit_many([{"kind": "double", "payload": {"n": n}} for n in range(60)])
        self.start({"double": lambda task: {"doubled": task.payload["n"] * 2}}, concurrency=4)
        tasks = eventually("every task finished", lambda: self.finished(ids))
        for n, task in enumerate(tasks):
            self.assertEqual(task["state"], "succeeded")
            self.assertEqual(task["result"], {"doubled": n * 2})
            self.assertEqual(len(task["attempts"]), 1)

    def test_heartbeats_carry_the_kinds_of_its_handlers(self):
        other = self.ops.submit("resize", {})
        worker = self.start({"double": lambda task: task.payload, "add": lambda task: task.payload})
        shown = eventually(
            "the registry holds the worker",
            lambda: next((w for w in self.ops._http.request("GET", "/api/v1/workers")["workers"]
                          if w["id"] == worker.worker_id), None),
        )
        self.assertEqual(shown["kinds"], ["add", "double"])
        # So a task of a kind no worker handles says so.
        self.assertEqual(
            self.ops.get(other)["waiting"],
            [{"reason": "no_worker_for_kind",
              "text": 'no live worker handles kind "resize" in queue "default"'}],
        )

    def test_a_checkpoint_reaches_the_next_attempt_under_a_newer_fencing_token(self):
        seen = []

        def resumable(task: Task):
            seen.append((task.attempt, task.checkpoint, task.fencing_token))
            if task.checkpoint is None:
                task.save(checkpoint={"step": 1}, progress={"pct": 50})
                raise Fail("try again", retry_after=0)
            return {"resumed_from": task.checkpoint["step"]}

        task_id = self.ops.submit("resumable", {}, backoff=FAST)
        self.start({"resumable": resumable}, concurrency=1)
        (task,) = eventually("the task finished", lambda: self.finished([task_id]))
        self.assertEqual(task["state"], "succeeded")
        self.assertEqual(task["result"], {"resumed_from": 1})
        self.assertEqual([a["outcome"] for a in task["attempts"]], ["error", "succeeded"])
        (first, second) = seen
        self.assertIsNone(first[1])
        self.assertEqual(second[1], {"step": 1})
        self.assertGreater(second[2], first[2], "the second claim's fencing token is newer")

    def test_log_lines_join_the_tasks_history(self):
        def chatty(task: Task):
            task.log("fetching", "parsing")
            return None

        task_id = self.ops.submit("chatty", {})
        self.start({"chatty": chatty}, concurrency=1)
        (task,) = eventually("the task finished", lambda: self.finished([task_id]))
        lines = [e["detail"]["line"] for e in task["timeline"] if e["event"] == "log"]
        self.assertEqual(lines, ["fetching", "parsing"])

    def test_each_handler_outcome_is_recorded(self):
        def fail_for_good(task):
            raise Fail("not this one", retryable=False)

        snoozed = []

        def snooze_once(task):
            if not snoozed:
                snoozed.append(task.id)
                raise Snooze(0.0)
            return "after the snooze"

        def crash(task):
            raise KeyError("missing")

        ids = [
            self.ops.submit("fail_for_good", None),
            self.ops.submit("snooze_once", None),
            self.ops.submit("crash", None, max_attempts=1),
            self.ops.submit("anything", {"text": "naïve ☃ \u2028 \U0001F600", "nested": [1, {"a": None}], "big": 2**53}),
        ]
        self.start({
            "fail_for_good": fail_for_good, "snooze_once": snooze_once, "crash": crash,
            "anything": lambda task: task.payload,
        })
        failed, snoozed_task, crashed, anything = eventually("every task finished", lambda: self.finished(ids))
        self.assertEqual(failed["state"], "failed")
        self.assertEqual(failed["last_error"], "not this one")
        self.assertEqual(snoozed_task["state"], "succeeded")
        self.assertEqual([a["outcome"] for a in snoozed_task["attempts"]], ["snoozed", "succeeded"])
        self.assertEqual(crashed["state"], "failed")
        head = crashed["last_error"].splitlines()[0]
        self.assertEqual(head, "KeyError: 'missing'", "the first line says what was raised")
        self.assertIn('raise KeyError("missing")', crashed["last_error"], "the traceback names the line that raised")
        self.assertIn("in crash", crashed["last_error"])
        self.assertEqual(crashed["attempts"][-1]["error"], crashed["last_error"])
        self.assertEqual(anything["result"], anything["payload"])

    def test_a_traceback_is_stored_with_its_innermost_frames_only(self):
        def deep(n):
            if n == 0:
                raise ValueError("at the bottom")
            deep(n - 1)

        task_id = self.ops.submit("deep", None, max_attempts=1)
        self.start({"deep": lambda task: deep(500)})
        (task,) = eventually("the task failed", lambda: self.finished([task_id]))
        error = task["last_error"]
        self.assertTrue(error.startswith("ValueError: at the bottom\n"))
        self.assertIn('raise ValueError("at the bottom")', error, "the frame that raised is kept")
        self.assertLess(len(error), 4096 + 200, "the traceback is bounded")

    def test_results_the_server_cannot_take_fail_the_task_saying_why(self):
        import datetime

        ids = [
            self.ops.submit("not_json", None),
            self.ops.submit("too_large", None),
            self.ops.submit("fine", None),
            self.ops.submit("snooze_back", None),
        ]
        snoozed = []

        def snooze_back(task):
            if not snoozed:
                snoozed.append(task.id)
                raise Snooze(-5)  # a delay in the past: at once
            return "ok"

        self.start({
            "not_json": lambda task: {"at": datetime.datetime.now()},
            "too_large": lambda task: "x" * 1_100_000,
            "fine": lambda task: "fine",
            "snooze_back": snooze_back,
        }, concurrency=4)
        not_json, too_large, fine, snooze_task = eventually("every task finished", lambda: self.finished(ids))
        self.assertEqual(not_json["state"], "failed")
        self.assertIn("not JSON", not_json["last_error"])
        self.assertEqual(too_large["state"], "failed")
        self.assertIn("payload_too_large", too_large["last_error"])
        self.assertEqual(fine["result"], "fine")
        self.assertEqual([a["outcome"] for a in snooze_task["attempts"]], ["snoozed", "succeeded"])

    def test_runs_the_copies_of_a_multi_run_task_on_distinct_workers(self):
        task_id = self.ops.submit("copy", None, copies=2)
        ran = []
        for name in ("py-a", "py-b"):
            self.start({"copy": lambda task, name=name: ran.append((name, task.run)) or name}, worker_id=name)
        (task,) = eventually("the task finished", lambda: self.finished([task_id]))
        self.assertEqual(task["state"], "succeeded")
        self.assertEqual(sorted(name for name, _ in ran), ["py-a", "py-b"])
        self.assertEqual(sorted(run for _, run in ran), [1, 2])

    def test_survives_a_server_restart(self):
        worker = self.start({"double": lambda task: task.payload * 2}, concurrency=2)
        first = self.ops.submit_many([{"kind": "double", "payload": n} for n in range(10)])
        eventually("the first tasks finished", lambda: self.finished(first))
        self.server.restart()
        second = self.server.operator.submit_many([{"kind": "double", "payload": n} for n in range(10, 20)])
        tasks = eventually("the tasks after the restart finished", lambda: self.finished(second), timeout=90)
        self.assertTrue(all(t["state"] == "succeeded" for t in tasks))
        self.assertEqual([t["result"] for t in tasks], [n * 2 for n in range(10, 20)])
        self.assertFalse(worker._stopping.is_set())

    def test_a_lease_lost_to_the_rescuer_stops_its_handler(self):
        task_id = self.ops.submit("wait_for_stop", None, backoff=FAST)
        worker = self.spawn_worker(lease_ms=1000)
        self.assertEqual(self.read_line(worker), {"started": task_id})
        # Freeze the worker past its lease: the server's rescuer takes the task back.
        worker.send_signal(signal.SIGSTOP)
        try:
            eventually(
                "the rescuer took the task back",
                lambda: any(a["outcome"] == "lease_expired" for a in self.ops.get(task_id)["attempts"]),
            )
        finally:
            worker.send_signal(signal.SIGCONT)
        # Its next renewal is refused, and the handler is told to stop. (Claims it had
        # waiting may have taken the task again meanwhile: each is a handler of its own.)
        said = self.read_line(worker)
        while said == {"started": task_id}:
            said = self.read_line(worker)
        self.assertEqual(said, {"stopped": task_id})
        self.stop_worker(worker)

    def test_sigterm_gives_running_tasks_back_without_spending_an_attempt(self):
        task_id = self.ops.submit("wait_for_stop", None)
        worker = self.spawn_worker(grace="0.5")
        self.assertEqual(self.read_line(worker), {"started": task_id})
        self.stop_worker(worker)
        task = self.ops.get(task_id)
        self.assertEqual(task["state"], "pending")
        self.assertEqual([a["outcome"] for a in task["attempts"]], ["interrupted"])
        self.assertEqual(task["attempt"], 0, "an interrupted attempt is not spent")

    def test_a_stale_lease_in_a_batch_spoils_nothing_else(self):
        ids = self.ops.submit_many([{"kind": "k", "payload": n} for n in range(3)])
        client = self.server.client("worker")
        claimed = client.claim(["k"], "py-direct", limit=3)
        self.assertEqual(len(claimed), 3)
        stale = dict(claimed[1].lease(), credential="0" * 32)
        results = client.acknowledge([
            {**claimed[0].lease(), "op": "complete", "result": 0},
            {**stale, "op": "complete", "result": 1},
            {**claimed[2].lease(), "op": "renew", "lease_ms": 60000},
        ])
        self.assertEqual([r.ok for r in results], [True, False, True])
        self.assertEqual(results[1].code, "lease_lost")
        self.assertIsNotNone(results[2].lease_expires_at)
        self.assertEqual([self.ops.get(i)["state"] for i in ids], ["succeeded", "running", "running"])
        with self.assertRaises(ApiError) as refused:
            client.acknowledge([{**claimed[1].lease(), "op": "finish"}])
        self.assertEqual(refused.exception.status, 422)

    def test_short_handlers_are_claimed_ahead_in_large_claims(self):
        ids = self.ops.submit_many([{"kind": "noop", "payload": None} for _ in range(600)])
        worker = Worker(self.server.client("worker"), {"noop": lambda task: None}, concurrency=2, claim_wait_ms=2000)
        sizes = []
        claim = worker.client.claim
        worker.client.claim = lambda *a, **kw: sizes.append(len(got := claim(*a, **kw))) or got
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        self.workers.append((worker, thread))
        tasks = eventually("every task finished", lambda: self.finished(ids))
        self.assertTrue(all(t["state"] == "succeeded" and len(t["attempts"]) == 1 for t in tasks))
        self.assertEqual(sizes[0], 2, "nothing is claimed ahead before a handler has run")
        # Ten times the concurrency at least: how far ahead follows the handlers' measured
        # time, which a loaded machine stretches, so the bound is far below the usual 160.
        self.assertGreater(max(sizes), 20, f"claims of short handlers carry many tasks: {sizes}")

    def test_tasks_claimed_ahead_are_given_back_unrun_when_the_worker_stops(self):
        release = threading.Event()
        started = []

        def block(task):
            started.append(task.id)
            release.wait(30)

        worker = self.start({"warm": lambda task: None, "block": block}, concurrency=1, shutdown_grace=10)
        warm = self.ops.submit("warm", None)
        eventually("the warm-up ran", lambda: self.ops.get(warm)["state"] == "succeeded")
        ids = self.ops.submit_many([{"kind": "block", "payload": n} for n in range(30)])
        eventually("one runs while the others wait", lambda: len(started) == 1 and all(
            self.ops.get(i)["state"] == "running" for i in ids))
        worker.stop()
        release.set()
        self.workers[-1][1].join(timeout=30)
        tasks = [self.ops.get(i) for i in ids]
        ran = [t for t in tasks if t["id"] in started]
        waited = [t for t in tasks if t["id"] not in started]
        self.assertEqual([t["state"] for t in ran], ["succeeded"])
        self.assertEqual(len(waited), 29)
        for t in waited:
            self.assertEqual(t["state"], "pending")
            self.assertEqual(t["attempt"], 0, "a task given back unrun spends no attempt")
            self.assertEqual([a["outcome"] for a in t["attempts"]], ["interrupted"])

    def test_a_task_that_waited_too_long_for_a_slot_is_given_back_and_run_later(self):
        release = threading.Event()
        self.start({"warm": lambda task: None, "slow": lambda task: release.wait(30)}, concurrency=1)
        warm = self.ops.submit("warm", None)
        eventually("the warm-up ran", lambda: self.ops.get(warm)["state"] == "succeeded")
        ids = self.ops.submit_many([{"kind": "slow", "payload": n} for n in range(3)])
        # The first holds the slot until a task waiting behind it has been given back.
        eventually("a task waiting for the slot went back", lambda: any(
            a["outcome"] == "interrupted" for i in ids for a in self.ops.get(i)["attempts"]))
        release.set()
        tasks = eventually("every task finished", lambda: self.finished(ids), timeout=60)
        self.assertEqual([t["state"] for t in tasks], ["succeeded"] * 3)
        outcomes = sorted([a["outcome"] for a in t["attempts"]] for t in tasks)
        self.assertIn(["interrupted", "succeeded"], outcomes, "a task claimed ahead that waited over a second went back")
        self.assertTrue(all(t["attempt"] == 1 for t in tasks), "giving back spent no attempt")

    def test_tasks_waiting_behind_a_busy_slot_are_given_back_after_a_second(self):
        release = threading.Event()
        self.start({"warm": lambda task: None, "slow": lambda task: release.wait(30), "fast": lambda task: None},
                   concurrency=1)
        warm = self.ops.submit("warm", None)
        eventually("the warm-up ran", lambda: self.ops.get(warm)["state"] == "succeeded")
        slow = self.ops.submit("slow", None)
        fast = self.ops.submit_many([{"kind": "fast", "payload": n} for n in range(20)])
        eventually("the slow one runs with the fast ones claimed behind it",
                   lambda: all(self.ops.get(i)["state"] == "running" for i in [slow, *fast]))
        # The slot stays busy: the ones waiting for it go back, for any worker to take.
        eventually("the waiting tasks were given back", lambda: all(
            self.ops.get(i)["state"] == "pending" for i in fast), timeout=10)
        self.assertEqual(self.ops.get(slow)["state"], "running")
        release.set()
        tasks = eventually("every task finished", lambda: self.finished([slow, *fast]))
        self.assertEqual({t["state"] for t in tasks}, {"succeeded"})
        for t in tasks[1:]:
            # Given back once at least (a claim already in flight may take one again).
            *before, last = [a["outcome"] for a in t["attempts"]]
            self.assertEqual(last, "succeeded")
            self.assertTrue(before and set(before) == {"interrupted"}, t["attempts"])
            self.assertEqual(t["attempt"], 1, "giving back spent no attempt")

    def test_a_server_that_allows_smaller_claims_is_asked_for_fewer(self):
        ids = self.ops.submit_many([{"kind": "noop", "payload": None} for _ in range(300)])
        # 410 slots ask for 410 tasks at once, more than the server's 400: refused, the
        # worker halves its claims (1000 -> 500 -> 250) until one is taken.
        worker = Worker(self.server.client("worker"), {"noop": lambda task: None}, concurrency=410,
                        claim_batch=1000, claim_wait_ms=2000)
        asked = []
        claim = worker.client.claim
        worker.client.claim = lambda *a, **kw: asked.append(kw["limit"]) or claim(*a, **kw)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        self.workers.append((worker, thread))
        tasks = eventually("every task finished", lambda: self.finished(ids))
        self.assertEqual({t["state"] for t in tasks}, {"succeeded"})
        self.assertEqual(asked[:3], [410, 410, 250], f"claims asked for: {asked}")
        self.assertEqual(worker.claim_batch, 250)
        self.assertTrue(all(n <= 250 for n in asked[2:]), f"claims asked for: {asked}")

    def test_a_server_that_does_not_speak_the_workers_protocol_stops_it_saying_why(self):
        ids = self.ops.submit_many([{"kind": "noop", "payload": None} for _ in range(5)])
        client = self.server.client("worker")
        beat = client.heartbeat
        # A package from the future: its heartbeats name a protocol the server never spoke.
        client.heartbeat = lambda worker_id, **facts: beat(worker_id, **facts, protocol_version=2)
        worker = Worker(client, {"noop": lambda task: None}, claim_wait_ms=2000)
        with self.assertRaises(ApiError) as refused:
            worker.run()
        self.assertEqual(refused.exception.code, "protocol_unsupported")
        self.assertIn("upgrade the server", refused.exception.message)
        tasks = [self.ops.get(i) for i in ids]
        self.assertEqual({t["state"] for t in tasks}, {"pending"})
        self.assertEqual([t["attempts"] for t in tasks], [[]] * 5, "nothing was claimed")

    def test_a_worker_whose_id_another_token_owns_stops_saying_why(self):
        ids = self.ops.submit_many([{"kind": "noop", "payload": None} for _ in range(3)])
        self.server.client("admin").heartbeat("taken-id")
        worker = Worker(self.server.client("worker"), {"noop": lambda task: None},
                        worker_id="taken-id", claim_wait_ms=2000)
        with self.assertRaises(ApiError) as refused:
            worker.run()
        self.assertEqual(refused.exception.code, "worker_not_owned")
        self.assertEqual({self.ops.get(i)["state"] for i in ids}, {"pending"})

    # A worker in a process of its own, for the tests that signal it.

    def spawn_worker(self, lease_ms=30000, grace="5"):
        env = dict(os.environ, TASKTABLE_SERVER=self.server.url, TASKTABLE_TOKEN=TOKENS["worker"],
                   LEASE_MS=str(lease_ms), GRACE=grace, PYTHONPATH=os.pathsep.join(sys.path))
        process = subprocess.Popen([sys.executable, os.path.join(HERE, "stoppable_worker.py")],
                                   stdout=subprocess.PIPE, env=env, text=True)
        self.addCleanup(process.kill)
        return process

    def read_line(self, process):
        line = process.stdout.readline()
        self.assertTrue(line, "the worker process said nothing more")
        return json.loads(line)

    def stop_worker(self, process):
        process.send_signal(signal.SIGTERM)
        self.assertEqual(process.wait(timeout=60), 0)


if __name__ == "__main__":
    unittest.main()
