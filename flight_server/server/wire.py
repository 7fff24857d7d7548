"""Wire shapes of the Flight service, in one place: query commands, action bodies, endpoint
``app_metadata`` and ticket payloads. They mirror ``schemas/command.schema.json``.

Every command and action body is validated against the JSON Schema; violations raise
:class:`~catalog.errors.InvalidQueryError` (INVALID_ARGUMENT) with the path of the offending
element, so a client learns exactly what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import jsonschema

import schemas
from catalog.errors import InvalidQueryError
from catalog.plan.options import ReadOptions
from catalog.table.files import BaseFile, FileSlice, LogFile, Split
from flight_server.server.limits import LimitExceededError, Limits

DEFAULT_LIMITS = Limits()

ACTIONS: dict[str, tuple[str, str]] = {
    # action type -> (schema $defs entry of its body, description)
    "list-namespaces": ("action_empty", "List namespaces. Body: {}. Result: JSON list of names."),
    "list-tables": ("action_list_tables", 'List tables. Body: {"namespace"?}. Result: JSON list of tables.'),
    "register-table": (
        "action_register",
        'Register a table. Body: {"table": "ns.name", "uri", "storage_options"?, "properties"?, "replace"?}.',
    ),
    "unregister-table": ("action_table", 'Remove a table from the catalog. Body: {"table"}.'),
    "refresh-table": (
        "action_refresh",
        'Re-read a table\'s timeline (body {"table"}), or re-scan every warehouse (body {}).',
    ),
    "table-info": (
        "action_table",
        'Describe a table: table_type, table_version, record_key_fields, partition_fields, schema, timeline.',
    ),
    "health": ("action_empty", "Liveness and catalog size. Body: {} or empty."),
    "cluster-heartbeat": (
        "action_heartbeat",
        'A worker is alive (coordinator only). Body: {"token"}, signed with the cluster secret.',
    ),
}


@lru_cache(maxsize=None)
def _validator(definition: str | None) -> jsonschema.Draft202012Validator:
    root = schemas.load("command.schema.json")
    schema = root if definition is None else {**root["$defs"][definition], "$defs": root["$defs"]}
    return jsonschema.Draft202012Validator(schema)


def _decode(body: bytes, what: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    limits.check_body(body, what)
    try:
        doc = json.loads(body.decode("utf-8")) if body else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InvalidQueryError(f"{what} is not valid UTF-8 JSON: {err}") from err
    except RecursionError as err:
        raise LimitExceededError("max_json_depth", limits.max_json_depth, f"{what} is nested deeper") from err
    limits.check_depth(doc, what)
    return doc


def _validate(doc: Any, definition: str | None, what: str) -> None:
    errors = sorted(_validator(definition).iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        err = errors[0]
        where = "/".join(str(p) for p in err.path) or "(root)"
        message = err.message
        if err.validator == "pattern" and err.schema.get("description"):  # words, not the regex
            message = f"{str(err.instance)[:64]!r} is not of the form {err.schema['description']}"
        raise InvalidQueryError(f"invalid {what} at {where}: {message}")


@dataclass(frozen=True)
class QueryCommand:
    """A query as sent in ``FlightDescriptor.for_command``: a table and its read options."""

    table: str
    options: ReadOptions = field(default_factory=ReadOptions)

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, **self.options.to_json()}


def command_from_json(doc: Any) -> QueryCommand:
    """Validate a decoded command and build a :class:`QueryCommand`."""
    _validate(doc, None, "command")
    return QueryCommand(doc["table"], ReadOptions.from_json(doc))


def parse_command(body: bytes, limits: Limits = DEFAULT_LIMITS) -> QueryCommand:
    """Parse and validate a command descriptor's bytes (within ``limits``)."""
    doc = _decode(body, "command", limits)
    limits.check_command(doc)
    return command_from_json(doc)


def parse_action(action_type: str, body: bytes, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Validate an action body; unknown actions raise NotImplementedError (UNIMPLEMENTED)."""
    if action_type not in ACTIONS:
        shown = action_type if len(action_type) <= 64 and action_type.isprintable() else action_type[:64] + "..."
        raise NotImplementedError(f"unknown action {shown!r}; known: {', '.join(ACTIONS)}")
    doc = _decode(body, f"{action_type} body", limits)
    _validate(doc, ACTIONS[action_type][0], f"{action_type} body")
    return doc


# -- endpoints and tickets -------------------------------------------------------------------


def endpoint_metadata(split: Split) -> bytes:
    """The endpoint's ``app_metadata``: what a scheduler needs to place and size the work."""
    doc = {
        "weight": round(split.weight, 6),
        "bytes": split.bytes,
        "estimated_rows": split.estimated_rows,
        "partition": split.partition,
        "file_ids": split.file_ids,
    }
    if split.row_groups is not None:
        doc["row_groups"] = list(split.row_groups)
    return json.dumps(doc, separators=(",", ":")).encode()


def query_metadata(splits: list[Split], limit: int) -> bytes:
    """``app_metadata`` of the single endpoint of a ``limit`` query (it reads every split)."""
    doc = {
        "weight": 1.0,
        "bytes": sum(s.bytes for s in splits),
        "estimated_rows": min(limit, sum(s.estimated_rows for s in splits)),
        "partition": None,
        "file_ids": sorted({f for s in splits for f in s.file_ids}),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclass(frozen=True)
class TicketBody:
    """What a ticket carries (signed): the table, the pinned instant, the query, the split and
    the caller it was planned for (``who``: only that user may read it).

    ``split`` is ``None`` for a ticket that reads the whole query (used for ``limit`` queries,
    whose result is only well defined over the union).
    """

    table: str
    uri: str
    instant: str | None
    command: dict[str, Any]
    split: dict[str, Any] | None = field(default=None)
    user: str | None = field(default=None)

    def to_json(self) -> dict[str, Any]:
        return {"t": self.table, "u": self.uri, "i": self.instant, "c": self.command, "s": self.split, "who": self.user}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "TicketBody":
        try:
            return cls(doc["t"], doc["u"], doc["i"], doc["c"], doc.get("s"), doc.get("who"))
        except (KeyError, TypeError) as err:
            raise InvalidQueryError("ticket payload is incomplete") from err


def split_to_json(split: Split) -> dict[str, Any]:
    """A split as ticket payload: the slice's files, the owned row groups and the estimates."""
    fs = split.file_slice
    doc: dict[str, Any] = {
        "p": fs.partition,
        "f": fs.file_id,
        "bi": fs.base_instant,
        "b": [fs.base_file.name, fs.base_file.size] if fs.base_file else None,
        "l": [[lf.name, lf.size] for lf in fs.log_files],
        "n": [split.bytes, split.estimated_rows, split.weight],
    }
    if split.row_groups is not None:
        doc["rg"] = list(split.row_groups)
    return doc


def split_from_json(doc: dict[str, Any]) -> Split:
    """Rebuild the split named by a ticket."""
    try:
        base = BaseFile.parse(doc["b"][0], doc["b"][1]) if doc["b"] else None
        logs = [LogFile.parse(name, size) for name, size in doc["l"]]
        if (doc["b"] and base is None) or any(lf is None for lf in logs):
            raise ValueError("unparseable file name")
        fs = FileSlice(doc["p"], doc["f"], doc["bi"], base, logs)  # type: ignore[arg-type]
        nbytes, rows, weight = doc.get("n") or (0, 0, 1.0)
        row_groups = doc.get("rg")
        return Split(
            fs, int(nbytes), int(rows), float(weight), row_groups=tuple(row_groups) if row_groups is not None else None
        )
    except (KeyError, TypeError, IndexError, ValueError) as err:
        raise InvalidQueryError("ticket names an invalid file slice") from err


__all__ = [
    "ACTIONS",
    "QueryCommand",
    "TicketBody",
    "command_from_json",
    "endpoint_metadata",
    "parse_action",
    "parse_command",
    "query_metadata",
    "split_from_json",
    "split_to_json",
]
