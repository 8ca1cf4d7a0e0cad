"""The dashboard in a real browser: Chromium renders what the daemon's snapshot says, offline."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry

from retain.ops import DashboardPage, Health, OpsServer, StreamRow
from tests.helpers.browser import browser_page

ROWS = [StreamRow("emq:{game}:stream:feed", "MAXLEN ~ 100", length=130, bound=100),
        StreamRow("emq:{game}:stream:rounds", "MAX-AGE ~ 7d", length=12, archived=True, watermark="1789171100000-0",
                  watermark_age_s=90.0, fold_lag=0)]


class TestInTheBrowser:
    def test_each_stream_shows_its_length(self, tmp_path):
        """Every declared stream appears as a row with its length, bar and W; a screenshot is kept."""
        server = OpsServer(("127.0.0.1", 0), Health(), CollectorRegistry(), lambda: DashboardPage("test", ROWS))
        server.start()
        try:
            with browser_page() as page:
                page.goto(f"http://{server.address[0]}:{server.address[1]}/")
                for row in ROWS:
                    shown = page.locator(f'tr[data-stream="{row.key}"]')
                    assert shown.locator("td.length").inner_text() == f"{row.length:,}"
                    assert shown.locator("svg.bar").is_visible()
                assert page.locator('tr[data-stream="emq:{game}:stream:rounds"] td.watermark').inner_text() == \
                    "1789171100000-0"
                page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
        finally:
            server.stop()
        assert (tmp_path / "dashboard.png").stat().st_size > 1000


class TestAgainstTheDaemon:
    def test_each_declared_stream_with_its_length(self, tmp_path, redis_server, redis_conn):
        """A running `retain streams run --http`: Chromium shows each declared stream with its length; a
        screenshot is kept under the test's temp dir (docs/img/dashboard.png is one of these)."""
        from tests.helpers.daemons import running
        from tests.helpers.streams import append
        from tests.helpers.waiting import wait_for
        from tests.ops.test_daemons import FEED, ROUNDS, policy, sample

        ten_days_ago = int(time.time() * 1000) - 10 * 86400 * 1000
        for offset in range(300):  # rounds older than the 7-day window: folded into the archive, then trimmed
            redis_conn.xadd(ROUNDS, {"i": str(offset)}, id=f"{ten_days_ago + offset}-0")
        append(redis_conn, ROUNDS, 25)
        append(redis_conn, FEED, 640)
        with running(["streams", "run", policy(tmp_path, redis_server.url, archive=True)], tmp_path) as daemon:
            wait_for(lambda: sample(daemon.metrics(), "retain_stream_watermark_age_seconds", stream=ROUNDS) is not None,
                     "the fold", child=daemon.process)
            lengths = {FEED: redis_conn.xlen(FEED), ROUNDS: redis_conn.xlen(ROUNDS)}
            wait_for(lambda: all(sample(daemon.metrics(), "retain_stream_length", stream=key) == count
                                 for key, count in lengths.items()), "the status read", child=daemon.process)
            with browser_page() as page:
                page.set_viewport_size({"width": 1400, "height": 420})
                page.goto(daemon.base + "/")
                for key, count in lengths.items():
                    shown = page.locator(f'tr[data-stream="{key}"]')
                    assert shown.get_attribute("data-length") == str(count)
                    assert shown.locator("td.length").inner_text() == f"{count:,}"
                    assert shown.locator("svg.bar").is_visible()
                assert page.locator("section.ready").is_visible()
                assert page.locator(f'tr[data-stream="{ROUNDS}"] td.watermark').inner_text().endswith("-0")
                page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
        assert (tmp_path / "dashboard.png").stat().st_size > 1000
