// The Node side of bench/plugin.py: the plugin's own context engine, client and spool (lib/), driven
// as OpenClaw drives them around a model call that answers at once, and timed per turn.
//
//   node bench/plugin_turns.mjs --base-url http://127.0.0.1:PORT --assistant SLUG --session-key KEY \
//       --turns 200 --warm-up 20 --token-budget 200000 --spool-dir DIR      (key in OPENCLAW_SITE_API_KEY)
//
// Each turn is `engine.assemble({sessionKey, messages: [], tokenBudget})` and then
// `engine.commitTurn({advancementKey, messages: [user, assistant], sessionKey})`, back to back. It
// prints one JSON object: the milliseconds of each part per timed turn, and what the last assemble
// answered (messages, estimated tokens, bytes of the context as JSON).

import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

import { resolveConfig, SiteClient } from "../integrations/openclaw/lib/client.js";
import { SiteContextEngine } from "../integrations/openclaw/lib/engine.js";
import { Spool } from "../integrations/openclaw/lib/spool.js";

const { values: options } = parseArgs({
  options: {
    "base-url": { type: "string" },
    assistant: { type: "string" },
    "session-key": { type: "string" },
    turns: { type: "string", default: "200" },
    "warm-up": { type: "string", default: "20" },
    "token-budget": { type: "string", default: "200000" },
    "spool-dir": { type: "string" },
    "user-words": { type: "string", default: "25" },
    "assistant-words": { type: "string", default: "120" },
  },
});

const quiet = { warn: () => {}, info: () => {}, error: (message) => console.error(message) };
const config = resolveConfig({ baseUrl: options["base-url"], assistant: options.assistant });
if (config.missing.length) throw new Error(`missing ${config.missing.join(", ")}`);
const spoolDir = options["spool-dir"] ?? (await mkdtemp(join(tmpdir(), "bench-plugin-spool-")));
const engine = new SiteContextEngine({
  client: new SiteClient(config, quiet),
  spool: new Spool(spoolDir, quiet),
  logger: quiet,
});
// The time each turn spends waiting on the server, apart from the plugin's own work (the spool).
let requestMs = 0;
const request = engine.client.request.bind(engine.client);
engine.client.request = async (...args) => {
  const started = performance.now();
  try {
    return await request(...args);
  } finally {
    requestMs += performance.now() - started;
  }
};
const sessionKey = options["session-key"];
const tokenBudget = Number(options["token-budget"]);
const userWords = Number(options["user-words"]);
const assistantWords = Number(options["assistant-words"]);

function words(turn, count, salt) {
  return Array.from({ length: count }, (_, k) => `w${(turn * 31 + k * 7 + salt) % 997}`).join(" ");
}

/** A turn as OpenClaw commits it: the user's message and the model's answer, in its own shape. */
function turnMessages(turn) {
  const now = Date.now();
  return [
    { role: "user", content: [{ type: "text", text: `Turn ${turn}: ${words(turn, userWords, 1)}` }], timestamp: now },
    {
      role: "assistant",
      content: [{ type: "text", text: `Answer ${turn}: ${words(turn, assistantWords, 2)}` }],
      api: "openai-completions",
      provider: "bench",
      model: "instant",
      stopReason: "stop",
      timestamp: now + 1,
    },
  ];
}

// What a compaction summary's user message starts with (sessions_app/compaction/cutpoint.py, Pi's own text).
const SUMMARY_PREFIX = "The conversation history before this point was compacted";
/** What an assemble answered: its messages, their estimated tokens, their size as JSON. */
function contextFigures(context) {
  return {
    messages: context.messages.length,
    estimated_tokens: context.estimatedTokens,
    json_bytes: Buffer.byteLength(JSON.stringify(context.messages)),
    summary_first: Boolean(context.messages[0]?.content?.[0]?.text?.startsWith(SUMMARY_PREFIX)),
  };
}

const run = `${process.pid}-${Date.now()}`;
const timings = { assemble_ms: [], commit_ms: [], turn_ms: [], assemble_http_ms: [], commit_http_ms: [], cpu_ms: [] };
let last = null;
let first = null;
const total = Number(options["warm-up"]) + Number(options.turns);
for (let turn = 0; turn < total; turn += 1) {
  requestMs = 0;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  last = await engine.assemble({ sessionKey, messages: [], tokenBudget });
  const assembled = performance.now();
  const assembleRequestMs = requestMs;
  // The engine answers from OpenClaw's own history (here none) when the server is not reached in
  // time: such a turn would time the fallback, not the server.
  if (engine.client.down || last.messages.length === 0) throw new Error(`turn ${turn}: the server did not answer`);
  first ??= contextFigures(last);
  const committed = await engine.commitTurn({
    advancementKey: `bench-${run}-${turn}`,
    messages: turnMessages(turn),
    sessionKey,
  });
  const done = performance.now();
  if (committed.status !== "committed") throw new Error(`turn ${turn} was not committed: ${committed.status}`);
  if (turn < Number(options["warm-up"])) continue;
  const cpu = process.cpuUsage(cpuBefore);
  timings.cpu_ms.push((cpu.user + cpu.system) / 1000);
  timings.assemble_ms.push(assembled - started);
  timings.commit_ms.push(done - assembled);
  timings.turn_ms.push(done - started);
  timings.assemble_http_ms.push(assembleRequestMs);
  timings.commit_http_ms.push(requestMs - assembleRequestMs);
}
await engine.dispose();
const waiting = await engine.spool.pending();
console.log(
  JSON.stringify({
    ...timings,
    first_context: first,
    last_context: contextFigures(last),
    spool_left: waiting.length,
  }),
);
