"""Wire shapes of the Flight service, in one place: query commands, action bodies and endpoint
``app_metadata`` (ticket payloads are in :mod:`.tickets`). They mirror ``schemas/command.schema.json``.

Every command and action body is validated against the JSON Schema (a command of the common
shapes by a hand-written check that is never looser); violations raise
:class:`~catalog.errors.InvalidQueryError` (INVALID_ARGUMENT) with the path of the offending
element, so a client learns exactly what is wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import jsonschema

import schemas
from catalog.errors import InvalidQueryError, shown
from catalog.plan.aggregates import Aggregate, check_aggregates
from catalog.plan.options import ReadOptions
from catalog.table.files import Split
from flight_server.protocol import wire
from flight_server.server.security.limits import LimitExceededError, Limits

DEFAULT_LIMITS = Limits()

ACTIONS: dict[str, tuple[str, str]] = {
    # action type -> (schema $defs entry of its body, description)
    wire.LIST_NAMESPACES: ("action_empty", "List namespaces. Body: {}. Result: JSON list of names."),
    wire.LIST_TABLES: ("action_list_tables", 'List tables. Body: {"namespace"?}. Result: JSON list of tables.'),
    wire.REGISTER_TABLE: (
        "action_register",
        'Register a table. Body: {"table": "ns.name", "uri", "storage_options"?, "properties"?, "replace"?}.',
    ),
    wire.UNREGISTER_TABLE: ("action_table", 'Remove a table from the catalog. Body: {"table"}.'),
    wire.REFRESH_TABLE: (
        "action_refresh",
        'Re-read a table\'s timeline (body {"table"}), or re-scan every warehouse (body {}).',
    ),
    wire.TABLE_INFO: (
        "action_table",
        'Describe a table: table_type, table_version, record_key_fields, partition_fields, schema, timeline.',
    ),
    wire.HEALTH: ("action_empty", "Liveness and catalog size. Body: {} or empty."),
    wire.CLUSTER_HEARTBEAT: (
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


class _CommandShape:
    """A hand-written check of the common command shapes, read off the command schema: a command
    it accepts is valid (it is never looser than the schema), so the JSON Schema walk, about a
    tenth of a point query's planning, runs only for the others (and names what is wrong)."""

    def __init__(self) -> None:
        root = schemas.load("command.schema.json")
        defs, props = root["$defs"], root["properties"]
        self.keys = frozenset(props)
        self.identifier = re.compile(defs["identifier"]["pattern"])
        self.ops = frozenset(defs["filter"]["prefixItems"][1]["enum"])
        self.query_types = frozenset(props["query_type"]["enum"])
        self.instant_chars = (defs["instant"]["minLength"], defs["instant"]["maxLength"])

    def _instant(self, value: Any) -> bool:
        return isinstance(value, str) and self.instant_chars[0] <= len(value) <= self.instant_chars[1]

    @staticmethod
    def _scalar(value: Any) -> bool:
        return value is None or isinstance(value, (str, bool, int, float))

    def _filter(self, item: Any) -> bool:
        if not isinstance(item, list) or not 2 <= len(item) <= 3:
            return False
        column, op = item[0], item[1]
        if not isinstance(column, str) or not column or not isinstance(op, str) or op not in self.ops:
            return False
        if len(item) == 2 or self._scalar(item[2]):
            return True
        return isinstance(item[2], list) and all(self._scalar(v) for v in item[2])

    def accepts(self, doc: Any) -> bool:
        if not isinstance(doc, dict) or "table" not in doc or not self.keys.issuperset(doc):
            return False
        table = doc["table"]
        if not isinstance(table, str) or self.identifier.search(table) is None:
            return False
        columns = doc.get("columns")
        if "columns" in doc and not (
            isinstance(columns, list)
            and all(isinstance(c, str) and c for c in columns)
            and len(set(columns)) == len(columns)
        ):
            return False
        filters = doc.get("filters")
        if "filters" in doc and not (isinstance(filters, list) and all(self._filter(f) for f in filters)):
            return False
        if "query_type" in doc and not (isinstance(doc["query_type"], str) and doc["query_type"] in self.query_types):
            return False
        if any(key in doc and not self._instant(doc[key]) for key in ("as_of", "start", "end")):
            return False
        limit = doc.get("limit")
        if "limit" in doc and not (isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0):
            return False
        return wire.AGGREGATES_KEY not in doc  # (its shape is left to the schema: a rare command)


_COMMAND_SHAPE = _CommandShape()


@dataclass(frozen=True)
class QueryCommand:
    """A query as sent in ``FlightDescriptor.for_command``: a table, its read options and the
    aggregates to answer from metadata instead of rows (none: read the rows)."""

    table: str
    options: ReadOptions = field(default_factory=ReadOptions)
    aggregates: tuple[Aggregate, ...] = ()

    def to_json(self) -> dict[str, Any]:
        doc = {wire.TABLE_KEY: self.table, **self.options.to_json()}
        if self.aggregates:
            doc[wire.AGGREGATES_KEY] = [[a.function, a.column] for a in self.aggregates]
        return doc


def command_from_json(doc: Any) -> QueryCommand:
    """Validate a decoded command and build a :class:`QueryCommand`.

    Raises:
        InvalidQueryError: the command breaks the schema, or its aggregates come with an option
            they do not take (``limit``, ``columns``, an incremental or CDC query).
    """
    if not _COMMAND_SHAPE.accepts(doc):
        _validate(doc, None, "command")
    options = ReadOptions.from_json(doc)
    raw = doc.get(wire.AGGREGATES_KEY)
    if raw is None:
        return QueryCommand(doc[wire.TABLE_KEY], options)
    aggregates = tuple(Aggregate.parse(item) for item in raw)
    check_aggregates(aggregates, options)
    return QueryCommand(doc[wire.TABLE_KEY], options, aggregates)


def parse_command(body: bytes, limits: Limits = DEFAULT_LIMITS) -> QueryCommand:
    """Parse and validate a command descriptor's bytes (within ``limits``)."""
    doc = _decode(body, "command", limits)
    limits.check_command(doc)
    return command_from_json(doc)


def parse_action(action_type: str, body: bytes, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Validate an action body; unknown actions raise NotImplementedError (UNIMPLEMENTED)."""
    if action_type not in ACTIONS:
        raise NotImplementedError(f"unknown action '{shown(action_type)}'; known: {', '.join(ACTIONS)}")
    doc = _decode(body, f"{action_type} body", limits)
    _validate(doc, ACTIONS[action_type][0], f"{action_type} body")
    return doc


# -- endpoints -------------------------------------------------------------------------------


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


def query_metadata(splits: list[Split], limit: int | None) -> bytes:
    """``app_metadata`` of the single endpoint of a query that reads every split (one with a
    ``limit``, or asked for in one endpoint)."""
    rows = sum(s.estimated_rows for s in splits)
    doc = {
        "weight": 1.0,
        "bytes": sum(s.bytes for s in splits),
        "estimated_rows": rows if limit is None else min(limit, rows),
        "partition": None,
        "file_ids": sorted({f for s in splits for f in s.file_ids}),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def meta_endpoint_metadata(rows: int, nbytes: int) -> bytes:
    """``app_metadata`` of the one endpoint of a metadata table (``ns.t$timeline``): its rows and
    bytes as built at planning."""
    doc: dict[str, Any] = {"weight": 1.0, "bytes": nbytes, "estimated_rows": rows, "partition": None, "file_ids": []}
    return json.dumps(doc, separators=(",", ":")).encode()


__all__ = [
    "ACTIONS",
    "QueryCommand",
    "command_from_json",
    "endpoint_metadata",
    "meta_endpoint_metadata",
    "parse_action",
    "parse_command",
    "query_metadata",
]
