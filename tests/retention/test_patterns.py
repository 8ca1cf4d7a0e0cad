"""retain.retention.patterns: one entry for every stream whose key matches, found again every rescan.

INV-DECOUPLED for streams nobody declared one by one: a stream created while
the driver runs is bounded within one rescan; a key of another type that
matches is skipped, not an error; an explicit entry overrides a pattern.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from retain.cli import main
from retain.errors import InvalidPolicy
from retain.retention import Policy, RetentionDriver, StreamPolicy, parse_policy, preview
from retain.retention.patterns import StreamPattern, expand
from retain.streams import RawKey, StreamRef
from retain.windows import MaxLen
from tests.helpers.streams import append

UTC = UTC
START = datetime(2026, 9, 12, tzinfo=UTC)
_queues = itertools.count()


class Clock:
    """A clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


class TestPure:
    def test_expand(self):
        """Explicit entries come first and win; of two patterns matching one key the first declared wins."""
        explicit = StreamPolicy(RawKey("a"), MaxLen(50))
        first, second = StreamPattern("*", MaxLen(10)), StreamPattern("b*", MaxLen(20))
        entries = expand([explicit], [first, second], {"*": ["a", "b1", "c"], "b*": ["b1", "b2"]})
        assert [(entry.key, entry.window) for entry in entries] == [
            ("a", MaxLen(50)), ("b1", MaxLen(10)), ("c", MaxLen(10)), ("b2", MaxLen(20))]

    def test_a_key_the_pattern_cannot_take_is_skipped(self):
        """An archived pattern matching '.' (no object-store path segment) leaves that key out, not the rescan."""
        entries = expand([], [StreamPattern("*", MaxLen(1), archive=True)], {"*": [".", "ok"]})
        assert [entry.key for entry in entries] == ["ok"]

    def test_refusals(self):
        """A bad glob, rescan or repeated pattern is refused before any I/O."""
        with pytest.raises(InvalidPolicy, match="contains ' '"):
            StreamPattern("a b", MaxLen(1))
        with pytest.raises(InvalidPolicy, match="rescan must be a positive duration"):
            StreamPattern("a*", MaxLen(1), rescan=timedelta(0))
        with pytest.raises(InvalidPolicy, match="repeats pattern 'a\\*'"):
            Policy([StreamPattern("a*", MaxLen(1)), StreamPattern("a*", MaxLen(2))])
        with pytest.raises(InvalidPolicy, match="pattern 'a\\*' has archive=True, but no archive"):
            RetentionDriver(None, [StreamPattern("a*", MaxLen(1), archive=True)])

    def test_policy_file(self):
        """pattern and rescan in a [[stream]]; rescan elsewhere, or key with pattern, is refused naming the field."""
        parsed = parse_policy('[[stream]]\npattern = "emq:{*}:stream:*"\nmaxlen = 10\nrescan = "30s"\n'
                              '[[stream]]\nkey = "k"\nmaxlen = 5\n')
        assert parsed.policy.patterns == (StreamPattern("emq:{*}:stream:*", MaxLen(10), rescan=timedelta(seconds=30)),)
        assert [entry.key for entry in parsed.policy.entries] == ["k"]
        with pytest.raises(InvalidPolicy, match="field 'rescan': applies to a pattern entry only"):
            parse_policy('[[stream]]\nkey = "k"\nmaxlen = 5\nrescan = "1m"\n')
        with pytest.raises(InvalidPolicy, match="unknown field 'key'"):
            parse_policy('[[stream]]\npattern = "a*"\nkey = "k"\nmaxlen = 5\n')
        with pytest.raises(InvalidPolicy, match="repeats the pattern of \\[\\[stream\\]\\] #1"):
            parse_policy('[[stream]]\npattern = "a*"\nmaxlen = 5\n[[stream]]\npattern = "a*"\nmaxlen = 6\n')


class TestLive:
    def test_new_stream_bounded_within_one_rescan(self, redis_conn):
        """A stream created after the driver's first scan is left alone until the next rescan, then bounded; a
        matching key of another type is skipped; an explicit entry overrides the pattern."""
        queue = f"p{next(_queues)}"
        early, late, explicit = (StreamRef(queue, name) for name in ("early", "late", "explicit"))
        append(redis_conn, early.key, 100)
        append(redis_conn, explicit.key, 100)
        redis_conn.set(f"emq:{{{queue}}}:stream:not-a-stream", "v")
        clock = Clock()
        driver = RetentionDriver(redis_conn, [StreamPattern(f"emq:{{{queue}}}:stream:*", MaxLen(10, approx=False)),
                                              (explicit, MaxLen(50, approx=False))], clock=clock)
        report = driver.sweep()
        assert report.ok and dict(report.removed_by) == {explicit.key: 50, early.key: 90}
        append(redis_conn, late.key, 100)
        clock.now += timedelta(seconds=59)
        assert late.key not in driver.sweep().removed_by and redis_conn.xlen(late.key) == 100
        clock.now += timedelta(seconds=1)  # one rescan after the first scan
        report = driver.sweep()
        assert report.ok and report.removed_by[late.key] == 90 and redis_conn.xlen(late.key) == 10
        assert redis_conn.xlen(explicit.key) == 50 and redis_conn.get(f"emq:{{{queue}}}:stream:not-a-stream") == b"v"

    def test_on_a_cluster_every_master(self, redis_cluster):
        """On a cluster the scan goes to every master: streams of queues in different slots are all found."""
        with redis_cluster.client() as conn:
            keys = [StreamRef(f"c{next(_queues)}-{index}", "s").key for index in range(12)]
            for key in keys:
                append(conn, key, 30)
            slots = {conn.keyslot(key) for key in keys}
            assert len({conn.nodes_manager.get_node_from_slot(slot).name for slot in slots}) > 1
            report = RetentionDriver(conn, [StreamPattern("emq:{c*}:stream:s", MaxLen(5, approx=False))]).sweep()
            assert report.ok and all(report.removed_by[key] == 25 for key in keys)
            for key in keys:
                conn.delete(key)

    def test_dry_run_lists_matches(self, redis_server, redis_conn, tmp_path):
        """The dry run names what each pattern matched, and each matched stream's row names its pattern."""
        queue = f"p{next(_queues)}"
        for name in ("a", "b"):
            append(redis_conn, StreamRef(queue, name).key, 20)
        rows = preview(redis_conn, [StreamPattern(f"emq:{{{queue}}}:stream:*", MaxLen(5, approx=False))], now=START)
        assert [(row.key, row.pattern, row.outside) for row in rows] == [
            (StreamRef(queue, "a").key, f"emq:{{{queue}}}:stream:*", 15),
            (StreamRef(queue, "b").key, f"emq:{{{queue}}}:stream:*", 15)]
        path = tmp_path / "retain.toml"
        path.write_text(f'[[stream]]\npattern = "emq:{{{queue}}}:stream:*"\nmaxlen = 5\n')
        result = CliRunner().invoke(main, ["streams", "run", str(path), "--dry-run", "--url", redis_server.url])
        assert result.exit_code == 0, result.output
        assert f"pattern emq:{{{queue}}}:stream:* matched 2 streams" in result.output
        assert redis_conn.xlen(StreamRef(queue, "a").key) == 20
