"""retain.ops.dashboard: the page a person opens, rendered from a snapshot (pure)."""

from __future__ import annotations

import re

from retain.ops import DashboardPage, LogdPanel, ReplicaPanel, StreamRow, render_dashboard

NOW = 1_789_171_200.0


def page(**options) -> str:
    return render_dashboard(DashboardPage(title="retain streams run p.toml", at=NOW, **options))


class TestRender:
    def test_one_row_per_stream_with_its_figures(self):
        """Each stream is a row carrying its key and length as data attributes, its window, W and fold lag."""
        html = page(streams=[
            StreamRow("emq:{q}:stream:a", "MAXLEN ~ 100", length=120, bound=100, last_beat=NOW - 1.5),
            StreamRow("emq:{q}:stream:b", "MAX-AGE ~ 7d", length=5, archived=True, watermark="1789171100000-0",
                      watermark_age_s=7200.0, fold_lag=3, samples=[(NOW - 60, 1.0), (NOW, 5.0)]),
        ])
        assert html.startswith("<!doctype html>") and "<script" not in html and "http" not in html.split("<body>")[1]
        assert re.search(r'<tr data-stream="emq:\{q\}:stream:a" data-length="120">', html)
        assert '<td class="window">MAXLEN ~ 100</td>' in html and '<td class="last-beat">1.5 s ago</td>' in html
        assert '<td class="watermark">1789171100000-0</td><td class="watermark-age">2.0 h</td>' in html
        assert '<td class="fold-lag">3</td>' in html and "<polyline" in html
        assert 'fill="#d98e04"' in html  # a over its bound: amber
        assert 'aria-label="120 of 100"' in html

    def test_text_is_escaped(self):
        """A key or an error with markup in it is shown as text, never interpreted."""
        html = page(streams=[StreamRow("legacy:<b>feed</b>", "MAXLEN ~ 1", error="WRONGTYPE <oops>")])
        assert "legacy:&lt;b&gt;feed&lt;/b&gt;" in html and "WRONGTYPE &lt;oops&gt;" in html
        assert "<b>feed</b>" not in html

    def test_readiness_and_logd(self):
        """Not ready: the reasons are listed; a logd panel shows its head and recent retain answers."""
        html = page(not_ready=["redis: Redis unavailable"],
                    logd=LogdPanel(head=4127, retains=[(NOW - 30, "retain at 2026-09-12T08:00:00Z: deleted 312")]))
        assert 'data-ready="false"' in html and "<li>redis: Redis unavailable</li>" in html
        assert 'data-head="4127"' in html and "30.0 s ago</span> retain at 2026-09-12T08:00:00Z: deleted 312" in html

    def test_a_replica_and_its_shards(self):
        """A replica sharing its policy: its name, how many of the shards it holds and which, among how many."""
        html = page(replica=ReplicaPanel("host-a", [0, 1, 7], 64, 3))
        assert 'data-replica="host-a" data-shards="3"' in html
        assert "holds <b>3</b> of 64 shards, one of 3 replicas" in html and "shards 0, 1, 7" in html
