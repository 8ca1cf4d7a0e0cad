"""The README's tour, exactly as written (its port swapped for a free one): the PATH line, the embedded server it
starts, then its shell and Python blocks, each in a real shell against that server."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import retain
from retain.servers import free_port

README = Path(__file__).resolve().parent.parent / "README.md"
#: the port the README's tour names; the test runs the tour on a free one instead (never a fixed port in tests)
README_PORT = "6390"


def tour_blocks() -> list[tuple[str, str]]:
    """The fenced blocks of the "A short tour" section, in order, as (language, code)."""
    text = README.read_text()
    section = text[text.index("## A short tour"):]
    section = section[:section.index("\n### ")]
    return re.findall(r"```(\w+)\n(.*?)```", section, re.S)


def shell(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euc", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


class TestTour:
    def test_the_tour_runs_as_written(self, tmp_path):
        """On PATH in one line, an embedded server started as shown, then the shell and Python blocks all work
        (nothing on 6379 is used)."""
        blocks = tour_blocks()
        assert [language for language, _ in blocks] == ["sh", "sh", "sh", "python", "sh"]
        (on_path, _), (start_server, _), (point_at_it, _), (python_tour, _), (shell_tour, _) = \
            [(code, language) for language, code in blocks]
        port = str(free_port())
        # A clone as the README assumes: .venv/ beside it (this interpreter's), this checkout's retain importable.
        (tmp_path / ".venv").symlink_to(Path(sys.prefix))
        env = {**os.environ, "PYTHONPATH": str(Path(retain.__file__).resolve().parents[1])}
        env.pop("RETAIN_REDIS_URL", None)
        server = subprocess.Popen(["bash", "-euc", on_path + "exec " + start_server.replace(README_PORT, port)],
                                  cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()  # printed once the server answers
            assert url == f"redis://127.0.0.1:{port}/0", server.stderr.read() if server.stderr else ""
            (tmp_path / "tour.py").write_text(python_tour)
            first = on_path + point_at_it.replace(README_PORT, port)
            ran = shell(first + "python tour.py\n", tmp_path, env)
            assert ran.returncode == 0, ran.stderr
            assert 10_000 <= int(ran.stdout.strip().splitlines()[-1]) < 10_200
            ran = shell(first + shell_tour, tmp_path, env)
            assert ran.returncode == 0, ran.stderr
            assert "removed 0 entries from emq:{codemojex}:stream:activity (MAXLEN ~ 10000);" in ran.stdout
            assert "Usage: retain [OPTIONS] COMMAND" in ran.stdout
        finally:
            server.send_signal(signal.SIGINT)
            code = server.wait(timeout=30)
        assert code == 0


class TestMarkedBlocks:
    def test_the_readme_runs_as_written(self, tmp_path, redis_server, redis_conn):
        """Every block the README marks runs in order, in an empty directory, against a real Redis and a real logd:
        the tour's Python and shell, the driver on its beat, retain.toml and the commands on it, the archive in a
        directory of its own, logd's Python, expire.yaml and retain-jobs.toml sent to a logd (before:
        run_the_app() was undefined, retain.toml and retain-jobs.toml never shown, the archive needed root)."""
        from tests.helpers.command import retain_env
        from tests.helpers.docs import marked_blocks, run_blocks
        from tests.helpers.waiting import accepts, wait_for

        blocks = marked_blocks(README)
        assert {block.name for block in blocks if block.kind == "file"} == {"retain.toml", "expire.yaml",
                                                                          "retain-jobs.toml"}
        assert "run_the_app" not in README.read_text() and "/var/lib/retain/archive\")" not in README.read_text()
        work = tmp_path / "work"
        work.mkdir()
        port = free_port()
        env = {**retain_env(tmp_path / "bin"), "RETAIN_REDIS_URL": redis_server.url,
               "RETAIN_LOGD": f"127.0.0.1:{port}"}
        logd = subprocess.Popen(["retain", "logd", "serve", "--db", str(tmp_path / "served.sqlite3"), "--listen",
                                 f"127.0.0.1:{port}"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: accepts(port), "logd to listen", child=logd)
            printed = "".join(run_blocks(blocks, work, env, redis_server.url))
        finally:
            logd.send_signal(signal.SIGTERM)
            assert logd.wait(timeout=30) == 0
        assert "retain.toml: the policy is good" in printed and "beat at " in printed
        assert "emq:{codemojex}:stream:activity" in printed and "MAXLEN ~ 10000" in printed
        assert (work / "retain-archive").is_dir() and "deleted: 0" in printed


class TestPath:
    def test_readme_says_where_retain_is(self):
        """After the two commands the README says, in one line, how to put .venv/bin on PATH."""
        assert 'export PATH="$PWD/.venv/bin:$PATH"' in README.read_text()




class TestDocdWalkthrough:
    def test_the_walkthrough_prints_what_the_readme_shows(self, tmp_path):
        """The README's docd walkthrough -- its mount file, its request, its commands (ports and the socket moved to
        free ones) -- prints exactly the answer the README shows, once logd has one finished job to age out."""
        from tests.helpers.waiting import accepts, wait_for

        text = README.read_text()
        section = text[text.index("### docd: one retain"):text.index("Your own tests can use")]
        blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
        assert [language for language, _ in blocks] == ["toml", "yaml", "sh", ""]
        mounts, request, commands, shown = (code for _, code in blocks)
        logd_port, docd_port, sock = str(free_port()), str(free_port()), str(tmp_path / "verse-ctl.sock")

        def moved(code: str) -> str:
            return code.replace("7420", logd_port).replace("7410", docd_port).replace("/tmp/verse-ctl.sock", sock)

        (tmp_path / "mounts.toml").write_text(moved(mounts))
        (tmp_path / "retain.yaml").write_text(request)
        lines = [line.split("  #")[0].split() for line in moved(commands).strip().splitlines()]
        assert [line[:3] for line in lines] == [["retain", "logd", "serve"], ["retain", "docd", "controller"],
                                               ["retain", "docd", "serve"], ["retain", "logd", "retain"]]
        lines[0] += ["--listen", f"127.0.0.1:{logd_port}"]  # the README's default ports, moved
        lines[2] += ["--listen", f"127.0.0.1:{docd_port}"]
        env = {**os.environ, "PYTHONPATH": str(Path(retain.__file__).resolve().parents[1])}
        run = [sys.executable, "-c", "from retain.cli import main; main()"]
        servers = [subprocess.Popen(run + line[1:], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL) for line in lines[:3]]
        try:
            for address in (int(logd_port), sock, int(docd_port)):
                wait_for(lambda address=address: accepts(address), f"a server on {address}")
            patch = subprocess.run(run + ["logd", "request", "-", "--connect", f"127.0.0.1:{logd_port}"],
                                   input='{patch: {ops: [{set: jobs.j1, value: {status: done, '
                                         'updatedAt: "2026-09-01T00:00:00Z"}}]}}', cwd=tmp_path, env=env,
                                   capture_output=True, text=True, timeout=60)
            assert patch.returncode == 0, patch.stderr
            answer = subprocess.run(run + lines[3][1:], cwd=tmp_path, env=env, capture_output=True, text=True,
                                    timeout=60)
            assert answer.returncode == 0, answer.stderr
            assert answer.stdout == shown
        finally:
            for server in servers:
                server.send_signal(signal.SIGTERM)
            assert [server.wait(timeout=30) for server in servers] == [0, 0, 0]
