"""The retain command through click's runner: help everywhere, trim against a real server."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from retain.cli import main
from tests.helpers.command import retain_env


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


FEED = "emq:{game}:stream:feed"


def fed(conn, key: str = FEED, count: int = 30) -> None:
    """``count`` entries at known ids (1 s apart from 2026-09-11T20:26:40Z), a group that read 5 of them."""
    for index in range(count):
        conn.xadd(key, {"i": str(index)}, id=f"{1_789_000_000_000 + 1000 * index}-0")
    conn.xgroup_create(key, "billing", id="0")
    conn.xreadgroup("billing", "worker", {key: ">"}, count=5)


def policy_file(tmp_path: Path, url: str) -> str:
    path = tmp_path / "retain.toml"
    path.write_text(f'url = "{url}"\narchive = "file://{tmp_path / "archive"}"\n'
                    '[[stream]]\nkey = "legacy:feed"\nmaxlen = 5\narchive = true\n'
                    '[[stream]]\npattern = "emq:{*}:stream:*"\nmaxlen = 10\n')
    return str(path)


class TestStreamsLs:
    def test_lists_streams_only_with_their_figures(self, redis_server, redis_conn):
        """Every stream matching the glob with its length and groups; a key of another type is never listed."""
        fed(redis_conn)
        redis_conn.xadd("legacy:feed", {"a": "1"})
        redis_conn.set("emq:{game}:stream:text", "not a stream")
        result = CliRunner().invoke(main, ["streams", "ls", "--url", redis_server.url])
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert lines[0].split() == ["KEY", "LENGTH", "OLDEST", "NEWEST", "MEMORY", "GROUPS", "WINDOW"]
        assert [line.split()[:2] for line in lines[1:]] == [[FEED, "30"], ["legacy:feed", "1"]]
        narrowed = CliRunner().invoke(main, ["streams", "ls", "legacy:*", "--url", redis_server.url])
        assert [line.split()[0] for line in narrowed.output.splitlines()[1:]] == ["legacy:feed"]

    def test_json_with_the_policy_window(self, tmp_path, redis_server, redis_conn):
        """--json is one list; with --policy each stream carries the window that applies and where it comes from
        (the policy's url is used)."""
        fed(redis_conn)
        redis_conn.xadd("legacy:feed", {"a": "1"})
        result = CliRunner().invoke(main, ["streams", "ls", "--json", "--policy",
                                           policy_file(tmp_path, redis_server.url)],
                                    env={"RETAIN_REDIS_URL": "redis://127.0.0.1:1/0"})
        assert result.exit_code == 0, result.output
        rows = {row["key"]: row for row in json.loads(result.output)}
        assert (rows[FEED]["window"], rows[FEED]["policy"]) == ("MAXLEN ~ 10", "emq:{*}:stream:*")
        assert (rows["legacy:feed"]["window"], rows["legacy:feed"]["policy"]) == ("MAXLEN ~ 5", "entry")
        assert rows["legacy:feed"]["archived"] is True and rows["legacy:feed"]["fold_lag"] == 0


    def test_on_a_cluster_every_masters_streams(self, redis_cluster):
        """--cluster: the streams of every master are listed, and info reads one from the node that holds it."""
        conn = redis_cluster.client()
        keys = [f"emq:{{{queue}}}:stream:ls" for queue in ("a", "b", "c", "d", "e")]
        for key in keys:
            conn.xadd(key, {"x": "1"})
        try:
            listed = CliRunner().invoke(main, ["streams", "ls", "emq:*:stream:ls", "--cluster", "--url",
                                               redis_cluster.url])
            assert listed.exit_code == 0, listed.output
            assert [line.split()[0] for line in listed.output.splitlines()[1:]] == keys
            shown = CliRunner().invoke(main, ["streams", "info", "c", "ls", "--cluster", "--url", redis_cluster.url])
            assert shown.exit_code == 0 and "  length    1" in shown.output, shown.output
        finally:
            conn.delete(*keys)
            conn.close()


class TestStreamsInfo:
    def test_one_stream_with_its_groups(self, redis_server, redis_conn):
        """QUEUE NAME: length, first and last id with their age, memory, each group's pending and lag."""
        fed(redis_conn)
        result = CliRunner().invoke(main, ["streams", "info", "game", "feed", "--url", redis_server.url])
        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[:2] == [FEED, "  length    30"]
        assert "  first     1789000000000-0  (" in result.output and "  last      1789000029000-0  (" in result.output
        assert re.search(r"  memory    [\d.]+ KiB", result.output)
        lag = "lag 25" if int(redis_conn.info("server")["redis_version"].split(".")[0]) >= 7 else "lag unknown"
        assert f"  group billing: 1 consumers, 5 pending, {lag}, last delivered 1789000004000-0" in result.output

    def test_json_with_an_archived_entry(self, tmp_path, redis_server, redis_conn):
        """A literal key under --policy: its window from its own entry, W and the fold lag of the archive."""
        for index in range(8):
            redis_conn.xadd("legacy:feed", {"i": str(index)}, id=f"{1000 + index}-0")
        result = CliRunner().invoke(main, ["streams", "info", "legacy:feed", "--json", "--url", redis_server.url,
                                           "--policy", policy_file(tmp_path, redis_server.url)])
        assert result.exit_code == 0, result.output
        shown = json.loads(result.output)
        assert (shown["length"], shown["first"], shown["last"]) == (8, "1000-0", "1007-0")
        assert shown["first_age_s"] > 0 and shown["memory_bytes"] > 0 and shown["groups"] == []
        assert (shown["window"], shown["policy"], shown["archived"]) == ("MAXLEN ~ 5", "entry", True)
        assert (shown["watermark"], shown["fold_lag"]) == (None, 3)

    def test_no_stream_is_one_line(self, redis_server, redis_conn):
        """A missing key or a key of another type: one line naming it, exit 1."""
        redis_conn.set("text", "x")
        missing = CliRunner().invoke(main, ["streams", "info", "nope", "--url", redis_server.url])
        assert (missing.exit_code, missing.output) == (1, "Error: no stream at 'nope': the key does not exist\n")
        other = CliRunner().invoke(main, ["streams", "info", "text", "--url", redis_server.url])
        assert (other.exit_code, other.output) == (1, "Error: 'text' holds a string, not a stream\n")


class TestStreamsTrimDryRun:
    def test_says_what_it_would_remove_and_removes_nothing(self, redis_server, redis_conn):
        """--dry-run prints the length, what the window keeps and what the trim would remove; the stream is
        untouched."""
        fed(redis_conn)
        result = CliRunner().invoke(main, ["streams", "trim", "game", "feed", "--maxlen", "10", "--exact",
                                           "--dry-run", "--url", redis_server.url])
        assert result.exit_code == 0, result.output
        assert "nothing is trimmed" in result.output
        assert f"{FEED}  MAXLEN = 10  length 30  keeps 10  a trim now removes 20" in result.output
        assert redis_conn.xlen(FEED) == 30


class TestPolicyCheck:
    def test_a_good_file(self, tmp_path):
        """A good file: exit 0 and one line; nothing is reached (its url names a closed port)."""
        path = tmp_path / "retain.toml"
        path.write_text('url = "redis://127.0.0.1:1/0"\n[[stream]]\nqueue = "q"\nname = "s"\nmaxlen = 10\n')
        result = CliRunner().invoke(main, ["policy", "check", str(path)])
        assert (result.exit_code, result.output) == (0, f"{path}: the policy is good\n")

    def test_every_problem_is_listed(self, tmp_path):
        """Each bad field of each entry and of the top level is listed, then the count; exit 1."""
        path = tmp_path / "retain.toml"
        path.write_text('tick = "0s"\ncolour = 1\n'
                        '[[stream]]\nqueue = "q"\nname = "a b"\nmaxlen = 1\n'
                        '[[stream]]\nqueue = "q"\nname = "s"\nmax_len = 3\n'
                        '[[stream]]\npattern = "emq:*"\nmax_age = "7x"\n')
        result = CliRunner().invoke(main, ["policy", "check", str(path)])
        assert result.exit_code == 1
        lines = result.output.splitlines()
        assert len(lines) == 6 and lines[-1] == f"{path}: 5 problems"
        assert "unknown field 'colour'" in lines[0] and "field 'tick'" in lines[1]
        assert "[[stream]] #1" in lines[2] and "[[stream]] #2" in lines[3] and "unknown field 'max_len'" in lines[3]
        assert "[[stream]] #3" in lines[4] and "field 'max_age'" in lines[4]

    def test_what_holds_across_entries(self, tmp_path):
        """A stream declared twice is found once each entry is good on its own."""
        path = tmp_path / "retain.toml"
        path.write_text('[[stream]]\nqueue = "q"\nname = "s"\nmaxlen = 1\n' * 2)
        result = CliRunner().invoke(main, ["policy", "check", str(path)])
        assert result.exit_code == 1 and "repeats the stream of [[stream]] #1" in result.output


class TestCompletion:
    @pytest.mark.parametrize(("shell", "line"), [
        ("bash", "complete -o nosort -F _retain_completion retain"), ("zsh", "#compdef retain"),
        ("fish", "complete --no-files --command retain")])
    def test_the_script_is_produced(self, tmp_path, shell, line):
        """_RETAIN_COMPLETE=<shell>_source retain prints the completion script the README has each shell load."""
        ran = subprocess.run(["retain"], env={**retain_env(tmp_path), "_RETAIN_COMPLETE": f"{shell}_source"},
                             capture_output=True, text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr
        assert line in ran.stdout

    def test_bash_completes_commands_as_the_readme_loads_it(self, tmp_path):
        """The README's bash line, then TAB after `retain streams i`: bash is offered info."""
        readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
        load = next(line.split("  #")[0] for line in readme.splitlines() if "bash_source" in line)
        script = (f"{load}\nCOMP_WORDS=(retain streams i); COMP_CWORD=2\n_retain_completion retain\n"
                  'printf "%s\\n" "${COMPREPLY[@]}"\n')
        ran = subprocess.run(["bash", "-euc", script], env=retain_env(tmp_path), capture_output=True, text=True,
                             timeout=60)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.split() == ["info"]


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
