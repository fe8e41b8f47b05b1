"""Schemathesis hooks for .ci/schemathesis: three narrowings of what is generated, each
written down with its reason in docs/api.md ("The document as a contract"). They touch
only positive cases (requests the document says are valid), so every negative case is
sent exactly as drawn, and no check is turned off."""

import schemathesis

# The longest backoff cap the server takes: 30 days.
MAX_BACKOFF_MS = 30 * 24 * 3600 * 1000
# A long-poll claim that finds no work waits its whole wait_ms, up to 60 s, and generated
# claims almost never match a task: uncapped, the run would spend its time waiting.
MAX_WAIT_MS = 200
# Each task of a batch stays in the database for the rest of the run, and every later
# bulk operation may change all of them; a 10,000-task batch makes each one take
# seconds. tests/api.rs submits a batch of exactly the limit on every backend instead.
MAX_BATCH = 50


def _positive(case):
    meta = case.meta
    return meta is not None and meta.generation.mode == schemathesis.GenerationMode.POSITIVE


def _whole(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _submitted(body):
    if not isinstance(body, dict):
        return []
    tasks = body.get("tasks") if isinstance(body.get("tasks"), list) else [body]
    return [task for task in tasks if isinstance(task, dict)]


@schemathesis.hook
def filter_case(context, case):
    """Drops submits whose backoff starts above its own cap: the one rule between two
    fields the document can state only in words, as JSON Schema cannot compare them."""
    if not _positive(case):
        return True
    for task in _submitted(case.body):
        backoff = task.get("backoff")
        if not isinstance(backoff, dict):
            continue
        initial, cap = backoff.get("initial_ms"), backoff.get("max_ms")
        if _whole(initial) and _whole(cap) and 0 <= cap < initial <= MAX_BACKOFF_MS:
            return False
    return True


@schemathesis.hook
def map_case(context, case):
    if not _positive(case) or not isinstance(case.body, dict):
        return case
    path = case.operation.path
    if path == "/api/v1/claim":
        wait = case.body.get("wait_ms")
        if _whole(wait) and wait > MAX_WAIT_MS:
            case.body["wait_ms"] = MAX_WAIT_MS
    elif path == "/api/v1/tasks/batch":
        tasks = case.body.get("tasks")
        if isinstance(tasks, list) and len(tasks) > MAX_BATCH:
            case.body["tasks"] = tasks[:MAX_BATCH]
    return case
