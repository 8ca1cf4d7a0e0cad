"""The import graph: no part imports a layer above it, whether at the top of a module, in a function or for typing.

The layers, lowest first (docs/development.md draws them):

- the vocabulary: ``retain`` itself, ``errors``, ``windows``, ``durations``,
  ``ids``, ``clock``, the shared machinery ``beats`` (a cadence), ``daemon``
  (a daemon's lifecycle) and ``logs`` (how it logs), and the private boundaries ``_redis``
  (and ``_nodes``, a cluster's round trip), ``_gc``, ``_fields``, ``_toml``;
- ``retain.streams``: keys and the trim verb, on the vocabulary alone;
- ``retain.archive``: on the vocabulary and ``retain.streams``;
- ``retain.wire``: the documents and servers logd and docd talk through, on the vocabulary alone;
- ``retain.ops``: health, metrics and the dashboard a daemon serves, on the vocabulary and wire;
- ``retain.retention``: on the vocabulary, streams and archive (and ops and wire, for its daemon's endpoints);
- ``retain.logd``: on the vocabulary, wire and ops;
- ``retain.docd``: on the vocabulary, wire, logd and ops;
- ``retain.servers``: the embedded servers, on the vocabulary (and the archive, to open one on a server);
- ``retain.cli`` and ``retain.demo`` sit on top and may import every part.

``retain`` itself is the vocabulary's package and the library's front door: it
also offers each part's entry (``from retain import Archive``), imported on
first use by name (``importlib``) and named for the type checker under
``TYPE_CHECKING``. Those are not imports of the vocabulary: a fresh ``import
retain`` loads no part (tests/test_exported_members.py checks that).

Each part is checked twice: every ``import`` statement in its source, read
(so a lazy import inside a function counts), and what importing it in a fresh
interpreter actually loads.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import retain

SOURCE = Path(retain.__file__).resolve().parent
VOCABULARY = {"retain", "retain.errors", "retain.windows", "retain.durations", "retain.ids", "retain.clock",
              "retain.beats", "retain.daemon", "retain.logs", "retain._redis", "retain._nodes", "retain._gc",
              "retain._fields", "retain._toml"}
#: part -> the parts (besides itself) it may import
ALLOWED = {
    "vocabulary": VOCABULARY,
    "retain.streams": VOCABULARY - {"retain._toml"},
    "retain.archive": VOCABULARY | {"retain.streams"},
    "retain.retention": VOCABULARY | {"retain.streams", "retain.archive", "retain.ops", "retain.wire"},
    "retain.wire": VOCABULARY,
    "retain.logd": VOCABULARY | {"retain.wire", "retain.ops"},
    "retain.docd": VOCABULARY | {"retain.wire", "retain.logd", "retain.ops"},
    "retain.servers": VOCABULARY | {"retain.streams", "retain.archive"},
    "retain.ops": VOCABULARY | {"retain.wire"},
}


def part_of(module: str) -> str:
    """The part a ``retain...`` module belongs to: its package (``retain.streams``) or a vocabulary module."""
    head = ".".join(module.split(".")[:2])
    return head if head in VOCABULARY or (SOURCE / head.split(".")[1]).is_dir() else "retain"


def files_of(part: str) -> list[Path]:
    if part == "vocabulary":
        return [SOURCE / "__init__.py", *(SOURCE / f"{name.split('.')[1]}.py" for name in VOCABULARY - {"retain"})]
    return sorted((SOURCE / part.split(".")[1]).glob("*.py"))


def imported(path: Path) -> set[str]:
    """Every retain module ``path`` imports, wherever the statement stands (in ``retain/__init__.py``: but for
    the front door's ``TYPE_CHECKING`` names, see the module docstring)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    if path == SOURCE / "__init__.py":
        tree.body = [node for node in tree.body if not _type_checking(node)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from retain import _fields`` imports the module retain._fields
            found |= {f"{node.module}.{alias.name}" for alias in node.names} if node.module == "retain" \
                else {node.module}
    return {name for name in found if name == "retain" or name.startswith("retain.")}


def _type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


class TestImportGraph:
    @pytest.mark.parametrize("part", list(ALLOWED))
    def test_no_part_imports_a_layer_above_it(self, part):
        """Every import statement of a part names itself or a part below it."""
        own = VOCABULARY if part == "vocabulary" else {part}
        wrong = sorted(f"{path.relative_to(SOURCE.parent)}: {name}" for path in files_of(part)
                       for name in imported(path) if part_of(name) not in own | ALLOWED[part])
        assert not wrong, f"{part} imports above itself: {wrong}"

    @pytest.mark.parametrize(("part", "absent"), [
        ("retain.streams", ["retain.archive", "retain.retention", "pyarrow", "obstore", "deltalake"]),
        ("retain.archive", ["retain.retention"]),
        # retention loads the archive (pyarrow, obstore, deltalake) only when a policy archives
        ("retain.retention", ["retain.archive", "pyarrow", "obstore", "deltalake"]),
        ("retain.wire", ["retain.logd", "retain.docd", "retain.streams", "redis"]),
        ("retain.logd", ["retain.docd", "retain.streams", "retain.archive", "redis", "pyarrow", "deltalake"]),
        ("retain.docd", ["retain.streams", "retain.archive", "redis", "pyarrow", "deltalake"]),
        ("retain.servers", ["retain.archive", "pyarrow", "deltalake"]),
    ])
    def test_a_fresh_import_loads_nothing_above(self, part, absent):
        """Importing a part in a fresh interpreter loads no layer above it (nor the archive's heavy libraries)."""
        code = f"import sys, {part}; print(sorted(set({absent!r}) & set(sys.modules)))"
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "[]"
