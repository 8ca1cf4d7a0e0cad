"""retain.archive.beat: a driver's beat folds many streams in one commit, then trims each; a claim (its
replica's lease) is asked before every step, and its token goes into the commit."""

from __future__ import annotations

from retain.archive import Fence, StreamId, fold_then_trim_all, read
from retain.errors import ArchiveFenced, LeaseLost, UnarchivableEntry
from retain.streams import StreamRef
from retain.windows import MaxLen


def ids_of(entries) -> list[bytes]:
    return [entry_id for entry_id, _ in entries]


class Claim:
    """A fence whose validity a test turns off after ``valid_for`` questions."""

    def __init__(self, app_id: str, token: int, valid_for: int = 10**9) -> None:
        self.asked, self.valid_for = 0, valid_for
        self.fence = Fence(app_id, token, self.valid)

    def valid(self) -> bool:
        self.asked += 1
        return self.asked <= self.valid_for


class TestFoldThenTrimAll:
    def test_many_small_folds_are_the_files_one_fold_makes(self, redis_conn, archive, append):
        """A beat's streams, their files encoded together: each stream's W, entries and merge-read are what
        a fold of that stream alone gives."""
        refs = [StreamRef("beat", f"s{number}") for number in range(12)]
        appended = {ref.key: append(ref, 5 + number) for number, ref in enumerate(refs)}
        outcomes = fold_then_trim_all(redis_conn, [(ref, MaxLen(2, approx=False)) for ref in refs], archive)
        assert all(outcome.error is None for outcome in outcomes)
        for ref in refs:
            ids = appended[ref.key]
            assert archive.watermark(ref) == StreamId.parse(ids[-3])
            assert archive.state(ref).entries == len(ids) - 2 and redis_conn.xlen(ref.key) == 2
            assert ids_of(read(redis_conn, ref, archive)) == ids

    def test_an_unarchivable_entry_fails_its_stream_alone(self, redis_conn, archive, append):
        """One stream holds a field name no file can hold: it fails with UnarchivableEntry, untrimmed; the
        streams beside it fold and trim as ever."""
        refs = [StreamRef("beat", f"s{number}") for number in range(3)]
        appended = {ref.key: append(ref, 5) for ref in refs}
        redis_conn.xadd(refs[1].key, {b"\xff": b"1"})
        outcomes = {outcome.stream: outcome for outcome in
                    fold_then_trim_all(redis_conn, [(ref, MaxLen(0, approx=False)) for ref in refs], archive)}
        assert isinstance(outcomes[refs[1].key].error, UnarchivableEntry)
        assert archive.watermark(refs[1]) is None and redis_conn.xlen(refs[1].key) == 6
        for ref in (refs[0], refs[2]):
            assert outcomes[ref.key].error is None and redis_conn.xlen(ref.key) == 0
            assert archive.watermark(ref) == StreamId.parse(appended[ref.key][-1])


class TestClaims:
    def test_a_lost_claim_touches_nothing(self, redis_conn, archive, append):
        """A stream whose claim is no longer valid at the start is neither folded nor trimmed: LeaseLost."""
        ref = StreamRef("beat", "lost")
        append(ref, 10)
        claim = Claim("lease/shard-1", 5, valid_for=0)
        outcome, = fold_then_trim_all(redis_conn, [(ref, MaxLen(2, approx=False))], archive,
                                      fences={ref.key: claim.fence})
        assert isinstance(outcome.error, LeaseLost) and not outcome.trimming
        assert archive.watermark(ref) is None and redis_conn.xlen(ref.key) == 10

    def test_a_claim_lost_before_the_commit_commits_nothing(self, redis_conn, archive, append):
        """Valid when its files are read, lost before the commit: no W moves, nothing is trimmed."""
        ref = StreamRef("beat", "late")
        append(ref, 10)
        claim = Claim("lease/shard-1", 5, valid_for=1)
        outcome, = fold_then_trim_all(redis_conn, [(ref, MaxLen(2, approx=False))], archive,
                                      fences={ref.key: claim.fence})
        assert isinstance(outcome.error, LeaseLost) and archive.version == -1
        assert redis_conn.xlen(ref.key) == 10

    def test_a_claim_lost_before_the_trim_keeps_the_fold(self, redis_conn, archive, append):
        """Lost after the commit: the fold stands (W moved), the stream is not trimmed, the error says so."""
        ref = StreamRef("beat", "trim")
        ids = append(ref, 10)
        claim = Claim("lease/shard-1", 5, valid_for=2)
        outcome, = fold_then_trim_all(redis_conn, [(ref, MaxLen(2, approx=False))], archive,
                                      fences={ref.key: claim.fence})
        assert isinstance(outcome.error, LeaseLost) and outcome.trimming
        assert archive.watermark(ref) == StreamId.parse(ids[-3]) and redis_conn.xlen(ref.key) == 10

    def test_a_stale_token_fails_its_streams_alone(self, redis_conn, archive, append):
        """A newer holder committed shard 2 with a higher token: this beat's stream of shard 2 is refused
        (ArchiveFenced), its stream of shard 3 commits and trims as ever."""
        newer, stale, other = (StreamRef("beat", name) for name in ("newer", "stale", "other"))
        for ref in (newer, stale, other):
            append(ref, 6)
        fold_then_trim_all(redis_conn, [(newer, MaxLen(2, approx=False))], archive,
                           fences={newer.key: Fence("lease/shard-2", 900)})
        outcomes = {outcome.stream: outcome for outcome in fold_then_trim_all(
            redis_conn, [(stale, MaxLen(2, approx=False)), (other, MaxLen(2, approx=False))], archive,
            fences={stale.key: Fence("lease/shard-2", 100), other.key: Fence("lease/shard-3", 100)})}
        assert isinstance(outcomes[stale.key].error, ArchiveFenced)
        assert archive.watermark(stale) is None and redis_conn.xlen(stale.key) == 6
        assert outcomes[other.key].error is None and redis_conn.xlen(other.key) == 2
