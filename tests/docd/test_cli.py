"""``retain docd serve`` and ``retain docd controller`` as real processes, and their refusals."""

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
from retain.servers import free_port
from tests.helpers.waiting import accepts


def start(args: list[str], address, processes: list[subprocess.Popen]) -> subprocess.Popen:
    """``retain ARGS`` as a child process, once it accepts connections at ``address``."""
    process = subprocess.Popen([sys.executable, "-c", "from retain.cli import main; main()", *args],
                               stderr=subprocess.PIPE, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    processes.append(process)
    deadline = time.monotonic() + 30
    while not accepts(address):
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, f"retain {' '.join(args)} never listened"
        time.sleep(0.05)
    return process


@pytest.fixture
def processes():
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


class TestServe:
    def test_routes_between_processes(self, world, tmp_path, processes):
        """A controller process and a docd process: requests through docd reach logd and the controller."""
        ctl_socket = str(tmp_path / "cli-ctl.sock")
        controller = start(["docd", "controller", "--db", str(tmp_path / "cli-ctl.sqlite3"), "--socket", ctl_socket,
                            "--without", "compact"], ctl_socket, processes)
        mounts = tmp_path / "mounts.toml"
        mounts.write_text(f'logd = "127.0.0.1:1"\n[[mount]]\npath = "verse.ctl"\naddress = "unix:{ctl_socket}"\n')
        port = free_port()
        host, logd_port = world.logd.address
        docd = start(["docd", "serve", "--mounts", str(mounts), "--logd", f"{host}:{logd_port}", "--listen",
                      f"127.0.0.1:{port}"], ("127.0.0.1", port), processes)
        requests = ("{patch: {ops: [{set: verse.ctl.runs.r1, value: {at: x}}]}}\n---\n"
                    "{patch: {ops: [{set: jobs.j1, value: 1}]}}\n---\n{compact: {}}\n")
        result = CliRunner().invoke(main, ["logd", "request", "-", "--connect", f"127.0.0.1:{port}", "--json"],
                                    input=requests)
        assert result.output.splitlines() == [
            '{"result":{"patch":{"commit":1,"owner":"verse.ctl"}}}', '{"result":{"patch":{"commit":1,"owner":"logd"}}}',
            '{"error":{"code":"unsupported","message":"unsupported operation: request type \'compact\' (docd routes '
            'get, list, patch, retain, session, watch; send other requests to the owner directly)"}}']
        assert result.exit_code == 1  # an answer was an error
        said = {}
        for process, name in ((docd, "docd"), (controller, "controller")):
            os.kill(process.pid, signal.SIGINT)
            assert process.wait(timeout=30) == 0
            said[name] = process.stderr.read().decode()
            assert f"{name} stopped" in said[name]
        assert f"docd serving on 127.0.0.1:{port}; mounts: verse.ctl" in said["docd"]
        assert f"on unix:{ctl_socket}; verbs: session, schema, patch, get, list" in said["controller"]
        assert "compact" not in said["controller"].split("verbs:")[1].splitlines()[0]

    def test_says_where_it_serves(self, tmp_path, processes):
        """On start, docd names its socket and its mounts."""
        mounts = tmp_path / "mounts.toml"
        mounts.write_text('[[mount]]\npath = "verse.ctl"\naddress = "127.0.0.1:1"\n')
        path = str(tmp_path / "docd.sock")
        docd = start(["docd", "serve", "--mounts", str(mounts), "--socket", path], path, processes)
        os.kill(docd.pid, signal.SIGINT)
        assert docd.wait(timeout=30) == 0
        assert f"docd serving on unix:{path}; mounts: verse.ctl" in docd.stderr.read().decode()


class TestRefusals:
    @pytest.mark.parametrize(("mounts", "args", "message"), [
        ("[[mount]]\npath = 'verse.*'\naddress = 'h:1'\n", [], "[[mount]] #1 (verse.*): field 'path'"),
        ("[[mount]]\npath = 'a'\naddress = 'h:1'\n[[mount]]\npath = 'a.b'\naddress = 'h:2'\n", [],
         "a.b lies inside a"),
        ("", ["--listen", "127.0.0.1:1", "--socket", "/tmp/x"], "give --listen or --socket, not both"),
        ("", ["--listen", "nohost"], "a logd address is HOST:PORT"),
        ("", ["--logd", "nohost"], "--logd: an address is HOST:PORT"),
    ])
    def test_serve(self, tmp_path, mounts, args, message):
        """A bad mount file or option exits non-zero with one clear line, before anything is served."""
        path = tmp_path / "mounts.toml"
        path.write_text(mounts)
        result = CliRunner().invoke(main, ["docd", "serve", "--mounts", str(path), *args])
        assert result.exit_code != 0 and message in result.output and "Traceback" not in result.output

    def test_missing_mount_file(self, tmp_path):
        """A mount file that is not there is named."""
        result = CliRunner().invoke(main, ["docd", "serve", "--mounts", str(tmp_path / "nope.toml")])
        assert result.exit_code == 1 and "nope.toml: cannot read the mount file" in result.output

    @pytest.mark.parametrize(("args", "message"), [
        ([], "give --listen HOST:PORT or --socket PATH"),
        (["--socket", "/tmp/x", "--without", "frobnicate"], "'frobnicate' is not a logd verb"),
        (["--socket", "/tmp/x", "--without", "session"], "cannot go without session"),
    ])
    def test_controller(self, tmp_path, args, message):
        """A controller's bad options exit non-zero with one clear line, before the store is opened."""
        result = CliRunner().invoke(main, ["docd", "controller", "--db", str(tmp_path / "c.sqlite3"), *args])
        assert result.exit_code != 0 and message in result.output and "Traceback" not in result.output
        assert not (tmp_path / "c.sqlite3").exists()


class TestPortInUse:
    def test_one_line(self, tmp_path):
        """docd serve on a port in use: one line naming the address, exit 1 (the real command, in a process)."""
        mounts = tmp_path / "mounts.toml"
        mounts.write_text("")
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            result = subprocess.run([sys.executable, "-c", "from retain.cli import main; main()", "docd", "serve",
                                     "--mounts", str(mounts), "--listen", f"127.0.0.1:{port}"],
                                    capture_output=True, text=True, timeout=60)
        assert result.returncode == 1 and "docd cannot start" in result.stderr
        assert f"cannot listen on 127.0.0.1:{port}: the address is in use by another process" in result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
