"""retain.streams.policyfile: the TOML policy file, good and bad (no server needed)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from retain.errors import InvalidPolicy
from retain.streams import Policy, PolicyFile, RawKey, StreamPolicy, StreamRef, load_policy, parse_policy
from retain.windows import MaxAge, MaxLen, MinId

DOCS = Path(__file__).resolve().parents[2] / "docs" / "policy.md"
ONE = '[[stream]]\nqueue = "q"\nname = "s"\nmaxlen = 10\n'


class TestParse:
    def test_the_documented_example(self):
        """The example in docs/policy.md parses to what the page says it means."""
        text = re.search(r"```toml\n(.*?)```", DOCS.read_text(), re.S).group(1)
        parsed = parse_policy(text, "retain.toml")
        assert parsed == PolicyFile(source="retain.toml", tick=1.0, url="redis://127.0.0.1:6379/0", policy=Policy([
            StreamPolicy(StreamRef("codemojex", "activity"), MaxLen(10_000)),
            StreamPolicy(StreamRef("codemojex", "rounds"), MaxAge("7d", approx=False)),
            StreamPolicy(RawKey("legacy:feed"), MinId(datetime(2026, 9, 1, tzinfo=timezone.utc))),
        ]))

    def test_defaults(self):
        """Only the streams are required: tick 1s, no url, not a cluster, prefix emq, ~."""
        parsed = parse_policy(ONE)
        assert (parsed.tick, parsed.url, parsed.cluster, parsed.source) == (1.0, None, False, "<string>")
        assert parsed.policy.entries == (StreamPolicy(StreamRef("q", "s"), MaxLen(10)),)

    @pytest.mark.parametrize(("tick", "seconds"), [("0.25", 0.25), ("2", 2.0), ('"5s"', 5.0), ('"1m30s"', 90.0)])
    def test_tick(self, tick, seconds):
        """tick is seconds, or a duration string."""
        assert parse_policy(f"tick = {tick}\n{ONE}").tick == seconds

    def test_prefixes_and_options(self):
        """The top-level prefix applies unless a stream names its own; approx=false, cluster=true, min_id strings."""
        parsed = parse_policy('prefix = "app"\ncluster = true\n'
                              '[[stream]]\nqueue = "q"\nname = "a"\nmaxlen = 1\napprox = false\n'
                              '[[stream]]\nqueue = "q"\nname = "b"\nprefix = "old"\nmin_id = "2026-09-12T10:00:00+02:00"\n')
        assert parsed.cluster is True
        assert [entry.key for entry in parsed.policy] == ["app:{q}:stream:a", "old:{q}:stream:b"]
        assert parsed.policy.entries[0].window == MaxLen(1, approx=False)
        assert parsed.policy.entries[1].window == MinId(datetime(2026, 9, 12, 8, tzinfo=timezone.utc))
        assert parsed.policy.entries[1].window.instant.utcoffset() == timedelta(hours=2)


class TestRefusals:
    """A bad file is refused before anything connects, naming the file, the entry and the field."""

    @pytest.mark.parametrize(("text", "message"), [
        ("", "p.toml: declares no streams"),
        ("stream = 3", "p.toml: declares no streams"),
        ("url = ", "p.toml: not valid TOML"),
        ("tik = 1\n" + ONE, "p.toml: unknown field 'tik': expected one of url, cluster, tick, prefix, stream"),
        ("tick = 0\n" + ONE, "p.toml: field 'tick': must be a positive number of seconds"),
        ("tick = -1.5\n" + ONE, "field 'tick': must be a positive"),
        ("tick = true\n" + ONE, "field 'tick': must be a positive"),
        ("tick = nan\n" + ONE, "field 'tick': must be a positive"),
        ('tick = "1.5s"\n' + ONE, "field 'tick': invalid duration '1.5s'"),
        ('url = "http://x"\n' + ONE, "p.toml: field 'url': must start with redis://"),
        ("url = 6379\n" + ONE, "field 'url': must be a string"),
        ('cluster = "yes"\n' + ONE, "field 'cluster': must be true or false"),
        ('prefix = "a b"\n' + ONE, "p.toml: field 'prefix': prefix 'a b' contains ' '"),
        ('[[stream]]\nqueue = "q"\nname = "s"\nmax_len = 1',
         "p.toml: [[stream]] #1 (queue 'q', name 's'): unknown field 'max_len'"),
        (ONE + '[[stream]]\nqueue = "q"\nname = "t"\nmaxlen = -1',
         "p.toml: [[stream]] #2 (queue 'q', name 't'): field 'maxlen': MaxLen count must be >= 0 (got -1)"),
        (ONE + '[[stream]]\nqueue = "q"\nname = "t"\nmaxlen = 1.5', "[[stream]] #2 (queue 'q', name 't'): field 'maxlen'"),
        ('[[stream]]\nqueue = "q"\nname = "a b"\nmaxlen = 1', "[[stream]] #1 (queue 'q', name 'a b'): field 'name': "
                                                             "stream name 'a b' contains ' '"),
        ('[[stream]]\nqueue = "q{x}"\nname = "s"\nmaxlen = 1', "field 'queue': queue 'q{x}' contains '{'"),
        ('[[stream]]\nqueue = "q"\nname = "s"\nprefix = 7\nmaxlen = 1', "field 'prefix': must be a string"),
        ('[[stream]]\nqueue = "q"\nmaxlen = 1', "[[stream]] #1 (queue 'q'): field 'name': missing"),
        ("[[stream]]\nmaxlen = 1", "[[stream]] #1 (unnamed): field 'queue': missing"),
        ('[[stream]]\nkey = "k"\nqueue = "q"\nmaxlen = 1', "[[stream]] #1 (key 'k'): field 'queue': give key, or queue"),
        ('[[stream]]\nkey = "a b"\nmaxlen = 1', "[[stream]] #1 (key 'a b'): field 'key': raw stream key 'a b' contains"),
        ('[[stream]]\nkey = "k"', "[[stream]] #1 (key 'k'): give exactly one of maxlen, max_age, min_id (got none)"),
        ('[[stream]]\nkey = "k"\nmaxlen = 1\nmax_age = "1d"', "give exactly one of maxlen, max_age, min_id (got maxlen, max_age)"),
        ('[[stream]]\nkey = "k"\nmax_age = 3600', "field 'max_age': must be a duration string"),
        ('[[stream]]\nkey = "k"\nmax_age = "1x"', "field 'max_age': unknown unit 'x'"),
        ('[[stream]]\nkey = "k"\nmin_id = 2026-09-12T08:00:00', "field 'min_id': 2026-09-12T08:00:00 has no offset"),
        ('[[stream]]\nkey = "k"\nmin_id = 2026-09-12', "field 'min_id': must be a time with an offset"),
        ('[[stream]]\nkey = "k"\nmin_id = "yesterday"', "field 'min_id': 'yesterday' is not a time"),
        ('[[stream]]\nkey = "k"\nmin_id = 1969-12-31T00:00:00Z', "field 'min_id': a MINID instant must not precede 1970"),
        ('[[stream]]\nkey = "k"\nmaxlen = 1\napprox = 1', "field 'approx': must be true or false"),
        ('[[stream]]\nkey = "k"\nmaxlen = 1\narchive = true', "field 'archive': archiving arrives with retain.archive"),
        ('[[stream]]\nkey = "emq:{q}:stream:s"\nmaxlen = 1\n' + ONE,
         "[[stream]] #2 (queue 'q', name 's'): repeats the stream of [[stream]] #1: one window per stream"),
    ])
    def test_refused(self, text, message):
        """Each mistake is refused with InvalidPolicy (a ValueError) saying where and what."""
        with pytest.raises(InvalidPolicy) as info:
            parse_policy(text, "p.toml")
        assert message in str(info.value)
        assert str(info.value).count("p.toml") == 1, "the location is said once"


class TestLoad:
    def test_reads_a_file(self, tmp_path):
        """load_policy reads a file and names it as the source."""
        path = tmp_path / "retain.toml"
        path.write_text(ONE)
        assert load_policy(path).source == str(path)
        assert load_policy(str(path)).policy.entries[0].key == "emq:{q}:stream:s"

    def test_missing_file(self, tmp_path):
        """A file that cannot be read is refused, naming it."""
        with pytest.raises(InvalidPolicy, match="absent.toml: cannot read the policy file"):
            load_policy(tmp_path / "absent.toml")

    def test_not_utf8(self, tmp_path):
        """Bytes that are not UTF-8 are refused, naming the file."""
        path = tmp_path / "latin.toml"
        path.write_bytes(b'[[stream]]\nkey = "caf\xe9"\nmaxlen = 1\n')
        with pytest.raises(InvalidPolicy, match="latin.toml: cannot read"):
            load_policy(path)
