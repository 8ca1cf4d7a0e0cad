"""Naming what is damaged in a table's log, when delta-rs cannot read it.

delta-rs reports damage to the log as a generic error ("Kernel error: Json
error ...", "Invalid Checkpoint: Gap between checkpoint version 10 and next
commit 1") that names no object. :func:`diagnose` looks at the log the way a
reader replays it and names the first object that stops it:

- ``_last_checkpoint`` pointing at a checkpoint that is not there;
- the newest checkpoint that cannot be read as Parquet (a flipped byte, a
  truncation);
- a commit missing from the run after that checkpoint (``…11.json`` gone while
  ``…10`` and ``…12`` are there);
- a commit that is not one JSON action per line (truncated, garbage).

It reads only what a reader would (the listing of ``_delta_log/``, the newest
checkpoint, the commits after it), and only when opening the table already
failed: never on the common road.
"""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq

from retain.archive._boundary import printable
from retain.archive.location import Location
from retain.errors import ArchiveError

__all__ = ["diagnose"]

_LOG = "_delta_log/"


def diagnose(location: Location) -> str | None:
    """The first damaged object of the table's log at ``location``, described; None when none is found."""
    try:
        listed = {str(item["path"]) for item in location.listing(_LOG)}
    except ArchiveError:
        return None  # the store cannot be listed: an outage, not damage
    commits = sorted(_version(path) for path in listed if path.endswith(".json") and _version(path) >= 0)
    checkpoints = sorted({_version(path) for path in listed if path.endswith(".checkpoint.parquet")})
    found = _last_checkpoint(location, listed, checkpoints)
    if found is not None:
        return found
    start = checkpoints[-1] if checkpoints else -1
    if checkpoints:
        found = _checkpoint(location, start)
        if found is not None:
            return found
    after = [version for version in commits if version > start]
    expected = start + 1
    for version in after:
        if version != expected:
            since = f"the checkpoint of version {start}" if start >= 0 else "the table's start"
            return (f"{_commit(expected)} is missing: after {since} the log goes on at commit {version} "
                    f"(up to {after[-1]})")
        expected += 1
    for version in after:
        found = _commit_text(location, version)
        if found is not None:
            return found
    return None


def _version(path: str) -> int:
    name = path.rsplit("/", 1)[-1].split(".", 1)[0]
    return int(name) if name.isdigit() else -1


def _commit(version: int) -> str:
    return f"{_LOG}{version:020d}.json"


def _last_checkpoint(location: Location, listed: set[str], checkpoints: list[int]) -> str | None:
    path = f"{_LOG}_last_checkpoint"
    if path not in listed:
        return None
    try:
        hint = json.loads(location.get(path))
        version = int(hint["version"])
    except (ValueError, KeyError, TypeError, ArchiveError):
        return None  # a hint delta-rs ignores when it cannot read it
    if version not in checkpoints:
        return f"{path} names the checkpoint of version {version}, which is not in the log"
    return None


def _checkpoint(location: Location, version: int) -> str | None:
    path = f"{_LOG}{version:020d}.checkpoint.parquet"
    try:
        # Pages' checksums verified, metadata decoded and every string checked: a flipped byte may land in any
        # of them (delta-rs then says only "invalid utf8").
        parquet = pq.ParquetFile(io.BytesIO(location.get(path)), page_checksum_verification=True)
        parquet.read().validate(full=True)
    except ArchiveError as error:
        return f"{path} cannot be read: {error}"
    except Exception as exc:  # noqa: BLE001 - whatever pyarrow says of the bytes is the damage
        return f"{path} is not a readable checkpoint: {printable(str(exc))}"
    return None


def _commit_text(location: Location, version: int) -> str | None:
    path = _commit(version)
    try:
        lines = location.get(path).decode().splitlines()
    except UnicodeDecodeError:
        return f"{path} is not text"
    except ArchiveError as error:
        return f"{path} cannot be read: {error}"
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError as exc:
            return f"{path} line {number} is not JSON ({printable(str(exc))}): the commit is truncated or overwritten"
        if not isinstance(action, dict):
            return f"{path} line {number} is not a Delta action"
    return None
