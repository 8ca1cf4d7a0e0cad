"""docs/architecture.md stays the design the code has: its layers are the ones tests/test_layers.py enforces, every
invariant of the design has a row, and every test a row names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.test_layers import ALLOWED, VOCABULARY

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "architecture.md").read_text()
#: the invariants of the design (ARCHITECTURE.md), each of which must have a row
INVARIANTS = ["WINDOW", "DECOUPLED", "VALIDATE", "SURFACE", "FOLD", "MERGE", "FENCE", "IDEMPOTENT", "PRECONDITION",
              "REPRO", "HISTORY", "NOSILENTGAP", "ISOLATION", "AUTH", "ONEHOLDER", "TAKEOVER", "PROGRESS", "HEADS"]


def section(name: str) -> str:
    found = re.search(rf"<!-- {name} -->(.*?)<!-- /{name} -->", PAGE, re.S)
    assert found, f"docs/architecture.md has no <!-- {name} --> section"
    return found[1]


def rows(name: str) -> list[list[str]]:
    lines = [line for line in section(name).strip().splitlines() if line.startswith("|")][2:]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_the_layers_are_the_enforced_ones():
    """The page's table: each part and what it may import, as tests/test_layers.py checks them."""
    shown = {}
    for part, allowed in rows("layers"):
        names = set(re.findall(r"`(retain[.\w]*)`", allowed)) | ({"vocabulary"} if "the vocabulary" in allowed else set())
        for each in re.findall(r"`(retain[.\w]*)`", part) or [part]:
            shown[each] = names
    for part, allowed in ALLOWED.items():
        if part == "vocabulary":
            assert part in shown
            named = set(re.findall(r"`(\w+)`", rows("layers")[0][1]))
            assert {module.rsplit(".", 1)[-1] for module in VOCABULARY} == named, named
            continue
        expected = {"vocabulary" if module in VOCABULARY else module for module in allowed}
        assert shown.get(part) == expected, f"{part}: the page says {shown.get(part)}, the test {expected}"
    assert set(shown) == set(ALLOWED) | {"retain.cli", "retain.demo"}


def test_every_invariant_has_a_row():
    named = [row[0] for row in rows("invariants")]
    assert named == [f"INV-{name}" for name in INVARIANTS]


def test_every_test_named_exists():
    """Each ``path::Name`` (a test function or class) or ``path::Class::method`` is defined in that file."""
    for invariant, _, proofs in rows("invariants"):
        references = re.findall(r"`(tests/[\w/]+\.py)::([\w:]+)`", proofs)
        assert references, f"{invariant} names no test"
        for path, name in references:
            tree = ast.parse((ROOT / path).read_text())
            defined = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
            assert set(name.split("::")) <= defined, f"{invariant}: {path}::{name} does not exist"
