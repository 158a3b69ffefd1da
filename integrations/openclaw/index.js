// openclaw-site as OpenClaw's context engine and memory (docs/integrations.md, OpenClaw plugin).
// Node's built-ins only: nothing to install, nothing to build.

import { homedir } from "node:os";
import { join } from "node:path";

import { resolveConfig, SiteClient } from "./lib/client.js";
import { ENGINE_ID, SiteContextEngine } from "./lib/engine.js";
import { Spool } from "./lib/spool.js";
import { memoryTools, TOOL_NAMES } from "./lib/tools.js";

// register() runs several times per process: one client per server, key and assistant, so an
// outage is warned about once whichever part of the plugin meets it.
const clients = new Map();

function clientFor(config, logger) {
  const id = `${config.baseUrl}|${config.assistant}|${config.apiKey}`;
  if (!clients.has(id)) clients.set(id, new SiteClient(config, logger));
  return clients.get(id);
}

function stateDir() {
  return process.env.OPENCLAW_STATE_DIR || join(homedir(), ".openclaw");
}

export default {
  id: "openclaw-site",
  name: "openclaw-site",
  description: "OpenClaw's sessions and memory on an openclaw-site server",
  register(api) {
    const logger = api.logger ?? console;
    const config = resolveConfig(api.pluginConfig);
    if (config.missing.length) {
      logger.error(`openclaw-site: set ${config.missing.join(", ")} in plugins.entries["openclaw-site"].config`);
      return;
    }
    api.registerContextEngine(ENGINE_ID, (ctx) => {
      const spoolDir = config.spoolDir ?? join(ctx?.agentDir ?? stateDir(), "openclaw-site-spool");
      return new SiteContextEngine({ client: clientFor(config, logger), spool: new Spool(spoolDir, logger), logger });
    });
    api.registerTool((ctx) => memoryTools(clientFor(config, logger), { sessionKey: ctx?.sessionKey }), {
      names: TOOL_NAMES,
    });
  },
};
