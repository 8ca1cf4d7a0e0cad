"""retain.retention.policy: policy entries and the pure decision of a beat (no server needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retain.errors import InvalidPolicy, InvalidWindow
from retain.retention import Policy, StreamPolicy, TrimCall, decide
from retain.retention.policy import checked_archive
from retain.streams import RawKey, StreamRef
from retain.windows import MaxAge, MaxLen, MinId, minid_floor
from tests.strategies import aware_instants, whole_second_durations

UTC = UTC
NOW = datetime(2026, 9, 12, 8, 0, tzinfo=UTC)
FEED = StreamRef("codemojex", "activity")
LEGACY = RawKey("legacy:feed")


def ms(instant: datetime) -> str:
    return minid_floor(instant)


class TestStreamPolicy:
    def test_named_entry(self):
        """A StreamPolicy is a frozen stream + window, archive off by default."""
        entry = StreamPolicy(FEED, MaxLen(10))
        assert (entry.stream, entry.window, entry.archive, entry.key) == (FEED, MaxLen(10), False,
                                                                         "emq:{codemojex}:stream:activity")
        with pytest.raises(AttributeError):
            entry.window = MaxLen(1)  # type: ignore[misc]

    @pytest.mark.parametrize(("stream", "window", "message"), [
        ("emq:{q}:stream:s", MaxLen(1), "stream must be a StreamRef or RawKey"),
        (FEED, ("maxlen", 1, True), "window must be MaxLen, MinId, MaxAge, MaxBytes or Limits"),
        (FEED, 10, "window must be MaxLen, MinId, MaxAge, MaxBytes or Limits"),
    ])
    def test_refuses_what_is_not_a_stream_or_window(self, stream, window, message):
        """A raw string key or a tuple window is refused, saying what arrived."""
        with pytest.raises(InvalidPolicy, match=message):
            StreamPolicy(stream, window)

    def test_archive_opts_in(self):
        """archive=True is an entry's opt-in to fold before trim; anything but a bool is refused."""
        assert StreamPolicy(FEED, MaxAge("1d"), archive=True).archive is True
        with pytest.raises(InvalidPolicy, match="archive must be True or False"):
            StreamPolicy(FEED, MaxLen(1), archive="yes")  # type: ignore[arg-type]


class TestPolicy:
    def test_pairs_and_entries_mix(self):
        """Plain (stream, window) pairs and StreamPolicy entries normalise to StreamPolicy, in order."""
        policy = Policy([(FEED, MaxLen(10)), StreamPolicy(LEGACY, MaxAge("1h"))])
        assert policy.entries == (StreamPolicy(FEED, MaxLen(10)), StreamPolicy(LEGACY, MaxAge("1h")))
        assert len(policy) == 2 and list(policy) == list(policy.entries)

    def test_of_keeps_a_policy(self):
        """Policy.of returns a Policy as it is and validates anything else."""
        policy = Policy([(FEED, MaxLen(10))])
        assert Policy.of(policy) is policy
        assert Policy.of([(FEED, MaxLen(10))]) == policy

    def test_one_window_per_stream(self):
        """Two entries for one key (however addressed) are refused, naming both entries."""
        with pytest.raises(InvalidPolicy, match=r"entry #3 repeats stream 'emq:\{codemojex\}:stream:activity' of entry #1"):
            Policy([(FEED, MaxLen(10)), (LEGACY, MaxLen(1)), (RawKey(FEED.key), MaxAge("1d"))])

    @pytest.mark.parametrize(("policy", "message"), [
        ("emq:{q}:stream:s", "a policy is a list"),
        (StreamPolicy(FEED, MaxLen(1)), "a policy is a list"),
        (42, "a policy is a list"),
        ([(FEED,)], r"entry #1 must be a \(stream, window\) pair"),
        ([(FEED, MaxLen(1)), [FEED, MaxLen(1)]], r"entry #2 must be a \(stream, window\) pair"),
        ([(FEED, MaxLen(1)), ("q", MaxLen(1))], "entry #2: a policy entry's stream must be"),
    ])
    def test_refuses_malformed(self, policy, message):
        """A malformed policy is refused, naming the entry by position."""
        with pytest.raises(InvalidPolicy, match=message):
            Policy(policy)

    def test_archived_entries(self):
        """Policy.archived holds the entries that opt in to archiving, in policy order."""
        entries = [StreamPolicy(FEED, MaxLen(10), archive=True), (LEGACY, MaxLen(1)),
                   StreamPolicy(RawKey("b"), MaxAge("1d"), archive=True)]
        policy = Policy(entries)
        assert policy.archived == (entries[0], entries[2])
        assert Policy([(FEED, MaxLen(1))]).archived == ()

    def test_an_archived_entry_needs_an_archive(self):
        """checked_archive refuses a policy that archives with no archive, naming the entry; or a non-archive."""
        policy = Policy([(LEGACY, MaxLen(1)), StreamPolicy(FEED, MaxLen(10), archive=True)])
        with pytest.raises(InvalidPolicy, match=r"policy entry #2 \(emq:\{codemojex\}:stream:activity\) has "
                                                r"archive=True, but no archive was given to fold into: pass archive="):
            checked_archive(policy, None)
        with pytest.raises(InvalidPolicy, match="archive must be a retain.archive.Archive"):
            checked_archive(policy, "file:///var/lib/retain")
        assert checked_archive(Policy([(LEGACY, MaxLen(1))]), None) is None

    def test_invalid_policy_is_a_value_error(self):
        """InvalidPolicy reads naturally to code that catches ValueError."""
        with pytest.raises(ValueError):
            Policy([(FEED, MaxLen(1)), (FEED, MaxLen(2))])


class TestDecide:
    @pytest.mark.parametrize(("stream", "window", "command"), [
        (FEED, MaxLen(10_000), ("XTRIM", "emq:{codemojex}:stream:activity", "MAXLEN", "~", "10000", "LIMIT", "0")),
        (FEED, MaxLen(0, approx=False), ("XTRIM", "emq:{codemojex}:stream:activity", "MAXLEN", "=", "0")),
        (LEGACY, MinId(NOW), ("XTRIM", "legacy:feed", "MINID", "~", ms(NOW), "LIMIT", "0")),
        (LEGACY, MinId(NOW, approx=False), ("XTRIM", "legacy:feed", "MINID", "=", ms(NOW))),
        (LEGACY, MaxAge("7d"), ("XTRIM", "legacy:feed", "MINID", "~", ms(NOW - timedelta(days=7)), "LIMIT", "0")),
        (LEGACY, MaxAge("90m", approx=False), ("XTRIM", "legacy:feed", "MINID", "=", ms(NOW - timedelta(minutes=90)))),
    ])
    def test_table(self, stream, window, command):
        """Each window becomes one XTRIM; ~ carries LIMIT 0 so a beat is never capped by the server."""
        (call,) = decide([(stream, window)], NOW)
        assert call == TrimCall(StreamPolicy(stream, window), call.window, command)
        assert call.key == stream.key

    @pytest.mark.parametrize(("now", "floor"), [
        (NOW, NOW - timedelta(hours=1)),
        (NOW + timedelta(milliseconds=1), NOW - timedelta(hours=1) + timedelta(milliseconds=1)),
        (datetime(2026, 9, 12, 10, 0, tzinfo=timezone(timedelta(hours=2))), NOW - timedelta(hours=1)),
        (datetime(1970, 1, 1, 1, 0, tzinfo=UTC), datetime(1970, 1, 1, tzinfo=UTC)),
    ])
    def test_age_window_against_the_injected_clock(self, now, floor):
        """MaxAge resolves to MinId(now - age): the floor follows the clock given, in any offset."""
        (call,) = decide([(FEED, MaxAge("1h", approx=False))], now)
        assert call.window == MinId(now - timedelta(hours=1), approx=False)
        assert call.command[-1] == ms(floor)

    def test_only_age_windows_move_with_the_clock(self):
        """Two instants give the same length and fixed-instant calls; the age call's floor moves."""
        policy = Policy([(FEED, MaxLen(5)), (LEGACY, MinId(NOW)), (RawKey("aged"), MaxAge("1d"))])
        first, later = decide(policy, NOW), decide(policy, NOW + timedelta(seconds=30))
        assert first[:2] == later[:2]
        assert int(later[2].command[4].split("-")[0]) - int(first[2].command[4].split("-")[0]) == 30_000

    def test_archived_entries_get_no_plain_trim(self):
        """decide leaves archived entries out: a plain XTRIM could remove what is not archived yet."""
        policy = Policy([StreamPolicy(FEED, MaxLen(10), archive=True), (LEGACY, MaxLen(5)),
                         StreamPolicy(RawKey("aged"), MaxAge("1d"), archive=True)])
        assert [call.key for call in decide(policy, NOW)] == ["legacy:feed"]

    def test_nothing_to_do(self):
        """An empty policy decides no calls."""
        assert decide([], NOW) == ()
        assert decide(Policy(), NOW) == ()

    @pytest.mark.parametrize("now", [datetime(2026, 9, 12), "2026-09-12T08:00:00Z", None])
    def test_needs_an_aware_now(self, now):
        """A naive or missing clock reading is refused, even when no window is an age."""
        with pytest.raises(InvalidWindow, match="now must be"):
            decide([(FEED, MaxLen(1))], now)

    def test_age_before_the_epoch_is_refused(self):
        """An age that reaches before 1970 from now cannot be a MINID."""
        with pytest.raises(InvalidWindow, match="must not precede 1970"):
            decide([(FEED, MaxAge("1d"))], datetime(1970, 1, 1, 12, tzinfo=UTC))

    def test_refuses_a_malformed_policy(self):
        """decide validates a raw list like Policy does."""
        with pytest.raises(InvalidPolicy, match="entry #1"):
            decide([("q", MaxLen(1))], NOW)

    @given(now=aware_instants, age=whole_second_durations.filter(lambda d: d < timedelta(days=3650)),
           approx=st.booleans())
    def test_age_floor_is_now_minus_age(self, now, age, approx):
        """For any clock and age, the MINID sent is the floor of now - age, ~ with LIMIT 0, = without."""
        (call,) = decide([(FEED, MaxAge(age, approx))], now)
        expected = ("~", ms(now - age), "LIMIT", "0") if approx else ("=", ms(now - age))
        assert call.command[3:] == expected
