"""What every embedded server shares: free loopback ports, a child process, waiting for readiness."""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

import psutil

from retain.errors import ServerStartError

__all__ = ["ChildProcess", "ManagedServer", "ServerStartError", "StartedOnEnter", "free_port", "wait_listening",
           "wait_until"]

# Ports below are never picked: 6379, 5432 and friends may be taken by the machine's own services.
_LOW, _HIGH = 20000, 30000


def _bindable(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port(*, also_free_at: tuple[int, ...] = ()) -> int:
    """A loopback port in 20000-29999 that is free now, and so is ``port + offset`` for each offset.

    Offsets serve servers that open a second port at a fixed distance (Redis
    Cluster's bus at +10000, SeaweedFS's gRPC at +10000).
    """
    for _ in range(1000):
        port = random.randrange(_LOW, _HIGH)
        if _bindable(port) and all(_bindable(port + offset) for offset in also_free_at):
            return port
    raise ServerStartError("no free loopback port found in 20000-29999")


def wait_until(ready: Callable[[], bool], *, timeout: float, what: str,
               alive: Callable[[], bool] = lambda: True, log: Path | None = None) -> None:
    """Poll ``ready`` until it answers True; raise with the log's tail on timeout or early death."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        if ready():
            return
        if not alive() or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
            state = "exited" if not alive() else f"not ready after {timeout:.0f}s"
            raise ServerStartError(f"{what} {state}\n{tail}")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def wait_listening(child: ChildProcess, host: str, port: int, ready: Callable[[], bool], *, timeout: float,
                   what: str) -> None:
    """Wait until ``child`` itself listens on ``host:port`` and ``ready`` answers True.

    The listener is checked first: another process's server on a taken port answers ``ready``
    too, and would pass for the child's while the child exits with "address in use".

    Raises:
        ServerStartError: one line naming the address when the child exited and the port is taken;
            else :func:`wait_until`'s message with the log's tail.
    """
    try:
        wait_until(lambda: child.listens(port) and ready(), alive=child.alive, timeout=timeout, log=child.log,
                   what=what)
    except ServerStartError:
        if not child.alive() and not _bindable(port, host):
            raise ServerStartError(f"{what}: {host}:{port} is in use by another process; "
                                   f"choose another port") from None
        raise


#: run in front of a server's argv when retain holds SIGTERM/SIGINT blocked (a daemon does, see
#: retain.daemon): a child inherits the signal mask through fork and exec, and a server that cannot
#: receive SIGTERM is killed only after stop()'s timeout. preexec_fn would do it in the child, but is
#: unsafe in a process with threads; this small interpreter resets the mask (and SIGPIPE and SIGXFSZ,
#: as subprocess's restore_signals does), takes the server's user if it has one (argv[1], or ""), then
#: execs the server: same pid.
_DEFAULT_SIGNALS = ("import os, signal, sys\n"
                    "for number in (signal.SIGPIPE, signal.SIGXFSZ): signal.signal(number, signal.SIG_DFL)\n"
                    "signal.pthread_sigmask(signal.SIG_SETMASK, ())\n"
                    "if sys.argv[1]: os.setgroups([]); os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1]))\n"
                    "os.execvp(sys.argv[2], sys.argv[2:])")


def _launcher(argv: list[str], user: int | None) -> tuple[list[str], int | None]:
    """The argv to start and the user to start it as, so that the server runs as ``user`` with no signal blocked."""
    if not signal.pthread_sigmask(signal.SIG_BLOCK, ()):
        return argv, user  # nothing blocked: the child starts with the default mask as it is
    # The interpreter runs as retain's user (it may sit where ``user`` cannot reach it) and becomes ``user`` itself.
    shim = [sys.executable, "-I", "-S", "-c", _DEFAULT_SIGNALS, "" if user is None else str(user)]
    return [*shim, *argv], None


class ChildProcess:
    """A server child process whose output goes to a log file; stopped by terminate, then kill.

    It starts with no signal blocked, whatever the calling thread blocks.
    """

    def __init__(self, argv: list[str], log: Path, cwd: Path, *, user: int | None = None) -> None:
        self.argv = argv
        self.log = log
        self._log_file = log.open("ab")
        # ``user``: run as that uid (and its gid) -- a server that refuses root, started by root.
        # A process group of its own: a terminal's Ctrl-C goes to retain, which stops its servers itself
        # after what runs against them has stopped, instead of every server dying under its clients at once.
        launched, as_user = _launcher(argv, user)
        self.process = subprocess.Popen(launched, stdout=self._log_file, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, cwd=cwd, user=as_user, group=as_user,
                                        process_group=0)

    def alive(self) -> bool:
        return self.process.poll() is None

    def listens(self, port: int) -> bool:
        """Whether this process itself (not another one) has a socket listening on ``port``."""
        try:
            connections = psutil.Process(self.process.pid).net_connections(kind="tcp")
        except psutil.Error:
            return False  # exited, or not ours to inspect: not (yet) listening
        return any(conn.status == psutil.CONN_LISTEN and conn.laddr.port == port for conn in connections)

    def stop(self, timeout: float = 10.0) -> None:
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log_file.close()


class StartedOnEnter:
    """A context manager that starts on enter and closes on exit, or on a failed start."""

    def start(self) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()


class ManagedServer(StartedOnEnter):
    """The lifecycle every embedded server shares: one child process in a directory of its own.

    Subclasses implement ``_launch()`` (setting ``self._child``, waiting until it
    answers). ``stop()`` keeps the directory so that ``start()`` can bring the
    server back; ``close()`` also removes the directory if the server made it. A
    start that fails stops what it started, and a first start that fails also
    removes the directory it made, whether or not the server is used as a context
    manager: a failed start leaves nothing behind.
    """

    host = "127.0.0.1"

    def __init__(self, directory: Path | None, prefix: str) -> None:
        self._own_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix=prefix))
        self._child: ChildProcess | None = None
        self._started = False

    def _launch(self) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        """Start the server (again: same port, same files) and wait until it answers; a server running already
        is left as it is (``start()`` then ``with server:`` once launched a second one and lost the first).

        Raises:
            ServerStartError: it did not come up (the message carries its log's tail); what it made is removed.
        """
        if self._child is not None:
            if self._child.alive():
                return self
            self.stop()  # it died (a test killed it): let go of its log file before launching again
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._launch()
        except BaseException:
            self.stop()
            if not self._started and self._own_directory:
                shutil.rmtree(self.directory, ignore_errors=True)
            raise
        self._started = True
        return self

    def stop(self) -> None:
        """Stop the server; the directory (and the port) are kept for a later ``start()``."""
        if self._child is not None:
            self._child.stop()
            self._child = None

    def close(self) -> None:
        """Stop the server and remove its directory."""
        self.stop()
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)
