"""Every daemon's ops endpoints through the real command in a subprocess: --http and --log-format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from retain.servers import RedisServer
from tests.helpers.daemons import running
from tests.helpers.streams import append
from tests.helpers.waiting import wait_for

FEED = "emq:{game}:stream:feed"
ROUNDS = "emq:{game}:stream:rounds"


def policy(tmp_path: Path, url: str, *, archive: bool = False) -> str:
    path = tmp_path / "retain.toml"
    head = f'url = "{url}"\ntick = 0.1\n'
    if archive:
        head += f'archive = "file://{tmp_path / "archive"}"\n'
    path.write_text(head + '[[stream]]\nqueue = "game"\nname = "feed"\nmaxlen = 1000\n'
                    '[[stream]]\nqueue = "game"\nname = "rounds"\nmax_age = "7d"\n'
                    + ("archive = true\n" if archive else ""))
    return str(path)


def sample(metrics: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name{labels}`` in a Prometheus text page, labels in any order (None: absent)."""
    for line in metrics.splitlines():
        found = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
        if found and found.group(1) == name and dict(re.findall(r'(\w+)="([^"]*)"', found.group(2) or "")) == labels:
            return float(found.group(3))
    return None


class TestStreamsRun:
    def test_health_metrics_dashboard_and_json_logs(self, tmp_path, redis_server, redis_conn):
        """/healthz, /readyz, /metrics (each stream's length, window, oldest age, fold lag, W age) and the
        dashboard row per stream, from a real `retain streams run --http --log-format json`."""
        append(redis_conn, FEED, 120)
        append(redis_conn, ROUNDS, 7)
        with running(["streams", "run", policy(tmp_path, redis_server.url, archive=True), "--log-format", "json"],
                     tmp_path) as daemon:
            assert daemon.json("/healthz") == (200, {"alive": True})
            wait_for(lambda: daemon.get("/readyz")[0] == 200, "the daemon to be ready", child=daemon.process)
            # A beat sets the lengths too; only the status read sets the windows, so wait on those.
            wait_for(lambda: None not in (sample(page := daemon.metrics(), "retain_stream_window_entries", stream=FEED),
                                          sample(page, "retain_stream_fold_lag_entries", stream=ROUNDS)),
                     "the status read", child=daemon.process)
            metrics = daemon.metrics()
            assert sample(metrics, "retain_stream_length", stream=FEED) == 120
            assert sample(metrics, "retain_stream_window_entries", stream=FEED) == 1000
            assert sample(metrics, "retain_stream_window_seconds", stream=ROUNDS) == 7 * 86400
            assert sample(metrics, "retain_stream_fold_lag_entries", stream=ROUNDS) == 0
            assert sample(metrics, "retain_stream_oldest_entry_age_seconds", stream=FEED) is not None
            assert sample(metrics, "retain_last_beat_timestamp_seconds") is not None
            assert "retain_beat_duration_seconds_bucket" in metrics
            status, page = daemon.get("/")
            assert sample(metrics, "retain_redis_up") == 1 and sample(metrics, "retain_archive_up") == 1
            assert status == 200
            assert f'data-stream="{FEED}" data-length="120"' in page
            assert f'data-stream="{ROUNDS}" data-length="7"' in page
        lines = [json.loads(line) for line in daemon.log.read_text().splitlines()]
        assert {"time", "level", "logger", "event"} <= set(lines[0])
        beats = [line for line in lines if line["event"].startswith("beat at ")]
        assert beats and beats[0]["removed"] == 0 and "trims" in beats[0]

    def test_pattern_streams_get_gauges_and_a_row_at_the_first_beat(self, tmp_path, redis_server, redis_conn):
        """A pattern's streams get their window and oldest-age gauges and a dashboard row with figures as soon as
        the first beat has matched them, not at the next status read (30 s later here: tick 30 s)."""
        append(redis_conn, FEED, 12)
        path = tmp_path / "retain.toml"
        path.write_text(f'url = "{redis_server.url}"\ntick = "30s"\n'
                        '[[stream]]\npattern = "emq:{game}:stream:*"\nmaxlen = 1000\n')
        with running(["streams", "run", str(path)], tmp_path) as daemon:
            wait_for(lambda: sample(daemon.metrics(), "retain_stream_window_entries", stream=FEED) == 1000,
                     "the pattern stream's window gauge", timeout=15, child=daemon.process)
            assert sample(daemon.metrics(), "retain_stream_oldest_entry_age_seconds", stream=FEED) is not None
            assert f'data-stream="{FEED}" data-length="12"' in daemon.get("/")[1]

    def test_a_replica_says_which_shards_it_holds(self, tmp_path, redis_server, redis_conn):
        """With replicas (on by default): /readyz names the replica and its shards, /metrics counts them, the
        dashboard shows them, the start line says which replica of which group this is."""
        with running(["streams", "run", policy(tmp_path, redis_server.url), "--replica", "host-a"], tmp_path) as daemon:
            wait_for(lambda: "details" in daemon.json("/readyz")[1], "a beat's replica details", child=daemon.process)
            replica = daemon.json("/readyz")[1]["details"]["replica"]
            assert (replica["name"], replica["shards"], replica["of"], replica["members"]) == \
                ("host-a", list(range(64)), 64, 1)
            assert sample(daemon.metrics(), "retain_replica_shards") == 64
            assert 'data-replica="host-a" data-shards="64"' in daemon.get("/")[1]
        assert "replica host-a of group policy-" in daemon.log.read_text()

    def test_a_failing_stream_logs_its_key_and_error_as_fields(self, tmp_path, redis_server, redis_conn):
        """--log-format json: a failing trim's line carries stream, error and kind as fields of their own."""
        redis_conn.set(FEED, "not a stream")
        with running(["streams", "run", policy(tmp_path, redis_server.url), "--log-format", "json"],
                     tmp_path) as daemon:
            wait_for(lambda: '"kind": "trim"' in daemon.log.read_text(), "a failure logged", child=daemon.process)
        lines = [json.loads(line) for line in daemon.log.read_text().splitlines()]
        failed = next(line for line in lines if line.get("kind") == "trim")
        assert (failed["stream"], failed["error"], failed["level"]) == (FEED, "WrongTypeError", "WARNING")
        assert failed["event"].startswith(f"trim of {FEED} failed: Redis refused the command")

    def test_not_ready_when_redis_is_down(self, tmp_path):
        """/readyz answers 503 naming Redis once the server is gone, and /healthz still 200."""
        with RedisServer() as server:
            with running(["streams", "run", policy(tmp_path, server.url)], tmp_path) as daemon:
                wait_for(lambda: daemon.get("/readyz")[0] == 200, "the daemon to be ready", child=daemon.process)
                server.stop()
                wait_for(lambda: daemon.get("/readyz")[0] == 503, "readiness to fail", child=daemon.process)
                status, answer = daemon.json("/readyz")
                assert answer["ready"] is False and "redis" in answer["reasons"]
                assert daemon.get("/healthz")[0] == 200
                wait_for(lambda: sample(daemon.metrics(), "retain_redis_up") == 0, "retain_redis_up 0",
                         child=daemon.process)
                assert sample(daemon.metrics(), "retain_archive_up") is None  # no archive, no archive_up series

    def test_archive_up_follows_the_archive(self, tmp_path, redis_server, redis_conn):
        """retain_archive_up is 1 while the archive answers, 0 once reading W from it fails (its directory replaced
        by a file), while retain_redis_up stays 1."""
        import shutil

        append(redis_conn, ROUNDS, 3)
        with running(["streams", "run", policy(tmp_path, redis_server.url, archive=True)], tmp_path) as daemon:
            wait_for(lambda: sample(daemon.metrics(), "retain_archive_up") == 1, "retain_archive_up 1",
                     child=daemon.process)
            shutil.rmtree(tmp_path / "archive")
            (tmp_path / "archive").write_text("not a directory")
            # The next status read (every 5 s) finds it; on a loaded machine that read itself may take long.
            wait_for(lambda: sample(daemon.metrics(), "retain_archive_up") == 0, "retain_archive_up 0",
                     timeout=60, child=daemon.process)
            assert sample(daemon.metrics(), "retain_redis_up") == 1

    def test_the_metrics_every_exporter_has(self, tmp_path, redis_server):
        """process_* (CPU, RSS, open fds, start time) and retain_build_info with the versions that run."""
        import platform
        from importlib import metadata

        import retain

        with running(["streams", "run", policy(tmp_path, redis_server.url)], tmp_path) as daemon:
            metrics = daemon.metrics()
        for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                     "process_start_time_seconds"):
            assert (sample(metrics, name) or 0) > 0, name
        assert sample(metrics, "retain_build_info", version=retain.__version__, python=platform.python_version(),
                      redis_py=metadata.version("redis"), deltalake=metadata.version("deltalake")) == 1

    def test_metrics_port_is_an_alias(self, tmp_path, redis_server):
        """--http and --metrics-port together are refused: they name one address."""
        from click.testing import CliRunner

        from retain.cli import main
        result = CliRunner().invoke(main, ["streams", "run", policy(tmp_path, redis_server.url), "--http",
                                           "127.0.0.1:1", "--metrics-port", "2"])
        assert result.exit_code == 2 and "give --http or --metrics-port, not both" in result.output

    def test_a_bad_http_address_is_refused(self, tmp_path, redis_server):
        """--http takes HOST:PORT; anything else is named before anything starts."""
        from click.testing import CliRunner

        from retain.cli import main
        result = CliRunner().invoke(main, ["streams", "run", policy(tmp_path, redis_server.url), "--http", "nope"])
        assert result.exit_code == 2 and "expected HOST:PORT such as 127.0.0.1:9464 (got 'nope')" in result.output


class TestLogdServe:
    def test_health_metrics_and_dashboard(self, tmp_path):
        """logd's --http serves POST / and the ops routes; commits, latency by verb, retain counts, store size."""
        db = tmp_path / "logd.sqlite3"
        with running(["logd", "serve", "--db", str(db), "--socket", str(tmp_path / "logd.sock")], tmp_path) as daemon:
            assert daemon.json("/readyz") == (200, {"ready": True, "reasons": {}})
            import urllib.request
            for document in ('{"patch": {"ops": [{"set": "jobs.j1", "value": {"status": "done", "at": "2020-01-01T00:00:00Z"}}]}}',
                             '{"retain": {"now": "2026-01-01T00:00:00Z", "what": [{"path": "jobs.*", "age": ".at", '
                             '"after": "1d"}]}}'):
                request = urllib.request.Request(daemon.base + "/", document.encode(), method="POST",
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=10) as response:
                    assert response.status == 200
            metrics = daemon.metrics()
            assert sample(metrics, "retain_logd_commits_total") == 2
            assert sample(metrics, "retain_logd_requests_total", verb="patch", outcome="ok") == 1
            assert sample(metrics, "retain_logd_request_duration_seconds_count", verb="retain") == 1
            assert sample(metrics, "retain_logd_retain_deleted_total") == 1
            assert sample(metrics, "retain_logd_retain_skipped_total") == 0
            assert sample(metrics, "retain_logd_retain_unreadable_total") == 0
            assert (sample(metrics, "retain_logd_store_size_bytes") or 0) > 0
            assert (sample(metrics, "process_resident_memory_bytes") or 0) > 0  # as every exporter
            assert "retain_build_info{" in metrics
            status, page = daemon.get("/")
            assert status == 200 and 'data-head="2"' in page and "deleted 1" in page
            db.unlink()
            status, answer = daemon.json("/readyz")
            assert status == 503 and "logd.sqlite3 is gone" in answer["reasons"]["store"]


class TestLogdSchedule:
    def test_ready_while_it_beats(self, tmp_path):
        """The schedule's --http: not ready while its logd is unreachable, with the reason; metrics count it."""
        schedule = tmp_path / "schedule.toml"
        schedule.write_text(f'connect = "unix:{tmp_path / "none.sock"}"\nevery = "1s"\n'
                            '[[rule]]\npath = "jobs.*"\nage = ".at"\nafter = "1d"\n')
        with running(["logd", "schedule", str(schedule), "--log-format", "json"], tmp_path) as daemon:
            wait_for(lambda: daemon.get("/readyz")[0] == 503, "the schedule to say logd is unreachable",
                     child=daemon.process)
            status, answer = daemon.json("/readyz")
            assert "logd unreachable" in answer["reasons"]["logd"]
            assert (sample(daemon.metrics(), "retain_schedule_beats_total", outcome="unreachable") or 0) >= 1


class TestDocdServe:
    def test_every_owner_down_is_not_ready(self, tmp_path):
        """docd's --http: /readyz 503 naming each owner down; 200 once logd answers; owner metrics exported."""
        mounts = tmp_path / "mounts.toml"
        logd_socket = tmp_path / "logd.sock"
        mounts.write_text(f'logd = "unix:{logd_socket}"\n')
        with running(["docd", "serve", "--mounts", str(mounts), "--socket", str(tmp_path / "docd.sock")],
                     tmp_path) as daemon:
            status, answer = daemon.json("/readyz")
            assert status == 503 and "every owner is down: logd" in answer["reasons"]["owners"]
            with running(["logd", "serve", "--db", str(tmp_path / "l.sqlite3"), "--socket", str(logd_socket)],
                         tmp_path, name="logd"):
                assert daemon.json("/readyz")[0] == 200
                from retain.logd import Client
                with Client(str(tmp_path / "docd.sock")) as client:
                    client.request({"get": {"path": "jobs.j1"}})
                wait_for(lambda: sample(daemon.metrics(), "retain_docd_owner_requests_total", owner="logd",
                                        outcome="not_found") == 1, "docd to count the request", child=daemon.process)
                assert "retain_docd_owner_request_duration_seconds_bucket" in daemon.metrics()


class TestTokens:
    def test_metrics_and_dashboard_need_a_read_token(self, tmp_path, redis_server):
        """With --tokens, /metrics and / need a bearer token that may read (401 without, 403 without read);
        the probes stay open."""
        import urllib.request
        tokens = tmp_path / "tokens.toml"
        tokens.write_text('[[token]]\nname = "prometheus"\nsecret = "scrape-secret-0123456789"\nmay = ["read"]\n'
                          '[[token]]\nname = "writer"\nsecret = "write-secret-0123456789"\nmay = ["write"]\n')
        with running(["streams", "run", policy(tmp_path, redis_server.url), "--tokens", str(tokens)],
                     tmp_path) as daemon:
            assert daemon.get("/healthz")[0] == 200 and daemon.get("/readyz")[0] in (200, 503)
            assert daemon.get("/metrics")[0] == 401 and daemon.get("/")[0] == 401

            def with_bearer(path: str, secret: str) -> int:
                request = urllib.request.Request(daemon.base + path, headers={"Authorization": f"Bearer {secret}"})
                try:
                    with urllib.request.urlopen(request, timeout=10) as response:
                        return response.status
                except urllib.error.HTTPError as exc:
                    return exc.code

            assert with_bearer("/metrics", "scrape-secret-0123456789") == 200 and with_bearer("/", "scrape-secret-0123456789") == 200
            assert with_bearer("/metrics", "write-secret-0123456789") == 403 and with_bearer("/metrics", "nope") == 401

    def test_an_open_non_loopback_address_is_refused(self, tmp_path, redis_server):
        """--http on a non-loopback address without --tokens: one line saying so, before anything starts."""
        import subprocess
        import sys
        result = subprocess.run([sys.executable, "-c", "from retain.cli import main; main()", "streams", "run",
                                 policy(tmp_path, redis_server.url), "--http", "0.0.0.0:1"], capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 1 and "refusing to serve 0.0.0.0 without tokens" in result.stderr
        assert "Traceback" not in result.stderr


DOCD_SERVE = """
import sys
from retain.docd import DocdConfig, load_mounts, serve
serve(DocdConfig(load_mounts(sys.argv[2]), socket_path=sys.argv[3], http=("127.0.0.1", int(sys.argv[1]))))
"""

SCHEDULE_RUN = """
import sys
from retain.logd import ScheduleConfig, run_scheduled
from retain.logd.schedule import load_schedule
run_scheduled(ScheduleConfig(load_schedule(sys.argv[2]), http=("127.0.0.1", int(sys.argv[1]))))
"""


class TestLibraryEntries:
    """docd and the schedule started through their library entries (a frozen config, no click): the same
    daemon, endpoints and stop as the commands'."""

    def test_docd_serve(self, tmp_path):
        mounts = tmp_path / "mounts.toml"
        mounts.write_text(f'logd = "unix:{tmp_path / "logd.sock"}"\n')
        with running([str(mounts), str(tmp_path / "docd.sock")], tmp_path, library=DOCD_SERVE) as daemon:
            status, answer = daemon.json("/readyz")
            assert status == 503 and "every owner is down: logd" in answer["reasons"]["owners"]
        assert "docd serving on unix:" in daemon.log.read_text()

    def test_docd_config_takes_one_address(self, tmp_path):
        """A TCP and a socket address both: refused when the config is made, before anything opens; neither:
        docd's default address."""
        from retain.docd import DocdConfig, parse_mounts
        from retain.docd.daemon import DEFAULT_LISTEN
        from retain.errors import InvalidInput

        table = parse_mounts('logd = "unix:/nowhere.sock"\n')
        with pytest.raises(InvalidInput, match="not both"):
            DocdConfig(table, listen=("127.0.0.1", 7410), socket_path=str(tmp_path / "docd.sock"))
        assert DocdConfig(table).listen == DEFAULT_LISTEN

    def test_schedule(self, tmp_path):
        schedule = tmp_path / "schedule.toml"
        schedule.write_text(f'connect = "unix:{tmp_path / "none.sock"}"\nevery = "1s"\n'
                            '[[rule]]\npath = "jobs.*"\nage = ".at"\nafter = "1d"\n')
        with running([str(schedule)], tmp_path, library=SCHEDULE_RUN) as daemon:
            wait_for(lambda: daemon.get("/readyz")[0] == 503, "the schedule to say logd is unreachable",
                     child=daemon.process)
        assert "retain schedule stopped after" in daemon.log.read_text()
