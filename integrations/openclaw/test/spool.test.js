// The spool keeps every turn until the server has it, in order, and the engine falls back to
// OpenClaw's own history within its deadline when the server cannot answer.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdtemp, readdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { ServerError, SiteClient, resolveConfig } from "../lib/client.js";
import { SiteContextEngine } from "../lib/engine.js";
import { fitToBudget } from "../lib/messages.js";
import { Spool } from "../lib/spool.js";

/** A logger that keeps what it is told, so a test can count the warnings. */
function logger() {
  const log = { warnings: [], infos: [], errors: [] };
  return { ...log, warn: (m) => log.warnings.push(m), info: (m) => log.infos.push(m), error: (m) => log.errors.push(m), log };
}

/** A tiny stand-in for the server: records turns, answers duplicates, can be made to hang. */
async function fakeServer({ hang = false } = {}) {
  const turns = new Map();
  const server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      if (hang) return; // never answers
      const data = body ? JSON.parse(body) : {};
      if (request.url.endsWith("/turns/")) {
        const duplicate = turns.has(data.advancement_key);
        turns.set(data.advancement_key, data.messages);
        response.writeHead(duplicate ? 200 : 201, { "Content-Type": "application/json" });
        response.end(JSON.stringify({ status: duplicate ? "duplicate" : "committed" }));
      } else if (request.url.endsWith("/context/")) {
        response.writeHead(200, { "Content-Type": "application/json" });
        response.end(JSON.stringify({ messages: [], estimated_tokens: 0, system_prompt_addition: "## Memory" }));
      } else {
        response.writeHead(400, { "Content-Type": "application/json" });
        response.end(JSON.stringify({ error: { code: "invalid", message: "no" } }));
      }
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, turns, url: `http://127.0.0.1:${server.address().port}` };
}

async function engineFor(url, { assembleTimeoutMs = 3000, timeoutMs = 2000 } = {}) {
  const log = logger();
  const config = resolveConfig({ baseUrl: url, assistant: "helper", apiKey: "k", assembleTimeoutMs, timeoutMs });
  const spool = new Spool(await mkdtemp(join(tmpdir(), "spool-")), log);
  return { engine: new SiteContextEngine({ client: new SiteClient(config, log), spool, logger: log }), spool, log };
}

const turn = (text) => [{ role: "user", content: text, timestamp: 1 }];

test("turns made while the server is down are sent in order once it is back, none twice", async () => {
  const { engine, spool, log } = await engineFor("http://127.0.0.1:9");
  for (const [index, text] of ["one", "two", "three"].entries()) {
    const answer = await engine.commitTurn({ advancementKey: `k${index}`, messages: turn(text), sessionKey: "agent:main:main" });
    assert.equal(answer.status, "committed");
  }
  assert.equal((await spool.pending()).length, 3);
  assert.equal(log.log.warnings.length, 1, "one warning per outage");
  assert.equal((await engine.commitTurn({ advancementKey: "k1", messages: turn("two"), sessionKey: "s" })).status, "duplicate");
  const { server, turns, url } = await fakeServer();
  engine.client.config.baseUrl = url;
  await engine.commitTurn({ advancementKey: "k3", messages: turn("four"), sessionKey: "agent:main:main" });
  assert.deepEqual([...turns.keys()], ["k0", "k1", "k2", "k3"]);
  assert.deepEqual((await spool.pending()), []);
  assert.equal(log.log.infos.length, 1, "says once that the server is back");
  server.close();
});

test("a turn the server refuses is kept aside, not lost, and the rest still go", async () => {
  const { server, turns, url } = await fakeServer();
  const { spool, log } = await engineFor(url);
  await spool.add({ sessionKey: "s", advancementKey: "bad", messages: [] });
  await spool.add({ sessionKey: "s", advancementKey: "good", messages: turn("x") });
  const client = new SiteClient(resolveConfig({ baseUrl: url, assistant: "helper", apiKey: "k" }), log);
  const { answers } = await spool.drain((entry) =>
    entry.advancementKey === "bad"
      ? Promise.reject(new ServerError(400, { error: { code: "invalid_message", message: "bad" } }))
      : client.request("POST", client.sessionPath(entry.sessionKey, "turns/"), { advancement_key: entry.advancementKey, messages: entry.messages }),
  );
  assert.equal(answers.size, 2);
  assert.deepEqual([...turns.keys()], ["good"]);
  assert.equal((await readdir(join(spool.dir, "rejected"))).length, 1);
  assert.equal(log.log.errors.length, 1);
  server.close();
});

test("assemble answers from OpenClaw's own messages when the server does not answer in time", async () => {
  const { server, url } = await fakeServer({ hang: true });
  const { engine } = await engineFor(url, { assembleTimeoutMs: 300, timeoutMs: 5000 });
  const messages = [...turn("old ".repeat(400)), { role: "assistant", content: [{ type: "text", text: "a" }] }, ...turn("new")];
  const started = Date.now();
  const answer = await engine.assemble({ sessionKey: "s", messages, tokenBudget: 100 });
  assert.ok(Date.now() - started < 2000);
  assert.deepEqual(answer.messages.map((m) => m.content), ["new"]);
  assert.match(answer.systemPromptAddition, /cannot be reached/);
  server.closeAllConnections();
  server.close();
});

test("fitToBudget keeps whole turns from a user message", () => {
  const messages = [
    { role: "user", content: "a".repeat(400) },
    { role: "assistant", content: [{ type: "toolCall", id: "1", name: "x", arguments: {} }] },
    { role: "toolResult", toolCallId: "1", content: [{ type: "text", text: "r".repeat(40) }] },
    { role: "user", content: "b" },
  ];
  assert.deepEqual(fitToBudget(messages, 10).messages.map((m) => m.role), ["user"]);
  assert.equal(fitToBudget(messages, 10_000).messages.length, 4);
});

test("the API key may come from the environment", () => {
  const config = resolveConfig({ baseUrl: "http://x/", assistant: "a" }, { OPENCLAW_SITE_API_KEY: "secret" });
  assert.equal(config.apiKey, "secret");
  assert.equal(config.baseUrl, "http://x");
  assert.deepEqual(resolveConfig({}, {}).missing, ["baseUrl", "assistant", "apiKey (or OPENCLAW_SITE_API_KEY)"]);
});

test("a memory tool says clearly that the server is unreachable", async () => {
  const { memoryTools } = await import("../lib/tools.js");
  const log = logger();
  const client = new SiteClient(resolveConfig({ baseUrl: "http://127.0.0.1:9", assistant: "helper", apiKey: "k" }), log);
  const [search] = memoryTools(client, { sessionKey: "agent:main:main" });
  await assert.rejects(search.execute("call_1", { query: "x" }), /memory_search failed: openclaw-site at http:\/\/127\.0\.0\.1:9 is unreachable/);
  await assert.rejects(search.execute("call_2", { query: "y" }));
  assert.equal(log.log.warnings.length, 1, "one warning for the whole outage");
});
