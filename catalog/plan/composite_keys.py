"""Record keys of complex and custom key generators, spelled from filters that pin every key field.

Hudi's ``ComplexKeyGenerator`` (and ``CustomKeyGenerator`` of several fields) writes the record key
of several fields as ``f1:v1,f2:v2``: the fields in the table's order
(``hoodie.table.recordkey.fields``), each value as Java's ``String.valueOf`` spells it, ``__null__``
for a null and ``__empty__`` for an empty string (``KeyGenUtils``). Of one field it writes the value
alone or ``f1:v1``, by release and ``hoodie.write.complex.keygen.new.encoding``, and the table does
not record which: both spellings are looked up. That is safe because the record index only says
where rows are: a spelling no record has locates nothing, and the query's own row filter still
keeps the exact rows of the groups located.

Only values Java and Python spell alike are spelled (strings and integers); a filter of another
type on a key field, a key field no ``=`` / ``in`` filter pins, or more than :data:`MAX_KEYS` keys
(the product of the ``in`` lists) leave the record index unused.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import pyarrow as pa

from catalog.plan.filters import BoundFilter
from catalog.read.mor import EMPTY_KEY
from catalog.table.config import TableConfig

#: at most this many spelled keys are looked up in the record index for one query
MAX_KEYS = 256
#: key generators whose record keys name their fields
_NAMING_GENERATORS = ("COMPLEX", "CUSTOM")


def composite_keys(config: TableConfig, filters: Sequence[BoundFilter]) -> set[str] | None:
    """The record keys (every spelling the writer may have used) of the rows ``filters`` can
    match, when they pin every record key field of a complex or custom key generator's table;
    ``None`` otherwise."""
    fields = config.record_key_fields
    if not fields or not any(kind in config.key_generator.upper() for kind in _NAMING_GENERATORS):
        return None
    values: list[list[str]] = []
    for name in fields:
        pinned = _pinned(name, filters)
        if pinned is None:
            return None
        values.append(sorted(pinned))
    if math.prod(len(v) for v in values) * (2 if len(fields) == 1 else 1) > MAX_KEYS:
        return None
    if len(fields) == 1:
        return set(values[0]) | {f"{fields[0]}:{value}" for value in values[0]}
    return {",".join(f"{f}:{v}" for f, v in zip(fields, combo)) for combo in itertools.product(*values)}


def _pinned(column: str, filters: Sequence[BoundFilter]) -> set[str] | None:
    """The spelled values ``=`` / ``in`` filters on ``column`` pin (intersected); ``None`` when
    none pins it or one has a type not spelled alike in Java and Python."""
    out: set[str] | None = None
    for f in filters:
        if f.column != column or f.op not in ("=", "in"):
            continue
        if not (pa.types.is_string(f.type) or pa.types.is_large_string(f.type) or pa.types.is_integer(f.type)):
            return None
        raw = [f.value.as_py()] if f.op == "=" else f.value.to_pylist()
        spelled = {_spelled(v) for v in raw if v is not None}
        out = spelled if out is None else out & spelled
    return out


def _spelled(value: str | int) -> str:
    if isinstance(value, str):
        return value or EMPTY_KEY
    return str(value)


__all__ = ["MAX_KEYS", "composite_keys"]
