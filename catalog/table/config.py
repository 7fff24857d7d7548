"""Typed view of ``.hoodie/hoodie.properties`` (format doc sections 1.2-1.3)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from catalog.errors import CorruptTableError, StorageUnavailableError, TableNotFoundError, UnsupportedTableError
from catalog.storage import Storage

PROPERTIES_PATH = ".hoodie/hoodie.properties"
BACKUP_PATH = ".hoodie/hoodie.properties.backup"
SUPPORTED_VERSIONS = (3, 4, 5, 6, 8, 9)
TIMESTAMP_KEYGEN_PREFIXES = ("hoodie.keygen.timebased.", "hoodie.deltastreamer.keygen.timebased.")

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_KEY_END = re.compile(r"(?<!\\)[=: \t]")


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise CorruptTableError(f"malformed \\uXXXX escape in properties: {text[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: comments, ``=``/``:``/blank separators, escapes, continuations."""
    props: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        # A line ending in an odd number of backslashes continues on the next line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        m = _KEY_END.search(line)
        if m is None:
            key, value = line, ""
        else:
            key = line[: m.start()]
            rest = line[m.start() :].lstrip(" \t")
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip(" \t")
            value = rest
        props[_unescape(key)] = _unescape(value)
    return props


def _bool(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() == "true"


def _list(value: str | None) -> list[str]:
    if not value:
        return []
    return [v.strip() for v in value.split(",") if v.strip()]


@dataclass(frozen=True)
class TableConfig:
    """The settings of a Hudi table that a reader needs, typed."""

    properties: Mapping[str, str] = field(repr=False)
    table_name: str
    table_type: str
    table_version: int
    timeline_layout_version: int
    timeline_path: str
    timeline_history_path: str
    archive_folder: str
    record_key_fields: list[str]
    partition_fields: list[str]
    ordering_fields: list[str]
    key_generator: str
    hive_style_partitioning: bool
    url_encoded_partitioning: bool
    drop_partition_columns: bool
    populate_meta_fields: bool
    base_file_format: str
    metadata_partitions: list[str]
    metadata_partitions_inflight: list[str]
    merge_mode: str
    payload_class: str
    create_schema: str | None
    timeline_timezone: str

    @property
    def is_mor(self) -> bool:
        return self.table_type == "MERGE_ON_READ"

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_fields)

    @property
    def is_timestamp_keygen(self) -> bool:
        return "TIMESTAMP" in self.key_generator.upper() or "TIMEBASED" in self.key_generator.upper()

    @property
    def cdc_enabled(self) -> bool:
        """``hoodie.table.cdc.enabled``: the writer logs changes (``.cdc`` log files) for CDC queries."""
        return _bool(self.properties.get("hoodie.table.cdc.enabled"), False)

    @property
    def cdc_logging_mode(self) -> str:
        """``hoodie.table.cdc.supplemental.logging.mode`` as ``OP_KEY_ONLY``, ``DATA_BEFORE`` or
        ``DATA_BEFORE_AFTER`` (the default); the names of Hudi 0.13 (``cdc_op_key``, ...) map to them."""
        raw = (self.properties.get("hoodie.table.cdc.supplemental.logging.mode") or "DATA_BEFORE_AFTER").strip()
        return _CDC_MODE_ALIASES.get(raw.lower(), raw.upper())

    @property
    def partial_update_mode(self) -> str | None:
        """``hoodie.table.partial.update.mode`` (table version 9): how a log record's columns holding
        defaults (``IGNORE_DEFAULTS``) or a marker (``FILL_UNAVAILABLE``) take the previous version's
        values; None when records replace each other whole."""
        mode = (self.properties.get("hoodie.table.partial.update.mode") or "").strip().upper()
        return mode if mode and mode != "NONE" else None

    @property
    def delete_marker(self) -> tuple[str, str] | None:
        """(column, value) marking a record as a delete besides ``_hoodie_is_deleted``: the table's
        merge properties (``hoodie.payload.delete.field`` / ``.marker``, table version 9), or
        ``AWSDmsAvroPayload``'s ``Op`` = ``D`` on tables that name the payload only."""
        column = self.properties.get(MERGE_PROPERTY + "hoodie.payload.delete.field")
        marker = self.properties.get(MERGE_PROPERTY + "hoodie.payload.delete.marker")
        if column and marker is not None:
            return column.strip(), marker
        if self.payload_class.endswith(AWS_DMS_PAYLOAD):
            return "Op", "D"
        return None

    @property
    def usable_metadata_partitions(self) -> list[str]:
        return [p for p in self.metadata_partitions if p not in self.metadata_partitions_inflight]

    def timestamp_keygen_options(self) -> dict[str, str]:
        """``hoodie.keygen.timebased.*`` settings with the prefix removed (legacy prefix accepted)."""
        out: dict[str, str] = {}
        for prefix in reversed(TIMESTAMP_KEYGEN_PREFIXES):
            for k, v in self.properties.items():
                if k.startswith(prefix):
                    out[k[len(prefix) :]] = v
        return out

    @classmethod
    def from_properties(cls, props: Mapping[str, str], *, source: str = PROPERTIES_PATH) -> "TableConfig":
        def required(key: str) -> str:
            value = props.get(key)
            if not value:
                raise CorruptTableError(f"{source}: required key {key!r} is missing")
            return value.strip()

        table_type = required("hoodie.table.type").upper()
        if table_type not in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            raise CorruptTableError(f"{source}: unknown hoodie.table.type {table_type!r}")
        version_text = required("hoodie.table.version")
        try:
            version = int(version_text)
        except ValueError:
            raise CorruptTableError(f"{source}: hoodie.table.version is not a number: {version_text!r}") from None
        if version not in SUPPORTED_VERSIONS:
            raise UnsupportedTableError(
                f"{source}: Hudi table version {version} is not supported (supported: 3, 4, 5, 6, 8 and 9)"
            )
        layout_text = props.get("hoodie.timeline.layout.version") or ("2" if version >= 8 else "1")
        try:
            layout = int(layout_text)
        except ValueError:
            raise CorruptTableError(f"{source}: bad hoodie.timeline.layout.version {layout_text!r}") from None
        if layout not in (1, 2):
            raise UnsupportedTableError(f"{source}: unsupported hoodie.timeline.layout.version {layout}")
        base_format = (props.get("hoodie.table.base.file.format") or "PARQUET").upper()
        if base_format not in ("PARQUET", "HFILE", "ORC", "LANCE"):
            raise CorruptTableError(f"{source}: unknown hoodie.table.base.file.format {base_format!r}")
        # v8+ CUSTOM key generator may write "field:TYPE" entries.
        partition_fields = [f.split(":", 1)[0] for f in _list(props.get("hoodie.table.partition.fields"))]
        ordering = props.get("hoodie.table.ordering.fields") or props.get("hoodie.table.precombine.field")
        keygen = props.get("hoodie.table.keygenerator.type") or props.get("hoodie.table.keygenerator.class") or ""
        payload = props.get("hoodie.table.legacy.payload.class") or props.get("hoodie.compaction.payload.class") or ""
        ordering_fields = _list(ordering)
        return cls(
            properties=dict(props),
            table_name=props.get("hoodie.table.name", ""),
            table_type=table_type,
            table_version=version,
            timeline_layout_version=layout,
            timeline_path=props.get("hoodie.timeline.path") or "timeline",
            timeline_history_path=props.get("hoodie.timeline.history.path") or "history",
            archive_folder=props.get("hoodie.archivelog.folder") or "archived",
            record_key_fields=_list(props.get("hoodie.table.recordkey.fields")),
            partition_fields=partition_fields,
            ordering_fields=ordering_fields,
            key_generator=keygen,
            hive_style_partitioning=_bool(props.get("hoodie.datasource.write.hive_style_partitioning"), False),
            url_encoded_partitioning=_bool(props.get("hoodie.datasource.write.partitionpath.urlencode"), False),
            drop_partition_columns=_bool(props.get("hoodie.datasource.write.drop.partition.columns"), False),
            populate_meta_fields=_bool(props.get("hoodie.populate.meta.fields"), True),
            base_file_format=base_format,
            metadata_partitions=_list(props.get("hoodie.table.metadata.partitions")),
            metadata_partitions_inflight=_list(props.get("hoodie.table.metadata.partitions.inflight")),
            merge_mode=_merge_mode(props, version, payload, ordering_fields),
            payload_class=payload,
            create_schema=props.get("hoodie.table.create.schema") or None,
            timeline_timezone=(props.get("hoodie.table.timeline.timezone") or "LOCAL").upper(),
        )

    @classmethod
    def load(cls, storage: Storage) -> "TableConfig":
        """Read the table's properties file (or its backup while an update is in progress)."""
        for path in (PROPERTIES_PATH, BACKUP_PATH):
            try:
                data = storage.read_bytes(path)
            except FileNotFoundError:
                continue
            except StorageUnavailableError:
                raise  # the table may well be there: storage did not answer
            except OSError as err:
                raise TableNotFoundError(f"cannot read {storage.uri}/{path}: {err}") from err
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as err:
                raise CorruptTableError(f"{storage.uri}/{path} is not valid UTF-8 text") from err
            return cls.from_properties(parse_properties(text), source=f"{storage.uri}/{path}")
        if storage.exists(".hoodie"):
            raise CorruptTableError(f"{storage.uri}: .hoodie exists but {PROPERTIES_PATH} (and its backup) is missing")
        raise TableNotFoundError(f"not a Hudi table: {storage.uri} has no {PROPERTIES_PATH}")


_CDC_MODE_ALIASES = {
    "cdc_op_key": "OP_KEY_ONLY",
    "cdc_data_before": "DATA_BEFORE",
    "cdc_data_before_after": "DATA_BEFORE_AFTER",
}

MERGE_MODES = ("EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING", "CUSTOM")
#: the prefix of the merge settings a table version 9 keeps in its properties (RFC-97)
MERGE_PROPERTY = "hoodie.record.merge.property."
#: a payload whose merge is the latest write's, with ``Op = 'D'`` marking deletes (what Hudi 1.1's
#: upgrade to table version 9 records as commit-time ordering and a delete marker)
AWS_DMS_PAYLOAD = "AWSDmsAvroPayload"
_STRATEGY_MODES = {
    "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5": "EVENT_TIME_ORDERING",
    "ce9acb64-bde0-424c-9b91-f6ebba25356d": "COMMIT_TIME_ORDERING",
}


def _merge_mode(props: Mapping[str, str], version: int, payload: str, ordering: list[str]) -> str:
    """The record merge mode, inferred for v6 tables the way Hudi 1.x infers it (format doc 7.1);
    tables before version 6 without a payload class used 0.x's default payload (latest write wins)."""
    explicit = (props.get("hoodie.record.merge.mode") or "").upper()
    if version >= 8 and explicit:
        if explicit not in MERGE_MODES:
            raise CorruptTableError(
                f"unknown hoodie.record.merge.mode {explicit!r}; expected one of {', '.join(MERGE_MODES)}"
            )
        mode = explicit
    elif payload.endswith("OverwriteWithLatestAvroPayload") or payload.endswith(AWS_DMS_PAYLOAD):
        mode = "COMMIT_TIME_ORDERING"
    elif payload.endswith("DefaultHoodieRecordPayload") or payload.endswith("EventTimeAvroPayload"):
        mode = "EVENT_TIME_ORDERING"
    elif payload:
        mode = "CUSTOM"
    else:
        strategy = props.get("hoodie.record.merge.strategy.id") or ""
        by_strategy = _STRATEGY_MODES.get(strategy) if version >= 8 else None
        if version < 6:
            # Hudi 0.x defaulted hoodie.compaction.payload.class to OverwriteWithLatestAvroPayload:
            # the latest write wins, whatever the precombine field says.
            mode = "COMMIT_TIME_ORDERING"
        else:
            mode = by_strategy or ("EVENT_TIME_ORDERING" if ordering else "COMMIT_TIME_ORDERING")
    if mode == "EVENT_TIME_ORDERING" and not ordering:
        return "COMMIT_TIME_ORDERING"
    return mode
