"""Sizes and ages as people read them: ``3.1 MiB``, ``2d 4h 10m``.

The metadata tables keep exact integers in their columns; these forms are for the texts beside
them (``health`` details and thresholds, the CLI's ``info``, the web console).
"""

from __future__ import annotations

from datetime import timedelta

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def human_bytes(size: int | float) -> str:
    """``size`` bytes in binary units with one decimal (``512 B``, ``1.5 KiB``, ``100.0 MiB``)."""
    value = float(size)
    if abs(value) < 1024:
        return f"{int(value)} B"
    for unit in _UNITS:
        value /= 1024
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns at its last unit


def human_age(age: timedelta | None) -> str:
    """A duration to the minute (``45s`` below a minute, ``3h 12m``, ``2d 4h 10m``); ``None``
    (an age nobody can tell) as ``age unknown``."""
    if age is None:
        return "age unknown"
    seconds = max(0, int(age.total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    return f"{days}d {hours}h {rest // 60}m" if days else f"{hours}h {rest // 60}m"


__all__ = ["human_age", "human_bytes"]
