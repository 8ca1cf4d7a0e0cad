"""A daemon as a real process: ``retain ...`` in a subprocess, its ``--http`` address, its log; stopped by SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retain.servers import free_port
from tests.helpers.waiting import wait_for

__all__ = ["Daemon", "get", "running"]

RUN = "from retain.cli import main; main()"


@dataclass
class Daemon:
    process: subprocess.Popen[bytes]
    base: str
    log: Path

    def get(self, path: str) -> tuple[int, str]:
        return get(self.base + path)

    def json(self, path: str) -> tuple[int, Any]:
        status, body = self.get(path)
        return status, json.loads(body)

    def metrics(self) -> str:
        status, body = self.get("/metrics")
        assert status == 200, body
        return body


def get(url: str) -> tuple[int, str]:
    """GET ``url``: its status and body (an HTTP error status is an answer too)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _answers(url: str) -> bool:
    try:
        get(url)
        return True
    except (urllib.error.URLError, ConnectionError):
        return False


@contextmanager
def running(args: list[str], tmp_path: Path, *, name: str = "daemon", library: str | None = None) -> Iterator[Daemon]:
    """``retain *args --http 127.0.0.1:PORT`` running until the block ends, then SIGTERM: it must exit 0.

    With ``library``, that Python code runs instead of the command, with PORT as ``sys.argv[1]`` and ``args``
    after it: a daemon started through its library entry, no click.
    """
    port = free_port()
    log = tmp_path / f"{name}.log"
    command = ([sys.executable, "-c", library, str(port), *args] if library is not None
               else [sys.executable, "-c", RUN, *args, "--http", f"127.0.0.1:{port}"])
    with log.open("w") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
    daemon = Daemon(process, f"http://127.0.0.1:{port}", log)
    try:
        wait_for(lambda: _answers(daemon.base + "/healthz"), f"{name} to answer /healthz", child=process)
        yield daemon
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
