"""One pump for work done on a few threads and consumed as it comes: reading splits, splitting
file slices (footer reads) and fetching Flight endpoints all go through :func:`bounded_parallel`.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")
_DONE = object()
_PUT_WAIT_SECONDS = 0.05


class _Failure:
    """An exception on its way from a worker to the consumer."""

    def __init__(self, error: BaseException):
        self.error = error


def bounded_parallel(
    items: Iterable[T],
    work: Callable[[T, int], Iterable[R]],
    workers: int,
    max_waiting: int,
    name: str,
) -> Iterator[R]:
    """The outputs of ``work(item, lane)`` for every item, computed on ``workers`` threads and
    yielded as they come (in no particular order).

    The workers draw the items themselves, one thread at a time, so a lazy ``items`` (a
    listing, a planner) advances only as workers free up and overlaps with their work; ``lane``
    is the worker's number (``0 .. workers - 1``), e.g. to pick one of several connections. At
    most ``max_waiting`` outputs wait for the consumer. An error raised by ``work`` or by
    ``items`` is re-raised to the consumer; closing the returned generator early (or an error)
    stops the workers: they draw no further item, and it returns once they have stopped.
    Nothing starts before the first ``next``.
    """
    out: queue.Queue[object] = queue.Queue(maxsize=max(1, max_waiting))
    stop = threading.Event()
    lock = threading.Lock()
    source = iter(items)

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=_PUT_WAIT_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def run(lane: int) -> None:
        try:
            while not stop.is_set():
                with lock:  # one thread advances the source at a time
                    item = next(source, _DONE)
                if item is _DONE:
                    break
                for result in work(item, lane):  # type: ignore[arg-type]  # not _DONE here
                    if not put(result):
                        return
        except BaseException as err:  # noqa: BLE001 - handed to the consumer thread
            put(_Failure(err))
        finally:
            put(_DONE)

    threads = [threading.Thread(target=run, args=(lane,), name=f"{name}-{lane}", daemon=True)
               for lane in range(max(1, workers))]
    for thread in threads:
        thread.start()
    finished = 0
    try:
        while finished < len(threads):
            item = out.get()
            if item is _DONE:
                finished += 1
            elif isinstance(item, _Failure):
                raise item.error
            else:
                yield item  # type: ignore[misc]  # a work output
    finally:
        stop.set()
        current = threading.current_thread()
        for thread in threads:
            # the generator may be closed (or collected) on one of its own workers: that one
            # returns after this, drawing nothing further (``stop``); it cannot join itself
            if thread is not current:
                thread.join()


__all__ = ["bounded_parallel"]
