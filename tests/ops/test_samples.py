"""retain.ops.samples: a process's own samples, bounded in time and in count."""

from __future__ import annotations

from retain.ops import Samples


class TestSamples:
    def test_keeps_the_last_window(self):
        """Points older than the window are dropped as new ones arrive."""
        samples = Samples(window=60.0)
        for second in range(0, 121, 10):
            samples.add("s", float(second), float(second * 2))
        assert samples.series("s") == [(float(t), float(t * 2)) for t in range(60, 121, 10)]

    def test_bounded_in_count(self):
        """However often a daemon samples, a series holds at most `limit` points, the newest."""
        samples = Samples(window=3600.0, limit=5)
        for second in range(100):
            samples.add("s", float(second), 1.0)
        assert [at for at, _ in samples.series("s")] == [95.0, 96.0, 97.0, 98.0, 99.0]

    def test_unknown_series_is_empty(self):
        assert Samples().series("nothing") == []
