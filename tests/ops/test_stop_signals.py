"""A daemon's stop signals reach its sigwait whatever thread the kernel hands them to.

``retain logd serve`` and ``retain docd controller`` open a store before they call ``run_daemon``, and a
SQLite store starts its checkpoint thread at open. A SIGTERM sent after the daemon answered its probes but
before the main thread sat in ``sigwait`` went to that thread, which did not block it: the process died by
the signal (exit -15) instead of stopping and exiting 0 (seen once in CI, in tests/ops/test_daemons.py).
The commands now make their threads inside ``stop_signals_held``.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

# A thread made before run_daemon (as Store.open makes its checkpointer), then a service whose start sends
# the process SIGTERM: the signal arrives while the main thread is not yet waiting for it.
DAEMON = """
import contextlib, os, signal, sys, threading
from retain.daemon import run_daemon, stop_signals_held

class SignalsItselfAtStart:
    def start(self):
        os.kill(os.getpid(), signal.SIGTERM)
    def stop(self):
        print("stopped", flush=True)

with stop_signals_held() if sys.argv[1] == "held" else contextlib.nullcontext():
    threading.Thread(target=threading.Event().wait, daemon=True).start()
    run_daemon(SignalsItselfAtStart(), name="test daemon", started=lambda: "started")
"""


def run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", DAEMON, mode], capture_output=True, text=True, timeout=60)


def test_a_thread_made_before_the_daemon_takes_the_signal_unless_held():
    """Unheld, the early thread takes SIGTERM and the process dies by it (what the commands did); held, the
    daemon stops its services and exits 0."""
    unheld = run("unheld")
    assert unheld.returncode == -signal.SIGTERM and "stopped" not in unheld.stdout
    held = run("held")
    assert held.returncode == 0, held.stderr
    assert held.stdout == "stopped\n" and "SIGTERM received" in held.stderr


# The real command, its services started, then SIGTERM to itself before its main thread waits for it.
COMMAND = """
import os, signal, sys
import retain.daemon as daemon

started = daemon._start_all

def start_then_signal(services, name):
    running = started(services, name)
    os.kill(os.getpid(), signal.SIGTERM)
    return running

daemon._start_all = start_then_signal
from retain.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("command", [["logd", "serve"], ["docd", "controller"]])
def test_the_commands_that_open_a_store_stop_on_an_early_signal(command, tmp_path):
    """`retain logd serve` and `retain docd controller` (their store's checkpoint thread made at open) stop on
    a SIGTERM that comes before their main thread waits, and exit 0."""
    done = subprocess.run([sys.executable, "-c", COMMAND, *command, "--db", str(tmp_path / "store.sqlite3"),
                           "--socket", str(tmp_path / "store.sock")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "SIGTERM received" in done.stderr and " stopped" in done.stderr
