"""``retain archive`` through click's runner against a real Redis and real stores; the demo act."""

from __future__ import annotations

import base64
import json

from click.testing import CliRunner
from rich.console import Console

from retain.archive import Archive
from retain.cli import main
from retain.demo.archive_feed import archive_feed
from retain.streams import StreamRef


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["archive", *args], env=env)


class TestArchiveCommands:
    def test_fold_ls_read(self, redis_server, redis_conn, tmp_path):
        """fold archives, ls lists files and W, read prints every entry as a JSON line."""
        url = str(tmp_path / "archive")
        for index in range(1, 251):
            redis_conn.xadd("emq:{game}:stream:feed", {"i": str(index), "bin": b"\xff\x00"}, id=f"{index}-0")
        folded = invoke("fold", "game", "feed", "--upto", "200", "--segment-entries", "100",
                        "--archive", url, "--url", redis_server.url)
        assert folded.exit_code == 0, folded.output
        assert folded.output.strip() == ("folded 200 entries into 2 files of emq:{game}:stream:feed; "
                                         "W = 200-0 (table version 2)")
        redis_conn.xtrim("emq:{game}:stream:feed", minid="201-0")
        listed = invoke("ls", "game", "feed", "--archive", url)
        assert listed.exit_code == 0, listed.output
        assert "W = 200-0" in listed.output and "2 files, 200 entries" in listed.output
        everything = invoke("ls", "--archive", url)
        assert "emq:{game}:stream:feed" in everything.output and "200-0" in everything.output
        read = invoke("read", "game", "feed", "--archive", url, "--url", redis_server.url)
        assert read.exit_code == 0, read.output
        lines = [json.loads(line) for line in read.output.splitlines()]
        assert [line["id"] for line in lines] == [f"{index}-0" for index in range(1, 251)]
        assert lines[0]["fields"] == {"i": "1", "bin": {"base64": base64.b64encode(b"\xff\x00").decode()}}

    def test_progress_bar_on_a_terminal(self, redis_server, redis_conn, tmp_path):
        """On a terminal a fold shows its progress; a key's braces are shown, not read as a format."""
        for index in range(3000):
            redis_conn.xadd("emq:{game}:stream:long", {"i": str(index)})
        result = invoke("fold", "game", "long", "--segment-entries", "500", "--archive", str(tmp_path / "a"),
                        "--url", redis_server.url, env={"TTY_COMPATIBLE": "1"})
        assert result.exit_code == 0, result.output
        assert "folding emq:{game}:stream:long" in result.output
        assert "folded 3000 entries into 6 files" in result.output

    def test_read_range_by_id_and_time(self, redis_server, redis_conn, tmp_path):
        """--since and --until take ids, <ms> and RFC 3339 times, both included."""
        url = str(tmp_path / "archive")
        for ms in (1000, 2000, 3000, 4000):
            redis_conn.xadd("emq:{g}:stream:s", {"ms": str(ms)}, id=f"{ms}-0")
        assert invoke("fold", "g", "s", "--upto", "2000-0", "--archive", url, "--url", redis_server.url).exit_code == 0
        by_id = invoke("read", "g", "s", "--since", "2000-0", "--until", "3000", "--archive", url,
                       "--url", redis_server.url)
        assert [json.loads(line)["id"] for line in by_id.output.splitlines()] == ["2000-0", "3000-0"]
        by_time = invoke("read", "--key", "emq:{g}:stream:s", "--since", "1970-01-01T00:00:01.500Z",
                         "--until", "1970-01-01T00:00:04Z", "--archive", url, "--url", redis_server.url)
        assert [json.loads(line)["id"] for line in by_time.output.splitlines()] == ["2000-0", "3000-0", "4000-0"]

    def test_s3_options(self, redis_server, redis_conn, seaweed_server):
        """An s3:// archive takes --s3-endpoint and --s3-region, credentials from the AWS_* environment."""
        redis_conn.xadd("emq:{g}:stream:s3", {"a": "1"}, id="5-0")
        options = seaweed_server.archive_options()
        env = {"AWS_ACCESS_KEY_ID": options["access_key_id"], "AWS_SECRET_ACCESS_KEY": options["secret_access_key"]}
        url = seaweed_server.archive_url("cli")
        result = invoke("fold", "g", "s3", "--archive", url, "--s3-endpoint", options["endpoint"],
                        "--s3-region", "us-east-1", "--url", redis_server.url, env=env)
        assert result.exit_code == 0, result.output
        assert Archive(url, **options).state(StreamRef("g", "s3")).entries == 1

    def test_refusals(self, redis_server):
        """Bad arguments are one clean line, never a traceback."""
        for args, message in [
            (["read", "g", "s", "--archive", "ftp://x"], "file://, memory:// or s3://"),
            (["fold", "g", "--archive", "memory://"], "QUEUE NAME, or --key KEY"),
            (["read", "g", "s", "--since", "noon", "--archive", "memory://"], "is not a time"),
            (["fold", "g", "s", "--upto", "12-x", "--archive", "memory://"], "is not a time"),
        ]:
            result = invoke(*args, "--url", redis_server.url) if args[0] != "ls" else invoke(*args)
            assert result.exit_code != 0 and message in result.output, (args, result.output)
            assert "Traceback" not in result.output


class TestDemoAct:
    def test_proves_nothing_lost(self, redis_server, redis_conn):
        """The archive act runs the driver with an archive while the feed is appended, and proves the merge-read whole."""
        console = Console(record=True, width=100)
        archive_feed(redis_server, console)
        text = console.export_text()
        assert "kept to MAXLEN = 1500 by a driver beating every 0.1s with archive=True:" in text
        assert "the driver folds before it trims, beat by beat" in text
        assert ("merge-read: 6000 entries for 6000 appended (4500 from the archive, 1500 live); each once: True; "
                "in id order: True; same ids and fields as appended: True") in " ".join(text.split())
