"""Waiting in tests: poll a condition until it holds, failing by name after a deadline (never a bare sleep)."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable

import pytest

__all__ = ["accepts", "wait_for"]


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


def accepts(address: int | tuple[str, int] | str) -> bool:
    """Whether a server accepts a connection at ``address`` now: a loopback port, a ``(host, port)``, or the
    path of a Unix socket (a condition for :func:`wait_for`)."""
    target = ("127.0.0.1", address) if isinstance(address, int) else address
    with socket.socket(socket.AF_UNIX if isinstance(target, str) else socket.AF_INET) as probe:
        probe.settimeout(1)
        try:
            probe.connect(target)
        except OSError:
            return False
    return True
