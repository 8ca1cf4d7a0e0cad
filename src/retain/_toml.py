"""Reading the TOML files retain is configured with: policy, schedule and mount files.

One place reads a file and decodes it, so that every file gets the same
refusals: unreadable, not UTF-8, larger than :data:`MAX_FILE_BYTES`, not TOML.
Each caller passes the error class its part raises (``InvalidPolicy``,
``InvalidMounts``); the message names the file.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

__all__ = ["MAX_FILE_BYTES", "decode", "read"]

#: A configuration file is small; anything larger is refused before it is read whole.
MAX_FILE_BYTES = 1 << 20


def read(path: str | Path, what: str, error: type[Exception]) -> str:
    """The text of the ``what`` file at ``path`` (e.g. ``what="policy"``).

    Raises:
        error: the file cannot be read, is larger than 1 MiB, or is not UTF-8.
    """
    try:
        with Path(path).open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise error(f"{path}: the {what} file is larger than {MAX_FILE_BYTES} bytes")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read the {what} file: {exc}") from exc


def decode(text: str, source: str, error: type[Exception]) -> dict[str, Any]:
    """The TOML document in ``text``; ``source`` names it in the message.

    Raises:
        error: ``text`` is not valid TOML.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{source}: not valid TOML: {exc}") from exc
