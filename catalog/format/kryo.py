"""Kryo-serialized delete block payloads (delete block content versions 1 and 2, Hudi <= 0.13).

Delete block content is ``int32 version | int32 length | payload``; versions 1 and 2 hold
``Kryo.writeClassAndObject`` of an array (version 3 is Avro, see ``log_block``):

* version 1 (Hudi <= 0.10): ``HoodieKey[]``
* version 2 (Hudi 0.11-0.13): ``DeleteRecord[]`` (a HoodieKey and an ordering value)

Hudi's Kryo setup (``SerializationUtils.KryoInstantiator``): Kryo 4, registration not required
(classes written by name), references on, default ``FieldSerializer`` with fields in alphabetical
order: ``HoodieKey(partitionPath, recordKey)``, ``DeleteRecord(hoodieKey, orderingVal)``.

Byte layout, for example a ``DeleteRecord[]`` of one record::

    01 00 "[Lorg.apache.hudi.common.model.DeleteRecord;"  class by name (id 1 = by name), name id 0
    01                                                    reference marker: new object
    02                                                    array length + 1
      01 01 "org.apache.hudi.common.model.DeleteRecord"   element class by name, name id 1
      01                                                  new object
        01 02 "org.apache.hudi.common.model.HoodieKey" 01  hoodieKey: class + new object
          01 "p=1"   01 "k1"                             partitionPath, recordKey: ref marker + string
        02 00                                             orderingVal: registered int (id 0 + 2), zigzag 0

Reference markers: 0 = null, 1 = a new object (it gets the next reference id), n >= 2 = the
object with reference id n - 2 (equal String objects are written once). Strings: ASCII with the
last byte | 0x80, or a "UTF-8 length" (char count + 1; 0x80 = null) then modified UTF-8.

Only the shapes Hudi writes are decoded; anything else (a KryoSerializable HoodieKey of early
0.13.0, an Avro ``Utf8`` ordering value of 0.11/0.12, unknown classes) raises
``UnsupportedTableError`` rather than guess. Verified against Kryo 4.0.3 output (tests).
"""

from __future__ import annotations

import struct
from typing import Any

from catalog.errors import CorruptTableError, UnsupportedTableError

HOODIE_KEY = "org.apache.hudi.common.model.HoodieKey"
DELETE_RECORD = "org.apache.hudi.common.model.DeleteRecord"
_ARRAYS = {1: f"[L{HOODIE_KEY};", 2: f"[L{DELETE_RECORD};"}
# Kryo 4 default registrations (id -> class) of the values an ordering field may hold
_REGISTERED = dict(enumerate(("int", "String", "float", "boolean", "byte", "char", "short", "long", "double")))


class _Reader:
    def __init__(self, data: bytes, where: str):
        self.b, self.p, self.where = data, 0, where
        self.names: dict[int, str] = {}  # class-name ids
        self.refs: list[Any] = []  # referenceable objects in first-written order

    def unsupported(self, what: str) -> UnsupportedTableError:
        return UnsupportedTableError(
            f"{self.where}: Kryo delete payload holds {what}, which this reader does not decode"
        )

    def byte(self) -> int:
        v = self.b[self.p]
        self.p += 1
        return v

    def varint(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def zigzag(self) -> int:
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def string(self) -> str | None:
        b = self.b[self.p]
        if not b & 0x80:  # ASCII: the last byte carries bit 7
            start = self.p
            while not self.b[self.p] & 0x80:
                self.p += 1
            self.p += 1
            raw = bytearray(self.b[start : self.p])
            raw[-1] &= 0x7F
            return raw.decode("ascii")
        self.p += 1
        n = b & 0x3F
        if b & 0x40:
            shift = 6
            while True:
                c = self.byte()
                n |= (c & 0x7F) << shift
                if not c & 0x80:
                    break
                shift += 7
        if n == 0:
            return None
        units = []
        for _ in range(n - 1):  # modified UTF-8, one UTF-16 unit each
            c = self.byte()
            if c < 0x80:
                units.append(c)
            elif c >> 5 == 0b110:
                units.append((c & 0x1F) << 6 | self.byte() & 0x3F)
            else:
                c2, c3 = self.byte(), self.byte()
                units.append((c & 0x0F) << 12 | (c2 & 0x3F) << 6 | c3 & 0x3F)
        return b"".join(struct.pack(">H", u) for u in units).decode("utf-16-be", "surrogatepass")

    def klass(self) -> str | None:
        cid = self.varint()
        if cid == 0:
            return None
        if cid == 1:
            name_id = self.varint()
            if name_id not in self.names:
                name = self.string()
                if name is None:
                    raise CorruptTableError(f"{self.where}: Kryo class name is null")
                self.names[name_id] = name
            return self.names[name_id]
        if cid - 2 in _REGISTERED:
            return _REGISTERED[cid - 2]
        raise self.unsupported(f"registered class id {cid - 2}")

    def reference(self) -> tuple[bool, Any]:
        marker = self.varint()
        if marker == 0:
            return False, None
        if marker == 1:
            return True, None
        if marker - 2 >= len(self.refs):
            raise CorruptTableError(f"{self.where}: Kryo back-reference {marker - 2} to an unknown object")
        return False, self.refs[marker - 2]

    def string_field(self) -> str | None:
        new, old = self.reference()
        if not new:
            return old
        s = self.string()
        self.refs.append(s)
        return s

    def new_slot(self) -> int:
        self.refs.append(None)
        return len(self.refs) - 1

    def object(self) -> Any:
        """One ``writeClassAndObject`` value."""
        name = self.klass()
        if name is None:
            return None
        if name in ("int", "long"):
            return self.zigzag()
        if name in ("float", "double", "boolean", "byte", "short", "char"):
            return self.fixed(name)
        new, old = self.reference()
        if not new:
            return old
        if name == "String":
            s = self.string()
            self.refs.append(s)
            return s
        if name == HOODIE_KEY:
            slot = self.new_slot()
            key = {"partitionPath": self.string_field(), "recordKey": self.string_field()}
            self.refs[slot] = key
            return key
        if name == DELETE_RECORD:
            slot = self.new_slot()
            rec = {"hoodieKey": self.object(), "orderingVal": self.object()}
            self.refs[slot] = rec
            return rec
        if name in _ARRAYS.values():
            slot = self.new_slot()
            n = self.varint() - 1
            arr = [self.object() for _ in range(max(n, 0))]
            self.refs[slot] = arr
            return arr
        raise self.unsupported(f"class {name}")

    def fixed(self, name: str) -> Any:
        if name == "float":
            (v,) = struct.unpack_from(">f", self.b, self.p)
            self.p += 4
            return v
        if name == "double":
            (v,) = struct.unpack_from(">d", self.b, self.p)
            self.p += 8
            return v
        if name == "boolean":
            return self.byte() == 1
        if name == "byte":
            return struct.unpack(">b", bytes([self.byte()]))[0]
        (u,) = struct.unpack_from(">H" if name == "char" else ">h", self.b, self.p)
        self.p += 2
        return chr(u) if name == "char" else u


def decode_kryo_deletes(version: int, payload: bytes, where: str = "delete block") -> list[tuple[Any, Any, Any]]:
    """``(recordKey, partitionPath, orderingVal)`` of a version 1 or 2 delete payload
    (``orderingVal`` is ``None`` in version 1: those deletes apply regardless of ordering)."""
    if version not in _ARRAYS:
        raise UnsupportedTableError(f"{where}: Kryo delete payloads exist in block versions 1 and 2, not {version}")
    reader = _Reader(payload, where)
    try:
        if _Reader(payload, where).klass() != _ARRAYS[version]:
            raise reader.unsupported(f"a value other than {_ARRAYS[version]}")
        arr = reader.object()
    except (IndexError, struct.error, UnicodeDecodeError) as err:
        raise CorruptTableError(f"{where}: Kryo delete payload does not decode ({err!r})") from err
    if reader.p != len(payload) or not isinstance(arr, list):
        raise CorruptTableError(f"{where}: Kryo delete payload has {len(payload) - reader.p} trailing bytes")
    out = []
    for item in arr:
        if not isinstance(item, dict):
            raise CorruptTableError(f"{where}: null entry in Kryo delete payload")
        if version == 1:
            out.append((item["recordKey"], item["partitionPath"], None))
        else:
            key = item["hoodieKey"] or {}
            out.append((key.get("recordKey"), key.get("partitionPath"), item["orderingVal"]))
    return out


__all__ = ["decode_kryo_deletes"]
