"""The table generator (hudi_generator) checked by independent readers: the ``hudi`` package
(hudi-rs) and, once it exists, catalog.HudiTable; plus byte-level checks of the writers."""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from hudi_generator import generator
from hudi_generator.generator import COPY_ON_WRITE, MERGE_ON_READ, GeneratorSpec, expected_table, generate
from hudi_generator.hfile_writer import HFileWriter
from hudi_generator.log_writer import avro_data_block, delete_block
from hudi_generator.properties import render_properties

SMALL = dict(rows=300, partitions=3, files_per_partition=2, commits=3, update_fraction=0.25, delete_fraction=0.05)


def _hudi_read(path: str) -> pa.Table:
    table = HudiTableBuilder.from_base_uri(path).build()
    return pa.Table.from_batches(table.read())


def _assert_same(actual: pa.Table, spec: GeneratorSpec) -> None:
    expected = expected_table(spec, with_meta=True).sort_by("uuid")
    got = actual.select(expected.column_names).sort_by("uuid").cast(expected.schema)
    assert got.num_rows == expected.num_rows
    for name in expected.column_names:
        assert got.column(name).equals(expected.column(name)), name


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
@pytest.mark.parametrize("metadata_table", [True, False])
def test_hudi_reads_generated_table(tmp_path: Path, table_type: str, metadata_table: bool) -> None:
    spec = GeneratorSpec(**SMALL, table_type=table_type, metadata_table=metadata_table)
    result = generate(str(tmp_path / "t"), spec)
    expected = expected_table(spec)
    # the evolution really did update and delete rows
    assert 0 < expected.num_rows < spec.rows
    assert result.live_rows == expected.num_rows
    assert pa.compute.sum(pa.compute.starts_with(expected["rider"], "rider-").cast(pa.int8())).as_py() == expected.num_rows
    assert pa.compute.any(pa.compute.invert(pa.compute.ends_with(expected["rider"], "-v1"))).as_py()
    _assert_same(_hudi_read(str(tmp_path / "t")), spec)


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_non_partitioned_and_two_level_tables(generated_table, table_type: str) -> None:
    paths = {}
    for name, extra in {"flat": dict(partitions=0), "two": dict(partitions=7, partition_levels=2, hive_style=False)}.items():
        spec = GeneratorSpec(**{**SMALL, **extra}, table_type=table_type)
        paths[name] = Path(generated_table(spec))
        _assert_same(_hudi_read(str(paths[name])), spec)
    assert (paths["two"] / "region-00000" / "2024-01-01" / ".hoodie_partition_metadata").exists()
    assert not any(p.is_dir() and p.name != ".hoodie" for p in paths["flat"].iterdir())


def test_hudi_plans_from_the_generated_metadata_table(generated_copy) -> None:
    """hudi-rs reads our HFiles: breaking the MDT base HFile makes its read fail."""
    spec = GeneratorSpec(**SMALL, table_type=MERGE_ON_READ)
    table = Path(generated_copy(spec))  # a private copy: its HFile gets broken below
    mdt = table / ".hoodie" / "metadata"
    props = (table / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.metadata.partitions=files\n" in props
    (hfile,) = (mdt / "files").glob("files-0000-0_*_00000000000000000.hfile")
    logs = sorted((mdt / "files").glob(".files-0000-0_*.log.1_*"))
    assert len(logs) == spec.commits + 1  # seeding delete block + one per data commit
    timeline = sorted(p.name for p in (mdt / ".hoodie" / "timeline").iterdir())
    deltacommits = [n for n in timeline if n.endswith(".deltacommit")]
    requested = [r for r, _ in spec.instants()]
    assert [n.split("_")[0] for n in deltacommits] == ["00000000000000000", *requested]
    hfile.write_bytes(hfile.read_bytes()[:100])
    with pytest.raises(Exception, match="HFile"):
        _hudi_read(str(table))
    # hudi-rs departure pinned: it plans from the MDT even with hoodie.metadata.enable=false (Java
    # would list storage), which is why storage-listing reads are checked on tables generated
    # without a metadata table (test_hudi_reads_generated_table[False-...]).
    builder = HudiTableBuilder.from_base_uri(str(table)).with_hudi_option("hoodie.metadata.enable", "false")
    with pytest.raises(Exception, match="HFile"):
        builder.build().read()


def test_timeline_and_commit_metadata_layout(tmp_path: Path) -> None:
    spec = GeneratorSpec(**SMALL, table_type=MERGE_ON_READ)
    result = generate(str(tmp_path / "t"), spec)
    tl = tmp_path / "t" / ".hoodie" / "timeline"
    names = sorted(p.name for p in tl.iterdir())
    for requested, completed in result.instants:
        assert f"{requested}.deltacommit.requested" in names
        assert f"{requested}.deltacommit.inflight" in names
        assert f"{requested}_{completed}.deltacommit" in names
        with open(tl / f"{requested}_{completed}.deltacommit", "rb") as f:
            reader = fastavro.reader(f)
            assert reader.writer_schema["name"] == "org.apache.hudi.avro.model.HoodieCommitMetadata"
            (meta,) = list(reader)
        stats = [s for group in meta["partitionToWriteStats"].values() for s in group]
        assert stats and all((tmp_path / "t" / s["path"]).stat().st_size == s["fileSizeInBytes"] for s in stats)
        schema = json.loads(meta["extraMetadata"]["schema"])
        assert [f["name"] for f in schema["fields"]][:2] == ["uuid", "ts"]
    logs = list((tmp_path / "t").glob("region=*/.*.log.1_*"))
    assert logs and all(p.name.split("_")[1].split(".")[0] in {r for r, _ in result.instants[1:]} for p in logs)


def test_log_block_framing_matches_format() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "k", "type": "string"}]}
    block = avro_data_block("20250101000000000", schema, [{"k": "a"}, {"k": "bc"}])
    assert block[:6] == b"#HUDI#"
    size = struct.unpack(">q", block[6:14])[0]
    assert len(block) == 14 + size
    assert struct.unpack(">q", block[-8:])[0] == size + 6
    version, btype, nheaders = struct.unpack(">iii", block[14:26])
    assert (version, btype, nheaders) == (1, 3, 2)
    dblock = delete_block("20250101000000000", [("key-1", "p=1")])
    content_len_at = dblock.index(b"20250101000000000") + 17
    content = dblock[content_len_at + 8:content_len_at + 8 + struct.unpack(">q", dblock[content_len_at:content_len_at + 8])[0]]
    assert struct.unpack(">i", content[:4])[0] == 3
    # recordKey branch 1 "key-1", partitionPath branch 1 "p=1", orderingVal branch 2 = IntWrapper, value 0
    assert content[8:] == b"\x02\x02\x0akey-1\x02\x06p=1\x04\x00\x00"


def _read_blocks(data: bytes, trailer_fields: dict) -> list[tuple[bytes, bytes]]:
    """Minimal test-side walk of an HFile's blocks (offsets from the trailer)."""
    out, off = [], 0
    while off < len(data) - 4096:
        magic = data[off:off + 8]
        on_disk, _, _ = struct.unpack(">iiq", data[off + 8:off + 24])
        with_header = struct.unpack(">i", data[off + 29:off + 33])[0]
        out.append((magic, zlib.decompress(data[off + 33:off + with_header], 16 + zlib.MAX_WBITS)))
        off += 33 + on_disk
    return out


def test_hfile_writer_layout() -> None:
    w = HFileWriter(block_size=64)
    rows = [f"key-{i:03d}".encode() for i in range(20)]
    w.extend((r, b"v" * i) for i, r in enumerate(rows))
    w.set_file_info("schema", b"{}")
    data = w.to_bytes()
    assert data[-4096:-4088] == b'TRABLK"$'
    assert data[-4:] == b"\x00\x00\x00\x03"
    blocks = _read_blocks(data, {})
    magics = [m for m, _ in blocks]
    assert magics[-3:] == [b"IDXROOT2", b"IDXROOT2", b"FILEINF2"]
    data_blocks = [body for m, body in blocks if m == b"DATABLK*"]
    assert len(data_blocks) > 1
    seen = []
    for body in data_blocks:
        pos = 0
        while pos < len(body):
            klen, vlen = struct.unpack(">ii", body[pos:pos + 8])
            key = body[pos + 8:pos + 8 + klen]
            rlen = struct.unpack(">H", key[:2])[0]
            assert klen == rlen + 12 and key[-9:] == b"\x7f\xff\xff\xff\xff\xff\xff\xff\x04"
            seen.append(key[2:2 + rlen])
            pos += 8 + klen + vlen + 1
    assert seen == rows
    with pytest.raises(ValueError, match="increasing"):
        w.add(b"key-000", b"")


def test_table_checksum_matches_fixture_values() -> None:
    from hudi_generator.properties import table_checksum

    # hoodie.table.checksum of quickstart_trips_table/mor/avro/v8_trips_8i3u1d and of its MDT
    assert table_checksum("default", "v8_trips_8i3u1d") == "1197752875"
    assert table_checksum("", "v8_trips_8i3u1d_metadata") == "380169000"


def test_properties_escaping() -> None:
    text = render_properties({"a.b": 'x:y=z {"k":1}', "path": "C:\\dir"}).decode()
    assert 'a.b=x\\:y\\=z {"k"\\:1}' in text.splitlines()
    assert "path=C\\:\\\\dir" in text.splitlines()


def test_bad_spec_and_existing_table(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="partition_levels"):
        generate(str(tmp_path / "x"), GeneratorSpec(partition_levels=3))
    with pytest.raises(ValueError, match="update_fraction"):
        GeneratorSpec(update_fraction=2).validate()
    generate(str(tmp_path / "t"), GeneratorSpec(rows=10, partitions=1))
    with pytest.raises(FileExistsError):
        generate(str(tmp_path / "t"), GeneratorSpec(rows=10, partitions=1))


def test_cli_writes_to_fsspec_memory(capsys: pytest.CaptureFixture) -> None:
    import fsspec

    uri = "memory://gen-cli/t"
    assert generator.main([uri, "--rows", "50", "--partitions", "2", "--commits", "2", "--table-type", "mor"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    # progress on stderr as the work goes: each file group, then each commit with its instant
    lines = err.splitlines()
    assert lines[-2:] == [f"commit {k}/2 completed: instant {summary['instants'][k - 1]}" for k in (1, 2)]
    assert lines[0].startswith("file groups written: 1/") and len(lines) == 2 + int(lines[0].rsplit("/", 1)[1])
    fs = fsspec.filesystem("memory")
    assert fs.exists("/gen-cli/t/.hoodie/hoodie.properties")
    assert fs.exists("/gen-cli/t/.hoodie/metadata/.hoodie/hoodie.properties")
    spec = GeneratorSpec(rows=50, partitions=2, commits=2, table_type=MERGE_ON_READ)
    assert summary["live_rows"] == expected_table(spec).num_rows
    with pytest.raises(SystemExit):
        generator.main([uri, "--partition-levels", "5"])


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
@pytest.mark.parametrize("use_mdt", [True, False])
def test_catalog_reader_agrees(generated_table, table_type: str, use_mdt: bool) -> None:
    import warnings

    import pyarrow.compute as pc

    from catalog import HudiTable
    from catalog.errors import MetadataTableFallbackWarning

    spec = GeneratorSpec(**SMALL, table_type=table_type, column_stats=True)
    path = generated_table(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)  # our MDT must be usable
        table = HudiTable.open(path, use_metadata_table=use_mdt)
        _assert_same(table.read(), spec)
        got = table.read(filters=[("fare", ">", 900.0), ("region", "=", "region-00001")])
    expected = expected_table(spec)
    mask = pc.and_(pc.greater(expected["fare"], 900.0), pc.equal(expected["region"], "region-00001"))
    assert sorted(got["uuid"].to_pylist()) == sorted(expected.filter(mask)["uuid"].to_pylist())



def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _hfile_cells(data: bytes) -> tuple[dict[str, bytes], list[tuple[bytes, bytes]]]:
    """Test-side decoding of a small GZ HFile: (file info, [(row, value)])."""
    info: dict[str, bytes] = {}
    cells = []
    for magic, body in _read_blocks(data, {}):
        if magic == b"FILEINF2":
            assert body[:4] == b"PBUF"
            n, pos = _varint(body, 4)
            end = pos + n
            while pos < end:
                _, pos = _varint(body, pos)
                ln, pos = _varint(body, pos)
                entry, pos = body[pos:pos + ln], pos + ln
                kv, j = {}, 0
                while j < len(entry):
                    tag, j = _varint(entry, j)
                    ll, j = _varint(entry, j)
                    kv[tag >> 3], j = entry[j:j + ll], j + ll
                info[kv[1].decode()] = kv.get(2, b"")
        elif magic == b"DATABLK*":
            pos = 0
            while pos < len(body):
                klen, vlen = struct.unpack(">ii", body[pos:pos + 8])
                key = body[pos + 8:pos + 8 + klen]
                row_len = struct.unpack(">H", key[:2])[0]
                cells.append((key[2:2 + row_len], body[pos + 8 + klen:pos + 8 + klen + vlen]))
                pos += 8 + klen + vlen + 1
    return info, cells


def _single_block_content(data: bytes, expected_type: int) -> bytes:
    """Content of a log file holding exactly one block (test-side framing walk)."""
    assert data[:6] == b"#HUDI#"
    block_size = struct.unpack(">q", data[6:14])[0]
    assert len(data) == 14 + block_size
    _, btype, n = struct.unpack(">iii", data[14:26])
    assert btype == expected_type
    pos = 26
    for _ in range(n):
        _, length = struct.unpack(">ii", data[pos:pos + 8])
        pos += 8 + length
    length = struct.unpack(">q", data[pos:pos + 8])[0]
    return data[pos + 8:pos + 8 + length]


def test_column_stats_key_matches_documented_examples() -> None:
    from hudi_generator.column_stats import column_stats_key

    key = column_stats_key("currency", "region=us", "f.parquet")
    assert key.startswith("/m6lxu4Dh5w=431THTTwO5Q=") and len(key) == 48
    assert column_stats_key("currency", "", "f.parquet")[12:24] == "FXThHwelITM="


def test_metadata_table_column_stats_match_files(generated_table) -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from hudi_generator.column_stats import column_stats_key

    spec = GeneratorSpec(rows=120, partitions=2, files_per_partition=1, commits=1, column_stats=True)
    table = Path(generated_table(spec))
    props = (table / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.metadata.partitions=column_stats,files\n" in props
    assert json.loads((table / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"]["column_stats"]
    first = spec.instants()[0][0]
    (log,) = (table / ".hoodie" / "metadata" / "column_stats").glob(f".col-stats-0000-0_{first}.log.1_*")
    info, cells = _hfile_cells(_single_block_content(log.read_bytes(), expected_type=4))
    schema = fastavro.parse_schema(json.loads(info["schema"]))
    stats = {}
    for row_key, value in cells:
        rec = fastavro.schemaless_reader(io.BytesIO(value), schema)
        assert rec["type"] == 3
        stats[row_key.decode()] = rec["ColumnStatsMetadata"]
    base_files = sorted(table.glob("region=*/*.parquet"))
    assert len(stats) == len(base_files) * 14  # 14 primitive columns: 5 meta + 9 data
    for path in base_files:
        data = pq.read_table(path)
        for column in ("fare", "uuid", "amount", "event_time", "_hoodie_record_key"):
            st = stats[column_stats_key(column, path.parent.name, path.name)]
            mm = pc.min_max(data[column])
            assert (st["minValue"]["value"], st["maxValue"]["value"]) == (mm["min"].as_py(), mm["max"].as_py())
            assert st["valueCount"] == data.num_rows and st["nullCount"] == data[column].null_count
            assert st["fileName"] == path.name and st["totalSize"] > 0
    _assert_same(_hudi_read(str(table)), spec)


@pytest.mark.s3
def test_generate_to_moto_s3_read_by_hudi() -> None:
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket="gen")
        options = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
        spec = GeneratorSpec(rows=120, partitions=2, commits=2, table_type=MERGE_ON_READ)
        generate("s3://gen/t", spec, storage_options=options)
        builder = HudiTableBuilder.from_base_uri("s3://gen/t")
        for key, value in {"aws_endpoint_url": endpoint, "aws_access_key_id": "testing", "aws_secret_access_key": "testing",
                           "aws_region": "us-east-1", "aws_allow_http": "true"}.items():
            builder = builder.with_storage_option(key, value)
        _assert_same(pa.Table.from_batches(builder.build().read()), spec)
    finally:
        server.stop()


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_fewer_rows_than_file_groups(tmp_path: Path, table_type: str) -> None:
    spec = GeneratorSpec(rows=3, partitions=4, files_per_partition=2, commits=3, update_fraction=0.5,
                         delete_fraction=0.3, table_type=table_type, column_stats=True)
    result = generate(str(tmp_path / "t"), spec)
    assert result.partitions == [f"region=region-0000{i}" for i in range(3)]
    assert not (tmp_path / "t" / "region=region-00003").exists()
    assert len({p.name.split("_")[0] for p in (tmp_path / "t").glob("region=*/*.parquet")}) == 3  # one group per row
    _assert_same(_hudi_read(str(tmp_path / "t")), spec)


def test_java_string_hash_sharding() -> None:
    from hudi_generator.metadata_table import java_string_hash, shard_of

    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322  # "hello".hashCode() in Java
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # the classic Integer.MIN_VALUE hash
    assert shard_of("polygenelubricants", 10) == 8  # Math.abs(MIN_VALUE) % 10 == -8 in Java
    assert all(0 <= shard_of(f"trip-{i:010d}", 7) < 7 for i in range(100))


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_record_index_locates_every_live_key(generated_table, table_type: str) -> None:
    """Our record_index (3 shards, with deletes in later commits), read by the catalog's MDT
    reader, locates every live key in the file group where hudi-rs finds it, and no deleted key."""
    from catalog import HudiTable

    spec = GeneratorSpec(**SMALL, table_type=table_type, record_index=True, record_index_shards=3)
    table = Path(generated_table(spec))
    rli = table / ".hoodie" / "metadata" / "record_index"
    first = spec.instants()[0][0]
    assert sorted(p.name.split("_")[0] for p in rli.glob(f".*_{first}.log.1_*")) == [f".record-index-000{i}-0" for i in range(3)]
    assert "hoodie.table.metadata.partitions=files,record_index\n" in (table / ".hoodie" / "hoodie.properties").read_text()
    oracle = _hudi_read(str(table))
    _assert_same(oracle, spec)
    where = {k: (p, f.split("_")[0]) for k, p, f in zip(oracle["uuid"].to_pylist(), oracle["_hoodie_partition_path"].to_pylist(),
                                                        oracle["_hoodie_file_name"].to_pylist())}
    deleted = sorted({f"trip-{i:010d}" for i in range(spec.rows)} - set(where))
    assert deleted
    mdt = HudiTable.open(str(table)).state.metadata_table
    assert mdt is not None  # planning reads this table's metadata table
    assert mdt.record_locations(sorted(where) + deleted) == where


def test_archive_and_schema_evolution_files(tmp_path):
    """``archive_commits`` moves the first commits to the LSM history (manifest, _version_, one
    layer-0 parquet file of HoodieLSMTimelineInstant rows); ``evolve_schema`` writes the schema
    history and ``latest_schema``."""
    import pyarrow.parquet as pq

    spec = GeneratorSpec(**{**SMALL, "commits": 5}, archive_commits=2, evolve_schema=True, metadata_table=False)
    generate(str(tmp_path / "t"), spec)
    hoodie = tmp_path / "t" / ".hoodie"
    history = hoodie / "timeline" / "history"
    assert (history / "_version_").read_text() == "1"
    manifest = json.loads((history / "manifest_1").read_text())
    (entry,) = manifest["files"]
    instants = [r for r, _ in spec.instants()]
    assert entry["fileName"] == f"{instants[0]}_{instants[1]}_0.parquet"
    rows = pq.read_table(history / entry["fileName"]).to_pylist()
    assert [r["instantTime"] for r in rows] == instants[:2] and all(r["metadata"].startswith(b"Obj\x01") for r in rows)
    active = sorted(p.name.split("_")[0].split(".")[0] for p in (hoodie / "timeline").glob("*_*.commit"))
    assert active == instants[2:]
    schemas = json.loads((hoodie / ".schema" / f"{instants[-1]}.schemacommit").read_text())["schemas"]
    assert [s["version_id"] for s in schemas] == [int(t) for t in reversed(instants)]
    names = [[f["name"] for f in s["fields"]] for s in reversed(schemas)]
    assert "driver" in names[0] and "driver_name" in names[1] and "tip" in names[2] and "rider" not in names[3]
    with pytest.raises(ValueError, match="archive_commits"):
        GeneratorSpec(commits=2, archive_commits=2).validate()


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
@pytest.mark.parametrize("metadata_table", [True, False])
def test_version_6_table_read_by_hudi_and_planned_through_its_metadata_table(
    generated_table, table_type: str, metadata_table: bool
) -> None:
    """A table version 6 (layout 1) table: hudi reads it equal to the generator's data, and so
    does HudiTable, planning through the v6 metadata table without falling back and without
    listing a data partition."""
    import warnings

    from catalog import HudiTable
    from catalog.errors import MetadataTableFallbackWarning
    from catalog.listing.mdt_listing import MetadataTableListing
    from catalog.listing.storage import StorageListing

    spec = GeneratorSpec(**SMALL, table_type=table_type, metadata_table=metadata_table, table_version=6)
    path = generated_table(spec)
    _assert_same(_hudi_read(path), spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MetadataTableFallbackWarning)
        table = HudiTable.open(path)
        assert table.table_version == 6
        table.storage.stats.reset()
        data = table.read()
    _assert_same(data, spec)
    listing = MetadataTableListing if metadata_table else StorageListing
    assert isinstance(table.state.listing, listing)
    if metadata_table:  # only the MDT's timeline and its files partition are listed
        assert table.storage.stats.counts["list"] == 2, table.storage.stats.snapshot()


def test_version_6_layout_matches_hudi_0_14(tmp_path: Path) -> None:
    """File names and encodings of a v6 table as in the external v6 fixtures (format digest 2.2,
    2.3, 3.2, 6.1): instants directly under .hoodie with JSON commits, logs named by their slice's
    base instant rolling to log.N, an MDT initialised at 00000000000000010 with a layout-1 timeline."""
    spec = GeneratorSpec(**SMALL, table_type=MERGE_ON_READ, table_version=6)
    result = generate(str(tmp_path / "t"), spec)
    hoodie = tmp_path / "t" / ".hoodie"
    props = (hoodie / "hoodie.properties").read_text()
    for line in ("hoodie.table.version=6", "hoodie.timeline.layout.version=1", "hoodie.archivelog.folder=archived",
                 "hoodie.table.keygenerator.class=org.apache.hudi.keygen.SimpleKeyGenerator",
                 "hoodie.table.metadata.partitions=files"):
        assert f"\n{line}\n" in props
    assert "hoodie.record.merge.mode" not in props and not (hoodie / "timeline").exists()
    names = {p.name for p in hoodie.iterdir()}
    for requested, _ in result.instants:
        assert {f"{requested}.deltacommit.requested", f"{requested}.deltacommit.inflight",
                f"{requested}.deltacommit"} <= names
        meta = json.loads((hoodie / f"{requested}.deltacommit").read_text())
        assert set(meta) == {"partitionToWriteStats", "compacted", "extraMetadata", "operationType"}
    base_instant = result.instants[0][0]
    logs = sorted(p.name for p in (tmp_path / "t").glob("region=*/.*.log.*"))
    assert logs and all(f"_{base_instant}.log." in n for n in logs)
    assert {n.split(".log.")[1].split("_")[0] for n in logs} == {"1", "2"}  # commits 2 and 3
    mdt = hoodie / "metadata"
    assert "hoodie.table.version=6\n" in (mdt / ".hoodie" / "hoodie.properties").read_text()
    mdt_timeline = sorted(p.name for p in (mdt / ".hoodie").iterdir() if p.name.endswith(".deltacommit"))
    assert mdt_timeline == ["00000000000000010.deltacommit", *(f"{r}.deltacommit" for r, _ in result.instants)]
    files = sorted(p.name for p in (mdt / "files").iterdir())
    assert files == [
        *(f".files-0000-0_00000000000000010.log.{n}_0-{n - 1}-{n - 1}" for n in range(1, spec.commits + 2)),
        ".hoodie_partition_metadata", "files-0000-0_0-0-0_00000000000000010.hfile",
    ]
    with pytest.raises(ValueError, match="table_version 6"):
        GeneratorSpec(table_version=6, record_index=True).validate()
    with pytest.raises(ValueError, match="table_version"):
        GeneratorSpec(table_version=7).validate()


def test_mdt_log_compaction_layout_and_hudi_reads_it(generated_table) -> None:
    """The log compaction the generator writes (MDT instant = last deltacommit + ``005``, a
    logcompaction completing as a deltacommit, one HFILE_DATA block listing the compacted
    instants): hudi, which plans v8 tables from the MDT, still reads the generator's data."""
    spec = GeneratorSpec(**SMALL, table_type=MERGE_ON_READ, mdt_log_compaction=True)
    path = Path(generated_table(spec))
    _assert_same(_hudi_read(str(path)), spec)
    last = spec.instants()[-1][0]
    timeline = {p.name for p in (path / ".hoodie/metadata/.hoodie/timeline").iterdir()}
    assert {f"{last}005.logcompaction.requested", f"{last}005.logcompaction.inflight"} <= timeline
    assert any(n.startswith(f"{last}005_") and n.endswith(".deltacommit") for n in timeline)
    (log,) = (path / ".hoodie/metadata/files").glob(f".files-0000-0_{last}005.log.1_*")
    assert b"\x00\x00\x00\x04" + struct.pack(">i", 53) + ",".join(r for r, _ in spec.instants()).encode() \
        in log.read_bytes()  # header key 4 (COMPACTED_BLOCK_TIMES), its length, the three instants
    with pytest.raises(ValueError, match="mdt_log_compaction"):
        GeneratorSpec(metadata_table=False, mdt_log_compaction=True).validate()
