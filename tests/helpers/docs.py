"""The blocks of a Markdown page marked runnable, and running them as a reader would, in order.

Two markers, each on the line right before a fence (docs/development.md, "Runnable docs"):

- ``<!-- runnable -->`` before a ``sh`` or ``python`` block: the block runs. A shell block runs
  in ``bash -euo pipefail`` (every line must succeed); a Python block runs in one interpreter the
  page's earlier Python blocks ran in, as if typed into one session.
- ``<!-- file: NAME -->`` before any block: its text is written to NAME first (a policy file, a
  request the page then uses).

The page runs in a directory of its own with ``retain`` on PATH and ``RETAIN_REDIS_URL`` naming the
test's Redis; the default URL a page may spell out (``redis://127.0.0.1:6379/0``,
``redis://localhost:6379/0``) is replaced by that Redis's, so no page reaches a fixed port.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Block", "PythonSession", "marked_blocks", "run_blocks"]

RUNNABLE = "<!-- runnable -->"
FILE = re.compile(r"<!-- file: (\S+) -->")
DEFAULT_URLS = ("redis://127.0.0.1:6379/0", "redis://localhost:6379/0")
#: what the session prints after each block: it ran, or it raised (the traceback is on stderr)
DONE, FAILED = "\x00done", "\x00failed"
SESSION = r'''
import sys, traceback
namespace = {"__name__": "__main__"}
lines = []
for line in sys.stdin:
    if line != "\x00end\n":
        lines.append(line)
        continue
    try:
        exec(compile("".join(lines), "<doc block>", "exec"), namespace)
        print("\x00done", flush=True)
    except BaseException:
        traceback.print_exc()
        print("\x00failed", flush=True)
    lines = []
'''


@dataclass(frozen=True)
class Block:
    """A marked block: where it is (page and line of its fence), what it is, its text."""

    where: str
    #: "sh", "python", or "file"
    kind: str
    code: str
    #: the file a "file" block is written to
    name: str | None = None


def marked_blocks(path: Path) -> list[Block]:
    """The marked blocks of the page at ``path``, in order."""
    lines = path.read_text().splitlines(keepends=True)
    blocks = []
    for number, line in enumerate(lines[:-1]):
        fence = lines[number + 1]
        if not fence.startswith("```"):
            continue
        named = FILE.fullmatch(line.strip())
        if line.strip() != RUNNABLE and named is None:
            continue
        end = next(index for index in range(number + 2, len(lines)) if lines[index].startswith("```"))
        code = "".join(lines[number + 2:end])
        where = f"{path.name}:{number + 2}"
        if named is not None:
            blocks.append(Block(where, "file", code, named.group(1)))
        else:
            language = fence[3:].strip()
            assert language in ("sh", "python"), f"{where}: only sh and python blocks run (got {language!r})"
            blocks.append(Block(where, language, code))
    return blocks


class PythonSession:
    """One interpreter a page's Python blocks run in, one after another."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.errors = cwd / ".python-session.err"
        self._stderr = self.errors.open("w")
        self.process = subprocess.Popen([sys.executable, "-c", SESSION], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self._stderr, text=True)

    def run(self, code: str) -> tuple[bool, str]:
        """Run ``code``: whether it ran, and what it printed (with the traceback when it raised)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(code + "\n\x00end\n")
        self.process.stdin.flush()
        printed = []
        for line in self.process.stdout:
            if line.rstrip("\n") in (DONE, FAILED):
                ok = line.rstrip("\n") == DONE
                return ok, "".join(printed) + ("" if ok else self.errors.read_text())
            printed.append(line)
        return False, "".join(printed) + self.errors.read_text()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)
        self._stderr.close()


def run_blocks(blocks: list[Block], cwd: Path, env: dict[str, str], redis_url: str) -> list[str]:
    """Run ``blocks`` in order in ``cwd``; what each printed, in order. A block that fails fails the test, naming
    its page and line."""
    session: PythonSession | None = None
    printed = []
    try:
        for block in blocks:
            code = block.code
            for url in DEFAULT_URLS:
                code = code.replace(url, redis_url)
            if block.kind == "file":
                assert block.name is not None
                (cwd / block.name).write_text(code)
                continue
            if block.kind == "sh":
                ran = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=cwd, env=env, capture_output=True,
                                     text=True, timeout=300)
                assert ran.returncode == 0, \
                    f"{block.where} failed ({ran.returncode}):\n{code}\n{ran.stdout}{ran.stderr}"
                printed.append(ran.stdout)
                continue
            session = session or PythonSession(cwd, env)
            ok, output = session.run(code)
            assert ok, f"{block.where} failed:\n{code}\n{output}"
            printed.append(output)
    finally:
        if session is not None:
            session.close()
    return printed
