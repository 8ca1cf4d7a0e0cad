"""``retain streams run``: the daemon against real servers; --once, --dry-run, bad files, signals to a real process."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from retain.cli import main
from retain.servers import free_port
from tests.streams.test_driver import append

RUN = "from retain.cli import main; main()"


def write_policy(tmp_path: Path, url: str | None, streams: str, tick: float = 0.05) -> Path:
    path = tmp_path / "retain.toml"
    head = f'url = "{url}"\n' if url else ""
    path.write_text(f"{head}tick = {tick}\n{streams}")
    return path


FEED = '[[stream]]\nqueue = "game"\nname = "feed"\nmaxlen = 10\napprox = false\n'
FEED_KEY = "emq:{game}:stream:feed"


def removed(metrics: str) -> float:
    """The daemon's retain_stream_removed_total for the feed, 0 before it has one."""
    found = re.search(r'^retain_stream_removed_total\{stream="emq:\{game\}:stream:feed"\} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["streams", "run", *args], env=env)


class TestOnce:
    def test_one_beat(self, tmp_path, redis_server, redis_conn):
        """--once applies one beat, prints it and exits 0."""
        append(redis_conn, FEED_KEY, 50)
        result = invoke(str(write_policy(tmp_path, redis_server.url, FEED)), "--once")
        assert result.exit_code == 0, result.output
        assert "removed 40 entries in 1 trim," in result.output
        assert f"{FEED_KEY}  removed 40" in result.output
        assert redis_conn.xlen(FEED_KEY) == 10

    def test_a_failed_stream_exits_1(self, tmp_path, redis_server, redis_conn):
        """A WRONGTYPE stream is reported and the exit status says so; the good stream is still trimmed."""
        append(redis_conn, FEED_KEY, 50)
        redis_conn.set("legacy", "x")
        path = write_policy(tmp_path, redis_server.url, FEED + '[[stream]]\nkey = "legacy"\nmax_age = "1d"\n')
        result = invoke(str(path), "--once")
        assert result.exit_code == 1
        assert "legacy  failed: Redis refused the command on key 'legacy': WRONGTYPE" in result.output
        assert redis_conn.xlen(FEED_KEY) == 10

    def test_url_precedence(self, tmp_path, redis_server, redis_conn):
        """--url beats the file's url; the file's url beats $RETAIN_REDIS_URL."""
        dead = f"redis://127.0.0.1:{free_port()}/0"
        append(redis_conn, FEED_KEY, 20)
        assert invoke(str(write_policy(tmp_path, dead, FEED)), "--once", "--url", redis_server.url).exit_code == 0
        append(redis_conn, FEED_KEY, 20)
        env = {"RETAIN_REDIS_URL": redis_server.url}
        assert invoke(str(write_policy(tmp_path, None, FEED)), "--once", env=env).exit_code == 0
        append(redis_conn, FEED_KEY, 20)
        assert invoke(str(write_policy(tmp_path, dead, FEED)), "--once", env=env).exit_code == 1
        assert redis_conn.xlen(FEED_KEY) == 30


class TestCluster:
    def test_once_on_a_cluster(self, tmp_path, redis_cluster):
        """cluster = true connects with RedisCluster: one beat trims streams on every master."""
        refs = [(f"daemon{q}", f"s{s}") for q in range(12) for s in range(2)]
        keys = [f"emq:{{{queue}}}:stream:{name}" for queue, name in refs]
        tables = "".join(f'[[stream]]\nqueue = "{queue}"\nname = "{name}"\nmaxlen = 3\napprox = false\n'
                         for queue, name in refs)
        path = tmp_path / "cluster.toml"
        path.write_text(f'url = "{redis_cluster.url}"\ncluster = true\n{tables}')
        with redis_cluster.client() as conn:
            for key in keys:
                append(conn, key, 8)
            try:
                result = invoke(str(path), "--once")
                assert result.exit_code == 0, result.output
                assert f"removed {5 * len(keys)} entries in {len(keys)} trims" in result.output
                assert {conn.xlen(key) for key in keys} == {3}
                dry = invoke(str(path), "--dry-run")
                assert dry.exit_code == 0 and dry.output.count("a trim now removes 0") == len(keys)
            finally:
                for key in keys:
                    conn.delete(key)


class TestDryRun:
    def test_trims_nothing(self, tmp_path, redis_server, redis_conn):
        """--dry-run prints length, what is kept and what would go, and removes nothing."""
        append(redis_conn, FEED_KEY, 50)
        append(redis_conn, "legacy:feed", 1_000)
        path = write_policy(tmp_path, redis_server.url, FEED + '[[stream]]\nkey = "legacy:feed"\nmaxlen = 100\n')
        redis_conn.config_resetstat()
        result = invoke(str(path), "--dry-run")
        assert result.exit_code == 0, result.output
        assert "nothing is folded or trimmed" in result.output
        assert f"{FEED_KEY}  MAXLEN = 10  length 50  keeps 10  a trim now removes 40" in result.output
        assert ("legacy:feed  MAXLEN ~ 100  length 1000  keeps 100  a trim now removes 801 to 900 "
                "(whole nodes of at most 100 entries)") in result.output
        stats = redis_conn.info("commandstats")
        assert "cmdstat_xtrim" not in stats and "cmdstat_del" not in stats
        assert (redis_conn.xlen(FEED_KEY), redis_conn.xlen("legacy:feed")) == (50, 1_000)


class TestRefusals:
    @pytest.mark.parametrize(("streams", "message"), [
        (FEED.replace("maxlen = 10", "maxlen = -1"),
         "[[stream]] #1 (queue 'game', name 'feed'): field 'maxlen': MaxLen count must be >= 0 (got -1)"),
        (FEED + '[[stream]]\nkey = "x"\nmax_age = "soon"\n', "[[stream]] #2 (key 'x'): field 'max_age': invalid duration"),
        (FEED.replace("approx", "aprox"), "[[stream]] #1 (queue 'game', name 'feed'): unknown field 'aprox'"),
    ])
    def test_bad_file_refused_before_connecting(self, tmp_path, redis_server, redis_conn, streams, message):
        """INV-VALIDATE: a bad policy file exits non-zero naming file, entry and field; the server sees nothing."""
        path = write_policy(tmp_path, redis_server.url, streams)
        redis_conn.config_resetstat()
        result = invoke(str(path))
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert f"Error: {path}: {message}" in result.output
        # only the test's own CONFIG RESETSTAT (Redis 7 names it cmdstat_config|resetstat, Redis 6 cmdstat_config)
        assert {name.split("|")[0] for name in redis_conn.info("commandstats") if name != "cmdstat_info"} == {
            "cmdstat_config"}

    def test_missing_file(self, tmp_path):
        """A policy file that is not there is named."""
        result = invoke(str(tmp_path / "absent.toml"))
        assert result.exit_code == 1 and "absent.toml: cannot read the policy file" in result.output

    def test_metrics_need_the_daemon(self, tmp_path, redis_server):
        """--metrics-port makes no sense with --once or --dry-run."""
        result = invoke(str(write_policy(tmp_path, redis_server.url, FEED)), "--once", "--metrics-port", "9464")
        assert result.exit_code == 2 and "--metrics-port serves a running daemon" in result.output


class TestDaemonProcess:
    """The daemon as a real process: it beats, serves metrics, and a signal ends it cleanly."""

    @pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
    def test_signal_finishes_the_beat_and_exits_0(self, tmp_path, redis_server, redis_conn, stop):
        """Mid-run, SIGTERM or SIGINT ends the daemon with status 0 after the beat in progress."""
        append(redis_conn, FEED_KEY, 500)
        port = free_port()
        log = tmp_path / "daemon.log"
        with log.open("w") as stderr:
            daemon = subprocess.Popen(
                [sys.executable, "-c", RUN, "streams", "run", str(write_policy(tmp_path, redis_server.url, FEED)),
                 "--metrics-port", str(port)], stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + 30
            metrics = ""
            while removed(metrics) < 490:  # the first beat's 490, then what the appends below add
                assert daemon.poll() is None, log.read_text()
                assert time.monotonic() < deadline, f"the daemon never trimmed\n{log.read_text()}"
                append(redis_conn, FEED_KEY, 5)   # producers keep appending while it runs
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                        metrics = response.read().decode()
                except (urllib.error.URLError, ConnectionError):
                    time.sleep(0.01)
            daemon.send_signal(stop)
            assert daemon.wait(timeout=30) == 0, log.read_text()
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
        text = log.read_text()
        assert f"{stop.name} received: finishing the beat in progress" in text
        assert "stopped after" in text and "Traceback" not in text
        assert "beat at " in text and "retention driver started: 1 streams" in text
