"""Typed readers for environment variables that fail loudly on bad values.

Pure: no Django import, so settings.py and the tests can both use it.
"""

from __future__ import annotations

import os


class EnvError(ValueError):
    """An environment variable holds a value that cannot be used."""


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """Return the variable as a string, stripped."""
    return os.environ.get(name, default).strip()


def env_text(name: str, default: str = "") -> str:
    """Return the variable exactly as set: a prefix such as "query: " keeps its trailing space."""
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    """Return the variable as a boolean (1/0, true/false, yes/no, on/off)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise EnvError(f"{name}={raw!r} is not a boolean; use true or false")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """Return the variable as an integer, at least ``minimum``."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise EnvError(f"{name}={value} must be at least {minimum}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    """Return the variable as a float, at least ``minimum``."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not a number") from None
    if minimum is not None and value < minimum:
        raise EnvError(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    """Return a comma-separated variable as a list of non-empty items."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """Return the variable if it is one of ``choices``."""
    value = env_str(name, default) or default
    if value not in choices:
        raise EnvError(f"{name}={value!r} must be one of: {', '.join(choices)}")
    return value


def usable_cpus() -> int:
    """Return how many CPUs this process may run on (its affinity, so a container's limit counts)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def half_the_cpus(cpus: int) -> int:
    """Return half of ``cpus``, at least one: a share that always leaves another team a core."""
    return max(1, cpus // 2)


def load_dotenv(path: os.PathLike[str] | str) -> None:
    """Set variables from a ``KEY=value`` file, never overriding the real environment."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return
    for line in lines:
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        os.environ.setdefault(key.strip(), value.strip().strip("'\""))
