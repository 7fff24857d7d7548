"""Stateless, signed Flight SQL handles: prepared statements and statement tickets.

Both are tickets of :class:`~flight_server.server.security.tickets.TicketSigner` (``hf1.`` + base64url JSON
payload + ``.`` + HMAC-SHA256), so any server process holding the ticket secret can serve them,
nobody can forge or alter one, and they expire. A ``"k"`` key tells the kinds apart (split tickets
of the JSON path have none), so a handle of one kind is never accepted as another.

- prepared statement (``"k": "prep"``): ``"q"`` the SQL, ``"p"`` the bound parameters (an Arrow IPC
  stream, base64, one row; absent until bound), ``"u"`` the user who prepared it.
- statement ticket (``"k": "sql"``): ``"q"`` the engine SQL over ``__hudi_scan_<i>`` views,
  ``"s"`` one ``[view, table, base URI, pinned options]`` per scan (each options' instants written
  out at planning, so every endpoint reads the same table state), ``"u"`` the user.
- count ticket (``"k": "count"``): ``"n"`` the column name, ``"c"`` the count (answered from
  metadata), ``"s"`` the one table it counted as ``[null, table, base URI, pinned options]``,
  ``"u"`` the user.
- catalog statement ticket (``"k": "show"``): ``"q"`` the ``SHOW``/``DESCRIBE`` text (answered
  again when read, so the caller's rights then apply), ``"u"`` the user.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from catalog.errors import InvalidTicketError
from flight_server.server.security.limits import Limits
from flight_server.server.security.tickets import TicketSigner

PREPARED = "prep"
STATEMENT = "sql"
COUNT = "count"
SHOW = "show"


@dataclass(frozen=True)
class PreparedStatement:
    """A prepared statement: its SQL, the bound parameter row (``None``: not bound) and its user."""

    sql: str
    parameters: pa.RecordBatch | None
    user: str

    def sign(self, signer: TicketSigner) -> bytes:
        doc: dict[str, Any] = {"k": PREPARED, "q": self.sql, "u": self.user}
        if self.parameters is not None:
            doc["p"] = base64.b64encode(parameters_ipc(self.parameters)).decode()
        return signer.sign(doc, signer.expiry())

    @classmethod
    def verify(cls, handle: bytes, signer: TicketSigner, limits: Limits) -> "PreparedStatement":
        limits.check_ticket(handle)
        doc = _verify(handle, signer, PREPARED)
        raw = doc.get("p")
        parameters = None
        if raw is not None:
            try:
                data = base64.b64decode(raw, validate=True)
                with pa.ipc.open_stream(data) as reader:
                    parameters = reader.read_all().combine_chunks().to_batches()[0]
            except (binascii.Error, ValueError, IndexError, pa.ArrowException, TypeError) as err:
                raise InvalidTicketError("prepared statement handle carries unreadable parameters") from err
        return cls(_text(doc, "q"), parameters, _text(doc, "u"))

    def parameter_values(self) -> list[Any] | None:
        """The bound row as Python values (``None``: nothing bound)."""
        if self.parameters is None:
            return None
        return [column[0].as_py() for column in self.parameters.columns]


def parameters_ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def sign_statement(signer: TicketSigner, doc: dict[str, Any], expires_at: float) -> bytes:
    """A statement or count ticket (``doc`` holds ``"k"`` and its fields)."""
    return signer.sign(doc, expires_at)


def verify_statement(ticket: bytes, signer: TicketSigner, limits: Limits) -> dict[str, Any]:
    """The payload of a genuine, unexpired statement or count ticket."""
    limits.check_ticket(ticket)
    doc = signer.verify(ticket)
    if doc.get("k") not in (STATEMENT, COUNT, SHOW):
        raise InvalidTicketError("not a Flight SQL statement ticket")
    return doc


def _verify(handle: bytes, signer: TicketSigner, kind: str) -> dict[str, Any]:
    doc = signer.verify(handle)
    if doc.get("k") != kind:
        raise InvalidTicketError("not a prepared statement handle")
    return doc


def _text(doc: dict[str, Any], key: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str):
        raise InvalidTicketError("handle payload is incomplete")
    return value


__all__ = ["COUNT", "PREPARED", "SHOW", "STATEMENT", "PreparedStatement", "parameters_ipc", "sign_statement",
           "verify_statement"]
