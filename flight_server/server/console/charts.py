"""The geometry of the console's charts, drawn as SVG by the templates (no script runs in a page).

:func:`time_chart` lays instants out on a time axis, one lane per kind of action;
:func:`histogram` counts sizes into power-of-four bins; :func:`bar_chart` draws one bar per
labelled value. Each returns plain numbers (positions in SVG user units) and texts; the templates
only place them, and Jinja escapes every text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Sequence

from catalog.meta.units import human_bytes

#: tick steps of a time axis, in seconds: the first that gives at most ``MAX_TICKS`` ticks is used
_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
          86400, 2 * 86400, 7 * 86400, 14 * 86400, 30 * 86400, 91 * 86400, 182 * 86400, 365 * 86400)
MAX_TICKS = 8
WIDTH = 960
LEFT = 110  # room for lane labels
RIGHT = 20
LANE_HEIGHT = 26
AXIS_HEIGHT = 34


@dataclass(frozen=True)
class Event:
    """Something that happened in one lane: a point (``end`` is ``None``) or a span."""

    lane: str
    start: datetime
    end: datetime | None
    title: str  # the tooltip: what, when
    pending: bool = False


@dataclass(frozen=True)
class Mark:
    """An event placed: ``x`` to ``x + width`` on lane row ``y`` (``width`` 0: a point)."""

    x: float
    y: float
    width: float
    lane: str
    title: str
    pending: bool


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Lane:
    y: float
    label: str


@dataclass(frozen=True)
class TimeChart:
    width: int
    height: int
    left: int
    right: int  # x of the axis' right end
    axis_y: float
    lanes: tuple[Lane, ...]
    marks: tuple[Mark, ...]
    ticks: tuple[Tick, ...]


def _css_name(lane: str) -> str:
    """The class suffix of a lane (its colour in console.css): letters only."""
    return "".join(c if c.isalnum() else "-" for c in lane.lower())


def _step(span: float) -> int:
    for step in _STEPS:
        if span / step <= MAX_TICKS:
            return step
    return _STEPS[-1] * math.ceil(span / (_STEPS[-1] * MAX_TICKS))


def _tick_label(moment: datetime, step: int, first: bool, previous: datetime | None) -> str:
    if step >= 86400:
        return moment.strftime("%Y-%m-%d")
    clock = moment.strftime("%H:%M:%S" if step < 60 else "%H:%M")
    if first or previous is None or previous.date() != moment.date():
        return f"{moment.strftime('%Y-%m-%d')} {clock}"
    return clock


def time_chart(events: Sequence[Event], lanes: Sequence[str], width: int = WIDTH) -> TimeChart:
    """``events`` on a shared time axis, one row per lane in ``lanes`` order (lanes without an
    event are left out)."""
    used = [lane for lane in lanes if any(e.lane == lane for e in events)]
    right = width - RIGHT
    if not events:
        return TimeChart(width, AXIS_HEIGHT + 10, LEFT, right, 10.0, (), (), ())
    times = [e.start for e in events] + [e.end for e in events if e.end is not None]
    first, last = min(times), max(times)
    span = (last - first).total_seconds()
    if span <= 0:  # one moment: a minute around it
        first, last, span = first - timedelta(seconds=30), last + timedelta(seconds=30), 60.0
    pad = span * 0.02
    first, last = first - timedelta(seconds=pad), last + timedelta(seconds=pad)
    span = (last - first).total_seconds()
    scale = (right - LEFT) / span

    def x_of(moment: datetime) -> float:
        return round(LEFT + (moment - first).total_seconds() * scale, 2)

    rows = {lane: 10 + i * LANE_HEIGHT + LANE_HEIGHT / 2 for i, lane in enumerate(used)}
    marks = tuple(
        Mark(x_of(e.start), rows[e.lane], round(max(0.0, x_of(e.end) - x_of(e.start)), 2) if e.end else 0.0,
             _css_name(e.lane), e.title, e.pending)
        for e in sorted(events, key=lambda e: e.start)
    )
    step = _step(span)
    # ticks at multiples of the step after midnight of the first day, in the moments' own zone
    midnight = first.replace(hour=0, minute=0, second=0, microsecond=0)
    tick = midnight + timedelta(seconds=math.ceil((first - midnight).total_seconds() / step) * step)
    ticks: list[Tick] = []
    previous: datetime | None = None
    while tick <= last:
        ticks.append(Tick(x_of(tick), _tick_label(tick, step, not ticks, previous)))
        previous, tick = tick, tick + timedelta(seconds=step)
    axis_y = 10 + len(used) * LANE_HEIGHT + 4
    return TimeChart(
        width, int(axis_y + AXIS_HEIGHT), LEFT, right, axis_y,
        tuple(Lane(y, lane) for lane, y in rows.items()), marks, tuple(ticks),
    )


@dataclass(frozen=True)
class Bar:
    """One bar: ``x``..``x + width`` wide, ``height`` tall from the baseline; ``label`` under
    it, ``value`` (a text) over it, ``title`` its tooltip."""

    x: float
    width: float
    height: float
    label: str
    value: str
    title: str


@dataclass(frozen=True)
class BarChart:
    width: int
    height: int
    baseline: float
    bars: tuple[Bar, ...]
    caption: str


BAR_AREA = 180  # height of the tallest bar
MAX_BAR_WIDTH = 96


def _bars(values: Sequence[tuple[str, float, str, str]], width: int, caption: str) -> BarChart:
    """``values``: (label, amount, value text, tooltip) per bar, drawn left to right."""
    if not values:
        return BarChart(width, 40, 20.0, (), caption)
    top = max(v for _, v, _, _ in values) or 1
    slot = (width - 20) / len(values)
    bar_width = min(MAX_BAR_WIDTH, max(2.0, slot * 0.8))
    baseline = 20.0 + BAR_AREA
    bars = tuple(
        Bar(round(10 + i * slot + (slot - bar_width) / 2, 2), round(bar_width, 2),
            round(BAR_AREA * amount / top, 2), label, text, title)
        for i, (label, amount, text, title) in enumerate(values)
    )
    return BarChart(width, int(baseline + 46), baseline, bars, caption)


def _bin_label(low: int) -> str:
    return human_bytes(low).replace(".0 ", " ")


def histogram(sizes: Sequence[int], what: str, width: int = WIDTH) -> BarChart:
    """How many of ``sizes`` (bytes) fall in each power-of-four bin from below 1 KiB upwards,
    every bin between the smallest and the largest shown (empty ones too)."""
    if not sizes:
        return _bars([], width, f"no {what}")

    def bin_of(size: int) -> int:  # 0: < 1 KiB; n: [1 KiB * 4^(n-1), 1 KiB * 4^n)
        return 0 if size < 1024 else 1 + int(math.log(size / 1024, 4) + 1e-9)

    counts: dict[int, int] = {}
    for size in sizes:
        counts[bin_of(size)] = counts.get(bin_of(size), 0) + 1
    values = []
    for n in range(min(counts), max(counts) + 1):
        low, high = (0, 1024) if n == 0 else (1024 * 4 ** (n - 1), 1024 * 4**n)
        label = f"< {_bin_label(high)}" if n == 0 else f"{_bin_label(low)}–{_bin_label(high)}"
        count = counts.get(n, 0)
        values.append((label, float(count), str(count), f"{count} {what} of {label}"))
    return _bars(values, width, f"{len(sizes)} {what} by size")


@dataclass(frozen=True)
class HBar:
    """One horizontal bar on row ``y``: ``width`` long from ``left``; ``label`` before it,
    ``value`` after it."""

    y: float
    width: float
    label: str
    value: str
    title: str


@dataclass(frozen=True)
class HBarChart:
    width: int
    height: int
    left: int
    bars: tuple[HBar, ...]
    caption: str


H_LEFT = 260  # room for the labels
H_ROW = 18


def bar_chart(items: Sequence[tuple[str, int]], what: str, limit: int, width: int = WIDTH) -> HBarChart:
    """One horizontal bar per (label, bytes) item, largest first, at most ``limit`` of them."""
    ordered = sorted(items, key=lambda item: (-item[1], item[0]))
    shown = ordered[:limit]
    top = max((size for _, size in shown), default=0) or 1
    room = width - H_LEFT - 90
    bars = tuple(
        HBar(round(6 + i * H_ROW, 2), round(max(1.0, room * size / top), 2), _shortened(label), human_bytes(size),
             f"{label}: {human_bytes(size)}")
        for i, (label, size) in enumerate(shown)
    )
    caption = f"{what} by size" + (f" (the {limit} largest of {len(ordered)})" if len(ordered) > limit else "")
    return HBarChart(width, int(12 + len(bars) * H_ROW), H_LEFT, bars, caption)


def _shortened(label: str, limit: int = 40) -> str:
    """A label that fits before its bar (the tooltip has it whole)."""
    return label if len(label) <= limit else label[: limit - 1] + "…"


__all__ = [
    "Bar", "BarChart", "Event", "HBar", "HBarChart", "Lane", "Mark", "Tick", "TimeChart", "bar_chart", "histogram",
    "time_chart",
]
