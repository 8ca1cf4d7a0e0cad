"""The cadence a beat keeps: its tick, its backoff, and a next beat asked for sooner."""

from __future__ import annotations

from retain.beats import Cadence


class TestCadence:
    def test_tick_and_backoff(self):
        """A healthy beat waits the tick; troubled beats double it up to the backoff; a healthy one resets it."""
        cadence = Cadence(10.0, 35.0)
        assert [cadence.after(troubled) for troubled in (False, True, True, True, False)] == [10, 20, 35, 35, 10]

    def test_sooner_once(self):
        """sooner() shortens the next delay only, and never lengthens it."""
        cadence = Cadence(10.0, 60.0)
        cadence.sooner(3.0)
        cadence.sooner(4.0)
        assert [cadence.after(False), cadence.after(False)] == [3.0, 10.0]
        cadence.sooner(30.0)
        assert cadence.after(False) == 10.0

    def test_sooner_never_cuts_a_backoff(self):
        """A troubled beat backs off whatever was asked; the ask is spent."""
        cadence = Cadence(10.0, 60.0)
        cadence.sooner(1.0)
        assert [cadence.after(True), cadence.after(False)] == [20.0, 10.0]
