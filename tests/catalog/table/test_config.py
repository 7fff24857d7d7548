"""hoodie.properties parsing (format doc 1.2) and typed table settings (1.3)."""

from __future__ import annotations

import pytest

from catalog.errors import CorruptTableError, UnsupportedTableError
from catalog.storage import Storage
from catalog.table.config import TableConfig, parse_properties


def test_java_properties_escapes_and_separators():
    text = "\n".join(
        [
            "# comment",
            "! also a comment",
            "a=1",
            "b: 2",
            "c 3",
            "  d   =   spaced value  ",
            r"schema={\"type\"\:\"record\"}",
            r"key\=with\:seps=v",
            r"unicode=caf\u00e9\tx",
            "multi=first \\",
            "    second",
            "empty=",
            "bare",
        ]
    )
    props = parse_properties(text)
    assert props["a"] == "1" and props["b"] == "2" and props["c"] == "3"
    assert props["d"] == "spaced value  "
    assert props["schema"] == '{"type":"record"}'
    assert props["key=with:seps"] == "v"
    assert props["unicode"] == "café\tx"
    assert props["multi"] == "first second"
    assert props["empty"] == "" and props["bare"] == ""


def test_bad_unicode_escape_is_corrupt():
    with pytest.raises(CorruptTableError, match="uXXXX"):
        parse_properties(r"k=\u00zz")


def _config(**extra: str) -> TableConfig:
    props = {"hoodie.table.type": "MERGE_ON_READ", "hoodie.table.version": "8"}
    props.update(extra)
    return TableConfig.from_properties(props)


def test_defaults_by_version():
    v8 = _config()
    assert v8.timeline_layout_version == 2 and v8.timeline_path == "timeline"
    assert v8.base_file_format == "PARQUET" and v8.populate_meta_fields
    assert not v8.is_partitioned and v8.merge_mode == "COMMIT_TIME_ORDERING"
    v6 = _config(**{"hoodie.table.version": "6"})
    assert v6.timeline_layout_version == 1


def test_typed_settings():
    cfg = _config(
        **{
            "hoodie.table.partition.fields": "region:SIMPLE, ts:TIMESTAMP",
            "hoodie.table.recordkey.fields": "id,name",
            "hoodie.table.precombine.field": "ts",
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.datasource.write.partitionpath.urlencode": "TRUE",
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.populate.meta.fields": "false",
            "hoodie.table.base.file.format": "parquet",
            "hoodie.table.metadata.partitions": "files,column_stats,record_index",
            "hoodie.table.metadata.partitions.inflight": "record_index",
            "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
            "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
            "hoodie.deltastreamer.keygen.timebased.output.dateformat": "yyyy/MM/dd",
        }
    )
    assert cfg.partition_fields == ["region", "ts"]
    assert cfg.record_key_fields == ["id", "name"] and cfg.ordering_fields == ["ts"]
    assert cfg.hive_style_partitioning and cfg.url_encoded_partitioning and not cfg.drop_partition_columns
    assert not cfg.populate_meta_fields and cfg.base_file_format == "PARQUET"
    assert cfg.usable_metadata_partitions == ["files", "column_stats"]
    assert cfg.merge_mode == "EVENT_TIME_ORDERING"
    assert cfg.timestamp_keygen_options() == {"timestamp.type": "EPOCHMILLISECONDS", "output.dateformat": "yyyy/MM/dd"}


@pytest.mark.parametrize(
    "payload, mode",
    [
        ("org.apache.hudi.common.model.OverwriteWithLatestAvroPayload", "COMMIT_TIME_ORDERING"),
        ("org.apache.hudi.common.model.DefaultHoodieRecordPayload", "EVENT_TIME_ORDERING"),
        ("org.apache.hudi.common.model.AWSDmsAvroPayload", "COMMIT_TIME_ORDERING"),
        ("com.example.MyPayload", "CUSTOM"),
    ],
)
def test_v6_merge_mode_from_payload(payload, mode):
    cfg = _config(
        **{"hoodie.table.version": "6", "hoodie.compaction.payload.class": payload, "hoodie.table.precombine.field": "ts"}
    )
    assert cfg.merge_mode == mode


@pytest.mark.parametrize("version", ["3", "4", "5"])
def test_pre_v6_merge_mode_without_payload_is_commit_time(version):
    """Hudi 0.x defaulted the payload class to OverwriteWithLatestAvroPayload (latest write wins)
    even with a precombine field; v6 without a payload infers event-time ordering from it."""
    cfg = _config(**{"hoodie.table.version": version, "hoodie.table.precombine.field": "ts"})
    assert (cfg.table_version, cfg.merge_mode) == (int(version), "COMMIT_TIME_ORDERING")
    v6 = _config(**{"hoodie.table.version": "6", "hoodie.table.precombine.field": "ts"})
    assert v6.merge_mode == "EVENT_TIME_ORDERING"


@pytest.mark.parametrize(
    "props, error, message",
    [
        ({"hoodie.table.version": "6"}, CorruptTableError, "hoodie.table.type"),
        ({"hoodie.table.type": "COPY_ON_WRITE"}, CorruptTableError, "hoodie.table.version"),
        ({"hoodie.table.type": "COPY_ON_WRITE", "hoodie.table.version": "2"}, UnsupportedTableError, "version 2 is not"),
        ({"hoodie.table.type": "COPY_ON_WRITE", "hoodie.table.version": "7"}, UnsupportedTableError, "version 7 is not"),
        ({"hoodie.table.type": "COPY_ON_WRITE", "hoodie.table.version": "10"}, UnsupportedTableError, "version 10 is"),
        (
            {"hoodie.table.type": "COPY_ON_WRITE", "hoodie.table.version": "6", "hoodie.table.base.file.format": "CSV"},
            CorruptTableError,
            "base.file.format",
        ),
        (
            {"hoodie.table.type": "COPY_ON_WRITE", "hoodie.table.version": "8", "hoodie.timeline.layout.version": "3"},
            UnsupportedTableError,
            "layout.version 3",
        ),
        (
            {"hoodie.table.type": "COPY_ON_WRITE", "hoodie.table.version": "8", "hoodie.record.merge.mode": "NEWEST"},
            CorruptTableError,
            "merge.mode",
        ),
    ],
)
def test_bad_config(props, error, message):
    with pytest.raises(error, match=message):
        TableConfig.from_properties(props)


def test_fixture_configs(fixture_table):
    cfg = TableConfig.load(Storage(fixture_table("sample_table/cow/v6_complexkeygen_hivestyle")))
    assert (cfg.table_type, cfg.table_version, cfg.timeline_layout_version) == ("COPY_ON_WRITE", 6, 1)
    assert cfg.partition_fields == ["byteField", "shortField"] and cfg.hive_style_partitioning
    assert cfg.record_key_fields == ["id", "name"]
    assert cfg.create_schema and cfg.create_schema.startswith('{"type":"record"')
    ts = TableConfig.load(Storage(fixture_table("sample_table/cow/v9_timebasedkeygen_epochmillis")))
    assert ts.is_timestamp_keygen and ts.table_version == 9
    assert ts.timestamp_keygen_options()["timestamp.type"] == "EPOCHMILLISECONDS"


def test_delete_marker_from_merge_properties_or_the_dms_payload():
    """Table version 9 keeps a payload's delete marker among its merge properties; a version 6
    table naming ``AWSDmsAvroPayload`` only has its fixed ``Op`` = ``D``."""
    v9 = _config(**{"hoodie.table.version": "9", "hoodie.record.merge.property.hoodie.payload.delete.field": "kind",
                    "hoodie.record.merge.property.hoodie.payload.delete.marker": "gone"})
    assert v9.delete_marker == ("kind", "gone")
    dms = _config(**{"hoodie.table.version": "6", "hoodie.compaction.payload.class": "x.AWSDmsAvroPayload"})
    assert dms.delete_marker == ("Op", "D")
    assert _config().delete_marker is None


@pytest.mark.parametrize(("value", "mode"), [(None, None), ("NONE", None), ("ignore_defaults", "IGNORE_DEFAULTS")])
def test_partial_update_mode(value, mode):
    extra = {"hoodie.table.partial.update.mode": value} if value is not None else {}
    assert _config(**{"hoodie.table.version": "9", **extra}).partial_update_mode == mode
