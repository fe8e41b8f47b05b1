// One task through the TypeScript client that @hey-api/openapi-ts generates from
// tasktable's OpenAPI document: submit, read, claim as a pull worker, complete, read again.
//
// Run by .ci/openapi after generating ./client beside it: node roundtrip.js BASE_URL TOKEN.

import { client } from "./client/client.gen.js";
import { claim, completeLease, showTask, submitTask } from "./client/sdk.gen.js";

function check(condition: boolean, what: string, value: unknown): void {
  if (!condition) {
    throw new Error(`${what}: ${JSON.stringify(value)}`);
  }
}

// JSON with every object's keys in order: a stored payload need not keep its keys' order.
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}

async function main(): Promise<void> {
  const [base, token] = process.argv.slice(2);
  client.setConfig({ baseUrl: base, auth: token });
  // Each call throws on an error status, so its data is the 2xx answer.
  const strict = { throwOnError: true } as const;
  const payload = { path: "a.png", sizes: [64, 128], meta: { by: "typescript", deep: [[{ x: null }]] } };

  const submitted = await submitTask({
    ...strict,
    body: { kind: "resize", queue: "generated-typescript", payload },
  });
  check(submitted.data.created && submitted.data.task.state === "pending", "submit", submitted.data);
  const id = submitted.data.id;

  const shown = await showTask({ ...strict, path: { id } });
  check(shown.data.task.id === id, "show", shown.data);

  const claimed = await claim({
    ...strict,
    body: { kinds: ["resize"], worker_id: "generated-typescript", queue: "generated-typescript", limit: 1 },
  });
  const tasks = claimed.data.tasks;
  check(tasks.length === 1 && tasks[0].id === id, "claim", tasks);
  check(canonical(tasks[0].payload) === canonical(payload), "payload", tasks[0].payload);

  const done = await completeLease({
    ...strict,
    path: { id },
    body: { token: tasks[0].token, credential: tasks[0].credential, result: { ok: true } },
  });
  check(done.data.state === "succeeded", "complete", done.data);

  const after = await showTask({ ...strict, path: { id } });
  check(after.data.task.state === "succeeded", "state afterwards", after.data.task);
  check(canonical(after.data.task.result) === canonical({ ok: true }), "result", after.data.task.result);
  console.log(`typescript client: task ${id} submitted, claimed and completed`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
