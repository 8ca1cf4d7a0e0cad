"""``retain`` on PATH as an operator has it: a script named retain that runs this checkout's command."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import retain

__all__ = ["retain_env"]


def retain_env(bin_dir: Path) -> dict[str, str]:
    """The environment of a shell with ``retain`` (this interpreter, this checkout) first on PATH.

    The script is named ``retain``, so click sees that program name (its completion variable is
    ``_RETAIN_COMPLETE``, as for the installed console script).
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "retain"
    script.write_text(f"#!{sys.executable}\nfrom retain.cli import main\nmain()\n")
    script.chmod(0o755)
    source = str(Path(retain.__file__).resolve().parents[1])
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": source}
    env.pop("RETAIN_REDIS_URL", None)
    return env
