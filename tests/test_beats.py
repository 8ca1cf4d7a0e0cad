"""retain.beats: the one beat runner (tick, backoff), in a thread and in asyncio; a poke starts the next beat now;
the cadence a beat keeps (its tick, its backoff, a next beat asked for sooner)."""

from __future__ import annotations

import asyncio
import threading

from retain.beats import AsyncBeat, Beat, Cadence, beat_delay
from tests.helpers.waiting import wait_for

#: a tick no test waits out: a beat that comes sooner than this was asked for
LONG = 3600.0


class TestDelay:
    def test_doubles_in_trouble_and_resets(self):
        assert [beat_delay(1.0, troubled, 30.0) for troubled in range(7)] == [1, 2, 4, 8, 16, 30, 30]


class TestPoke:
    def test_a_poke_starts_the_next_beat_now(self):
        """With a tick of an hour, a poke from another thread makes the next beat come at once."""
        beats: list[int] = []
        beat = Beat(lambda: bool(beats.append(1)), tick=LONG, max_backoff=LONG, name="poked")
        beat.start()
        try:
            wait_for(lambda: len(beats) == 1, "the first beat")
            threading.Thread(target=beat.poke).start()
            wait_for(lambda: len(beats) == 2, "the poked beat")
        finally:
            beat.stop(5)
        assert not beat.running

    def test_next_in_asks_for_a_sooner_beat(self):
        """next_in's answer, when sooner than the tick, is when the next beat comes."""
        beats: list[int] = []
        beat = Beat(lambda: bool(beats.append(1)), tick=LONG, max_backoff=LONG, name="soon",
                    next_in=lambda: 0.01 if len(beats) < 3 else None)
        beat.start()
        try:
            wait_for(lambda: len(beats) == 3, "three beats a hundredth of a second apart")
        finally:
            beat.stop(5)

    def test_the_asyncio_twin(self):
        """AsyncBeat: poked from a thread, it beats again at once; stop ends it."""
        async def scenario() -> int:
            beats: list[int] = []

            async def work() -> bool:
                beats.append(1)
                return False

            beat = AsyncBeat(work, tick=LONG, max_backoff=LONG, name="poked")
            await beat.start()
            while not beats:
                await asyncio.sleep(0.005)
            threading.Thread(target=beat.poke).start()
            while len(beats) < 2:
                await asyncio.sleep(0.005)
            await beat.stop()
            return len(beats)

        assert asyncio.run(asyncio.wait_for(scenario(), 20)) == 2


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
