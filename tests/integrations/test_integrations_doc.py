"""The Python examples of docs/integrations.md (OpenAI-compatible endpoint) run as written against the server."""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import pytest

from tests.fake_openai import text_reply, tool_call_reply

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def openai_examples() -> list[str]:
    text = DOC.read_text()
    section = text.split("## OpenAI-compatible endpoint", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


@pytest.mark.parametrize("index", range(len(openai_examples())))
def test_the_openai_example_runs(
    index: int, asgi_live_server: Any, acme_secret: str, llm: Any, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("OPENCLAW_URL", asgi_live_server.url)
    monkeypatch.setenv("OPENCLAW_API_KEY", acme_secret)
    monkeypatch.setenv("OPENCLAW_ASSISTANT", "helper")
    code = openai_examples()[index]
    if "get_time" in code:  # the tool example: the model calls the caller's tool once
        llm.queue(tool_call_reply([("get_time", {"zone": "Asia/Tokyo"})]), text_reply("It is noon in Tokyo."))
    script = tmp_path / "example.py"
    script.write_text(code)
    runpy.run_path(str(script), run_name="__main__")
    assert llm.chat_requests  # the assistant's model answered
