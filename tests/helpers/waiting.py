"""Waiting in tests: poll a condition until it holds, failing by name after a deadline (never a bare sleep)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import pytest

__all__ = ["wait_for"]


def wait_for(condition: Callable[[], bool], what: str = "the condition", timeout: float = 20.0, *,
             child: subprocess.Popen[bytes] | None = None, interval: float = 0.005) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds.

    With ``child``, also fail as soon as that process has exited: a dead child
    will never make the condition true.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if child is not None and child.poll() is not None:
            pytest.fail(f"the child died before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(interval)
