"""A table's timeline: instants, the active timeline (layouts 1 and 2) and instant files."""

from catalog.timeline.active import WRITE_ACTIONS, Timeline
from catalog.timeline.instants import CommitSet, Instant

__all__ = ["WRITE_ACTIONS", "CommitSet", "Instant", "Timeline"]
