"""The dashboard in a real browser: Chromium renders what the daemon's snapshot says, offline."""

from __future__ import annotations

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
