"""The one ticket codec: every ticket and handle the server issues, typed, signed by one signer.

Six kinds, told apart by the signed ``"k"`` key, so a ticket of one kind never passes for
another; every kind names the user it was issued to (``"u"``: the name and its account's incarnation,
``Access.owner``, so an account removed and re-created is another user), the only one who may
redeem it:

- :class:`SplitTicket` (``"split"``): one weighted split of a planned scan (the JSON path and
  plain SQL scans);
- :class:`ScanTicket` (``"scan"``): a whole planned scan (a ``limit`` query: a limit is only
  defined over the union of the splits);
- :class:`StatementTicket` (``"sql"``): engine SQL over ``__hudi_scan_<i>`` views and the pinned
  scans feeding them;
- :class:`CountTicket` (``"count"``): a ``count(*)`` answered from metadata;
- :class:`AggregateTicket` (``"agg"``): a command's aggregates answered from metadata;
- :class:`PreparedHandle` (``"prep"``): a Flight SQL prepared statement (SQL, bound parameters).

A scan is pinned once (:class:`PinnedScan`): the table, its base URI at planning, the instant
the plan resolved and the options; a snapshot's ``as_of`` is that instant, so it travels once.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, overload

import pyarrow as pa
import pyarrow.flight as flight

from catalog.errors import InvalidQueryError, InvalidTicketError
from catalog.lru import BoundedLRU, CacheListener
from catalog.plan.options import RANGE_QUERY_TYPES, ReadOptions
from catalog.table.files import BaseFile, FileSlice, LogFile, Split
from flight_server.server.security.limits import Limits
from flight_server.server.security.tickets import TicketSigner

Doc = dict[str, Any]


def _field(doc: Doc, key: str, kind: type) -> Any:
    value = doc.get(key)
    if not isinstance(value, kind):
        raise InvalidTicketError("ticket payload is incomplete")
    return value


@dataclass(frozen=True)
class PinnedScan:
    """A planned read of one table, pinned so that every endpoint reads the same table state.

    Attributes:
        table: the identifier.
        uri: the table's base URI when it was planned (a re-registered table is refused).
        instant: the instant the plan resolved (``None``: a table without commits).
        options: the resolved options (``as_of`` written out, or ``end`` for incremental and CDC reads).
        meta: the metadata table of ``table`` read instead of its rows (``catalog.meta``), if any;
            its ``instant`` is its ``as_of`` (``None``: now).
    """

    table: str
    uri: str
    instant: str | None
    options: ReadOptions
    meta: str | None = None

    def to_json(self) -> Doc:
        """The JSON form (made once per pin: every ticket of a plan carries it; do not mutate)."""
        return self._json

    @functools.cached_property
    def _json(self) -> Doc:
        options = self.options
        if options.query_type not in RANGE_QUERY_TYPES and options.as_of == self.instant:
            options = options.replace(as_of=None)  # the instant says it
        doc = {"t": self.table, "r": self.uri, "i": self.instant, "o": options.to_json()}
        if self.meta is not None:
            doc["m"] = self.meta
        return doc

    @functools.cached_property
    def key(self) -> str:
        """The canonical text of the pin (e.g. the key of a plan cache)."""
        return json.dumps(self._json, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, doc: Any) -> "PinnedScan":
        if not isinstance(doc, dict):
            raise InvalidTicketError("ticket payload is incomplete")
        instant = doc.get("i")
        if instant is not None and not isinstance(instant, str):
            raise InvalidTicketError("ticket payload is incomplete")
        given = _field(doc, "o", dict)
        if given.get("query_type", "snapshot") not in RANGE_QUERY_TYPES and given.get("as_of") is None:
            given = {**given, "as_of": instant}  # the instant says it (validated once, with the rest)
        try:
            options = ReadOptions.from_json(given)
        except (TypeError, ValueError) as err:
            raise InvalidTicketError("ticket carries invalid read options") from err
        meta = doc.get("m")
        if meta is not None and not isinstance(meta, str):
            raise InvalidTicketError("ticket payload is incomplete")
        scan = cls(_field(doc, "t", str), _field(doc, "r", str), instant, options, meta)
        # a signed ticket carries the JSON form this server made: kept, not made again
        kept = {"t": scan.table, "r": scan.uri, "i": instant, "o": doc["o"]}
        scan.__dict__["_json"] = kept if meta is None else {**kept, "m": meta}
        return scan


@dataclass(frozen=True)
class Ticket:
    """What every ticket kind has: the user it was issued to."""

    KIND: ClassVar[str] = ""
    user: str

    def payload(self) -> Doc:
        raise NotImplementedError

    @classmethod
    def parse(cls, doc: Doc, user: str) -> "Ticket":
        raise NotImplementedError

    def held_bytes(self) -> int:
        """Bytes this ticket holds beyond its fields' small objects (charged while remembered)."""
        return 0


@dataclass(frozen=True)
class ScanTicket(Ticket):
    """A whole planned scan, streamed by one endpoint (``limit`` queries)."""

    KIND: ClassVar[str] = "scan"
    scan: PinnedScan

    def payload(self) -> Doc:
        return {"s": self.scan.to_json()}

    @classmethod
    def parse(cls, doc: Doc, user: str) -> "ScanTicket":
        return cls(user, PinnedScan.from_json(doc.get("s")))


@dataclass(frozen=True)
class SplitTicket(Ticket):
    """One split of a planned scan."""

    KIND: ClassVar[str] = "split"
    scan: PinnedScan
    split: Split

    def payload(self) -> Doc:
        return {"s": self.scan.to_json(), "x": split_to_json(self.split)}

    @classmethod
    def parse(cls, doc: Doc, user: str) -> "SplitTicket":
        return cls(user, PinnedScan.from_json(doc.get("s")), split_from_json(doc.get("x")))


@dataclass(frozen=True)
class StatementTicket(Ticket):
    """Engine SQL over views, each view a pinned scan."""

    KIND: ClassVar[str] = "sql"
    sql: str
    views: tuple[tuple[str, PinnedScan], ...]

    def payload(self) -> Doc:
        return {"q": self.sql, "v": [[view, scan.to_json()] for view, scan in self.views]}

    @classmethod
    def parse(cls, doc: Doc, user: str) -> "StatementTicket":
        views = []
        for item in _field(doc, "v", list):
            if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], str):
                raise InvalidTicketError("ticket payload is incomplete")
            views.append((item[0], PinnedScan.from_json(item[1])))
        return cls(user, _field(doc, "q", str), tuple(views))


@dataclass(frozen=True)
class CountTicket(Ticket):
    """``count(*)`` of one pinned scan, answered from metadata at planning."""

    KIND: ClassVar[str] = "count"
    column: str
    count: int
    scan: PinnedScan

    def payload(self) -> Doc:
        return {"n": self.column, "c": self.count, "s": self.scan.to_json()}

    @classmethod
    def parse(cls, doc: Doc, user: str) -> "CountTicket":
        count = _field(doc, "c", int)
        return cls(user, _field(doc, "n", str), count, PinnedScan.from_json(doc.get("s")))


@dataclass(frozen=True)
class PreparedHandle(Ticket):
    """A prepared statement: its SQL and the bound parameter row (``None``: not bound)."""

    KIND: ClassVar[str] = "prep"
    sql: str
    parameters: pa.RecordBatch | None = None

    def payload(self) -> Doc:
        doc: Doc = {"q": self.sql}
        if self.parameters is not None:
            doc["p"] = _batch_text(self.parameters)
        return doc

    @classmethod
    def parse(cls, doc: Doc, user: str) -> "PreparedHandle":
        raw = doc.get("p")
        unreadable = "prepared statement handle carries unreadable parameters"
        return cls(user, _field(doc, "q", str), None if raw is None else _text_batch(raw, unreadable))

    def held_bytes(self) -> int:
        return self.parameters.get_total_buffer_size() if self.parameters is not None else 0

    def parameter_values(self) -> list[Any] | None:
        """The bound row as Python values (``None``: nothing bound)."""
        if self.parameters is None:
            return None
        return [column[0].as_py() for column in self.parameters.columns]


@dataclass(frozen=True)
class AggregateTicket(Ticket):
    """The one row of a command's ``aggregates`` (``catalog.plan.aggregates``), answered from
    metadata at planning, and the pinned scan it answers."""

    KIND: ClassVar[str] = "agg"
    answer: pa.RecordBatch
    scan: PinnedScan

    def payload(self) -> Doc:
        return {"a": _batch_text(self.answer), "s": self.scan.to_json()}

    @classmethod
    def parse(cls, doc: Doc, user: str) -> "AggregateTicket":
        answer = _text_batch(_field(doc, "a", str), "aggregate ticket carries an unreadable answer")
        return cls(user, answer, PinnedScan.from_json(doc.get("s")))

    def held_bytes(self) -> int:
        return self.answer.get_total_buffer_size()


def _batch_text(batch: pa.RecordBatch) -> str:
    """A record batch as ticket payload text (its Arrow IPC stream, base64)."""
    return base64.b64encode(parameters_ipc(batch)).decode()


def _text_batch(text: Any, what: str) -> pa.RecordBatch:
    """The record batch of :func:`_batch_text`'s ``text``; ``what`` is the refusal's message."""
    try:
        data = base64.b64decode(text, validate=True)
        with pa.ipc.open_stream(data) as reader:
            return reader.read_all().combine_chunks().to_batches()[0]
    except (binascii.Error, ValueError, IndexError, pa.ArrowException, TypeError) as err:
        raise InvalidTicketError(what) from err


A = TypeVar("A", bound=Ticket)
B = TypeVar("B", bound=Ticket)
C = TypeVar("C", bound=Ticket)
_KINDS: dict[str, type[Ticket]] = {
    cls.KIND: cls for cls in (ScanTicket, SplitTicket, StatementTicket, CountTicket, PreparedHandle, AggregateTicket)
}
_WHAT: dict[type[Ticket], str] = {
    PreparedHandle: "a prepared statement handle",
    StatementTicket: "a Flight SQL statement ticket",
    SplitTicket: "a scan ticket",
}


#: what a remembered issued ticket is charged beyond its bytes (the ticket object it stands for)
_ISSUED_OVERHEAD = 1024


class TicketCodec:
    """Issues and redeems every ticket kind with one signer, under one set of rules.

    The tickets this codec issued are remembered (the last ``issued_bytes`` of them, LRU), so
    redeeming one of them takes the ticket as issued instead of verifying its signature and
    parsing its payload again: bytes equal to a ticket this server signed are genuine. The kind,
    the expiry and the owner are checked as for any other ticket; one it does not remember (issued
    by another process, or forgotten) is verified and parsed.

    Args:
        signer: signs and verifies (expiry included).
        limits: bounds the size of what is redeemed.
        issued_bytes: the bound of remembered issued tickets (0: none remembered).
        listener: hears the remembered tickets' hits, misses and evictions.
    """

    def __init__(self, signer: TicketSigner, limits: Limits, issued_bytes: int = 0,
                 listener: CacheListener | None = None):
        self.signer = signer
        self.limits = limits
        self._issued: BoundedLRU[bytes, tuple[Ticket, float]] = BoundedLRU(
            "issued_tickets", issued_bytes, listener=listener
        )

    def expiry(self) -> float:
        """The absolute expiry of a ticket issued now, in whole seconds (the tickets and endpoints
        planned within one second share it; see ``queries.expiration_time``)."""
        return float(math.floor(self.signer.expiry()))

    def issue(self, ticket: Ticket, expires_at: float | None = None) -> bytes:
        doc = {"k": ticket.KIND, "u": ticket.user, **ticket.payload()}
        expires = self.expiry() if expires_at is None else expires_at
        raw = self.signer.sign(doc, expires)
        if self._issued.max_bytes:
            self._issued.put(raw, (ticket, round(expires, 3)), len(raw) + _ISSUED_OVERHEAD + ticket.held_bytes())
        return raw

    @overload
    def redeem(self, raw: bytes, kinds: tuple[type[A]], caller: str | None) -> A: ...

    @overload
    def redeem(self, raw: bytes, kinds: tuple[type[A], type[B]], caller: str | None) -> A | B: ...

    @overload
    def redeem(
        self, raw: bytes, kinds: tuple[type[A], type[B], type[C]], caller: str | None
    ) -> A | B | C: ...

    def redeem(self, raw: bytes, kinds: tuple[type[Ticket], ...], caller: str | None) -> Ticket:
        """The ticket in ``raw`` when it is genuine, unexpired, one of ``kinds`` and issued to
        ``caller`` (``None``: the caller is checked later, e.g. once its tables are known).

        Raises:
            InvalidTicketError: malformed, forged, expired or of another kind (UNAUTHENTICATED).
            flight.FlightUnauthorizedError: issued to another user (the one answer everywhere).
        """
        self.limits.check_ticket(raw)
        issued = self._issued.get(raw) if self._issued.max_bytes else None
        if issued is not None and time.time() <= issued[1]:
            ticket = issued[0]
            if not isinstance(ticket, kinds):
                raise InvalidTicketError(f"not {_WHAT.get(kinds[0], 'a ticket of this kind')}")
        else:  # not remembered, or expired: the signer says why it is refused
            doc = self.signer.verify(raw)
            cls = _KINDS.get(str(doc.get("k")))
            if cls is None or not issubclass(cls, kinds):
                raise InvalidTicketError(f"not {_WHAT.get(kinds[0], 'a ticket of this kind')}")
            ticket = cls.parse(doc, _field(doc, "u", str))
        check_owner(ticket, caller)
        return ticket


def check_owner(ticket: Ticket, caller: str | None) -> None:
    """Refuse a ticket issued to another user than ``caller`` (``None``: not known yet)."""
    if caller is not None and ticket.user != caller:
        raise flight.FlightUnauthorizedError("ticket was issued to another user (or an earlier account of this name)")


# -- splits as payload -----------------------------------------------------------------------


def split_to_json(split: Split) -> Doc:
    """A split as ticket payload: the slice's files, the owned row groups and the estimates."""
    fs = split.file_slice
    doc: Doc = {
        "p": fs.partition,
        "f": fs.file_id,
        "bi": fs.base_instant,
        "b": [fs.base_file.name, fs.base_file.size] if fs.base_file else None,
        "l": [[lf.name, lf.size] for lf in fs.log_files],
        "n": [split.bytes, split.estimated_rows, split.weight],
    }
    if split.row_groups is not None:
        doc["rg"] = list(split.row_groups)
    if fs.bootstrap_source is not None:
        doc["bs"] = fs.bootstrap_source
    return doc


def split_from_json(doc: Any) -> Split:
    """Rebuild the split a ticket names."""
    try:
        base = BaseFile.parse(doc["b"][0], doc["b"][1]) if doc["b"] else None
        logs = [LogFile.parse(name, size) for name, size in doc["l"]]
        if (doc["b"] and base is None) or any(lf is None for lf in logs):
            raise ValueError("unparseable file name")
        source = doc.get("bs")
        if source is not None and not isinstance(source, str):
            raise ValueError("bootstrap source is not a path")
        fs = FileSlice(doc["p"], doc["f"], doc["bi"], base, logs, source)  # type: ignore[arg-type]
        nbytes, rows, weight = doc.get("n") or (0, 0, 1.0)
        row_groups = doc.get("rg")
        return Split(
            fs, int(nbytes), int(rows), float(weight), row_groups=tuple(row_groups) if row_groups is not None else None
        )
    except (KeyError, TypeError, IndexError, ValueError, AttributeError) as err:
        raise InvalidQueryError("ticket names an invalid file slice") from err


def parameters_ipc(batch: pa.RecordBatch) -> bytes:
    """A parameter row as an Arrow IPC stream (how a prepared handle carries it)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


__all__ = [
    "AggregateTicket",
    "CountTicket",
    "PinnedScan",
    "PreparedHandle",
    "ScanTicket",
    "SplitTicket",
    "StatementTicket",
    "Ticket",
    "TicketCodec",
    "check_owner",
    "parameters_ipc",
    "split_from_json",
    "split_to_json",
]
