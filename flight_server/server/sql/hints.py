"""What a client is told next to a name it got wrong: the names it could have meant.

The engine tells a column that is not there in its own words (:func:`.engine.failures.plain_words`:
``column "ridr" not found``); the serving process knows which catalog tables the statement reads
and adds their columns, as the CLI adds the tables of a namespace to a table it does not know.
"""

from __future__ import annotations

import re
from typing import Sequence

import pyarrow as pa

from catalog.errors import InvalidQueryError

#: how many names a hint lists before it says how many more there are
SHOWN_NAMES = 12
_COLUMN_NOT_FOUND = re.compile(r'column "[^"]*" not found')


def listed(names: Sequence[str], shown: int = SHOWN_NAMES) -> str:
    """``a, b, c, … 7 more``: names for a message (``none`` when there are none)."""
    if not names:
        return "none"
    more = f", … {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def column_hint(sources: Sequence[tuple[str, pa.Schema]]) -> str:
    """``columns of ns.t: a, b; columns of ns.u: c``: the columns of each table a statement reads."""
    seen: dict[str, pa.Schema] = {}
    for table, schema in sources:
        seen.setdefault(table, schema)
    return "; ".join(f"columns of {table}: {listed(_data_first(schema.names))}" for table, schema in seen.items())


def _data_first(names: Sequence[str]) -> list[str]:
    """The data columns, then Hudi's ``_hoodie_`` meta columns (the ones a user mistypes come first)."""
    return sorted(names, key=lambda name: name.startswith("_hoodie_"))


def with_column_hint(err: Exception, sources: Sequence[tuple[str, pa.Schema]]) -> Exception:
    """``err``, or when it tells a column that is not there, the same error with the columns of
    the statement's tables added (the engine's message names no table of the catalog)."""
    if not isinstance(err, InvalidQueryError) or not sources or not _COLUMN_NOT_FOUND.search(str(err)):
        return err
    return InvalidQueryError(f"{err} ({column_hint(sources)})")


__all__ = ["SHOWN_NAMES", "column_hint", "listed", "with_column_hint"]
