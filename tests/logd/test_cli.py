"""``retain logd serve`` as a real process, and ``retain logd request`` against it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from retain.cli import main
from retain.errors import LimitExceeded
from retain.logd.client import Client
from retain.servers import free_port
from tests.helpers.waiting import accepts


def wait_connectable(port: int, process: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, process.stderr.read().decode()
        if accepts(port):
            return
        assert time.monotonic() < deadline, "logd serve never listened"
        time.sleep(0.05)


@pytest.fixture
def served_process(tmp_path):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", "from retain.cli import main; main()", "logd", "serve", "--db",
                                str(tmp_path / "cli.sqlite3"), "--listen", f"127.0.0.1:{port}"],
                               stderr=subprocess.PIPE, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        wait_connectable(port, process)
        yield port, process
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


class TestServeAndRequest:
    def test_request_prints_answers_in_order(self, served_process, tmp_path):
        """Documents in a file are sent pipelined; each answer is printed; an error answer exits 1."""
        port, _ = served_process
        requests = tmp_path / "requests.yaml"
        requests.write_text("{patch: {ops: [{set: jobs.j1, value: {status: done}}]}}\n---\n"
                            "{get: {path: jobs.j1.status}}\n...\n{get: {path: jobs.j2}}\n")
        result = CliRunner().invoke(main, ["logd", "request", str(requests), "--connect", f"127.0.0.1:{port}",
                                           "--author", "cli/test"])
        assert result.exit_code == 1
        assert result.output.split("...\n")[:3] == [
            "result:\n  patch:\n    commit: 1\n", "result:\n  get:\n    commit: 1\n    value: done\n",
            "error:\n  code: not_found\n  message: jobs.j2 does not exist at commit 1\n"]
        ok = CliRunner().invoke(main, ["logd", "request", "-", "--connect", f"127.0.0.1:{port}", "--json"],
                                input='{"list": {"path": "jobs.*"}}')
        assert ok.exit_code == 0 and ok.output == '{"result":{"list":{"commit":1,"items":{"j1":{"status":"done"}}}}}\n'

    def test_bad_document_sends_nothing(self, served_process):
        """A document that does not load is refused before anything is sent."""
        port, _ = served_process
        result = CliRunner().invoke(main, ["logd", "request", "-", "--connect", f"127.0.0.1:{port}"],
                                    input="{patch: {ops: [{set: a, value: 1}]}}\n---\n{get: !nope x}\n")
        assert result.exit_code == 1 and "unknown tag !nope" in result.output
        with Client(("127.0.0.1", port)) as logd:
            assert logd.call("get")["commit"] == 0

    def test_interrupt_stops_cleanly(self, served_process):
        """Ctrl-C (SIGINT) stops the server and says so."""
        _, process = served_process
        os.kill(process.pid, signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert b"logd stopped" in process.stderr.read()

    @pytest.mark.parametrize(("args", "message"), [
        (["serve", "--listen", "127.0.0.1:1", "--socket", "/tmp/x"], "not both"),
        (["serve", "--listen", "nohost"], "HOST:PORT"),
        (["serve", "--horizon", "1h", "--cutoff", "2h"], "horizon must be"),
        (["request", "-", "--connect", "127.0.0.1:1"], "cannot reach logd"),
    ])
    def test_refusals(self, args, message, tmp_path):
        """Bad options exit non-zero with one clear line."""
        result = CliRunner().invoke(main, ["logd", *args, "--db", str(tmp_path / "x.sqlite3")]
                                    if args[0] == "serve" else ["logd", *args], input="{get: {}}")
        assert result.exit_code != 0 and message in result.output and "Traceback" not in result.output


class TestLimits:
    def test_limits_reach_the_running_server(self, tmp_path):
        """--limit sets a request limit and a stream timeout of a real `retain logd serve`: a patch past
        patchOps is refused naming it, a shorter one is applied; an idle connection is closed at idleSeconds."""
        port = free_port()
        process = subprocess.Popen([sys.executable, "-c", "from retain.cli import main; main()", "logd", "serve",
                                    "--db", str(tmp_path / "limits.sqlite3"), "--listen", f"127.0.0.1:{port}",
                                    "--limit", "patchOps=2", "--limit", "idleSeconds=0.5"], stderr=subprocess.PIPE)
        try:
            wait_connectable(port, process)
            with Client(("127.0.0.1", port)) as client:
                with pytest.raises(LimitExceeded, match="limits.patchOps"):
                    client.patch([{"set": f"jobs.j{n}", "value": n} for n in range(3)])
                assert client.patch([{"set": "jobs.j1", "value": 1}]).commit == 1
            with socket.create_connection(("127.0.0.1", port), timeout=30) as idle:
                assert idle.recv(1) == b"", "the server closes a connection idle past idleSeconds"
        finally:
            process.kill()
            process.wait(timeout=30)

    def test_idle_closes_at_idle_seconds_after_an_answer(self, tmp_path):
        """A connection idle after a patch's answer is closed idleSeconds after it, not twice that (it closed
        at 6.0 s for idleSeconds=3: the read begun before the answer set its own deadline, then one more)."""
        port = free_port()
        process = subprocess.Popen([sys.executable, "-c", "from retain.cli import main; main()", "logd", "serve",
                                    "--db", str(tmp_path / "idle.sqlite3"), "--listen", f"127.0.0.1:{port}",
                                    "--limit", "idleSeconds=3"], stderr=subprocess.PIPE)
        try:
            wait_connectable(port, process)
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(b'{"patch": {"ops": [{"set": "jobs.j1", "value": 1}]}}\n...\n')
                answer = b""
                while not answer.endswith(b"...\n"):
                    answer += sock.recv(65536)
                answered = time.monotonic()
                assert b"commit" in answer and sock.recv(1) == b""
                idled = time.monotonic() - answered
            assert 3 <= idled < 4.5, f"closed {idled:.2f}s after the answer (idleSeconds=3)"
        finally:
            process.kill()
            process.wait(timeout=30)

    @pytest.mark.parametrize(("limit", "message"), [
        ("patchOps", "expected NAME=VALUE with NAME one of patchOps, retainRules"),
        ("nope=1", "expected NAME=VALUE with NAME one of"),
        ("patchOps=0", "patchOps is a positive whole number (got '0')"),
        ("pathLength=1.5", "pathLength is a positive whole number (got '1.5')"),
        ("documentSeconds=-1", "documentSeconds is a positive number (got '-1')"),
        ("httpBodySeconds=soon", "httpBodySeconds is a positive number (got 'soon')"),
    ])
    def test_a_bad_limit_is_refused_before_anything_opens(self, limit, message, tmp_path):
        """A bad --limit names what was wrong and what is expected; no store is made."""
        db = tmp_path / "never.sqlite3"
        result = CliRunner().invoke(main, ["logd", "serve", "--db", str(db), "--limit", limit])
        assert result.exit_code == 2 and message in result.output and not db.exists()


class TestPortInUse:
    def test_one_line_and_no_store_left(self, tmp_path):
        """logd serve on a port in use: one line naming the address, exit 1, and the store it would have made is
        not left behind (the real command, in a process of its own)."""
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            result = subprocess.run([sys.executable, "-c", "from retain.cli import main; main()", "logd", "serve",
                                     "--db", str(tmp_path / "new.sqlite3"), "--listen", f"127.0.0.1:{port}"],
                                    capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, result.stderr
        assert f"logd cannot start: cannot listen on 127.0.0.1:{port}: the address is in use by another process" \
            in result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert sorted(path.name for path in tmp_path.iterdir()) == []


class TestUnopenableDb:
    @pytest.mark.parametrize("where, says", [("absent/dir/logd.sqlite3", "does not exist"), (".", "is a directory")],
                             ids=["no directory", "a directory"])
    def test_the_path_is_named(self, tmp_path, where, says):
        """logd serve --db on a path SQLite cannot open: one line naming the path and why, exit 1."""
        db = tmp_path / where
        result = subprocess.run([sys.executable, "-c", "from retain.cli import main; main()", "logd", "serve",
                                 "--db", str(db), "--socket", str(tmp_path / "logd.sock")], capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 1, result.stderr
        assert f"cannot open the store {db}" in result.stderr and says in result.stderr
        assert "Traceback" not in result.stderr
