"""The ``before``/``after`` images of CDC rows as JSON text, written the way Spark's Hudi CDC
query writes them, so that the strings are equal, not just equivalent.

Spark writes an image in one of two ways, depending on where the record comes from:

* a record read from a file slice (inserts of a new base file, deletes, merge-on-read log files,
  and the images the key-only logging modes leave out): Jackson over the row, every column of
  the table schema (meta columns included) in schema order, null values left out, no spaces
  (``{"_hoodie_commit_time":"2024...","id":"a","price":1.5}``): :meth:`ImageWriter.jackson`;
* an image stored in a ``.cdc`` log file: Avro's ``GenericData.toString`` of the record, the
  fields of the logged image schema (no meta columns), nulls written, ``", "`` and ``": "``
  separators, and the text ``null`` for a missing image: :meth:`ImageWriter.avro`.

Numbers follow Java's ``Double.toString``/``Float.toString``; dates are days and timestamps
microseconds since the epoch (Spark's internal values). Column types whose Spark rendering we
do not reproduce (decimals, binary, nested and map types) are refused by name.
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from catalog.errors import UnsupportedTableError

Formatter = Callable[[Any], str]


def java_double(value: float) -> str:
    """``Double.toString(value)``: plain notation for 1e-3 <= |x| < 1e7, else ``d.dddE<n>``."""
    text = repr(float(value))
    if 1e-3 <= abs(value) < 1e7 and "e" not in text:
        return text  # Python's shortest repr is already Java's plain notation here
    return _java_number(value, text)


def java_float(value: float) -> str:
    """``Float.toString(value)`` of a 32-bit float (its shortest repr, Java's notation)."""
    return _java_number(value, _float32_shortest(value))


def _as_float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _float32_shortest(value: float) -> str:
    """The fewest significant digits that read back as the same 32-bit float."""
    single = _as_float32(value)
    for digits in range(1, 10):
        text = f"{single:.{digits}g}"
        if _as_float32(float(text)) == single:
            return text
    return repr(single)  # not reached for finite floats: 9 digits always round-trip


def _java_number(value: float, shortest: str) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits_t, exponent = Decimal(shortest).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    exponent += len(digits_t) - len(digits)
    point = len(digits) + exponent  # digits before the decimal point
    prefix = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{prefix}{digits}{'0' * (point - len(digits))}.0"
        return f"{prefix}{digits[:point]}.{digits[point:]}"
    return f"{prefix}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def _avro_string(text: str) -> str:
    """A string as Avro's ``GenericData.toString`` quotes it."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _AVRO_ESCAPES:
            out.append(_AVRO_ESCAPES[ch])
        elif code <= 0x1F or 0x7F <= code <= 0x9F or 0x2000 <= code <= 0x20FF:
            out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_AVRO_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


#: Jackson's escaping: ``"``, backslash, short escapes and ``\u00XX`` for control characters,
#: everything else as is (what ``json.dumps(text, ensure_ascii=False)`` writes)
_jackson_string: Formatter = encode_basestring


def _quoted_special(render: Formatter) -> Formatter:
    """NaN and infinities are written as quoted strings (Jackson's default)."""

    def fmt(value: Any) -> str:
        text = render(value)
        return f'"{text}"' if text in ("NaN", "Infinity", "-Infinity") else text

    return fmt


def _formatter(field: pa.Field, string: Formatter) -> Formatter:
    t = field.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return string
    if pa.types.is_boolean(t):
        return lambda v: "true" if v else "false"
    if pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t):
        return str
    if pa.types.is_float64(t):
        return _quoted_special(java_double)
    if pa.types.is_float32(t):
        return _quoted_special(java_float)
    raise UnsupportedTableError(
        f"CDC query: column {field.name!r} of type {t} is not supported in before/after images"
    )


def check_image_schema(schema: pa.Schema) -> None:
    """Refuse, by column, a table whose images this module cannot write as Spark does."""
    for field in schema:
        _formatter(field, _jackson_string)


def _plain(array: pa.Array | pa.ChunkedArray, micros: bool) -> list[Any]:
    """Python values of a column, dates and timestamps as the integers Spark holds.

    ``micros``: timestamps in microseconds (Spark rows); else in their stored unit (Avro records).
    """
    t = array.type
    if pa.types.is_timestamp(t):
        if micros and t.unit != "us":
            array = pc.cast(array, pa.timestamp("us", t.tz), safe=False)
        array = pc.cast(array, pa.int64())
    elif pa.types.is_date(t):
        array = pc.cast(array, pa.int32() if pa.types.is_date32(t) else pa.int64())
    return array.to_pylist()


class ImageWriter:
    """Writes rows of one schema as CDC images (see the module docstring for the two forms)."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self._jackson = [(_jackson_string(f.name), _formatter(f, _jackson_string)) for f in schema]

    def jackson(self, table: pa.Table) -> list[str]:
        """One image per row of ``table`` (columns of this writer's schema), as Spark writes
        records it read from a file slice."""
        if not self._jackson:
            return ["{}"] * table.num_rows
        columns = []  # per column: '"name":value' per row, None for a null (left out)
        for (name, fmt), field in zip(self._jackson, self.schema):
            prefix = name + ":"
            values = _plain(table.column(field.name), micros=True)
            columns.append([None if v is None else prefix + fmt(v) for v in values])
        return ["{" + ",".join([part for part in row if part is not None]) + "}" for row in zip(*columns)]


def avro_images(images: pa.Array | pa.ChunkedArray) -> list[str]:
    """One image per element of a struct column decoded from a ``.cdc`` log (``"null"`` for a
    missing image), as Avro's ``GenericData.toString`` writes the record."""
    if isinstance(images, pa.ChunkedArray):
        return [text for chunk in images.chunks for text in avro_images(chunk)]
    struct_type = images.type
    if not pa.types.is_struct(struct_type):
        raise UnsupportedTableError(f"CDC log image of type {struct_type} is not a record")
    fields = [struct_type.field(i) for i in range(struct_type.num_fields)]
    formats = [(_avro_string(f.name), _formatter(f, _avro_string)) for f in fields]
    columns = [_plain(pc.struct_field(images, [i]), micros=False) for i in range(len(fields))]
    valid = images.is_valid().to_pylist()
    rows = zip(*columns) if columns else iter([()] * len(images))
    out = []
    for ok, row in zip(valid, rows):
        if not ok:
            out.append("null")
            continue
        parts = [f"{name}: {'null' if v is None else fmt(v)}" for (name, fmt), v in zip(formats, row)]
        out.append("{" + ", ".join(parts) + "}")
    return out


__all__ = ["ImageWriter", "avro_images", "check_image_schema", "java_double", "java_float"]
