"""retain.retention.inspect: which entry of a policy applies to a stream (pure), and the stream inspected."""

from __future__ import annotations

from retain.clock import utc_now
from retain.retention import Policy, StreamPolicy, applying_entry, inspect_stream
from retain.retention.patterns import StreamPattern
from retain.streams import RawKey
from retain.windows import MaxAge, MaxLen


class TestApplyingEntry:
    def test_an_explicit_entry_wins_over_a_pattern(self):
        """The stream's own entry, else the first pattern that matches (as the driver applies them), else none."""
        policy = Policy([StreamPolicy(RawKey("emq:{q}:stream:a"), MaxLen(5)),
                         StreamPattern("emq:{q}:*", MaxAge("1d")), StreamPattern("emq:*", MaxLen(9))])
        entry, source = applying_entry(policy, "emq:{q}:stream:a")
        assert (entry.window, source) == (MaxLen(5), "entry")
        entry, source = applying_entry(policy, "emq:{q}:stream:b")
        assert (entry.window, source) == (MaxAge("1d"), "emq:{q}:*")
        assert applying_entry(policy, "legacy:feed") == (None, None)


class TestInspectStream:
    def test_a_stream_under_a_pattern(self, redis_conn):
        """The stream's figures with the window its pattern gives it; no archive figures for a plain stream."""
        for index in range(3):
            redis_conn.xadd("emq:{q}:stream:b", {"i": str(index)}, id=f"{1000 + index}-0")
        report = inspect_stream(redis_conn, "emq:{q}:stream:b", now=utc_now(),
                                policy=Policy([StreamPattern("emq:{q}:*", MaxLen(2))]))
        assert (report.info.length, str(report.info.first), str(report.info.last)) == (3, "1000-0", "1002-0")
        assert (report.window, report.source, report.archived, report.fold_lag) == (MaxLen(2), "emq:{q}:*", False,
                                                                                    None)
