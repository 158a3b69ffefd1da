// OpenClaw's AgentMessages on their way to and from the server (docs/integrations.md, OpenClaw
// plugin). The server stores user, assistant and toolResult messages as they are; what it sends
// back is made whole again in the shape OpenClaw's providers expect.

export const STORED_ROLES = new Set(["user", "assistant", "toolResult"]);
const CHARS_PER_TOKEN = 4;
const EMPTY_USAGE = Object.freeze({
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
});

/** The messages of a turn the server keeps: conversation roles only. */
export function storedMessages(messages) {
  return (messages ?? []).filter((message) => STORED_ROLES.has(message?.role));
}

/** A message from the server as OpenClaw's AgentMessage. */
export function toOpenClaw(message) {
  const { entryId: _entryId, compactionSummary: _summary, ...rest } = message;
  if (rest.role !== "assistant") return rest;
  const content = typeof rest.content === "string" ? [{ type: "text", text: rest.content }] : rest.content;
  return { ...rest, content, usage: rest.usage ?? { ...EMPTY_USAGE }, stopReason: rest.stopReason ?? "stop" };
}

/** A rough token estimate (characters / 4), for the fallback when the server cannot be asked. */
export function estimateTokens(message) {
  const content = message?.content;
  const text = typeof content === "string" ? content : JSON.stringify(content ?? "");
  return Math.ceil(text.length / CHARS_PER_TOKEN) + 4;
}

/** The newest messages that fit the budget, starting at a user message so no tool result is orphaned. */
export function fitToBudget(messages, budget) {
  let total = 0;
  let start = messages.length;
  for (let index = messages.length - 1; index >= 0; index -= 1) {
    total += estimateTokens(messages[index]);
    if (budget !== undefined && total > budget) break;
    if (messages[index].role === "user") start = index;
    if (index === 0) start = 0;
  }
  const kept = messages.slice(start);
  return { messages: kept, estimatedTokens: kept.reduce((sum, message) => sum + estimateTokens(message), 0) };
}
