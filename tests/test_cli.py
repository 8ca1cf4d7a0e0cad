"""The retain command through click's runner: help everywhere, trim against a real server."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from retain.cli import main


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from all_commands(command, (*prefix, name))


COMMANDS = list(all_commands(main))


class TestHelp:
    @pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
    def test_every_command_has_help_and_an_example(self, path, command):
        """Each command documents itself and shows at least one example."""
        assert command.help and len(command.help.split()) >= 5, f"retain {' '.join(path)} lacks help"
        assert "Example:" in command.help, f"retain {' '.join(path)} has no example"
        result = CliRunner().invoke(main, [*path, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output

    def test_every_option_has_help(self):
        """Each option of each command says what it does."""
        missing = [f"{' '.join(path)} {param.name}" for path, command in COMMANDS for param in command.params
                   if isinstance(param, click.Option) and not param.help]
        assert missing == []


class TestDocsNameRealCommands:
    def test_every_retain_command_in_the_docs_exists(self):
        """Each `retain GROUP COMMAND` the docs and the README show (in code) is a command retain has: the docs
        once named `retain streams dry-run`."""
        root = Path(__file__).resolve().parent.parent
        named = set()
        for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
            # in code: a line of a shell block (after a prompt, &&, |) or an inline `retain ...`
            for group, name in re.findall(r"(?:^\s*(?:\$ )?|`|&& |\| )retain ([a-z]+) ([a-z][a-z-]*)",
                                          page.read_text(), re.M):
                if isinstance(main.commands.get(group), click.Group):
                    named.add((page.name, group, name))
        assert named  # the pattern finds the commands the docs show
        missing = [f"{page}: retain {group} {name}" for page, group, name in sorted(named)
                   if name not in main.commands[group].commands]  # type: ignore[attr-defined]
        assert not missing


class TestStreamsTrim:
    def invoke(self, redis_server, *args: str):
        return CliRunner().invoke(main, ["streams", "trim", *args, "--url", redis_server.url])

    def test_maxlen(self, redis_server, redis_conn):
        """--maxlen --exact trims to N and says what it removed."""
        for index in range(30):
            redis_conn.xadd("emq:{game}:stream:feed", {"i": str(index)})
        result = self.invoke(redis_server, "game", "feed", "--maxlen", "10", "--exact")
        assert result.exit_code == 0, result.output
        assert result.output.strip() == "removed 20 entries from emq:{game}:stream:feed (MAXLEN = 10); 10 left"
        assert redis_conn.xlen("emq:{game}:stream:feed") == 10

    def test_max_age_and_raw_key(self, redis_server, redis_conn):
        """--key addresses a stream outside the layout; --max-age keeps what is young."""
        redis_conn.xadd("legacy:feed", {"old": "1"}, id="1000-0")
        redis_conn.xadd("legacy:feed", {"new": "1"}, id="*")
        result = self.invoke(redis_server, "--key", "legacy:feed", "--max-age", "1h", "--exact")
        assert result.exit_code == 0, result.output
        assert "removed 1 entries from legacy:feed (MINID = " in result.output
        assert redis_conn.xlen("legacy:feed") == 1

    def test_min_id(self, redis_server, redis_conn):
        """--min-id takes an RFC 3339 time."""
        redis_conn.xadd("emq:{g}:stream:s", {"a": "1"}, id="1000-0")
        redis_conn.xadd("emq:{g}:stream:s", {"a": "2"}, id="2000000000000-0")
        result = self.invoke(redis_server, "g", "s", "--min-id", "2026-09-12T08:00:00Z", "--exact")
        assert result.exit_code == 0, result.output
        assert "removed 1 entries" in result.output

    def test_approx_trims_past_the_servers_cap(self, redis_server, redis_conn):
        """A ~ trim of a 30,000-entry stream to 10,000 removes every whole node outside (LIMIT 0), not the server's
        cap of 10,000 per call; the length left is shown; --limit sets a cap of one's own."""
        pipe = redis_conn.pipeline(transaction=False)
        for index in range(30_000):
            pipe.xadd("emq:{game}:stream:big", {"i": str(index)})
        pipe.execute()
        result = self.invoke(redis_server, "game", "big", "--maxlen", "10000")
        assert result.exit_code == 0, result.output
        left = redis_conn.xlen("emq:{game}:stream:big")
        assert 10_000 <= left < 10_000 + 100 and result.output.strip().endswith(f"; {left} left")
        for index in range(20_000):
            pipe.xadd("emq:{game}:stream:big", {"i": str(index)})
        pipe.execute()
        capped = self.invoke(redis_server, "game", "big", "--maxlen", "10000", "--limit", "5000")
        assert capped.exit_code == 0 and "removed 5000 entries" in capped.output

    @pytest.mark.parametrize(("args", "message"), [
        (["g", "s"], "exactly one of --maxlen, --max-age, --min-id"),
        (["g", "s", "--maxlen", "1", "--max-age", "1h"], "exactly one of"),
        (["--maxlen", "1"], "QUEUE NAME, or --key KEY"),
        (["g", "s", "--key", "k", "--maxlen", "1"], "but not both"),
        (["g", "bad name", "--maxlen", "1"], "contains ' '"),
        (["g", "s", "--maxlen", "-1"], "must be a whole number >= 0"),
        (["g", "s", "--max-age", "soon"], "invalid duration 'soon'"),
        (["g", "s", "--min-id", "yesterday"], "is not a time"),
        (["g", "s", "--min-id", "2026-09-12T08:00:00"], "has no timezone"),
    ])
    def test_refusals(self, redis_server, redis_conn, args, message):
        """Bad arguments exit non-zero with a clear one-line reason and send nothing."""
        redis_conn.config_resetstat()
        result = self.invoke(redis_server, *args)
        assert result.exit_code != 0
        assert message in result.output
        assert "Traceback" not in result.output
        assert "cmdstat_xtrim" not in redis_conn.info("commandstats")

    def test_wrongtype_is_reported(self, redis_server, redis_conn):
        """A server error becomes one line carrying the server's text."""
        redis_conn.set("emq:{g}:stream:s", "x")
        result = self.invoke(redis_server, "g", "s", "--maxlen", "1")
        assert result.exit_code == 1
        assert "WRONGTYPE" in result.output


class TestDemo:
    def test_demo_runs(self):
        """The demo starts its own Redis, prints the trim table, then the driver bounding a live feed."""
        result = CliRunner().invoke(main, ["demo"])
        assert result.exit_code == 0, result.output
        assert "MAXLEN ~ 1250" in result.output and "MAX-AGE = 30m" in result.output
        assert "the driver bounds a feed nobody reads" in result.output
        assert "no consumer read the feed (consumer groups: 0)" in result.output
        assert "  - {path: jobs.*, deleted: 129, unreadable: 2}\n" in result.output  # logd: a retain request
        assert "  {path: verse.*, deleted: 0, owner: logd, under: [verse.ctl]}\n" in result.output  # through docd
        assert "Traceback" not in result.output and "Error" not in result.output

    def test_demo_on_postgres(self):
        """--postgres: the logd act's store is a database on an embedded PostgreSQL, with the same answers; the
        server and its files are gone after."""
        before = set(Path(tempfile.gettempdir()).glob("retain-postgres-*"))
        result = CliRunner().invoke(main, ["demo", "--postgres"])
        assert result.exit_code == 0, result.output
        assert "logd: a store of its own on logd.sock (PostgreSQL)" in result.output
        assert "  - {path: jobs.*, deleted: 129, unreadable: 2}\n" in result.output
        assert "Traceback" not in result.output and "Error" not in result.output
        assert set(Path(tempfile.gettempdir()).glob("retain-postgres-*")) == before
