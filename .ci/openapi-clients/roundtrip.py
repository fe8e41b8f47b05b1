"""One task through the Python client that openapi-python-client generates from
tasktable's OpenAPI document: submit, read, claim as a pull worker, complete, read again.

Run by .ci/openapi with the generated package installed: roundtrip.py BASE_URL TOKEN.
"""

import sys

from tasktable_client import AuthenticatedClient
from tasktable_client.api.default import claim, complete_lease, show_task, submit_task
from tasktable_client.models import (
    ClaimRequest,
    ClaimResponse200,
    CompleteLeaseBody,
    Finished,
    PayloadType3,
    ShowTaskResponse200,
    SubmitAnswer,
    SubmitTask,
)


def expect(value, kind):
    if not isinstance(value, kind):
        sys.exit(f"expected {kind.__name__}, got {value!r}")
    return value


def main() -> None:
    base, token = sys.argv[1], sys.argv[2]
    client = AuthenticatedClient(base_url=base, token=token, raise_on_unexpected_status=True)
    payload = {"path": "a.png", "sizes": [64, 128], "meta": {"by": "python", "deep": [[{"x": None}]]}}

    submitted = expect(
        submit_task.sync(
            client=client,
            body=SubmitTask(kind="resize", queue="generated-python", payload=PayloadType3.from_dict(payload)),
        ),
        SubmitAnswer,
    )
    assert submitted.created and submitted.task.state.value == "pending", submitted

    shown = expect(show_task.sync(submitted.id, client=client), ShowTaskResponse200)
    assert shown.task.id == submitted.id

    claimed = expect(
        claim.sync(
            client=client,
            body=ClaimRequest(kinds=["resize"], worker_id="generated-python", queue="generated-python", limit=1),
        ),
        ClaimResponse200,
    )
    assert [t.id for t in claimed.tasks] == [submitted.id], claimed
    task = claimed.tasks[0]
    assert task.payload == payload, task.payload

    done = expect(
        complete_lease.sync(
            task.id,
            client=client,
            body=CompleteLeaseBody(token=task.token, credential=task.credential, result={"ok": True}),
        ),
        Finished,
    )
    assert done.state.value == "succeeded", done

    shown = expect(show_task.sync(submitted.id, client=client), ShowTaskResponse200)
    assert shown.task.state.value == "succeeded", shown.task
    assert shown.task.result == {"ok": True}, shown.task.result
    print(f"python client: task {submitted.id} submitted, claimed and completed")


main()
