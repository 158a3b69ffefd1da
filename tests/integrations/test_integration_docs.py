"""Every copy-paste example of docs/integrations.md works as pasted.

Each ```python block runs in its own interpreter against the live ASGI server, with only the three
variables the page documents (OPENCLAW_URL, OPENCLAW_API_KEY, OPENCLAW_ASSISTANT) to find it; a
fake model and fake embeddings stand behind the server. Every ```json block must parse.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_openai import text_reply, tool_call_reply

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
_FENCE = re.compile(r"^```(?P<language>\w*)\n(?P<code>.*?)^```\s*$", re.MULTILINE | re.DOTALL)
_HEADING = re.compile(r"^#{2,3} (?P<title>.+)$", re.MULTILINE)
EXAMPLE_TIMEOUT_SECONDS = 120


def doc_blocks(language: str) -> list[pytest.param]:
    """The page's blocks in ``language``, each named by the heading it is under."""
    text = DOC.read_text()
    blocks = []
    for fence in _FENCE.finditer(text):
        if fence.group("language") != language:
            continue
        headings = [h.group("title") for h in _HEADING.finditer(text, 0, fence.start())]
        title = headings[-1] if headings else "top"
        blocks.append(pytest.param(fence.group("code"), id=re.sub(r"\W+", "-", title.lower()).strip("-")))
    return blocks


def test_the_page_has_the_examples_it_promises():
    ids = [block.id for block in doc_blocks("python")]
    assert "any-mcp-client-python" in ids
    assert "rest-ingest-for-agents-that-keep-their-own-loop" in ids
    assert "python-sdk" in ids


@pytest.mark.parametrize("code", doc_blocks("json"))
def test_json_examples_parse(code):
    assert isinstance(json.loads(code), dict)


@pytest.mark.parametrize("code", doc_blocks("python"))
def test_python_example_runs_against_the_server(
    asgi_live_server, world, acme_secret, llm, fake_embeddings, code
):
    if "get_time" in code:  # the client-tool example: the model calls the caller's tool once
        llm.queue(tool_call_reply([("get_time", {"zone": "Asia/Tokyo"})]), text_reply("It is noon in Tokyo."))
    environment = {
        **os.environ,
        "OPENCLAW_URL": asgi_live_server.url,
        "OPENCLAW_API_KEY": acme_secret,
        "OPENCLAW_ASSISTANT": world.assistant.slug,
    }

    ran = subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_SECONDS,
    )

    assert ran.returncode == 0, f"stdout:\n{ran.stdout}\nstderr:\n{ran.stderr}"
    assert ran.stdout.strip(), "an example shows what it got"
    print(ran.stdout)
