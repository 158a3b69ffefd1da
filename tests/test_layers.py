"""The layers the tree keeps (docs/architecture.md, Layers and The rooms), read from the imports.

Each product module's imports, module-level and inside functions alike, are read with `ast`; a
lower layer never imports an upper one, and only the entry points import the configuration.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("config", "openclaw_site", "memory_app", "sessions_app", "providers", "integrations")

# What each package must never import (its upper layers, or the configuration).
FORBIDDEN = {
    "providers": {"openclaw_site", "memory_app", "sessions_app", "integrations", "config"},
    "openclaw_site": {"memory_app", "sessions_app", "integrations", "config"},
    "memory_app": {"sessions_app", "integrations", "config"},
    "sessions_app": {"integrations", "config"},
    "integrations": {"config"},
}
MAX_MODULE_LINES = 700
MAX_MODULES_IN_A_FOLDER = 15


def product_modules() -> Iterator[Path]:
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def imported_packages(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module.split(".")[0]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_layer_imports_none_above_it(package: str) -> None:
    crossings = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in product_modules()
        if path.relative_to(ROOT).parts[0] == package
        for line, name in imported_packages(path)
        if name in FORBIDDEN[package]
    ]
    assert crossings == []


def test_no_product_module_is_over_the_size_a_reader_takes_in() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in product_modules()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_folder_holds_more_modules_than_a_reader_can_scan() -> None:
    folders: dict[Path, int] = {}
    for path in product_modules():
        if path.name != "__init__.py":
            folders[path.parent] = folders.get(path.parent, 0) + 1
    crowded = {
        str(folder.relative_to(ROOT)): n for folder, n in folders.items() if n > MAX_MODULES_IN_A_FOLDER
    }
    assert crowded == {}
