// A real `tasktable serve` for the tests: its own SQLite database in a temporary
// directory, bearer tokens for each role, and restarts on the same port and database.
import { spawn, ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { Client } from "../src/index.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
export const TOKENS = { worker: "ts-worker-token-0123456789", operator: "ts-operator-token-0123456789", reader: "ts-reader-token-0123456789", admin: "ts-admin-token-0123456789" };

function binary(): string {
  const path = process.env.TASKTABLE_BIN ?? join(root, "target", "debug", "tasktable");
  if (!existsSync(path)) throw new Error(`no tasktable binary at ${path}: build it or set TASKTABLE_BIN`);
  return path;
}

export class Server {
  private readonly dir = mkdtempSync(join(tmpdir(), "tasktable-ts-"));
  private process: ChildProcess | undefined;
  address = "127.0.0.1:0";
  url = "";

  static async start(): Promise<Server> {
    const server = new Server();
    await server.start();
    return server;
  }

  async start(): Promise<void> {
    const env = { ...process.env, TASKTABLE_TOKENS: Object.entries(TOKENS).map(([r, t]) => `${r}:${t}`).join(","), RUST_LOG: "warn" };
    const child = spawn(binary(), ["serve", "--database-url", `sqlite://${this.dir}/tasktable.db`, "--listen", this.address, "--workers", "0"], {
      env,
      stdio: ["ignore", "pipe", "ignore"],
    });
    this.process = child;
    const lines = createInterface({ input: child.stdout! });
    const first = await new Promise<string>((resolve, reject) => {
      lines.once("line", resolve);
      child.once("exit", () => reject(new Error("tasktable serve did not start")));
    });
    // The first line names the address listened on (a free port the first time).
    this.address = first.trim().split(" ").pop()!.replace("http://", "");
    this.url = `http://${this.address}`;
  }

  async kill(): Promise<void> {
    const child = this.process;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    }
  }

  async restart(): Promise<void> {
    await this.kill();
    await this.start();
  }

  client(role: keyof typeof TOKENS): Client {
    return new Client(this.url, TOKENS[role]);
  }

  async close(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Polls `check` until it answers something truthy; fails after `timeoutMs`. The server
 * is another process and the worker acknowledges on its own schedule, so the task's state
 * in the server is the only signal there is: it is read, not slept on. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined | null | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
