// The context engine: the server keeps the transcript, builds the context and owns the memory flush
// and compaction; OpenClaw keeps the model call and the tools (docs/integrations.md, OpenClaw plugin).

import { readFile } from "node:fs/promises";

import { ServerError, Unreachable } from "./client.js";
import { fitToBudget, storedMessages, toOpenClaw } from "./messages.js";

export const ENGINE_ID = "openclaw-site";
// The server accepts at most this many messages per request (OPENCLAW_MAX_BATCH_MESSAGES' default).
const BATCH = 500;
// A compaction runs the memory flush and the summary: model calls, so minutes rather than seconds.
const COMPACT_TIMEOUT_MS = 600_000;
const NO_MEMORY =
  "## Memory\nLong-term memory (openclaw-site) cannot be reached right now; memory tools will fail until it is back.";

export function engineInfo() {
  return {
    id: ENGINE_ID,
    name: "openclaw-site",
    version: "0.1.0",
    ownsCompaction: true,
    transcriptSemantics: {
      currentTurnFence: "before-current-turn-entry-v1",
      turnAdvancementIdempotency: "atomic-idempotent-v1",
    },
  };
}

export class SiteContextEngine {
  constructor({ client, spool, logger = console }) {
    this.client = client;
    this.spool = spool;
    this.logger = logger;
    this.info = engineInfo();
    this.lastAddition = null; // the last memory prompt the server gave, for an outage
    this.lastRefusal = null;
  }

  async bootstrap({ sessionKey, sessionId, sessionFile }) {
    const key = sessionKey ?? sessionId;
    let history;
    try {
      history = await readTranscript(sessionFile);
    } catch (error) {
      return { bootstrapped: false, reason: `OpenClaw's transcript could not be read: ${error.message}` };
    }
    if (history.length === 0) {
      // Nothing readable here: the first assemble imports the history OpenClaw passes it instead.
      return { bootstrapped: false, reason: "no transcript file to import" };
    }
    try {
      const imported = await this.#import(key, history);
      return { bootstrapped: imported > 0, importedMessages: imported };
    } catch (error) {
      return { bootstrapped: false, reason: error.message };
    }
  }

  async ingest() {
    return { ingested: false }; // commitTurn stores each accepted turn whole
  }

  async assemble({ sessionKey, sessionId, messages, tokenBudget }) {
    const key = sessionKey ?? sessionId;
    const deadline = this.client.config.assembleTimeoutMs;
    try {
      return await withDeadline(this.#assembleFromServer(key, messages, tokenBudget), deadline);
    } catch (error) {
      if (error instanceof ServerError) this.#refused(error);
      else if (!(error instanceof Unreachable) && !(error instanceof DeadlinePassed)) throw error;
      const fitted = fitToBudget(messages ?? [], tokenBudget);
      return { ...fitted, systemPromptAddition: this.lastAddition ?? NO_MEMORY };
    }
  }

  async #assembleFromServer(key, messages, tokenBudget) {
    if ((await this.#drain()).blocked) throw new Unreachable(this.client.config.baseUrl, new Error("turns are waiting"));
    const body = { token_budget: Math.max(1000, Math.floor(tokenBudget ?? 200_000)) };
    const path = this.client.sessionPath(key, "context/");
    let context;
    try {
      context = await this.client.request("POST", path, body);
    } catch (error) {
      if (!(error instanceof ServerError) || error.status !== 404 || error.code !== "not_found") throw error;
      const history = storedMessages(messages);
      if (history.length) await this.#import(key, history);
      else await this.#create(key);
      context = await this.client.request("POST", path, body);
    }
    this.lastAddition = context.system_prompt_addition;
    return {
      messages: context.messages.map(toOpenClaw),
      estimatedTokens: context.estimated_tokens,
      systemPromptAddition: context.system_prompt_addition,
    };
  }

  async commitTurn({ advancementKey, messages, sessionKey, sessionId }) {
    if (await this.spool.holds(advancementKey)) return { status: "duplicate" };
    const name = await this.spool.add({
      sessionKey: sessionKey ?? sessionId,
      advancementKey,
      messages: storedMessages(messages),
    });
    const { answers } = await this.#drain();
    return { status: answers.get(name)?.status === "duplicate" ? "duplicate" : "committed" };
  }

  async compact({ sessionKey, sessionId, tokenBudget, compactionTarget, customInstructions }) {
    if ((await this.#drain()).blocked) {
      return { ok: false, compacted: false, reason: "openclaw-site is unreachable; nothing was compacted" };
    }
    const body = { reason: compactionTarget === "budget" ? "overflow" : "manual" };
    if (tokenBudget) body.token_budget = Math.max(1000, Math.floor(tokenBudget));
    if (customInstructions) body.instructions = String(customInstructions).slice(0, 4000);
    try {
      const answer = await this.client.request("POST", this.client.sessionPath(sessionKey ?? sessionId, "compact/"), body, {
        timeoutMs: COMPACT_TIMEOUT_MS,
      });
      const result = answer.result && {
        summary: answer.result.summary,
        tokensBefore: answer.result.tokens_before ?? 0,
        tokensAfter: answer.result.tokens_after ?? undefined,
      };
      return { ok: answer.ok, compacted: answer.compacted, reason: answer.reason, ...(result ? { result } : {}) };
    } catch (error) {
      return { ok: false, compacted: false, reason: error.message };
    }
  }

  async maintain() {
    return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: "the server maintains the transcript" };
  }

  async dispose() {
    await this.spool.draining;
  }

  #drain() {
    return this.spool.drain((entry) =>
      this.client.request("POST", this.client.sessionPath(entry.sessionKey, "turns/"), {
        advancement_key: entry.advancementKey,
        messages: entry.messages,
      }),
    );
  }

  /** Log a refusal (a bad key, a missing scope) once until another one comes. */
  #refused(error) {
    if (this.lastRefusal === error.message) return;
    this.lastRefusal = error.message;
    this.logger.error(`${error.message}; answering from OpenClaw's own history`);
  }

  /** Create the session on the server (a bootstrap with no history). */
  async #create(key) {
    await this.client.request("POST", this.client.sessionPath(key, "bootstrap/"), { messages: [] });
  }

  /** Import a history the server has not seen (in batches); return how many messages it took. */
  async #import(key, history) {
    let afterSeq = 0;
    let imported = 0;
    for (let start = 0; start < history.length; start += BATCH) {
      const answer = await this.client.request("POST", this.client.sessionPath(key, "bootstrap/"), {
        messages: history.slice(start, start + BATCH),
        after_seq: afterSeq,
      });
      if (!answer.bootstrapped) break;
      imported += answer.imported_messages;
      afterSeq = answer.last_seq;
    }
    return imported;
  }
}

class DeadlinePassed extends Error {}

function withDeadline(promise, ms) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new DeadlinePassed(`no context within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** The conversation messages of OpenClaw's JSONL transcript (none when there is no file yet). */
async function readTranscript(sessionFile) {
  if (!sessionFile) return [];
  let text;
  try {
    text = await readFile(sessionFile, "utf8");
  } catch (error) {
    if (error.code === "ENOENT") return [];
    throw error;
  }
  const messages = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const entry = JSON.parse(line);
    if (entry.type === "message" && entry.message) messages.push(entry.message);
  }
  return storedMessages(messages);
}
