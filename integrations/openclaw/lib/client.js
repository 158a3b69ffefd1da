// The HTTP client of the openclaw-site REST API: Node's own fetch, a deadline per call, and one
// warning per outage (docs/integrations.md, OpenClaw plugin).

export const API_KEY_ENV = "OPENCLAW_SITE_API_KEY";
const DEFAULT_TIMEOUT_MS = 10_000;

/** The server answered with an error: the request reached it and was refused. */
export class ServerError extends Error {
  constructor(status, body) {
    const error = body && typeof body === "object" ? body.error : null;
    const code = error?.code ?? `http_${status}`;
    super(`openclaw-site refused the request (${status} ${code}): ${error?.message ?? "no message"}`);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

/** The server could not be reached in time (down, slow, or the network failed). */
export class Unreachable extends Error {
  constructor(url, cause) {
    const why = cause?.name === "TimeoutError" ? "no answer in time" : (cause?.cause?.code ?? cause?.message ?? String(cause));
    super(`openclaw-site at ${url} is unreachable (${why})`);
    this.cause = cause;
  }
}

/** Read and check the plugin's config; the API key may come from the environment instead. */
export function resolveConfig(raw, env = process.env) {
  const config = raw ?? {};
  const baseUrl = typeof config.baseUrl === "string" ? config.baseUrl.replace(/\/+$/, "") : "";
  const apiKey = (typeof config.apiKey === "string" && config.apiKey) || env[API_KEY_ENV] || "";
  const assistant = typeof config.assistant === "string" ? config.assistant : "";
  const missing = [!baseUrl && "baseUrl", !assistant && "assistant", !apiKey && `apiKey (or ${API_KEY_ENV})`].filter(Boolean);
  return {
    baseUrl,
    apiKey,
    assistant,
    timeoutMs: config.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    assembleTimeoutMs: config.assembleTimeoutMs ?? 3000,
    spoolDir: config.spoolDir ?? null,
    missing,
  };
}

/** One server, one key, one assistant; remembers whether the server is reachable. */
export class SiteClient {
  constructor(config, logger = console) {
    this.config = config;
    this.logger = logger;
    this.down = false;
  }

  assistantPath(path) {
    return `/api/v1/assistants/${encodeURIComponent(this.config.assistant)}${path}`;
  }

  sessionPath(sessionKey, path = "") {
    return this.assistantPath(`/sessions/by-key/${encodeURIComponent(sessionKey)}/${path}`);
  }

  /** Send a JSON request; throw Unreachable or ServerError, else return the parsed answer. */
  async request(method, path, body, { timeoutMs = this.config.timeoutMs } = {}) {
    const url = `${this.config.baseUrl}${path}`;
    let response;
    try {
      response = await fetch(url, {
        method,
        headers: { Authorization: `Bearer ${this.config.apiKey}`, "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw this.#failed(new Unreachable(this.config.baseUrl, error));
    }
    const text = await response.text().catch(() => "");
    const parsed = parseJson(text);
    if (response.status >= 500) {
      throw this.#failed(new Unreachable(this.config.baseUrl, new Error(`HTTP ${response.status}`)));
    }
    this.#reached();
    if (!response.ok) throw new ServerError(response.status, parsed);
    return parsed;
  }

  #failed(error) {
    if (!this.down) {
      this.down = true;
      this.logger.warn(
        `${error.message}: answering from OpenClaw's own history and keeping turns on disk until it is back`,
      );
    }
    return error;
  }

  #reached() {
    if (this.down) {
      this.down = false;
      this.logger.info(`openclaw-site at ${this.config.baseUrl} is reachable again`);
    }
  }
}

function parseJson(text) {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return { error: { code: "invalid_json", message: text.slice(0, 200) } };
  }
}
