"""Helpers for tests of streamed replies: waiting for what a server thread stores."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
WAIT_SECONDS = 20.0


def wait_for(probe: Callable[[], T | None], *, seconds: float = WAIT_SECONDS) -> T:
    """Return the first truthy answer of `probe`, polling; fail after `seconds` (not a timing assertion)."""
    deadline = time.monotonic() + seconds
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing arrived within {seconds:g} s")
        time.sleep(0.05)
