"""Schemathesis hooks for .ci/schemathesis: eight narrowings of what is generated, each
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
# A schedule's cron expression and time zone are checked by the server (a cron parser and
# the IANA database) and no JSON Schema can state either, so a schedule the document calls
# valid gets one of these; tests/schedules.rs checks the refusals of bad ones.
CRONS = ["*/5 * * * *", "0 2 * * *", "30 0 12 * * *", "0 9 * * MON-FRI", "15,45 * * * *"]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"]


def _positive(case):
    meta = case.meta
    return meta is not None and meta.generation.mode == schemathesis.GenerationMode.POSITIVE


def _whole(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _pick(options, drawn):
    return options[sum(map(ord, str(drawn))) % len(options)]


def _schedule_parts(body):
    """The recurrence and template of a schedule create or edit body, where present."""
    recurrence = body.get("recurrence")
    template = body.get("template")
    return (
        recurrence if isinstance(recurrence, dict) else None,
        template if isinstance(template, dict) else None,
    )


def _submitted(body):
    if not isinstance(body, dict):
        return []
    tasks = body.get("tasks") if isinstance(body.get("tasks"), list) else [body]
    return [task for task in tasks if isinstance(task, dict)]


def _breaks_a_runs_rule(task):
    """Whether a submitted task breaks a rule of multi-run tasks that the document states
    in words: the options of copies need copies, `at_once` is at most `copies`, copies
    exclude an affinity, a rearm needs an idempotency key; a broadcast (`copies`
    "all" or "all_joining") depends on the workers registered at the time (tests/runs.rs
    covers it); and a batch takes neither copies nor a timeout."""
    if isinstance(task.get("batch"), dict) and any(
        task.get(k) is not None for k in ("timeout_ms", "copies")
    ):
        # A batch has no timeout and no copies (docs/batches.md); tests/batches.rs
        # checks the refusals.
        return True
    copies = task.get("copies")
    if copies is None:
        return any(task.get(k) is not None for k in ("at_once", "repeat", "max_failed_runs", "rearm"))
    if copies in ("all", "all_joining") or task.get("affinity_ms") is not None:
        return True
    at_once = task.get("at_once")
    if _whole(at_once) and _whole(copies) and at_once > copies:
        return True
    return task.get("rearm") is not None and task.get("idempotency_key") is None


def _holds_nul(value):
    """Whether NUL is in a string or key of a JSON value, at any depth."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    if isinstance(value, dict):
        return any("\x00" in k or _holds_nul(v) for k, v in value.items())
    return False


def _payloads(body):
    """The payloads a request body gives: of submits, a schedule's template, an edit, and
    a batch's data."""
    if not isinstance(body, dict):
        return []
    found = [t.get("payload") for t in _submitted(body)]
    _, template = _schedule_parts(body)
    if template is not None:
        found.append(template.get("payload"))
    found.append(body.get("data"))
    return found


@schemathesis.hook
def filter_case(context, case):
    """Drops submits whose backoff starts above its own cap (a rule between two fields
    the document can state only in words, as JSON Schema cannot compare them), those that
    break a rule of multi-run tasks stated the same way, and payloads with NUL deeper
    than the schema spells the rule out."""
    if not _positive(case):
        return True
    if any(_breaks_a_runs_rule(task) for task in _submitted(case.body)):
        return False
    if case.operation.path == "/api/v1/batches" and isinstance(case.body, dict):
        # The route makes a batch whether or not the body says `batch`.
        if any(case.body.get(k) is not None for k in ("timeout_ms", "copies")):
            return False
    # A payload holds no NUL at any depth; the schema spells that out for its outer three
    # levels only (generators cannot follow a schema that refers to itself), so a payload
    # with NUL deeper down is valid to the document alone. tests/bad_input.rs checks the
    # refusal of NUL at every depth and in every place a payload is given.
    if any(_holds_nul(p) for p in _payloads(case.body)):
        return False
    tasks = _submitted(case.body)
    if case.operation.path.startswith("/api/v1/schedules") and isinstance(case.body, dict):
        tasks = [t for t in [_schedule_parts(case.body)[1]] if t is not None]
    for task in tasks:
        backoff = task.get("backoff")
        if not isinstance(backoff, dict):
            continue
        initial, cap = backoff.get("initial_ms"), backoff.get("max_ms")
        if _whole(initial) and _whole(cap) and 0 <= cap < initial <= MAX_BACKOFF_MS:
            return False
    return True


# The batch .ci/schemathesis makes before the run: only a batch's id names one, and no
# schema can list them, so a valid request to a batch operation names it.
SEEDED_BATCH = 1


@schemathesis.hook
def map_case(context, case):
    if not _positive(case):
        return case
    path = case.operation.path
    if path.startswith("/api/v1/batches/{id}") and case.path_parameters is not None:
        case.path_parameters["id"] = SEEDED_BATCH
    if not isinstance(case.body, dict):
        return case
    if path == "/api/v1/claim":
        wait = case.body.get("wait_ms")
        if _whole(wait) and wait > MAX_WAIT_MS:
            case.body["wait_ms"] = MAX_WAIT_MS
    elif path in ("/api/v1/schedules", "/api/v1/schedules/{schedule}"):
        recurrence, _ = _schedule_parts(case.body)
        if recurrence is not None:
            if recurrence.get("type") == "cron" and "expr" in recurrence:
                recurrence["expr"] = _pick(CRONS, recurrence["expr"])
            if recurrence.get("type") in ("cron", "daily") and "zone" in recurrence:
                recurrence["zone"] = _pick(ZONES, recurrence["zone"])
    elif path == "/api/v1/batches" and case.method.upper() == "POST":
        # A batch waits for its start only when created held, and start applies to no
        # other: held, every batch operation the links lead to can apply (start, then
        # pause, stop, resume and edit). tests/batches.rs covers batches created queued.
        case.body["held"] = True
    elif path == "/api/v1/tasks/batch":
        tasks = case.body.get("tasks")
        if isinstance(tasks, list) and len(tasks) > MAX_BATCH:
            case.body["tasks"] = tasks[:MAX_BATCH]
    return case
