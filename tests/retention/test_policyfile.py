"""retain.retention.policyfile: the TOML policy file, good and bad (no server needed)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from retain.archive import Archive, MaintenanceSettings
from retain.errors import InvalidPolicy
from retain.retention import ArchiveSettings, Policy, PolicyFile, Replicas, StreamPolicy, load_policy, parse_policy
from retain.streams import RawKey, StreamRef
from retain.windows import Limits, MaxAge, MaxBytes, MaxLen, MinId

DOCS = Path(__file__).resolve().parents[2] / "docs" / "policy.md"
ONE = '[[stream]]\nqueue = "q"\nname = "s"\nmaxlen = 10\n'


class TestParse:
    def test_the_documented_example(self):
        """The example in docs/policy.md parses to what the page says it means."""
        text = re.findall(r"```toml\n(.*?)```", DOCS.read_text(), re.S)[0]
        parsed = parse_policy(text, "retain.toml")
        assert parsed == PolicyFile(source="retain.toml", tick=1.0, url="redis://127.0.0.1:6379/0", policy=Policy([
            StreamPolicy(StreamRef("codemojex", "activity"), MaxLen(10_000)),
            StreamPolicy(StreamRef("codemojex", "rounds"), MaxAge("7d", approx=False)),
            StreamPolicy(RawKey("legacy:feed"), MinId(datetime(2026, 9, 1, tzinfo=UTC))),
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
        assert parsed.policy.entries[1].window == MinId(datetime(2026, 9, 12, 8, tzinfo=UTC))
        assert parsed.policy.entries[1].window.instant.utcoffset() == timedelta(hours=2)

    def test_combined_limits_and_bytes(self):
        """maxlen, max_age and max_bytes in one [[stream]] make one Limits, in the file's field order; a
        max_bytes alone is a MaxBytes with its bytes_samples."""
        parsed = parse_policy('[[stream]]\nkey = "a"\nmaxlen = 100\nmax_age = "7d"\nmax_bytes = "64MiB"\n'
                              '[[stream]]\nkey = "b"\nmax_bytes = 4096\nbytes_samples = 5\napprox = false\n')
        assert parsed.policy.entries[0].window == Limits(MaxLen(100), MaxAge("7d"), MaxBytes(64 << 20))
        assert parsed.policy.entries[1].window == MaxBytes(4096, samples=5, approx=False)


class TestReplicas:
    def test_the_replicas_table(self):
        """[replicas] gives the shards, the lease, the name, the group; absent, sharing is on with the defaults."""
        parsed = parse_policy(ONE + '[replicas]\nshards = 16\nlease = "5s"\nname = "host-a"\ngroup = "orders"\n',
                              "p.toml")
        assert parsed.replicas == Replicas(shards=16, lease=5.0, name="host-a", group="orders")
        assert parse_policy(ONE).replicas == Replicas()
        assert not parse_policy(ONE + "[replicas]\nenabled = false\n").replicas.enabled

    @pytest.mark.parametrize(("text", "message"), [
        ("[replicas]\nshards = 0\n", "p.toml: [replicas]: field 'shards': must be a whole number >= 1 (got 0)"),
        ('[replicas]\nlease = "1s"\n', "p.toml: [replicas] lease must be at least twice the tick (1 s < 2 x 1 s)"),
        ('[replicas]\nname = "a b"\n', "p.toml: [replicas] name must be 1 to 64 letters"),
        ("[replicas]\nlaese = 3\n", "p.toml: [replicas]: unknown field 'laese': expected one of enabled, shards, "
                                    "lease, name, group"),
        ("replicas = 3\n", "p.toml: field 'replicas': must be a [replicas] table (got 3)"),
    ])
    def test_refusals(self, text, message):
        with pytest.raises(InvalidPolicy) as info:
            parse_policy(ONE + text if text.startswith("[") else text + ONE, "p.toml")
        assert message in str(info.value)


class TestRefusals:
    """A bad file is refused before anything connects, naming the file, the entry and the field."""

    @pytest.mark.parametrize(("text", "message"), [
        ("", "p.toml: declares no streams"),
        ("stream = 3", "p.toml: declares no streams"),
        ("url = ", "p.toml: not valid TOML"),
        ("tik = 1\n" + ONE, "p.toml: unknown field 'tik': expected one of url, cluster, tick, prefix, archive, replicas, stream"),
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
         "p.toml: [[stream]] #2 (queue 'q', name 't'): field 'maxlen': MaxLen count: must be a whole number >= 0 (got -1)"),
        (ONE + '[[stream]]\nqueue = "q"\nname = "t"\nmaxlen = 1.5', "[[stream]] #2 (queue 'q', name 't'): field 'maxlen'"),
        ('[[stream]]\nqueue = "q"\nname = "a b"\nmaxlen = 1', "[[stream]] #1 (queue 'q', name 'a b'): field 'name': "
                                                             "stream name 'a b' contains ' '"),
        ('[[stream]]\nqueue = "q{x}"\nname = "s"\nmaxlen = 1', "field 'queue': queue 'q{x}' contains '{'"),
        ('[[stream]]\nqueue = "q"\nname = "s"\nprefix = 7\nmaxlen = 1', "field 'prefix': must be a string"),
        ('[[stream]]\nqueue = "q"\nmaxlen = 1', "[[stream]] #1 (queue 'q'): field 'name': missing"),
        ("[[stream]]\nmaxlen = 1", "[[stream]] #1 (unnamed): field 'queue': missing"),
        ('[[stream]]\nkey = "k"\nqueue = "q"\nmaxlen = 1', "[[stream]] #1 (key 'k'): field 'queue': give key, or queue"),
        ('[[stream]]\nkey = "a b"\nmaxlen = 1', "[[stream]] #1 (key 'a b'): field 'key': raw stream key 'a b' contains"),
        ('[[stream]]\nkey = "k"', "[[stream]] #1 (key 'k'): give at least one of maxlen, max_age, min_id, max_bytes (got none)"),
        ('[[stream]]\nkey = "k"\nmaxlen = 1\nbytes_samples = 5', "field 'bytes_samples': applies with max_bytes only"),
        ('[[stream]]\nkey = "k"\nmax_bytes = "64MB"', "field 'max_bytes': a size must be a whole number and a unit of B, KiB, MiB, GiB, such as '64MiB' (got '64MB')"),
        ('[[stream]]\nkey = "k"\nmax_bytes = 1.5', "field 'max_bytes': must be a size such as '64MiB'"),
        ('[[stream]]\nkey = "k"\nmax_bytes = 0', "field 'max_bytes': MaxBytes budget: must be a whole number >= 1 (got 0)"),
        ('[[stream]]\nkey = "k"\nmax_age = 3600', "field 'max_age': must be a duration string"),
        ('[[stream]]\nkey = "k"\nmax_age = "1x"', "field 'max_age': unknown unit 'x'"),
        ('[[stream]]\nkey = "k"\nmin_id = 2026-09-12T08:00:00', "field 'min_id': 2026-09-12T08:00:00 has no offset"),
        ('[[stream]]\nkey = "k"\nmin_id = 2026-09-12', "field 'min_id': must be a time with an offset"),
        ('[[stream]]\nkey = "k"\nmin_id = "yesterday"', "field 'min_id': 'yesterday' is not a time"),
        ('[[stream]]\nkey = "k"\nmin_id = 1969-12-31T00:00:00Z', "field 'min_id': a MINID instant must not precede 1970"),
        ('[[stream]]\nkey = "k"\nmaxlen = 1\napprox = 1', "field 'approx': must be true or false"),
        ('[[stream]]\nkey = "k"\nmaxlen = 1\narchive = "yes"', "[[stream]] #1 (key 'k'): field 'archive': must be true "
                                                              "or false (got 'yes')"),
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


ARCHIVED = '[[stream]]\nqueue = "q"\nname = "s"\nmaxlen = 10\narchive = true\n'


class TestArchive:
    def test_the_documented_example(self):
        """The archiving example in docs/policy.md parses to what the page says it means."""
        text = re.findall(r"```toml\n(.*?)```", DOCS.read_text(), re.S)[1]
        parsed = parse_policy(text, "retain.toml")
        assert parsed.archive == ArchiveSettings("s3://logs/retain", {"endpoint": "http://127.0.0.1:8333",
                                                                      "region": "us-east-1"}, min_entries=1000,
                                                 maintain_every=timedelta(minutes=5), max_age=timedelta(days=400),
                                                 max_age_by={"emq:{codemojex}:stream:activity": timedelta(days=90)})
        assert parsed.policy.entries == (
            StreamPolicy(StreamRef("codemojex", "activity"), MaxLen(10_000), archive=True),
            StreamPolicy(StreamRef("codemojex", "presence"), MaxAge("1h")),
        )
        assert parsed.fold_min_entries == 1000

    def test_url_form(self, tmp_path):
        """archive = "<url>" names the archive; archive = true entries fold into it; open_archive opens it."""
        plain = '[[stream]]\nqueue = "q"\nname = "t"\nmaxlen = 10\n'
        parsed = parse_policy(f'archive = "file://{tmp_path}/a"\n{ARCHIVED}{plain}')
        assert parsed.archive == ArchiveSettings(f"file://{tmp_path}/a")
        assert [entry.archive for entry in parsed.policy] == [True, False]
        assert parsed.fold_min_entries == 1
        archive = parsed.open_archive()
        assert isinstance(archive, Archive) and (tmp_path / "a").is_dir()
        assert parse_policy(ONE).open_archive() is None

    def test_deadline(self):
        """[archive] deadline is the driver's archive_deadline: seconds or a duration; 10 s when absent."""
        parsed = parse_policy('[archive]\nurl = "/tmp/never-opened"\ndeadline = "3s"\n' + ARCHIVED)
        assert parsed.archive is not None and parsed.archive.deadline == 3.0
        assert parsed.archive_deadline == 3.0
        assert parse_policy('archive = "/tmp/never-opened"\n' + ARCHIVED).archive_deadline == 10.0
        with pytest.raises(InvalidPolicy, match=r"\[archive\]: field 'deadline': must be a positive number of "
                                                r"seconds such as 10, or a duration such as '10s' \(got 0\)"):
            parse_policy('[archive]\nurl = "/tmp/never-opened"\ndeadline = 0\n' + ARCHIVED)

    def test_table_form_hides_credentials(self):
        """An [archive] table takes the s3 options and min_entries; its repr never shows a credential."""
        parsed = parse_policy('[archive]\nurl = "s3://b/p"\naccess_key_id = "AKIA"\nsecret_access_key = "hush"\n'
                              'session_token = "tok"\nallow_http = true\nmin_entries = 5\n' + ARCHIVED)
        assert dict(parsed.archive.options) == {"access_key_id": "AKIA", "secret_access_key": "hush",
                                                "session_token": "tok", "allow_http": True}
        assert "hush" not in repr(parsed) and "AKIA" not in repr(parsed)

    @pytest.mark.parametrize(("text", "message"), [
        (ARCHIVED, "p.toml: [[stream]] #1 (queue 'q', name 's'): field 'archive': true needs an archive to fold "
                   'into: add archive = "file:///var/lib/retain" (or an [archive] table) at the top of the file'),
        ('archive = "/var/lib/retain"\n' + ONE, "p.toml: field 'archive': no [[stream]] sets archive = true, so "
                                                 "nothing would be folded"),
        ('archive = "memory://"\n' + ARCHIVED, "p.toml: field 'archive': memory:// is lost when the daemon stops"),
        ('archive = "ftp://x/y"\n' + ARCHIVED, "p.toml: field 'archive': must be a directory, file:///path or "
                                                "s3://bucket/prefix (got 'ftp://x/y')"),
        ('archive = ""\n' + ARCHIVED, "p.toml: field 'archive': must be an archive URL"),
        ("archive = true\n" + ARCHIVED, "p.toml: field 'archive': must be an archive URL such as "
                                        "'file:///var/lib/retain', or an [archive] table (got True)"),
        ('[archive]\nregion = "x"\n' + ARCHIVED, "p.toml: [archive]: field 'url': must be an archive URL"),
        ('[archive]\nurl = "s3://b"\nendpont = "x"\n' + ARCHIVED,
         "p.toml: [archive]: unknown field 'endpont': expected one of url, endpoint, region"),
        ('[archive]\nurl = "/data"\nregion = "eu"\n' + ARCHIVED,
         "p.toml: [archive]: field 'region': applies to s3:// archives only (the url is '/data')"),
        ('[archive]\nurl = "s3://b"\nendpoint = 8333\n' + ARCHIVED,
         "p.toml: [archive]: field 'endpoint': must be a string"),
        ('[archive]\nurl = "s3://b"\nallow_http = "yes"\n' + ARCHIVED,
         "p.toml: [archive]: field 'allow_http': must be true or false"),
        ('[archive]\nurl = "s3://b"\nmin_entries = 0\n' + ARCHIVED,
         "p.toml: [archive]: field 'min_entries': must be a whole number >= 1 (got 0)"),
        ('[archive]\nurl = "s3://b"\nmin_entries = 1.5\n' + ARCHIVED, "field 'min_entries': must be a whole number"),
    ])
    def test_refused(self, text, message):
        """Each mistake is refused before anything connects, naming the file, the entry or [archive], and the field."""
        with pytest.raises(InvalidPolicy) as info:
            parse_policy(text, "p.toml")
        assert message in str(info.value)
        assert str(info.value).count("p.toml") == 1, "the location is said once"

    def test_maintenance(self):
        """[archive] says how the archive is maintained; a stream may set its own archive_max_age."""
        parsed = parse_policy('[archive]\nurl = "/data"\nmaintain_every = "5m"\nmax_age = "400d"\n'
                              'log_retention = "20m"\nvacuum_retention = "2m"\ntarget_file_entries = 50000\n'
                              + ARCHIVED + 'archive_max_age = "30d"\n' + ONE.replace('"s"', '"t"'))
        settings = parsed.maintenance()
        assert (settings.every, settings.max_age, settings.log_retention, settings.vacuum_retention,
                settings.target_file_entries) == (timedelta(minutes=5), timedelta(days=400), timedelta(minutes=20),
                                                  timedelta(minutes=2), 50_000)
        assert dict(settings.max_age_by) == {"emq:{q}:stream:s": timedelta(days=30)}
        assert settings.max_age_of("emq:{q}:stream:t") == timedelta(days=400)
        never = parse_policy('[archive]\nurl = "/data"\nmaintain_every = false\n' + ARCHIVED).maintenance()
        assert never.every is None
        assert parse_policy('archive = "/data"\n' + ARCHIVED).maintenance() == MaintenanceSettings()
        assert parse_policy(ONE).maintenance() is None

    @pytest.mark.parametrize(("text", "message"), [
        ('[archive]\nurl = "/d"\nmax_age = "forever"\n' + ARCHIVED, "[archive]: field 'max_age': "),
        ('[archive]\nurl = "/d"\nmaintain_every = true\n' + ARCHIVED, "[archive]: field 'maintain_every': "),
        ('[archive]\nurl = "/d"\ntarget_file_entries = 0\n' + ARCHIVED,
         "[archive]: field 'target_file_entries': must be a whole number >= 1 (got 0)"),
        ('archive = "/d"\n' + ARCHIVED + ONE.replace('"s"', '"t"') + 'archive_max_age = "7d"\n',
         "[[stream]] #2 (queue 'q', name 't'): field 'archive_max_age': applies to a stream with archive = true"),
        ('archive = "/d"\n' + ARCHIVED + 'archive_max_age = 7\n', "field 'archive_max_age': "),
    ])
    def test_maintenance_refused(self, text, message):
        """A maintenance setting that cannot hold is refused, naming the file, the table or entry and the field."""
        with pytest.raises(InvalidPolicy) as info:
            parse_policy(text, "p.toml")
        assert message in str(info.value) and str(info.value).startswith("p.toml: ")

    @pytest.mark.parametrize(("url", "message"), [
        ("s3:///prefix", "an s3 URL names a bucket"),
        ("file://host/data", "a file URL needs an absolute path"),
    ])
    def test_refused_on_opening(self, url, message):
        """What only the store can judge is refused when the archive is opened, still naming file and field."""
        parsed = parse_policy(f'archive = "{url}"\n{ARCHIVED}', "p.toml")
        with pytest.raises(InvalidPolicy, match=f"p.toml: field 'archive': .*{message}"):
            parsed.open_archive()


class TestNeverWorks:
    """Issue 13, findings 6 and 8: what passed validation and then failed every beat is refused at parse time."""

    @pytest.mark.parametrize("key", [".", ".."])
    def test_dot_keys_are_not_archived(self, tmp_path, key):
        """A raw key '.' or '..' with archive = true is refused, naming the entry and the field."""
        text = f'archive = "{tmp_path}/a"\n[[stream]]\nkey = "{key}"\nmaxlen = 5\narchive = true\n'
        with pytest.raises(InvalidPolicy, match=rf"\[\[stream\]\] #1 \(key '{re.escape(key)}'\): field 'key': "
                                                r"stream key .* cannot be archived: .* no object-store path segment"):
            parse_policy(text)
        assert parse_policy(f'[[stream]]\nkey = "{key}"\nmaxlen = 5\n').policy.entries[0].key == key  # plain: fine
        with pytest.raises(InvalidPolicy, match="cannot be archived"):
            StreamPolicy(RawKey(key), MaxLen(5), archive=True)

    @pytest.mark.parametrize("field", ["maxlen"])
    def test_counts_above_2_63(self, field):
        """maxlen = 2^70 is refused (it passed, then XTRIM refused it every beat); 2^63-1 is the largest."""
        with pytest.raises(InvalidPolicy, match=r"field 'maxlen': MaxLen count: must be at most 2\^63-1 = "
                                                r"9223372036854775807, the largest count Redis takes "
                                                r"\(got 1180591620717411303424\)"):
            parse_policy(f'[[stream]]\nqueue = "q"\nname = "s"\n{field} = {2**70}\n')
        assert parse_policy(f'[[stream]]\nqueue = "q"\nname = "s"\n{field} = {2**63 - 1}\n').policy.entries[0] \
            .window == MaxLen(2**63 - 1)

    def test_archive_counts_above_2_63(self, tmp_path):
        with pytest.raises(InvalidPolicy, match=r"\[archive\]: field 'min_entries': must be at most 2\^63-1"):
            parse_policy(f'[archive]\nurl = "{tmp_path}/a"\nmin_entries = {2**64}\n' + ARCHIVED)

    def test_future_min_id(self):
        """A min_id in the future would empty the stream every beat: refused unless allow_future = true."""
        text = '[[stream]]\nqueue = "q"\nname = "s"\nmin_id = 2999-01-01T00:00:00Z\n'
        with pytest.raises(InvalidPolicy, match=r"field 'min_id': 2999-01-01T00:00:00\+00:00 is in the future, so "
                                                r"every beat would empty the stream until then: .* allow_future = true"):
            parse_policy(text)
        allowed = parse_policy(text + "allow_future = true\n").policy.entries[0].window
        assert allowed == MinId(datetime(2999, 1, 1, tzinfo=UTC))
        with pytest.raises(InvalidPolicy, match="field 'allow_future': applies to a min_id window only"):
            parse_policy(ONE + "allow_future = true\n")

    def test_repr_hides_the_redis_password(self):
        """repr(PolicyFile) shows the URL with the password written ***; a refused URL too."""
        parsed = parse_policy('url = "redis://user:hunter2@127.0.0.1:7000/0"\n' + ONE)
        assert "hunter2" not in repr(parsed) and "redis://user:***@127.0.0.1:7000/0" in repr(parsed)
        assert parsed.url == "redis://user:hunter2@127.0.0.1:7000/0"  # the driver still gets it
        with pytest.raises(InvalidPolicy) as refused:
            parse_policy('url = "http://:hunter2@127.0.0.1:7000/0"\n' + ONE)
        assert "hunter2" not in str(refused.value) and "http://:***@127.0.0.1:7000/0" in str(refused.value)


class TestCheckPolicy:
    def test_a_good_file_has_no_problems(self):
        """check_policy of a good file is empty."""
        from retain.retention import check_policy

        assert check_policy('[[stream]]\nqueue = "q"\nname = "s"\nmaxlen = 10\n', "p.toml") == ()

    def test_one_bad_entry_does_not_hide_the_next(self):
        """Two bad entries and a bad top-level field: three problems, in file order, each worded as the loader."""
        from retain.errors import InvalidPolicy
        from retain.retention import check_policy, parse_policy

        text = ('cluster = "yes"\n[[stream]]\nqueue = "q"\nname = "s"\nmaxlen = -1\n'
                '[[stream]]\nkey = "k"\nmax_len = 3\n')
        problems = check_policy(text, "p.toml")
        assert len(problems) == 3 and "field 'cluster'" in problems[0]
        assert problems[1].startswith("p.toml: [[stream]] #1") and problems[2].startswith("p.toml: [[stream]] #2")
        with pytest.raises(InvalidPolicy) as refused:
            parse_policy(text, "p.toml")
        assert str(refused.value) in problems

    def test_cross_entry_problems_once_the_entries_are_good(self):
        """archive = true without an archive is found once each entry is good on its own; so is TOML that does
        not parse, alone."""
        from retain.retention import check_policy

        assert "needs an archive" in check_policy('[[stream]]\nkey = "k"\nmaxlen = 1\narchive = true\n')[0]
        assert check_policy("x = [")[0].startswith("<string>: not valid TOML")
