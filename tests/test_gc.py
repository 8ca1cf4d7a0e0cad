"""retain._gc: the one pause of the cyclic GC, counted across threads (the driver's beat and its archive job pause
it at once: a pause of one must not end the other's, nor leave the collector off)."""

from __future__ import annotations

import gc
import threading

from retain._gc import paused_gc


class TestPausedGc:
    def test_paused_inside_restored_after(self):
        """The GC is off inside, nested or on threads at once, and on again when the last block ends."""
        assert gc.isenabled()
        inside = threading.Event()
        leave = threading.Event()

        def other() -> None:
            with paused_gc():
                inside.set()
                leave.wait(10)

        thread = threading.Thread(target=other)
        with paused_gc():
            assert not gc.isenabled()
            thread.start()
            assert inside.wait(10)
        assert not gc.isenabled()  # the other block is still open
        leave.set()
        thread.join(10)
        assert gc.isenabled()

    def test_left_off_when_it_was_off(self):
        """A caller who turned the GC off keeps it off."""
        gc.disable()
        try:
            with paused_gc():
                pass
            assert not gc.isenabled()
        finally:
            gc.enable()

    def test_the_beat_and_the_job_in_either_order(self):
        """Two holders on two threads ending in the other order than they began: on again only after both."""
        first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

        def second() -> None:
            first_in.wait(10)
            with paused_gc():
                second_in.set()
                first_out.wait(10)

        thread = threading.Thread(target=second)
        thread.start()
        with paused_gc():
            first_in.set()
            assert second_in.wait(10)
        assert not gc.isenabled(), "the first holder's end turned it on under the second"
        first_out.set()
        thread.join(10)
        assert gc.isenabled()
