"""retain.archive.verify and ``retain archive verify``: a whole archive checked, each damaged object named.

Damage made by hand on a real archive (and a real Redis for the gap): a data file
deleted, bytes flipped in one, the newest log entry deleted, the stream trimmed past W.
"""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from retain.archive import fold_then_trim
from retain.archive.verify import verify
from retain.cli import main
from retain.windows import MaxLen
from tests.helpers.archive import NO_GAP_CHECK, keeps_entries_added

pytestmark = pytest.mark.parametrize("store_kind", ["local"], indirect=True)


@pytest.fixture
def filled(redis_conn, archive, stream, append):
    """Three folds of 2,000 entries, each trimmed to the newest 100: three data files, W on the last."""
    for start in (0, 2000, 4000):
        append(stream, 2000, start)
        fold_then_trim(redis_conn, stream, archive, MaxLen(100, approx=False))
    return archive


def root_of(archive) -> str:
    return archive.location.url.removeprefix("file://")


def run_verify(archive, *more: str):
    return CliRunner().invoke(main, ["archive", "verify", archive.url, *more])


def test_a_whole_archive(filled, redis_server, stream):
    report = verify(filled)
    assert report.ok and (report.streams, report.files, report.rows) == (1, 3, 5900)
    result = run_verify(filled, "--url", redis_server.url)
    assert result.exit_code == 0, result.output
    assert "whole; 1 streams, 3 files, 5900 rows read and checksummed" in result.output


def test_deleted_data_file(filled, stream):
    path = filled.state(stream).files[1].path
    os.remove(os.path.join(root_of(filled), path))
    result = run_verify(filled)
    assert result.exit_code == 1
    assert f"DAMAGED {path}: data file {path!r} is not in the store" in result.output


def test_flipped_bytes(filled, stream):
    path = filled.state(stream).files[0].path
    full = os.path.join(root_of(filled), path)
    data = bytearray(open(full, "rb").read())
    for offset in range(len(data) // 3, len(data) // 3 + 64):
        data[offset] ^= 0xFF
    open(full, "wb").write(bytes(data))
    result = run_verify(filled)
    assert result.exit_code == 1
    assert f"DAMAGED {path}: data file {path!r} is damaged" in result.output
    assert result.output.count("DAMAGED ") == 1 and "DAMAGED: 1 problems" in result.output


def test_newest_log_entry_deleted(filled, redis_conn, redis_server, stream):
    """W goes back to the second fold's; the live stream was trimmed past it: a gap, named with the stream."""
    if not keeps_entries_added(redis_conn):
        pytest.skip(NO_GAP_CHECK)
    os.remove(os.path.join(root_of(filled), "_delta_log", f"{filled.version:020d}.json"))
    result = run_verify(filled, "--url", redis_server.url)
    assert result.exit_code == 1, result.output
    assert f"DAMAGED stream {stream.key}: stream {stream.key!r}: 2000 entries after the archive's W" in result.output


def test_trimmed_past_w(filled, redis_conn, redis_server, stream):
    """The live stream trimmed past W by hand: whole without Redis, a gap naming how many entries with it (on
    Redis 6.2, which counts no entries added: the stream named as unverifiable, never silence)."""
    redis_conn.xtrim(stream.key, maxlen=10, approximate=False)
    assert run_verify(filled).exit_code == 0  # without Redis the archive alone is whole
    result = run_verify(filled, "--url", redis_server.url)
    if keeps_entries_added(redis_conn):
        assert result.exit_code == 1 and "90 entries after the archive's W" in result.output
    else:
        assert result.exit_code == 0, result.output
        assert (f"UNVERIFIABLE stream {stream.key}: the server does not count the entries added to a stream"
                in result.output)
        assert "; 1 streams' live side unverifiable" in result.output


def test_xdel_then_newest_log_entry_deleted(filled, redis_conn, redis_server, stream):
    """The silent gap after one XDEL, as the attack was made: a consumer XDELs one live entry, the archive loses its newest
    commit. The counts cannot tell (an XDEL above W), the trim mark can: verify names the stream, and `retain
    archive read` refuses instead of printing 5,800 of 5,999 ids and exiting 0. On every server, 6.2 too."""
    live = [entry_id for entry_id, _ in redis_conn.xrange(stream.key)]
    redis_conn.xdel(stream.key, live[40])
    os.remove(os.path.join(root_of(filled), "_delta_log", f"{filled.version:020d}.json"))
    result = run_verify(filled, "--url", redis_server.url)
    assert result.exit_code == 1, result.output
    assert f"DAMAGED stream {stream.key}: stream {stream.key!r}: the archive's W is" in result.output
    assert "the archive lost the commits in between" in result.output
    read = CliRunner().invoke(main, ["archive", "read", "--key", stream.key, "--archive", filled.url,
                                     "--url", redis_server.url])
    assert read.exit_code == 1 and "are in neither tier; a merge-read would skip them" in read.output, read.output


def test_xdel_above_w_then_trimmed_past_it_is_unverifiable(filled, redis_conn, redis_server, stream):
    """An XDEL above W, then a trim past W by hand: no count can tell a deleted entry from a lost one, and no
    commit was lost. verify says so for that stream, with the reason, and exits 0 (it found no damage)."""
    live = [entry_id for entry_id, _ in redis_conn.xrange(stream.key)]
    redis_conn.xdel(stream.key, live[95])
    redis_conn.xtrim(stream.key, maxlen=3, approximate=False)
    result = run_verify(filled, "--url", redis_server.url)
    assert result.exit_code == 0, result.output
    reason = "an XDEL removed entries above W" if keeps_entries_added(redis_conn) else "Redis before 7"
    line = next(line for line in result.output.splitlines() if line.startswith("UNVERIFIABLE"))
    assert line.startswith(f"UNVERIFIABLE stream {stream.key}: ") and reason in line, result.output

