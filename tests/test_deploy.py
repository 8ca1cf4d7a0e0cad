"""deploy/: the systemd units verify, and every metric the alert rules and the Grafana dashboard name is exported."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.helpers.daemons import running
from tests.helpers.streams import append
from tests.helpers.waiting import wait_for

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
#: PromQL words that look like metric names but are not
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
            "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions, keywords, labels or numbers."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for found in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr):
        before = expr[found.start() - 1] if found.start() else " "
        if before.isdigit() or before == "." or found.group().lower() in KEYWORDS:
            continue  # the exponent of 50e9, a keyword
        if expr[found.end():].lstrip().startswith("("):
            continue  # a function: rate(, histogram_quantile(
        names.add(found.group())
    return names


class TestMetricNames:
    def test_the_parser(self):
        """The parser keeps metric names and drops functions, labels, ranges, keywords and numbers."""
        assert metric_names('histogram_quantile(0.99, sum by (le, verb) (rate(a_bucket{verb="get"}[5m]))) > 1e3 '
                            "and b_total offset 5m") == {"a_bucket", "b_total"}
        assert metric_names("time() - retain_last_beat_timestamp_seconds > 60") == {
            "retain_last_beat_timestamp_seconds"}


def alert_expressions() -> list[str]:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "retain-alerts.yml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def grafana_expressions() -> list[str]:
    def walk(node: object) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "expr" and isinstance(value, str):
                    yield value
                else:
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    return list(walk(json.loads((DEPLOY / "grafana" / "retain-dashboard.json").read_text())))


def exported(metrics: str) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for line in metrics.splitlines() if line and not line.startswith("#")}


@pytest.fixture(scope="module")
def scraped(redis_server, tmp_path_factory) -> set[str]:
    """The sample names of every daemon's /metrics, each daemon driven so its labelled series exist."""
    tmp = tmp_path_factory.mktemp("deploy")
    conn = redis_server.client()
    conn.delete("emq:{deploy}:stream:feed", "emq:{deploy}:stream:broken", "emq:{deploy}:stream:aged")
    append(conn, "emq:{deploy}:stream:feed", 50)
    conn.set("emq:{deploy}:stream:broken", "a string, so its trims and reads fail")
    policy = tmp / "retain.toml"
    policy.write_text(f'url = "{redis_server.url}"\ntick = 0.1\narchive = "file://{tmp / "archive"}"\n'
                      '[[stream]]\nqueue = "deploy"\nname = "feed"\nmaxlen = 10\narchive = true\n'
                      '[[stream]]\nqueue = "deploy"\nname = "broken"\nmaxlen = 10\n'
                      '[[stream]]\nqueue = "deploy"\nname = "aged"\nmax_age = "7d"\n')
    names: set[str] = set()
    with running(["streams", "run", str(policy)], tmp, name="streams") as daemon:
        # Every labelled series the dashboards name: the fold's counter is set after its W (CI once scraped between).
        wait_for(lambda: "retain_stream_watermark_age_seconds{" in daemon.metrics()
                 and "retain_stream_folded_total{" in daemon.metrics()
                 and 'kind="read"' in daemon.metrics(), "the streams daemon's series", child=daemon.process)
        names |= exported(daemon.metrics())
    schedule = tmp / "schedule.toml"
    schedule.write_text(f'connect = "unix:{tmp / "absent.sock"}"\nevery = "1s"\n'
                        '[[rule]]\npath = "jobs.*"\nage = ".at"\nafter = "1d"\n')
    with running(["logd", "schedule", str(schedule)], tmp, name="schedule") as daemon:
        wait_for(lambda: "retain_schedule_beats_total{" in daemon.metrics(), "a beat", child=daemon.process)
        names |= exported(daemon.metrics())
    mounts = tmp / "mounts.toml"
    mounts.write_text(f'logd = "unix:{tmp / "logd.sock"}"\n')
    with running(["logd", "serve", "--db", str(tmp / "logd.sqlite3"), "--socket", str(tmp / "logd.sock")], tmp,
                 name="logd") as logd:
        request = urllib.request.Request(logd.base + "/", b'{"retain": {"now": "2026-01-01T00:00:00Z", "what": '
                                         b'[{"path": "jobs.*", "age": ".at", "after": "1d"}]}}', method="POST",
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).close()
        names |= exported(logd.metrics())
        with running(["docd", "serve", "--mounts", str(mounts), "--socket", str(tmp / "docd.sock")], tmp,
                     name="docd") as docd:
            from retain.logd import Client
            with Client(str(tmp / "docd.sock")) as client:
                client.request({"get": {"path": "jobs.j1"}})
            wait_for(lambda: "retain_docd_owner_requests_total{" in docd.metrics(), "docd's series",
                     child=docd.process)
            names |= exported(docd.metrics())
    conn.delete("emq:{deploy}:stream:feed", "emq:{deploy}:stream:broken", "emq:{deploy}:stream:aged")
    conn.close()
    return names


class TestExpressions:
    def test_alert_rules_name_exported_metrics(self, scraped):
        """Every metric in every alert rule's expression is in a running daemon's scrape."""
        expressions = alert_expressions()
        assert len(expressions) >= 10
        missing = {name: expr for expr in expressions for name in metric_names(expr) if name not in scraped}
        assert not missing, f"alert rules name metrics no daemon exports: {missing}"

    def test_grafana_names_exported_metrics(self, scraped):
        """Every metric in every Grafana panel's query is in a running daemon's scrape."""
        expressions = grafana_expressions()
        assert len(expressions) >= 15
        missing = {name: expr for expr in expressions for name in metric_names(expr) if name not in scraped}
        assert not missing, f"the Grafana dashboard names metrics no daemon exports: {missing}"


class TestSystemdUnits:
    @pytest.mark.parametrize("unit", UNITS, ids=[unit.name for unit in UNITS])
    def test_verify(self, unit, tmp_path):
        """systemd-analyze verify accepts the unit (its retain pointed at this checkout's) without a warning."""
        analyze = shutil.which("systemd-analyze")
        if analyze is None:
            pytest.skip("systemd-analyze is not on PATH (install systemd to verify the units)")
        retain = Path(sys.executable).with_name("retain")
        if not retain.exists():
            pytest.skip(f"no retain command next to {sys.executable} to point ExecStart at")
        copy = tmp_path / unit.name.replace("@.", "@1.")  # a template is verified as one of its instances
        copy.write_text(unit.read_text().replace("/usr/local/bin/retain", str(retain)))
        result = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and copy.name not in result.stderr, result.stderr

    def test_three_daemons(self):
        """There is a unit for streams run (and a template of its replicas), logd serve and docd serve, each with
        --http and JSON logs."""
        commands = {unit.name: unit.read_text() for unit in UNITS}
        assert set(commands) == {"retain-streams.service", "retain-streams@.service", "retain-logd.service",
                                 "retain-docd.service"}
        assert "--replica %H-%i" in commands["retain-streams@.service"]
        for text in commands.values():
            assert "--http 127.0.0.1:" in text and "--log-format json" in text
