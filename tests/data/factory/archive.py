"""The stored form of a factory table: ``<release>/<name>.tar.xz`` (the table folder ``<name>/``)
and ``<release>/<name>.expected.tar.xz`` (``manifest.json`` plus one Arrow IPC file per query Hudi
answered).

Solid xz archives, because a tiny Hudi table is mostly near-identical metadata-table files and
result files sharing a schema: compressed together they take a quarter of a zip's size. Member
times and owners are fixed, so identical content gives identical archives. Imported by the writer
(Spark venv) and by the tests (project venv); needs pyarrow only.
"""

from __future__ import annotations

import functools
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

MANIFEST = "manifest.json"
TABLE_SUFFIX = ".tar.xz"
EXPECTED_SUFFIX = ".expected.tar.xz"
#: a bootstrapped table's archive holds ``<name>/table/`` and the dataset it was bootstrapped from,
#: ``<name>/source/`` (``hoodie.bootstrap.base.path`` names where the writer had it)
TABLE_FOLDER = "table"
SOURCE_FOLDER = "source"
#: files the local Hadoop filesystem writes beside each file; not part of the table
_SKIPPED_SUFFIXES = (".crc",)


@dataclass(frozen=True)
class Query:
    """One query Hudi's Spark datasource answered, and the same query in ``HudiTable.read`` terms.

    Attributes:
        name: unique within the table (``snapshot``, ``as_of_<instant>``, ``incremental_<a>_<b>``...).
        query_type: ``snapshot``, ``read_optimized``, ``incremental`` or ``cdc``.
        spark_options: the read options given to Spark's Hudi datasource.
        as_of, start, end: the instant values for ``HudiTable.read`` (``None`` when unused).
        file: the Arrow IPC member holding Hudi's rows (``None`` when Hudi failed: see ``error``).
        rows: how many rows Hudi returned.
        error: Hudi's error, when it refused the query.
    """

    name: str
    query_type: str
    spark_options: dict[str, str]
    as_of: str | None = None
    start: str | None = None
    end: str | None = None
    file: str | None = None
    rows: int = 0
    error: str | None = None

    def read_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``HudiTable.read`` asking the same question."""
        kwargs: dict[str, Any] = {"query_type": self.query_type}
        for key in ("as_of", "start", "end"):
            if getattr(self, key) is not None:
                kwargs[key] = getattr(self, key)
        return kwargs


@dataclass
class Manifest:
    release: str
    name: str
    table_type: str
    table_version: int
    features: list[str]
    steps: list[str]
    instants: list[dict[str, str]]
    queries: list[Query] = field(default_factory=list)

    def to_json(self) -> str:
        body = dict(self.__dict__)
        body["queries"] = [q.__dict__ for q in self.queries]
        return json.dumps(body, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        body = json.loads(text)
        body["queries"] = [Query(**q) for q in body["queries"]]
        return cls(**body)


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    archive.addfile(info, io.BytesIO(data))


def _open_for_writing(target: Path) -> tarfile.TarFile:
    return tarfile.open(target, "w:xz", format=tarfile.PAX_FORMAT, preset=9)


def pack_table(base: Path, target: Path) -> None:
    """Archive the table folder ``base`` as ``<base.name>/...`` into ``target`` (sorted members)."""
    files = sorted(p for p in base.rglob("*") if p.is_file() and not p.name.endswith(_SKIPPED_SUFFIXES))
    with _open_for_writing(target) as archive:
        for path in files:
            _add(archive, f"{base.name}/{path.relative_to(base).as_posix()}", path.read_bytes())


def pack_expected(target: Path, manifest: Manifest, results: dict[str, pa.Table]) -> None:
    """Store ``manifest`` and each query's rows (``results[query.file]``) in ``target``."""
    with _open_for_writing(target) as archive:
        _add(archive, MANIFEST, manifest.to_json().encode())
        for file_name in sorted(results):
            sink = io.BytesIO()
            with ipc.new_file(sink, results[file_name].schema) as writer:
                writer.write_table(results[file_name])
            _add(archive, file_name, sink.getvalue())


@functools.lru_cache(maxsize=8)
def _members(archive_path: Path) -> dict[str, bytes]:
    """Every file of a (small) expected-results archive, read once: xz decompresses sequentially."""
    with tarfile.open(archive_path, "r:xz") as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}  # type: ignore[union-attr]


def read_manifest(expected: Path) -> Manifest:
    return Manifest.from_json(_members(expected)[MANIFEST].decode())


def read_result(expected: Path, query: Query) -> pa.Table:
    """Hudi's rows for ``query`` (which must have a ``file``)."""
    assert query.file is not None, f"{query.name}: Hudi answered no rows ({query.error})"
    return ipc.open_file(io.BytesIO(_members(expected)[query.file])).read_all()


def unpack_table(table_archive: Path, dest: Path) -> Path:
    """Unpack ``table_archive`` under ``dest`` (once); return the table's base path (``<name>/``,
    or ``<name>/table/`` for a bootstrapped table archived with its source)."""
    with tarfile.open(table_archive, "r:xz") as archive:
        (root,) = {m.name.split("/", 1)[0] for m in archive.getmembers()}
        target = dest / root
        if not target.exists():
            archive.extractall(dest, filter="data")
            if (target / SOURCE_FOLDER).is_dir():
                relocate_bootstrap_source(target / TABLE_FOLDER, target / SOURCE_FOLDER)
    bootstrapped = target / TABLE_FOLDER
    return bootstrapped if (bootstrapped / ".hoodie").is_dir() else target


BOOTSTRAP_BASE_PATH = "hoodie.bootstrap.base.path"


def relocate_bootstrap_source(base: Path, source: Path) -> None:
    """Point the bootstrapped table at ``base`` to its source dataset's new place ``source``, as
    an operator does when a lake moves: ``hoodie.bootstrap.base.path`` in ``hoodie.properties``
    is rewritten (the bootstrap index keeps the writer's paths; readers map them through it)."""
    properties = base / ".hoodie" / "hoodie.properties"
    lines = properties.read_text().splitlines()
    rewritten = [f"{BOOTSTRAP_BASE_PATH}={source.resolve()}" if line.startswith(f"{BOOTSTRAP_BASE_PATH}=") else line
                 for line in lines]
    if rewritten == lines:
        raise ValueError(f"{properties} names no {BOOTSTRAP_BASE_PATH}")
    properties.write_text("\n".join(rewritten) + "\n")
