"""retain.ops.health: readiness from the checks a daemon registers (pure, an injected clock)."""

from __future__ import annotations

from retain.ops import Health, beat_check


class FakeTime:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class TestHealth:
    def test_ready_when_every_check_passes(self):
        """No reasons: ready; the document says so."""
        health = Health()
        health.check("redis", lambda: None)
        assert health.readiness().ready and health.readiness().to_document() == {"ready": True, "reasons": {}}

    def test_each_failing_check_gives_its_reason(self):
        """A failing check's reason is reported by name; a check that raises fails with its exception."""
        health = Health()
        health.check("redis", lambda: "Redis unavailable: connection refused")
        health.check("archive", lambda: 1 / 0)
        health.check("store", lambda: None)
        readiness = health.readiness()
        assert not readiness.ready
        assert readiness.reasons == {"redis": "Redis unavailable: connection refused",
                                     "archive": "ZeroDivisionError: division by zero"}


class TestBeatCheck:
    def test_three_ticks_then_stale(self):
        """A beat is fresh up to three ticks old; older, the daemon is not ready, saying how old it is."""
        clock, last = FakeTime(), [1_000.0]
        check = beat_check(lambda: last[0], tick=1.0, clock=clock)
        clock.now = 1_003.0
        assert check() is None
        clock.now = 1_003.5
        assert check() == "the last beat: 3.5 s old, more than 3 ticks of 1 s"
        last[0] = 1_003.4
        assert check() is None

    def test_before_the_first_beat_the_start_counts(self):
        """Before any beat, the daemon has three ticks from its start to beat once."""
        clock = FakeTime()
        check = beat_check(lambda: None, tick=2.0, clock=clock)
        clock.now += 6.0
        assert check() is None
        clock.now += 0.1
        assert check() == "no beat yet: 6.1 s old, more than 3 ticks of 2 s"
