// Turns waiting for the server: one file per commit, written before anything is sent, removed only
// once the server has stored it (docs/integrations.md, OpenClaw plugin, outages).
//
// Files are named by time and a counter, so a directory listing is the commit order. A commit sent
// twice is harmless: the server stores a turn once per advancement key. A commit the server refuses
// (a 4xx: it can never succeed) is moved to rejected/ and logged, not dropped.

import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";

import { ServerError } from "./client.js";

let counter = 0;

export class Spool {
  constructor(dir, logger = console) {
    this.dir = dir;
    this.logger = logger;
    this.draining = null; // one drain at a time in this process
  }

  /** Write a commit durably (write, fsync, rename) and return its file name. */
  async add(entry) {
    await mkdir(this.dir, { recursive: true });
    counter = (counter + 1) % 1_000_000;
    const name = `${String(Date.now()).padStart(15, "0")}-${String(process.pid).padStart(8, "0")}-${String(counter).padStart(6, "0")}-${randomBytes(3).toString("hex")}.json`;
    const temporary = join(this.dir, `.${name}.tmp`);
    const file = await open(temporary, "w");
    try {
      await file.writeFile(JSON.stringify(entry));
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temporary, join(this.dir, name));
    return name;
  }

  /** The waiting commits' file names, oldest first. */
  async pending() {
    try {
      return (await readdir(this.dir)).filter((name) => name.endsWith(".json") && !name.startsWith(".")).sort();
    } catch (error) {
      if (error.code === "ENOENT") return [];
      throw error;
    }
  }

  /** Whether a commit with this advancement key is waiting (a retry of it is a duplicate). */
  async holds(advancementKey) {
    for (const name of await this.pending()) {
      const entry = await this.read(name);
      if (entry?.advancementKey === advancementKey) return true;
    }
    return false;
  }

  async read(name) {
    try {
      return JSON.parse(await readFile(join(this.dir, name), "utf8"));
    } catch (error) {
      if (error.code === "ENOENT") return null; // another drain sent it meanwhile
      throw error;
    }
  }

  /**
   * Send the waiting commits in order with `send(entry)`; stop at the first that cannot reach the
   * server (it stays, with everything after it). Return the answers by file name.
   */
  drain(send) {
    this.draining ??= this.#drain(send).finally(() => {
      this.draining = null;
    });
    return this.draining;
  }

  async #drain(send) {
    const answers = new Map();
    for (const name of await this.pending()) {
      const entry = await this.read(name);
      if (entry === null) continue;
      try {
        answers.set(name, await send(entry));
      } catch (error) {
        if (!(error instanceof ServerError)) return { answers, blocked: true };
        await this.#reject(name, error);
        answers.set(name, { status: "rejected", error });
        continue;
      }
      await rm(join(this.dir, name), { force: true });
    }
    return { answers, blocked: false };
  }

  async #reject(name, error) {
    const rejected = join(this.dir, "rejected");
    await mkdir(rejected, { recursive: true });
    await rename(join(this.dir, name), join(rejected, name)).catch(() => {});
    this.logger.error(`${error.message}; the turn is kept in ${join(rejected, name)}`);
  }
}
