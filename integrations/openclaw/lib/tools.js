// memory_search, memory_get and memory_write, answered by the server's agent tools: the same
// hybrid search, documents and citations as REST and MCP (docs/integrations.md, OpenClaw plugin).

import { ServerError } from "./client.js";

export const TOOL_NAMES = ["memory_search", "memory_get", "memory_write"];

const SPECS = {
  memory_search: {
    label: "Memory search",
    description:
      "Mandatory recall step: search the team's long-term memory (MEMORY.md, memory/*.md and past session transcripts) before answering about prior work, decisions, dates, people, preferences or todos. Returns the best snippets with path, lines, score and a citation; read more with memory_get.",
    parameters: {
      type: "object",
      properties: {
        query: { type: "string", description: "What to look for, in natural language (any language)." },
        maxResults: { type: "integer", minimum: 1, maximum: 50, description: "At most this many results." },
        minScore: { type: "number", minimum: 0, maximum: 1, description: "Drop results scoring below this." },
      },
      required: ["query"],
    },
  },
  memory_get: {
    label: "Memory get",
    description:
      "Read lines of MEMORY.md or memory/<name>.md, typically after memory_search, to pull only the lines you need.",
    parameters: {
      type: "object",
      properties: {
        path: { type: "string", description: "MEMORY.md or memory/<name>.md" },
        from: { type: "integer", minimum: 1, description: "First line (1-based)." },
        lines: { type: "integer", minimum: 1, description: "How many lines." },
      },
      required: ["path"],
    },
  },
  memory_write: {
    label: "Memory write",
    description:
      "Store durable memory shared with every agent and person of the team. mode='append' adds content to today's daily note (memory/YYYY-MM-DD.md); mode='replace' sets a document's whole text: read it first with memory_get and pass its revision as base_revision (leave base_revision out only to create a new document).",
    parameters: {
      type: "object",
      properties: {
        mode: { type: "string", enum: ["append", "replace"] },
        content: { type: "string", description: "append: the text to add. replace: the complete new text." },
        path: { type: "string", description: "replace only: MEMORY.md or memory/<name>.md." },
        base_revision: { type: "integer", minimum: 1, description: "replace only: the revision memory_get returned." },
      },
      required: ["mode", "content"],
    },
  },
};

/** The three tools for one session (the factory's context names it). */
export function memoryTools(client, { sessionKey } = {}) {
  return TOOL_NAMES.map((name) => ({
    name,
    ...SPECS[name],
    async execute(_toolCallId, params) {
      const body = { arguments: params ?? {} };
      if (sessionKey) body.session_key = sessionKey;
      let answer;
      try {
        answer = await client.request("POST", client.assistantPath(`/tools/${name}/`), body);
      } catch (error) {
        const why = error instanceof ServerError ? error.message : `${error.message}; try again later`;
        throw new Error(`${name} failed: ${why}`);
      }
      return { content: [{ type: "text", text: answer.text }], details: answer.details };
    },
  }));
}
