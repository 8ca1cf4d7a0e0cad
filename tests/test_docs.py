"""Every command in docs/ runs as written: each page's blocks marked runnable run in order against a real Redis,
with retain on PATH (tests/helpers/docs.py says how; docs/development.md, "Runnable docs", how to mark one); the
container example of docs/operating.md starts."""

from __future__ import annotations

import shlex
import signal
import ssl
import subprocess
import urllib.request
from pathlib import Path

import pytest

from retain.servers import free_port
from tests.helpers.command import retain_env
from tests.helpers.docs import marked_blocks, run_blocks
from tests.helpers.tls import self_signed
from tests.helpers.waiting import wait_for

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = [page for page in sorted(DOCS.glob("*.md")) if marked_blocks(page)]


class TestRunnableDocs:
    def test_the_operators_pages_mark_their_commands(self):
        """The pages an operator follows step by step have blocks marked runnable (the test below is not empty)."""
        assert {"streams.md", "policy.md", "operating.md"} <= {page.name for page in PAGES}

    @pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
    def test_every_runnable_block_runs(self, page, tmp_path, redis_server, redis_conn):
        """Each marked block of the page, in order, in a directory of its own: every shell line and every Python
        block succeeds."""
        work = tmp_path / "work"
        work.mkdir()
        env = {**retain_env(tmp_path / "bin"), "RETAIN_REDIS_URL": redis_server.url}
        run_blocks(marked_blocks(page), work, env, redis_server.url)


class TestMarkers:
    def test_runnable_and_file_blocks_are_found_in_order(self, tmp_path):
        """A block right after <!-- runnable --> runs, one after <!-- file: NAME --> is written to NAME; others
        are left alone."""
        page = tmp_path / "page.md"
        page.write_text("text\n```sh\nnot marked\n```\n<!-- file: p.toml -->\n```toml\na = 1\n```\n"
                        "<!-- runnable -->\n```sh\necho hi\n```\n<!-- runnable -->\n```python\nprint(1)\n```\n")
        assert [(block.kind, block.code, block.name) for block in marked_blocks(page)] == [
            ("file", "a = 1\n", "p.toml"), ("sh", "echo hi\n", None), ("python", "print(1)\n", None)]

    def test_python_blocks_share_one_session(self, tmp_path, redis_server):
        """A page's Python blocks run in one interpreter, as typed into one session; a failing block names itself."""
        page = tmp_path / "page.md"
        page.write_text("<!-- runnable -->\n```python\nx = 41\n```\n<!-- runnable -->\n```python\nprint(x + 1)\n```\n"
                        "<!-- runnable -->\n```python\nundefined_name\n```\n")
        blocks = marked_blocks(page)
        assert run_blocks(blocks[:2], tmp_path, retain_env(tmp_path / "bin"), redis_server.url) == ["", "42\n"]
        with pytest.raises(AssertionError, match="page.md:10 failed"):
            run_blocks(blocks, tmp_path, retain_env(tmp_path / "bin"), redis_server.url)


class TestContainerExample:
    def test_the_logd_line_starts(self, tmp_path):
        """docs/operating.md's `docker run ... retain logd serve ...` line, run as the image runs it (its paths and
        ports moved into the test's directory and free ports): the daemon starts, answers /healthz, and SIGTERM
        stops it with 0 (a non-loopback address without --tokens was refused: exit 1)."""
        text = (DOCS / "operating.md").read_text()
        section = text[text.index("## In a container"):text.index("## Who may look")]
        line = next(command for command in section.replace("\\\n", " ").splitlines()
                    if command.startswith("docker run") and " logd serve " in command)
        words = shlex.split(line)
        arguments = words[words.index("retain") + 1:]  # the image's ENTRYPOINT is retain
        tokens = tmp_path / "tokens.toml"
        tokens.write_text('[[token]]\nname = "prometheus"\nsecret = "prometheus-reads-it"\nmay = ["read"]\n')
        listen, http = str(free_port()), str(free_port())
        (tmp_path / "tls").mkdir()
        cert, key = self_signed(tmp_path / "tls")
        moved = [word.replace("/etc/retain/tokens.toml", str(tokens)).replace("/var/lib/retain", str(tmp_path))
                 .replace("/etc/retain/tls/cert.pem", str(cert)).replace("/etc/retain/tls/key.pem", str(key))
                 .replace(":7420", f":{listen}").replace(":7421", f":{http}") for word in arguments]
        assert moved[:2] == ["logd", "serve"] and f"0.0.0.0:{listen}" in moved
        process = subprocess.Popen(["retain", *moved], cwd=tmp_path, env=retain_env(tmp_path / "bin"),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_for(lambda: _answers(f"https://127.0.0.1:{http}/healthz", cert), "the container's logd to answer",
                     child=process)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
            _, stderr = process.communicate(timeout=30)
        assert process.returncode == 0, stderr.decode()


def _answers(url: str, ca: Path) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10, context=ssl.create_default_context(cafile=str(ca))) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False
