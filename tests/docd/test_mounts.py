"""The mount table: a TOML file checked before anything connects; one owner per path."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retain.docd.mounts import DEFAULT_LOGD, DEFAULT_TIMEOUT, Mount, MountTable, load_mounts, parse_mounts
from retain.errors import InvalidInput, InvalidMounts
from retain.logd.paths import Path, parse
from tests.strategies import docd_paths, mount_tables

GOOD = '''
logd = "unix:/run/logd.sock"
timeout = "90s"

[[mount]]
path = "verse.ctl"
address = "127.0.0.1:7501"

[[mount]]
path = "ci"
address = "unix:/run/ci.sock"
'''


class TestParseMounts:
    def test_good_file(self):
        """Every field is read: logd's address, the timeout, each mount's path and address, in file order."""
        table = parse_mounts(GOOD, source="mounts.toml")
        assert table.logd == "/run/logd.sock"
        assert table.timeout == 90.0
        assert table.mounts == (Mount(parse("verse.ctl"), ("127.0.0.1", 7501)), Mount(parse("ci"), "/run/ci.sock"))
        assert [mount.name for mount in table.mounts] == ["verse.ctl", "ci"]
        assert table.source == "mounts.toml"

    def test_defaults(self):
        """An empty file is a table with no mounts: logd owns everything, at its default address."""
        table = parse_mounts("")
        assert table == MountTable((), DEFAULT_LOGD, DEFAULT_TIMEOUT)
        assert table.owner(parse("verse.ctl.runs")) is None

    def test_numeric_timeout(self):
        """A timeout may be seconds as a number."""
        assert parse_mounts("timeout = 2.5").timeout == 2.5

    @pytest.mark.parametrize(("text", "message"), [
        ("logd = ", "m.toml: not valid TOML"),
        ("port = 1", "m.toml: unknown field 'port': expected one of logd, timeout, mount"),
        ("logd = 7420", "m.toml: field 'logd': must be a string, HOST:PORT or unix:PATH (got 7420)"),
        ("logd = 'nohost'", "m.toml: field 'logd': an address is HOST:PORT or a socket path"),
        ("timeout = 0", "m.toml: field 'timeout': must be a positive number of seconds"),
        ("timeout = true", "m.toml: field 'timeout': must be a positive number"),
        ("timeout = 'soon'", "m.toml: field 'timeout': invalid duration 'soon'"),
        ("mount = 3", "m.toml: 'mount' must be [[mount]] tables"),
        ("[[mount]]\naddress = '127.0.0.1:1'", "m.toml: [[mount]] #1: field 'path': missing"),
        ("[[mount]]\npath = 'a'", "m.toml: [[mount]] #1 (a): field 'address': missing"),
        ("[[mount]]\npath = 'a'\naddress = '127.0.0.1:1'\nname = 'x'", "[[mount]] #1 (a): unknown field 'name'"),
        ("[[mount]]\npath = 'a.*'\naddress = 'h:1'", "[[mount]] #1 (a.*): field 'path': 'a.*': a mount point is "
                                                      "names separated by '.', such as verse.ctl (found '*')"),
        ("[[mount]]\npath = 'a(k)'\naddress = 'h:1'", "field 'path': 'a(k)': a mount point is names"),
        ("[[mount]]\npath = 'a[0]'\naddress = 'h:1'", "field 'path': 'a[0]': a mount point is names"),
        ("[[mount]]\npath = 'a..b'\naddress = 'h:1'", "field 'path': path 'a..b': '..' is refused"),
        ("[[mount]]\npath = 'a/b'\naddress = 'h:1'", "field 'path': path 'a/b' at position 1: '/' is not allowed"),
        ("[[mount]]\npath = 3\naddress = 'h:1'", "[[mount]] #1: field 'path': a path must be a string"),
        ("[[mount]]\npath = 'logd'\naddress = 'h:1'", "field 'path': 'logd': answers name logd itself 'logd'"),
        ("[[mount]]\npath = 'a'\naddress = 'h:x'", "[[mount]] #1 (a): field 'address': an address is HOST:PORT"),
        ("[[mount]]\npath = 'a'\naddress = 1", "[[mount]] #1 (a): field 'address': must be a string"),
    ])
    def test_refusals(self, text, message):
        """A bad file is refused naming the file, the entry and the field, and what was expected."""
        with pytest.raises(InvalidMounts) as refused:
            parse_mounts(text, source="m.toml")
        assert message in str(refused.value)

    @pytest.mark.parametrize(("first", "second", "message"), [
        ("verse.ctl", "verse.ctl", "[[mount]] #2 (verse.ctl): mounts verse.ctl again (as m.toml: [[mount]] #1 "
                                   "(verse.ctl) does): a path has one owner"),
        ("verse", "verse.ctl", "[[mount]] #2 (verse.ctl): verse.ctl lies inside verse ([[mount]] #1 (verse)" ""),
        ("verse.ctl.runs", "verse.ctl", "[[mount]] #2 (verse.ctl): verse.ctl.runs lies inside verse.ctl"),
    ])
    def test_overlap_refused(self, first, second, message):
        """A path mounted twice, or one mount inside another, is refused naming both entries."""
        text = f"[[mount]]\npath = '{first}'\naddress = 'h:1'\n[[mount]]\npath = '{second}'\naddress = 'h:2'\n"
        with pytest.raises(InvalidMounts) as refused:
            parse_mounts(text, source="m.toml")
        assert message.replace("m.toml: ", "") in str(refused.value).replace("m.toml: ", "")

    def test_siblings_are_fine(self):
        """Mounts side by side, even sharing a prefix of characters, do not overlap."""
        text = "[[mount]]\npath = 'verse.ctl'\naddress = 'h:1'\n[[mount]]\npath = 'verse.ctl2'\naddress = 'h:2'\n"
        assert [mount.name for mount in parse_mounts(text).mounts] == ["verse.ctl", "verse.ctl2"]


class TestLoadMounts:
    def test_reads_a_file(self, tmp_path):
        """load_mounts reads the file and names it in the table."""
        path = tmp_path / "mounts.toml"
        path.write_text(GOOD)
        assert load_mounts(path).source == str(path)

    def test_unreadable(self, tmp_path):
        """A missing file is refused naming it."""
        with pytest.raises(InvalidMounts, match="cannot read the mount file"):
            load_mounts(tmp_path / "nope.toml")

    def test_error_is_a_value_error(self):
        """InvalidMounts is bad input: an InvalidInput and a ValueError."""
        assert issubclass(InvalidMounts, InvalidInput) and issubclass(InvalidMounts, ValueError)


class TestMountTable:
    def test_of_and_with_logd(self):
        """MountTable.of takes {path: address}; with_logd moves logd and keeps the mounts."""
        table = MountTable.of({"verse.ctl": "127.0.0.1:7501"}, logd="unix:/run/logd.sock")
        assert table.logd == "/run/logd.sock"
        moved = table.with_logd("127.0.0.1:9")
        assert moved.logd == ("127.0.0.1", 9) and moved.mounts == table.mounts
        assert table.with_logd(None) is table
        with pytest.raises(InvalidMounts, match="--logd: an address is HOST:PORT"):
            table.with_logd("nohost")

    def test_made_in_code_is_checked_too(self):
        """Overlapping mounts and a bad timeout are refused however the table is made."""
        with pytest.raises(InvalidMounts, match="verse.ctl lies inside verse"):
            MountTable.of({"verse": "h:1", "verse.ctl": "h:2"})
        with pytest.raises(InvalidMounts, match="field 'timeout': must be a positive number"):
            MountTable.of({}, timeout=-1)
        with pytest.raises(InvalidMounts, match="a mount point is names"):
            MountTable.of({"a(b)": "h:1"})

    def test_owner_and_beneath(self):
        """owner: the mount holding a path; beneath: the mounts strictly inside one."""
        table = MountTable.of({"verse.ctl": "h:1", "ci": "h:2", "verse.lab": "h:3"})
        assert table.owner(parse("verse.ctl")).name == "verse.ctl"
        assert table.owner(parse("verse.ctl.runs(r1).status")).name == "verse.ctl"
        assert table.owner(parse("verse")) is None
        assert table.owner(parse("verse.ctl2")) is None
        assert table.owner(Path(())) is None
        assert [m.name for m in table.beneath(parse("verse"))] == ["verse.ctl", "verse.lab"]
        assert [m.name for m in table.beneath(Path(()))] == ["verse.ctl", "ci", "verse.lab"]
        assert table.beneath(parse("verse.ctl")) == ()
        assert table.beneath(parse("jobs")) == ()

    @given(mount_tables(), docd_paths())
    def test_every_path_has_one_owner(self, table, path):
        """A path's owner is the one mount that holds it, or logd when none does; mounts never hold each other."""
        holders = [mount for mount in table.mounts if path.startswith(mount.path)]
        assert len(holders) <= 1
        assert table.owner(path) == (holders[0] if holders else None)
        for mount in table.beneath(path):
            assert table.owner(mount.path) is mount and mount.path != path

    @given(st.data())
    def test_order_of_declaration_does_not_matter_for_owners(self, data):
        """Shuffling the table's mounts changes no path's owner."""
        table = data.draw(mount_tables())
        shuffled = MountTable(tuple(data.draw(st.permutations(table.mounts))), table.logd)
        path = data.draw(docd_paths())
        assert table.owner(path) == shuffled.owner(path)
