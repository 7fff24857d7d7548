"""The one pump of threaded work: every output once, errors to the consumer, closing stops it."""

from __future__ import annotations

import threading

import pytest

from catalog.parallel import bounded_parallel


def test_every_output_of_every_item_once_on_the_given_lanes():
    lanes = set()

    def work(item, lane):
        lanes.add(lane)
        return [(item, i) for i in range(3)]

    got = list(bounded_parallel(range(50), work, 4, 2, "t"))
    assert sorted(got) == [(item, i) for item in range(50) for i in range(3)]
    assert lanes <= {0, 1, 2, 3}


@pytest.mark.parametrize("where", ["work", "items"])
def test_errors_reach_the_consumer(where):
    def items():
        yield 1
        if where == "items":
            raise FileNotFoundError("listing failed")
        yield 2

    def work(item, lane):
        if where == "work" and item == 2:
            raise ValueError("bad item")
        return [item]

    with pytest.raises((FileNotFoundError, ValueError), match="listing failed|bad item"):
        list(bounded_parallel(items(), work, 2, 4, "t"))


def test_closing_early_stops_drawing_items_and_the_threads():
    drawn = []

    def items():
        for i in range(1000):
            drawn.append(i)
            yield i

    before = threading.active_count()
    outputs = bounded_parallel(items(), lambda item, lane: [item], 2, 1, "t")
    assert not drawn  # nothing starts before the first next
    next(outputs)
    outputs.close()
    assert len(drawn) < 10 and threading.active_count() == before


def test_closed_on_one_of_its_own_workers_it_stops_without_joining_that_thread():
    """A generator dropped by its consumer may be closed on any thread, one of its workers
    included (a collection there): closing then joins the other workers and returns, with no
    "cannot join current thread" RuntimeError (printed as "Exception ignored in")."""
    suspended, closed = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def work(item: int, lane: int):
        if item == 3:
            suspended.wait(5)
            try:
                gen.close()
            except BaseException as err:  # noqa: BLE001 - the test reports it
                errors.append(err)
            closed.set()
        yield item

    gen = bounded_parallel(range(10), work, workers=2, max_waiting=1, name="close-on-worker")
    next(gen)
    suspended.set()
    assert closed.wait(5)
    assert errors == []
