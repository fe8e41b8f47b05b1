"""A tasktable worker in Python, using only the standard library.

It speaks the pull protocol: claim (long-polling), renew, checkpoint, complete. It then
plays a frozen worker: it claims a task with a short lease and never renews it, prints
the task's id and waits for a line "rescued" on stdin (the test rescues the task the way
a server's rescuer does), and shows that its stale token is refused.

Environment: TASKTABLE_SERVER, TASKTABLE_TOKEN (role worker), TASKTABLE_READER_TOKEN.
Prints the abandoned task as one JSON line, then one JSON summary line on success; exits non-zero with a message otherwise.
"""

import json
import os
import sys
import urllib.error
import urllib.request

BASE = os.environ["TASKTABLE_SERVER"]
TOKEN = os.environ["TASKTABLE_TOKEN"]
READER = os.environ["TASKTABLE_READER_TOKEN"]


def call(method, path, body=None, token=TOKEN):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        BASE + path,
        data=data,
        method=method,
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=70) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def expect(condition, what, answer):
    if not condition:
        sys.exit(f"{what}: {answer}")


def lease(task, op, **fields):
    return call("POST", f"/api/v1/leases/{task['id']}/{op}", {"token": task["token"], "credential": task["credential"], **fields})


def work_until_idle():
    done = 0
    while True:
        status, body = call("POST", "/api/v1/claim", {
            "kinds": ["double"], "worker_id": "py-worker", "worker_host": "python",
            "limit": 5, "wait_ms": 500,
        })
        expect(status == 200, "claim", body)
        if not body["tasks"]:
            return done
        for task in body["tasks"]:
            status, answer = lease(task, "renew", lease_ms=60000)
            expect(status == 200, "renew", answer)
            status, answer = lease(task, "checkpoint", progress={"pct": 50})
            expect(status == 200, "checkpoint", answer)
            status, answer = lease(task, "complete", result={"doubled": task["payload"]["n"] * 2})
            expect(status == 200 and answer["state"] == "succeeded", "complete", answer)
            done += 1


def wait_until_rescued(task_id):
    """Tells the test which task it abandoned and waits for the test to say the server's
    rescuer has taken it back."""
    print(json.dumps({"abandoned": task_id}), flush=True)
    if sys.stdin.readline().strip() != "rescued":
        sys.exit("the test did not confirm the rescue")
    status, shown = call("GET", f"/api/v1/tasks/{task_id}", token=READER)
    expect(status == 200 and shown["attempts"][-1]["outcome"] == "lease_expired", "rescued task", shown)


def main():
    completed = work_until_idle()

    status, body = call("POST", "/api/v1/claim", {
        "kinds": ["abandon"], "worker_id": "py-frozen", "lease_ms": 1000,
    })
    expect(status == 200 and len(body["tasks"]) == 1, "claim to abandon", body)
    frozen = body["tasks"][0]
    wait_until_rescued(frozen["id"])
    stale_status, stale = lease(frozen, "complete", result="too late")

    status, body = call("POST", "/api/v1/claim", {
        "kinds": ["abandon"], "worker_id": "py-worker", "wait_ms": 10000,
    })
    expect(status == 200 and len(body["tasks"]) == 1, "claim again", body)
    again = body["tasks"][0]
    status, answer = lease(again, "complete", result="done by the live worker")
    expect(status == 200, "complete after rescue", answer)

    print(json.dumps({
        "completed": completed,
        "stale_status": stale_status,
        "stale_code": stale["error"]["code"],
        "first_token": frozen["token"],
        "second_token": again["token"],
    }))


if __name__ == "__main__":
    main()
