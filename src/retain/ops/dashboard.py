"""The dashboard page: a snapshot of a daemon, rendered to HTML with inline SVG (pure; no script, no CDN).

One row per stream: its length against its window as a bar (green inside the
bound, amber past it), the archive's watermark W and W's age, the fold lag
(entries past the window not yet archived), the last beat, the last error, and a
small line of the stream's length over the last hour from the process's own
samples. For logd: its head commit and the recent retain answers. The page
refreshes itself every few seconds with a plain ``<meta http-equiv="refresh">``.

Every value a test or a person may look for carries a ``data-`` attribute
(``<tr data-stream="emq:{q}:stream:s" data-length="1234">``), so a browser test
reads what the page shows without parsing prose.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

__all__ = ["DashboardPage", "LogdPanel", "ReplicaPanel", "StreamRow", "render_dashboard"]

REFRESH_SECONDS = 5
_BAR_WIDTH, _BAR_HEIGHT = 160, 12
_SPARK_WIDTH, _SPARK_HEIGHT = 160, 28


@dataclass(frozen=True)
class StreamRow:
    """What the dashboard shows of one stream."""

    key: str
    #: the window as its XTRIM says it: ``MAXLEN ~ 10000``
    window: str
    length: int | None = None
    #: the entries the window keeps, for the bar (None for an age window: the bar is the length alone)
    bound: int | None = None
    archived: bool = False
    watermark: str | None = None
    watermark_age_s: float | None = None
    fold_lag: int | None = None
    #: epoch seconds of the last beat that reached this stream
    last_beat: float | None = None
    error: str | None = None
    #: (epoch seconds, length) over the last hour
    samples: Sequence[tuple[float, float]] = ()


@dataclass(frozen=True)
class LogdPanel:
    """What the dashboard shows of a logd: its head commit and the recent retain answers (newest first)."""

    head: int
    retains: Sequence[tuple[float, str]] = ()


@dataclass(frozen=True)
class ReplicaPanel:
    """What the dashboard shows of a replica that shares its policy: its name and the shards it holds."""

    name: str
    held: Sequence[int]
    shards: int
    members: int


@dataclass(frozen=True)
class DashboardPage:
    """One snapshot of a daemon, as the page shows it."""

    title: str
    streams: Sequence[StreamRow] = ()
    logd: LogdPanel | None = None
    replica: ReplicaPanel | None = None
    #: readiness: None when ready, else the reasons
    not_ready: Sequence[str] = ()
    at: float = field(default_factory=time.time)


def render_dashboard(page: DashboardPage) -> str:
    """The page as a whole HTML document."""
    parts = [_HEAD.format(title=html.escape(page.title), refresh=REFRESH_SECONDS),
             f"<h1>{html.escape(page.title)}</h1>",
             f'<p class="when">as of {_when(page.at)}</p>']
    if page.not_ready:
        items = "".join(f"<li>{html.escape(reason)}</li>" for reason in page.not_ready)
        parts.append(f'<section class="not-ready" data-ready="false"><h2>not ready</h2><ul>{items}</ul></section>')
    else:
        parts.append('<section class="ready" data-ready="true"><p>ready</p></section>')
    if page.replica is not None:
        parts.append(_replica(page.replica))
    if page.streams:
        parts.append(_streams(page))
    if page.logd is not None:
        parts.append(_logd(page.logd, page.at))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _streams(page: DashboardPage) -> str:
    rows = "\n".join(_stream_row(row, page.at) for row in page.streams)
    return ('<table class="streams"><thead><tr><th>stream</th><th>window</th><th>length</th><th></th>'
            '<th>W</th><th>W age</th><th>fold lag</th><th>last beat</th><th>last hour</th><th>error</th></tr>'
            f"</thead><tbody>\n{rows}\n</tbody></table>")


def _stream_row(row: StreamRow, now: float) -> str:
    length = "" if row.length is None else f"{row.length:,}"
    attrs = f'data-stream="{html.escape(row.key)}"'
    if row.length is not None:
        attrs += f' data-length="{row.length}"'
    if row.error:
        attrs += ' data-error="true"'
    cells = [
        f'<td class="key">{html.escape(row.key)}</td>',
        f'<td class="window">{html.escape(row.window)}</td>',
        f'<td class="length">{length}</td>',
        f"<td>{_bar(row)}</td>",
        f'<td class="watermark">{html.escape(row.watermark or ("none" if row.archived else ""))}</td>',
        f'<td class="watermark-age">{_age(row.watermark_age_s)}</td>',
        f'<td class="fold-lag">{"" if row.fold_lag is None else f"{row.fold_lag:,}"}</td>',
        f'<td class="last-beat">{_ago(row.last_beat, now)}</td>',
        f"<td>{_sparkline(row.samples)}</td>",
        f'<td class="error">{html.escape(row.error or "")}</td>',
    ]
    return f"<tr {attrs}>{''.join(cells)}</tr>"


def _bar(row: StreamRow) -> str:
    if row.length is None:
        return ""
    scale = max(row.bound or 0, row.length, 1) * 1.25
    filled = min(_BAR_WIDTH, round(_BAR_WIDTH * row.length / scale))
    over = row.bound is not None and row.length > row.bound
    colour = "#d98e04" if over else "#2e8b57"
    edge = ""
    if row.bound is not None:
        x = round(_BAR_WIDTH * row.bound / scale)
        edge = f'<line x1="{x}" y1="0" x2="{x}" y2="{_BAR_HEIGHT}" stroke="#333" stroke-width="1"/>'
    title = f"{row.length:,} of {row.bound:,}" if row.bound is not None else f"{row.length:,}"
    return (f'<svg class="bar" width="{_BAR_WIDTH}" height="{_BAR_HEIGHT}" role="img" aria-label="{title}">'
            f"<title>{title}</title>"
            f'<rect width="{_BAR_WIDTH}" height="{_BAR_HEIGHT}" fill="#eee"/>'
            f'<rect width="{filled}" height="{_BAR_HEIGHT}" fill="{colour}"/>{edge}</svg>')


def _sparkline(samples: Sequence[tuple[float, float]]) -> str:
    if len(samples) < 2:
        return ""
    first, last = samples[0][0], samples[-1][0]
    top = max(value for _, value in samples) or 1.0
    span = (last - first) or 1.0
    points = " ".join(f"{(at - first) / span * (_SPARK_WIDTH - 2) + 1:.1f},"
                      f"{_SPARK_HEIGHT - 1 - value / top * (_SPARK_HEIGHT - 2):.1f}" for at, value in samples)
    return (f'<svg class="spark" width="{_SPARK_WIDTH}" height="{_SPARK_HEIGHT}" role="img" '
            f'aria-label="length over the last hour">'
            f'<polyline fill="none" stroke="#3366cc" stroke-width="1.5" points="{points}"/></svg>')


def _replica(panel: ReplicaPanel) -> str:
    held = ", ".join(str(shard) for shard in sorted(panel.held)) or "none"
    return (f'<section class="replica" data-replica="{html.escape(panel.name)}" data-shards="{len(panel.held)}">'
            f'<h2>replica {html.escape(panel.name)}</h2>'
            f"<p>holds <b>{len(panel.held)}</b> of {panel.shards} shards, one of {panel.members} replicas: "
            f"the streams below are those of its shards</p>"
            f'<p class="shards">shards {html.escape(held)}</p></section>')


def _logd(panel: LogdPanel, now: float) -> str:
    answers = "".join(f'<li><span class="when">{_ago(at, now)}</span> {html.escape(summary)}</li>'
                      for at, summary in panel.retains) or "<li>none yet</li>"
    return (f'<section class="logd" data-head="{panel.head}"><h2>logd</h2>'
            f'<p>head commit <b class="head">{panel.head}</b></p>'
            f'<h3>recent retain answers</h3><ul class="retains">{answers}</ul></section>')


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _ago(at: float | None, now: float) -> str:
    return "" if at is None else f"{max(0.0, now - at):.1f} s ago"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


_HEAD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{refresh}">
<title>{title}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; }}
th, td {{ padding: 4px 10px; border-bottom: 1px solid #ddd; text-align: left; white-space: nowrap; }}
td.length, td.fold-lag {{ text-align: right; font-variant-numeric: tabular-nums; }}
tr[data-error="true"] td.error {{ color: #b00020; }}
.not-ready {{ color: #b00020; }} .ready {{ color: #2e8b57; }}
.when {{ color: #666; }}
</style></head><body>"""
