"""stream_status: what an operator watches of each declared stream, read against a real Redis and archive."""

from __future__ import annotations

from datetime import UTC, datetime

from retain.archive import Archive, StreamId, fold
from retain.errors import WrongTypeError
from retain.retention import StreamPolicy, stream_status
from retain.retention.metrics import DriverMetrics
from retain.streams import StreamRef
from retain.windows import MaxAge, MaxLen
from tests.helpers.streams import BASE_MS, fill

FEED = StreamRef("game", "feed")
ROUNDS = StreamRef("game", "rounds")
#: one second after the 30th entry of a stream filled one entry per second from BASE_MS
NOW = datetime.fromtimestamp((BASE_MS + 31_000) / 1000, UTC)


class TestStreamStatus:
    def test_length_oldest_and_window(self, redis_conn):
        """A plain stream: its length, its oldest entry and that entry's age, the window's size."""
        fill(redis_conn, FEED.key, [1000] * 30)
        (status,) = stream_status(redis_conn, [StreamPolicy(FEED, MaxLen(10))], now=NOW)
        assert (status.length, status.oldest, status.window_entries, status.window_seconds) == (
            30, StreamId(BASE_MS + 1000, 0), 10, None)
        assert status.oldest_age_s == 30.0 and status.fold_lag == 0 and status.error is None

    def test_fold_lag_and_watermark_age(self, tmp_path, redis_conn):
        """An archived stream: fold lag is every entry the window drops not yet archived; W's age is now less
        W's time."""
        fill(redis_conn, ROUNDS.key, [1000] * 30)
        archive = Archive(f"file://{tmp_path / 'archive'}")
        policy = [StreamPolicy(ROUNDS, MaxLen(10), archive=True)]
        (before,) = stream_status(redis_conn, policy, now=NOW, archive=archive)
        assert (before.fold_lag, before.watermark, before.watermark_age_s) == (20, None, None)
        fold(redis_conn, ROUNDS, archive, upto=StreamId(BASE_MS + 15_000, 0))
        (after,) = stream_status(redis_conn, policy, now=NOW, archive=archive)
        assert after.fold_lag == 5 and after.watermark == StreamId(BASE_MS + 15_000, 0)
        assert after.watermark_age_s == 16.0 and after.window_seconds is None

    def test_a_failing_stream_carries_its_error(self, redis_conn):
        """A key of the wrong type is that stream's error; the other stream is still read; metrics count it."""
        redis_conn.set(FEED.key, "not a stream")
        fill(redis_conn, ROUNDS.key, [1000] * 3)
        statuses = stream_status(redis_conn, [StreamPolicy(FEED, MaxLen(10)), StreamPolicy(ROUNDS, MaxAge("7d"))],
                                 now=NOW)
        assert isinstance(statuses[0].error, WrongTypeError) and statuses[1].length == 3
        assert statuses[1].window_seconds == 7 * 86400
        metrics = DriverMetrics()
        metrics.observe_status(statuses)
        page = metrics.exposition().decode()
        assert f'retain_stream_failures_total{{kind="read",stream="{FEED.key}"}} 1.0' in page \
            or f'retain_stream_failures_total{{stream="{FEED.key}",kind="read"}} 1.0' in page
        assert f'retain_stream_length{{stream="{ROUNDS.key}"}} 3.0' in page
