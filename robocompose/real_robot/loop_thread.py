"""Where a server's coroutine runs: on a daemon thread, for callers that carry on meanwhile
(tests, benchmarks, an in-process deploy), or on this thread until SIGINT or SIGTERM.

    thread = LoopThread(main, "policy server")  # main(ready, stopping) sets `ready` once it
    failure = thread.start(timeout_s)           # listens and returns once `stopping` is set;
    thread.stop(timeout_s)                      # start() returns what it raised before `ready`
    run_until_signal(main)
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable

Main = Callable[[threading.Event, asyncio.Event], Awaitable[None]]


class LoopThread:
    """`main(ready, stopping)` on its own event loop in a daemon thread ("policy server" runs on
    the thread "policy-server")."""

    def __init__(self, main: Main, what: str) -> None:
        self.what = what
        self._main = main
        self._ready = threading.Event()
        self._failure: list[BaseException] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name=what.replace(" ", "-"), daemon=True)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def start(self, timeout_s: float) -> BaseException | None:
        """Start `main`: None once it set `ready`; what it raised before that (the thread
        joined); TimeoutError when neither happened within `timeout_s`."""
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"{self.what} did not start within {timeout_s} s.")
        if self._failure:
            self._thread.join()
            return self._failure[0]
        return None

    def stop(self, timeout_s: float) -> None:
        """Set `stopping` on the loop and join the thread (TimeoutError after `timeout_s`)."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and self.running:
            loop.call_soon_threadsafe(stopping.set)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"{self.what} did not stop within {timeout_s} s.")

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as e:  # noqa: BLE001 - handed to the starting thread
            self._failure.append(e)
            self._ready.set()

    async def _serve(self) -> None:
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        await self._main(self._ready, self._stopping)


def run_until_signal(main: Main) -> None:
    """`main(ready, stopping)` on this thread, `stopping` set by SIGINT or SIGTERM."""

    async def serve() -> None:
        stopping = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stopping.set)
        await main(threading.Event(), stopping)

    asyncio.run(serve())
