"""Test settings: the normal settings with background tasks run inline and no debounce waits."""

from __future__ import annotations

import os

os.environ.setdefault("OPENCLAW_TASKS_SYNC", "1")
os.environ.setdefault("MEMORY_INDEX_DEBOUNCE_SECONDS", "0")
os.environ.setdefault("SESSION_INDEX_DEBOUNCE_SECONDS", "0")
os.environ.setdefault("SESSION_JOB_DELAY_SECONDS", "0")
os.environ.setdefault("LOG_LEVEL", "WARNING")
os.environ.setdefault("LLM_BASE_URL", "")
os.environ.setdefault("LLM_MODEL", "")
# Floods of requests with one key must not hit the per-key rate limit (its own tests lower it).
os.environ.setdefault("OPENCLAW_API_KEY_RATE_PER_MINUTE", "1000000")
# Memory writes index themselves; tests that want vectors start FakeOpenAI (or load MiniLM)
# explicitly, so the rest of the suite does not load torch for every document it writes.
os.environ.setdefault("EMBEDDING_PROVIDER", "none")

from config.settings import *
from config.settings import VAR_DIR

EXPORT_ROOT = VAR_DIR / "test-exports"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
INSTALLED_APPS = [*INSTALLED_APPS, "evaluation"]
