"""Writers that patch a retain pass's items while it runs: what one write does to an item, and the check of
INV-PROGRESS over a store's commit log (shared by the tests and the writer processes they start)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from retain.clock import parse_rfc3339
from retain.logd.retain_rules import parse_retain, select

__all__ = ["WRITES", "check_progress", "written"]

#: What a writer does to an item: refresh it (young: no longer taken), stop it matching, give it a new old stamp
#: (still taken, but its guard fails), delete it, or touch a field the rule does not read (its guard holds).
WRITES = ("refresh", "running", "restamp", "delete", "touch")
YOUNG = "2026-09-12T07:00:00Z"


def written(kind: str, value: Mapping[str, Any] | None, count: int) -> dict[str, Any] | None:
    """A job ``{status, updatedAt, ...}`` after a write of ``kind`` (the ``count``-th write, so that new stamps
    differ); None when the write deletes it, or when there is no job to write."""
    if kind == "delete" or value is None:
        return None
    if kind == "refresh":
        return {**value, "updatedAt": YOUNG}
    if kind == "running":
        return {**value, "status": "running"}
    if kind == "restamp":
        return {**value, "updatedAt": f"2026-09-02T{count // 3600 % 24:02d}:{count // 60 % 60:02d}:{count % 60:02d}Z"}
    return {**value, "touched": count}


def check_progress(commits: Iterable[Any], rule: Mapping[str, Any], now: str, initial: Mapping[str, Any],
                   writes: list[tuple[int, str, Any]], read_at: int, end: int, author: str,
                   shape: Callable[[Any], Any] = lambda value: value) -> set[str]:
    """INV-PROGRESS over ``commits`` (a store's log from ``read_at + 1`` on): every item of ``initial`` (name ->
    job at ``read_at``) the rule takes at ``now`` and nobody wrote (``writes``: ``(commit, name, job or None)``)
    after ``read_at`` up to ``end`` was deleted by a commit of ``author``; and every item ``author`` deleted was, as
    last written before its delete, one the rule takes. Jobs are stored as ``shape`` makes them. Returns the
    names ``author`` deleted."""
    checked = parse_retain({"what": [rule]}).rules[0]
    instant = parse_rfc3339(now)
    assert instant is not None

    def takes(name: str, job: Any) -> bool:
        return job is not None and bool(select([(name, shape(job))], checked, instant).expired)

    deletes: dict[str, int] = {}  # name -> the commit that deleted it
    for record in commits:
        if record.number > end:
            break
        if record.author == author:
            for op in record.ops or ():
                deletes[op["delete"].rpartition(".")[2]] = record.number
    touched = {name for commit, name, _ in writes if read_at < commit <= end}
    eligible = {name for name, job in initial.items() if takes(name, job)}
    assert eligible - touched <= set(deletes), f"not deleted: {sorted(eligible - touched - set(deletes))}"
    for name, commit in deletes.items():
        before = [job for at, which, job in writes if which == name and read_at < at < commit]
        last = before[-1] if before else initial.get(name)
        assert takes(name, last), f"{name} deleted at commit {commit} over {last}"
    return set(deletes)
