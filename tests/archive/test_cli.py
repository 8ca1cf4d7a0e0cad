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


class TestTableCommands:
    def fill(self, redis_server, redis_conn, url: str, folds: int = 3) -> None:
        for step in range(folds):
            for index in range(10):
                redis_conn.xadd("emq:{g}:stream:t", {"i": str(index), "bin": b"\xfe" if index == 0 else b"x"},
                                id=f"{1000 + step * 100 + index}-0")
            assert invoke("fold", "g", "t", "--archive", url, "--url", redis_server.url).exit_code == 0

    def test_query(self, redis_server, redis_conn, tmp_path):
        """query runs SQL over the stream's view as a table, or as JSON lines; a refused query is one line."""
        url = str(tmp_path / "archive")
        self.fill(redis_server, redis_conn, url)
        shown = invoke("query", "g", "t", "SELECT count(*) AS n, min(ms) AS first FROM entries", "--archive", url)
        assert shown.exit_code == 0, shown.output
        assert "1000" in shown.output and "30" in shown.output and "1 rows" in shown.output
        lines = invoke("query", "SELECT stream, id, fields, fields_binary FROM archive ORDER BY ms LIMIT 2", "--json",
                       "--archive", url)
        assert lines.exit_code == 0, lines.output
        assert [json.loads(line) for line in lines.output.splitlines()] == [
            {"stream": "emq:{g}:stream:t", "id": "1000-0", "fields": None,
             "fields_binary": {"i": "0", "bin": {"base64": base64.b64encode(b"\xfe").decode()}}},
            {"stream": "emq:{g}:stream:t", "id": "1001-0", "fields": {"i": "1", "bin": "x"}, "fields_binary": None}]
        refused = invoke("query", "g", "t", "SELECT nope FROM entries", "--archive", url)
        assert refused.exit_code == 1 and "DuckDB refused the query" in refused.output
        assert "Traceback" not in refused.output
        usage = invoke("query", "g", "SELECT 1", "--archive", url)
        assert usage.exit_code != 0 and 'give QUEUE NAME "SQL"' in usage.output

    def test_maintain_and_ls_show_expiry(self, redis_server, redis_conn, tmp_path):
        """maintain compacts and expires (a dry run first says what it would do); ls shows how far expiry reached."""
        url = str(tmp_path / "archive")
        self.fill(redis_server, redis_conn, url)
        dry = invoke("maintain", "--max-age", "1d", "--dry-run", "--archive", url)
        assert dry.exit_code == 0, dry.output
        assert "would expire 30 entries" in dry.output and Archive(url).state(StreamRef("g", "t")).entries == 30
        done = invoke("maintain", "--archive", url, "--vacuum-retention", "1m")
        assert done.exit_code == 0 and "compacted 3 files into 1" in done.output
        assert "expired before none" in " ".join(invoke("ls", "g", "t", "--archive", url).output.split())
        expired = invoke("maintain", "--max-age", "1d", "--archive", url)
        assert expired.exit_code == 0 and "expired 30 entries" in expired.output
        listed = " ".join(invoke("ls", "g", "t", "--archive", url).output.split())
        assert "0 files, 0 entries" in listed and "expired before 20" in listed
        bad = invoke("maintain", "--max-age", "soon", "--archive", url)
        assert bad.exit_code != 0 and "--max-age" in bad.output and "Traceback" not in bad.output

    def test_migrate(self, redis_server, redis_conn, tmp_path):
        """migrate turns a format-1 archive into the table and says what it moved; ls then shows the table."""
        from tests.helpers.legacy import write_legacy

        url = str(tmp_path / "old")
        write_legacy(url, {"emq:{g}:stream:old": [[(f"{ms}-0".encode(), {b"a": b"1"}) for ms in range(1, 11)]]})
        assert "format 1, read-only" in " ".join(invoke("ls", "--archive", url).output.split())
        folded = invoke("fold", "g", "old", "--archive", url, "--url", redis_server.url)
        assert folded.exit_code == 1 and "retain archive migrate" in folded.output
        moved = invoke("migrate", "--archive", url)
        assert moved.exit_code == 0, moved.output
        assert "emq:{g}:stream:old  10 entries from 1 segments: 1 files; W = 10-0" in moved.output
        assert "migrated 10 entries of 1 streams, every id checked once" in moved.output
        assert "(table, version 1)" in " ".join(invoke("ls", "--archive", url).output.split())


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


class TestFirstSteps:
    """Issue 15's problems 7 and 8, through the real command in a process of its own."""

    @staticmethod
    def run(*args: str, cwd=None, env=None):
        import os
        import subprocess
        import sys
        from pathlib import Path

        import retain
        # this checkout's retain, whatever the working directory
        env = {**(os.environ if env is None else env), "PYTHONPATH": str(Path(retain.__file__).parents[1])}
        return subprocess.run([sys.executable, "-c", "from retain.cli import main; main()", "archive", *args],
                              capture_output=True, text=True, timeout=120, cwd=cwd, env=env)

    def test_ls_in_an_empty_folder_creates_nothing(self, tmp_path):
        """`retain archive ls` where no archive is: it says so, exits 0, and ./retain-archive is not made."""
        result = self.run("ls", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "no archive at" in result.stdout and "nothing has been folded there yet" in result.stdout
        assert list(tmp_path.iterdir()) == []

    def test_missing_s3_credentials_are_named(self, tmp_path):
        """An s3:// archive at an endpoint with no credentials: one line naming the variables to set, before any
        request (never a 403 from the cloud's metadata endpoint)."""
        import os
        env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
        result = self.run("ls", "--archive", "s3://logs/retain", "--s3-endpoint", "http://127.0.0.1:9", env=env)
        assert result.returncode == 1
        assert "no S3 credentials for 's3://logs/retain'" in result.stderr and "AWS_ACCESS_KEY_ID" in result.stderr
        assert "169.254.169.254" not in result.stderr and "Traceback" not in result.stderr

    def test_the_metadata_endpoints_refusal_says_credentials_are_missing(self):
        """Where the store fell back to the metadata endpoint anyway (no endpoint given), its refusal is mapped to
        an error that says no credentials were found."""
        from retain.archive._boundary import map_error
        from retain.errors import ArchiveAccessDenied
        text = ("Generic S3 error: Error performing PUT http://169.254.169.254/latest/api/token in 3ms - "
                "Server returned non-2xx status code 403 Forbidden")
        error = map_error(OSError(text), "opening the table 's3://logs/retain'")
        assert isinstance(error, ArchiveAccessDenied)
        assert "no S3 credentials were found" in str(error) and "AWS_ACCESS_KEY_ID" in str(error)


class TestFailuresSayOneClearLine:
    """Issue 26's smaller defects of the archive commands, through the real command in a process of its own."""

    run = staticmethod(TestFirstSteps.run)

    def test_read_of_no_archive_creates_nothing(self, tmp_path, redis_server):
        """`retain archive read` where no archive is: one line saying so, exit 1, and no directory made."""
        missing = tmp_path / "typo" / "archive"
        result = self.run("read", "game", "feed", "--archive", str(missing), "--url", redis_server.url)
        assert result.returncode == 1
        assert result.stderr.strip() == (f"Error: no archive at {missing}: nothing has been folded there yet "
                                          "(is --archive or $RETAIN_ARCHIVE the folder the folds write to?)")
        assert not (tmp_path / "typo").exists()

    def test_an_unwritable_archive_carries_no_debug_dump(self, tmp_path, redis_server, redis_conn):
        """A data file that cannot be written (its folder is taken by a file) is named in one line, without the
        store's `Debug source: Generic {` dump."""
        redis_conn.xadd("emq:{game}:stream:feed", {"k": "v"})
        archive = tmp_path / "archive"
        archive.mkdir()
        # a file where the folder of emq:{game}:stream:feed goes
        (archive / "stream_digest=sha256-4570a980041b5714").write_text("not a folder")
        result = self.run("fold", "game", "feed", "--archive", str(archive), "--url", redis_server.url)
        assert result.returncode == 1
        assert result.stderr.startswith("Error: writing data file") and "Not a directory" in result.stderr
        assert "Debug source" not in result.stderr and "{" not in result.stderr.replace("{game}", "")
        assert len(result.stderr.strip().splitlines()) == 1

    def test_s3_without_an_endpoint_or_credentials(self, redis_server):
        """An s3:// archive on no endpoint with no credentials: one line saying none were found, without the AWS
        SDK's IMDS warnings or delta-rs's "Kernel error"."""
        import os
        env = {name: value for name, value in os.environ.items() if not name.startswith(("AWS_", "RUST_LOG"))}
        result = self.run("fold", "game", "feed", "--archive", "s3://logs/retain", "--url", redis_server.url, env=env)
        assert result.returncode == 1
        assert result.stderr.startswith("Error: opening the table 's3://logs/retain': no S3 credentials were found")
        assert "WARN" not in result.stderr and "Kernel error" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
