"""The writer's answers handed back to the event loop in batches: outcomes, cancellation, one wakeup for many."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

import pytest

from retain.logd.handback import Handback


def _resolve_from_thread(action) -> None:
    thread = threading.Thread(target=action)
    thread.start()
    thread.join()


class TestHandback:
    def test_outcomes(self):
        """A result, an error and a cancellation on the other thread arrive as the loop's futures' outcomes."""
        async def main():
            handback = Handback(asyncio.get_running_loop())
            sources: list[Future[int]] = [Future(), Future(), Future()]
            answers = [handback.wrap(source) for source in sources]

            def resolve():
                sources[0].set_result(7)
                sources[1].set_exception(KeyError("gone"))
                sources[2].cancel()
            _resolve_from_thread(resolve)
            assert await answers[0] == 7
            with pytest.raises(KeyError):
                await answers[1]
            with pytest.raises(asyncio.CancelledError):
                await answers[2]
        asyncio.run(main())

    def test_one_wakeup_for_all_ready(self):
        """Futures resolved before the loop's next turn are handed over in that one turn (wrap_future took one
        turn, and one write to the loop's pipe, each)."""
        async def main():
            handback = Handback(asyncio.get_running_loop())
            sources: list[Future[int]] = [Future() for _ in range(10)]
            answers = [handback.wrap(source) for source in sources]

            def resolve():
                for number, source in enumerate(sources):
                    source.set_result(number)
            _resolve_from_thread(resolve)  # the loop does not run meanwhile: all ten are waiting
            assert await asyncio.gather(*answers) == list(range(10))
            assert handback.wakeups == 1
            later: Future[int] = Future()
            answer = handback.wrap(later)
            _resolve_from_thread(lambda: later.set_result(11))
            assert await answer == 11
            assert handback.wakeups == 2  # a later one wakes the loop again
        asyncio.run(main())

    def test_cancel_reaches_the_work(self):
        """Cancelling the loop's future cancels the work behind it, which then never runs."""
        async def main():
            handback = Handback(asyncio.get_running_loop())
            source: Future[int] = Future()
            answer = handback.wrap(source)
            answer.cancel()
            await asyncio.sleep(0)  # the done callbacks run on the loop's next turn
            assert source.cancelled()
            assert not source.set_running_or_notify_cancel()
        asyncio.run(main())

    def test_closed_loop(self, caplog):
        """Work finishing after its loop closed is dropped quietly, as nobody is left to answer."""
        loop = asyncio.new_event_loop()
        handback = Handback(loop)
        source: Future[int] = Future()
        handback.wrap(source)
        loop.close()
        _resolve_from_thread(lambda: source.set_result(1))
        assert "exception calling callback" not in caplog.text  # what a callback that raised would log
