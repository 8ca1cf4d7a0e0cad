"""``retain streams run``: the daemon against real servers; --once, --dry-run, bad files, signals to a real process."""

from __future__ import annotations

import json
import logging
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC
from pathlib import Path

import pytest
from click.testing import CliRunner

from retain.archive import Archive, fold, read
from retain.cli import main
from retain.errors import InvalidInput, InvalidPolicy
from retain.retention import DaemonConfig, dry_run, load_policy, run_once
from retain.servers import free_port
from retain.streams import StreamRef
from tests.helpers.archive import archived_ids
from tests.helpers.daemons import running
from tests.helpers.streams import append
from tests.helpers.waiting import wait_for

RUN = "from retain.cli import main; main()"


def write_policy(tmp_path: Path, url: str | None, streams: str, tick: float = 0.05, archive: str | None = None) -> Path:
    path = tmp_path / "retain.toml"
    head = f'url = "{url}"\n' if url else ""
    head += f'archive = "{archive}"\n' if archive else ""
    path.write_text(f"{head}tick = {tick}\n{streams}")
    return path


FEED = '[[stream]]\nqueue = "game"\nname = "feed"\nmaxlen = 10\napprox = false\n'
FEED_KEY = "emq:{game}:stream:feed"
ARCHIVED_FEED = FEED + "archive = true\n"


def removed(metrics: str) -> float:
    """The daemon's retain_stream_removed_total for the feed, 0 before it has one."""
    found = re.search(r'^retain_stream_removed_total\{stream="emq:\{game\}:stream:feed"\} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["streams", "run", *args], env=env)


class TestOnce:
    def test_one_beat_takes_no_lease(self, tmp_path, redis_server, redis_conn):
        """--once trims every stream whoever holds its shard, says so, and writes no lease key."""
        append(redis_conn, FEED_KEY, 50)
        group = "held-elsewhere"
        path = write_policy(tmp_path, redis_server.url, FEED + f'[replicas]\ngroup = "{group}"\n')
        for shard in range(64):  # another replica holds every shard
            redis_conn.set(f"retain:replicas:{group}:lease:{shard}", "1 other~1", px=60_000)
        result = invoke(str(path), "--once")
        assert result.exit_code == 0, result.output
        assert "taking no lease: every stream of the policy, whichever replica holds it" in result.output
        assert redis_conn.xlen(FEED_KEY) == 10
        assert redis_conn.keys(f"retain:replicas:{group}:members") == []

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
         "[[stream]] #1 (queue 'game', name 'feed'): field 'maxlen': MaxLen count: must be a whole number >= 0 (got -1)"),
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
        assert result.exit_code == 2 and "--http and --metrics-port serve a running daemon" in result.output


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


def commands_run(conn) -> set[str]:
    """The commands the server ran since the last CONFIG RESETSTAT (Redis 7 names subcommands, Redis 6 not)."""
    return {name.split("|")[0] for name in conn.info("commandstats") if name != "cmdstat_info"}


class TestArchived:
    """A policy file with archive = true: the daemon folds before it trims."""

    def test_once_folds_then_trims(self, tmp_path, redis_server, redis_conn):
        """--once folds what the window drops into the file's archive, then trims past W, and says so."""
        archive_url = f"file://{tmp_path / 'archive'}"
        appended = append(redis_conn, FEED_KEY, 50)
        append(redis_conn, "legacy:feed", 30)
        path = write_policy(tmp_path, redis_server.url, ARCHIVED_FEED + '[[stream]]\nkey = "legacy:feed"\nmaxlen = 5\n'
                            'approx = false\n', archive=archive_url)
        result = invoke(str(path), "--once")
        assert result.exit_code == 0, result.output
        assert "removed 65 entries in 2 trims, folded 40 entries, " in result.output
        assert f"{FEED_KEY}  folded 40, W = {appended[39].decode()}, removed 40" in result.output
        assert "legacy:feed  removed 25" in result.output
        assert (redis_conn.xlen(FEED_KEY), redis_conn.xlen("legacy:feed")) == (10, 5)
        archive = Archive(archive_url)
        assert [entry_id for entry_id, _ in read(redis_conn, StreamRef("game", "feed"), archive)] == appended
        assert archive.streams() == [FEED_KEY]

    def test_a_failed_fold_exits_1(self, tmp_path, redis_server, redis_conn):
        """A stream whose fold fails is reported, left untrimmed, and the exit status says so."""
        append(redis_conn, FEED_KEY, 20)
        redis_conn.xadd(FEED_KEY, {b"\xff": b"x"})
        append(redis_conn, FEED_KEY, 20)
        path = write_policy(tmp_path, redis_server.url, ARCHIVED_FEED, archive=str(tmp_path / "archive"))
        result = invoke(str(path), "--once")
        assert result.exit_code == 1
        assert f"{FEED_KEY}  fold failed, not trimmed: a field name of" in result.output
        assert redis_conn.xlen(FEED_KEY) == 41

    def test_dry_run_folds_and_trims_nothing(self, tmp_path, redis_server, redis_conn):
        """--dry-run says what a beat would fold and then trim; it folds nothing and trims nothing."""
        archive_url = str(tmp_path / "archive")
        ids = append(redis_conn, FEED_KEY, 50)
        fold(redis_conn, StreamRef("game", "feed"), Archive(archive_url), ids[19])
        path = write_policy(tmp_path, redis_server.url, ARCHIVED_FEED, archive=archive_url)
        redis_conn.config_resetstat()
        result = invoke(str(path), "--dry-run")
        assert result.exit_code == 0, result.output
        assert "nothing is folded or trimmed" in result.output
        assert (f"{FEED_KEY}  MAXLEN = 10  archived, W {ids[19].decode()}  length 50  keeps 10  "
                "a fold now archives 20, then a trim removes 40") in result.output
        assert "cmdstat_xtrim" not in commands_run(redis_conn) and redis_conn.xlen(FEED_KEY) == 50
        assert Archive(archive_url).version == 1  # the hand fold's commit, and no other

    @pytest.mark.parametrize(("archive", "streams", "message"), [
        (None, ARCHIVED_FEED, "[[stream]] #1 (queue 'game', name 'feed'): field 'archive': true needs an archive"),
        ("memory://", ARCHIVED_FEED, "field 'archive': memory:// is lost when the daemon stops"),
        ("s3:///no-bucket", ARCHIVED_FEED, "field 'archive': an s3 URL names a bucket"),
        ("/var/lib/retain", FEED, "field 'archive': no [[stream]] sets archive = true"),
    ])
    def test_refused_before_connecting(self, tmp_path, redis_server, redis_conn, archive, streams, message):
        """INV-VALIDATE: a bad archive setting exits 1 naming the file, the entry and the field; Redis sees nothing."""
        path = write_policy(tmp_path, redis_server.url, streams, archive=archive)
        redis_conn.config_resetstat()
        result = invoke(str(path), "--once")
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert f"Error: {path}: {message}" in result.output
        assert commands_run(redis_conn) == {"cmdstat_config"}

    def test_killed_mid_run_then_run_again(self, tmp_path, redis_server, redis_conn):
        """INV-IDEMPOTENT: the daemon SIGKILLed wherever it is mid-beat, then one beat: nothing lost, nothing twice."""
        archive_url = f"file://{tmp_path / 'archive'}"
        path = write_policy(tmp_path, redis_server.url, ARCHIVED_FEED, tick=0.01, archive=archive_url)
        archive, feed = Archive(archive_url), StreamRef("game", "feed")
        appended: list[bytes] = []
        log = tmp_path / "daemon.log"
        with log.open("w") as stderr:
            daemon = subprocess.Popen([sys.executable, "-c", RUN, "streams", "run", str(path)],
                                      stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + 60
            while archive.version < 5:  # producers append while the daemon folds and trims
                assert daemon.poll() is None, log.read_text()
                assert time.monotonic() < deadline, f"the daemon never folded\n{log.read_text()}"
                appended += append(redis_conn, FEED_KEY, 25)
            appended += append(redis_conn, FEED_KEY, 25)
            daemon.kill()
            assert daemon.wait(timeout=30) == -signal.SIGKILL
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
        assert "Traceback" not in log.read_text()
        result = invoke(str(path), "--once")
        assert result.exit_code == 0, result.output
        assert redis_conn.xlen(FEED_KEY) == 10
        assert [entry_id for entry_id, _ in read(redis_conn, feed, Archive(archive_url))] == appended
        archived = archived_ids(Archive(archive_url), feed)
        assert len(archived) == len(set(archived)) == len(appended) - 10


LIBRARY_RUN = """
import sys
from retain.retention import DaemonConfig, load_policy, run
run(DaemonConfig(load_policy(sys.argv[2]), http=("127.0.0.1", int(sys.argv[1]))))
"""


class TestLibrary:
    """The daemon as a library call, no click: what `retain streams run` runs is retain.retention's."""

    def test_run_once_and_dry_run(self, tmp_path, redis_server, redis_conn):
        """run_once(config) is one beat's report; dry_run(config) previews and trims nothing."""
        append(redis_conn, FEED_KEY, 50)
        config = DaemonConfig.from_file(str(write_policy(tmp_path, redis_server.url, FEED)))
        _, rows = dry_run(config)
        assert [(row.key, row.length) for row in rows] == [(FEED_KEY, 50)] and redis_conn.xlen(FEED_KEY) == 50
        report = run_once(config)
        assert report.removed_by == {FEED_KEY: 40} and redis_conn.xlen(FEED_KEY) == 10

    def test_config_fields_over_the_file(self, tmp_path, redis_server, redis_conn):
        """The url field beats the file's; a bad replica name, or endpoints off loopback without tokens, are refused
        when the config is made, before I/O."""
        dead = f"redis://127.0.0.1:{free_port()}/0"
        append(redis_conn, FEED_KEY, 20)
        policy = load_policy(str(write_policy(tmp_path, dead, FEED)))
        assert run_once(DaemonConfig(policy, url=redis_server.url)).removed_by == {FEED_KEY: 10}
        with pytest.raises(InvalidPolicy, match="name"):
            DaemonConfig(policy, replica="has space")
        with pytest.raises(InvalidInput, match="refusing to serve 0.0.0.0 without tokens"):
            DaemonConfig(policy, http=("0.0.0.0", 9464))
        assert DaemonConfig(policy, http=("0.0.0.0", 9464), insecure=True).http == ("0.0.0.0", 9464)

    def test_a_malformed_url_names_its_source(self, tmp_path, redis_server):
        """A URL the client cannot parse is refused before any I/O, naming where it came from, never its password:
        the file's when the policy is read, the config's when the daemon connects."""
        with pytest.raises(InvalidPolicy, match=re.escape(f"{tmp_path / 'retain.toml'}: field 'url'")):
            DaemonConfig.from_file(str(write_policy(tmp_path, "redis://127.0.0.1:notaport/0", FEED)))
        config = DaemonConfig.from_file(str(write_policy(tmp_path, redis_server.url, FEED)),
                                        url="redis://:hun/ter2@127.0.0.1:6379/0")
        with pytest.raises(InvalidInput, match="^--url: .*percent-encode") as refused:
            run_once(config)
        assert "ter2" not in str(refused.value)

    def test_run_serves_and_stops_on_sigterm(self, tmp_path, redis_server, redis_conn):
        """run(config) in a plain Python process trims, serves its metrics, and ends with 0 on SIGTERM."""
        append(redis_conn, FEED_KEY, 500)
        policy = write_policy(tmp_path, redis_server.url, FEED)
        with running([str(policy)], tmp_path, library=LIBRARY_RUN) as daemon:
            wait_for(lambda: removed(daemon.metrics()) >= 490, "the daemon to trim", child=daemon.process)
        assert "retention driver stopped after" in daemon.log.read_text()


def _beats(metrics: str) -> float:
    found = re.search(r"^retain_beats_total (\S+)$", metrics, re.M)
    return float(found.group(1)) if found else 0.0
class TestLogs:
    """What `streams run` writes: JSON on every line with --log-format json; a quiet beat not at INFO."""
    def test_json_on_every_line_with_redis_down(self, tmp_path):
        """With Redis down, the first line (the driver starts anyway) is JSON like every other."""
        policy = write_policy(tmp_path, f"redis://127.0.0.1:{free_port()}/0", FEED)
        with running(["streams", "run", str(policy), "--log-format", "json"], tmp_path) as daemon:
            pass
        lines = daemon.log.read_text().splitlines()
        events = [json.loads(line)["event"] for line in lines]  # raises on a line that is not JSON
        assert any("the driver starts anyway" in event for event in events), lines
    def test_once_summary_is_json(self, tmp_path, redis_server, redis_conn):
        """--once --log-format json writes one JSON object per line on stdout, the beat's fields with it."""
        append(redis_conn, FEED_KEY, 25)
        result = invoke(str(write_policy(tmp_path, redis_server.url, FEED)), "--once", "--log-format", "json")
        assert result.exit_code == 0, result.output
        lines = [json.loads(line) for line in result.stdout.splitlines()]
        assert any(line.get("removed") == 15 and "trims" in line for line in lines), lines
        assert {"event": f"{FEED_KEY}  removed 15", "stream": FEED_KEY, "removed": 15} in lines
    def test_dry_run_is_json(self, tmp_path, redis_server, redis_conn):
        """--dry-run --log-format json: one JSON object per line on stdout, each stream's figures by name."""
        append(redis_conn, FEED_KEY, 25)
        result = invoke(str(write_policy(tmp_path, redis_server.url, FEED)), "--dry-run", "--log-format", "json")
        assert result.exit_code == 0, result.output
        lines = [json.loads(line) for line in result.stdout.splitlines()]
        assert lines[0]["event"].startswith("dry run at ") and "now" in lines[0]
        row = next(line for line in lines if line.get("stream") == FEED_KEY)
        assert (row["length"], row["keeps"], row["outside"]) == (25, 10, 15), row
        assert redis_conn.xlen(FEED_KEY) == 25  # a dry run
    def test_a_beat_that_removed_nothing_is_not_logged_at_info(self, tmp_path, redis_server, redis_conn):
        """Beats that change nothing log at DEBUG after the first (one INFO line a minute), not a line per tick."""
        redis_conn.delete(FEED_KEY)
        policy = write_policy(tmp_path, redis_server.url, FEED, tick=0.02)
        with running(["streams", "run", str(policy)], tmp_path) as daemon:
            wait_for(lambda: _beats(daemon.metrics()) >= 10, "ten beats")
        assert daemon.log.read_text().count("beat at ") == 1, daemon.log.read_text()
class TestMetricsPage:
    def test_no_created_series(self, tmp_path, redis_server, redis_conn):
        """/metrics exports each counter and histogram once, with no *_created gauge beside it."""
        with running(["streams", "run", str(write_policy(tmp_path, redis_server.url, FEED))], tmp_path) as daemon:
            wait_for(lambda: _beats(daemon.metrics()) >= 1, "a beat")
            page = daemon.metrics()
        assert "retain_beats_total" in page
        assert re.findall(r"^(?:# (?:HELP|TYPE) )?(\w+_created)\b", page, re.M) == []
class TestPortInUse:
    def test_http_on_a_taken_port_names_the_address(self, tmp_path, redis_server):
        """`streams run --http` on a port in use: one line naming the address (Python's own names none), exit 1."""
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            result = subprocess.run([sys.executable, "-c", RUN, "streams", "run",
                                     str(write_policy(tmp_path, redis_server.url, FEED)), "--http", f"127.0.0.1:{port}"],
                                    capture_output=True, text=True, timeout=60)
        assert result.returncode == 1
        assert result.stderr.strip().splitlines()[-1] == (f"Error: retention driver cannot start: cannot listen on "
                                                          f"127.0.0.1:{port}: the address is in use by another process")
class TestBeatLevel:
    @staticmethod
    def report(**fields):
        from datetime import datetime

        from retain.retention import SweepReport
        return SweepReport(at=datetime(2026, 9, 12, tzinfo=UTC), **{
            "removed": 0, "calls": 1, "removed_by": {FEED_KEY: 0}, "failures": {}, **fields})
    def test_an_idle_beat_is_debug_but_once_a_minute(self):
        """The first beat is INFO; idle ones after it DEBUG until a minute passed; a beat that removed is INFO."""
        from retain.retention.daemon import _BeatLevel
        level = _BeatLevel(every=60)
        idle, busy = self.report(), self.report(removed=3, removed_by={FEED_KEY: 3})
        assert idle.idle and not busy.idle
        assert [level.of(idle, 0), level.of(idle, 30), level.of(busy, 31), level.of(idle, 90), level.of(idle, 91.5)] \
            == [logging.INFO, logging.DEBUG, logging.INFO, logging.DEBUG, logging.INFO]
