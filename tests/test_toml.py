"""retain._toml: every configuration file is read and refused the same way."""

import pytest

from retain import _toml
from retain.docd.mounts import load_mounts
from retain.errors import InvalidMounts, InvalidPolicy
from retain.logd.schedule import load_schedule
from retain.retention.policyfile import load_policy

LOADERS = [(load_policy, InvalidPolicy, "policy"), (load_schedule, InvalidPolicy, "schedule"),
           (load_mounts, InvalidMounts, "mount")]


class TestRefusals:
    @pytest.mark.parametrize(("load", "error", "what"), LOADERS)
    def test_huge_file(self, tmp_path, load, error, what):
        """A file over 1 MiB is refused, naming the file and the bound, without being read whole."""
        path = tmp_path / "huge.toml"
        path.write_bytes(b"# " + b"x" * _toml.MAX_FILE_BYTES + b"\n")
        with pytest.raises(error, match=rf"huge.toml: the {what} file is larger than {_toml.MAX_FILE_BYTES} bytes"):
            load(path)

    @pytest.mark.parametrize(("load", "error", "what"), LOADERS)
    def test_not_utf8(self, tmp_path, load, error, what):
        """Bytes that are not UTF-8 are refused, naming the file."""
        path = tmp_path / "binary.toml"
        path.write_bytes(b"\xff\xfe\x00garbage")
        with pytest.raises(error, match=rf"binary.toml: cannot read the {what} file"):
            load(path)

    @pytest.mark.parametrize(("load", "error", "what"), LOADERS)
    def test_missing(self, tmp_path, load, error, what):
        """A file that is not there is refused, naming it."""
        with pytest.raises(error, match=rf"absent.toml: cannot read the {what} file"):
            load(tmp_path / "absent.toml")

    @pytest.mark.parametrize(("load", "error", "what"), LOADERS)
    def test_not_toml(self, tmp_path, load, error, what):
        """Text that is not TOML is refused with the parser's position."""
        path = tmp_path / "broken.toml"
        path.write_text("[[stream\n")
        with pytest.raises(error, match=r"broken.toml: not valid TOML: .*line 1"):
            load(path)
