"""The tables Hudi's own Spark writer wrote (``tests/data/tables``, made by ``make tables``) and
Hudi's stored answers about them: where they are and how to unpack them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from tests.data.factory.archive import EXPECTED_SUFFIX, TABLE_SUFFIX, Manifest, Query, read_manifest, unpack_table

WRITTEN_DIR = Path(__file__).resolve().parents[1] / "data" / "tables"


@dataclass(frozen=True, order=True)
class WrittenTable:
    """``<release>/<name>.tar.xz`` and its ``.expected.tar.xz``."""

    release: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.release}/{self.name}"

    @property
    def identifier(self) -> str:
        """Where the tests serve it: ``1.2.0/cow_core`` -> ``hudi_1_2_0.cow_core``."""
        return f"hudi_{self.release.replace('.', '_')}.{self.name}"

    @property
    def table_archive(self) -> Path:
        return WRITTEN_DIR / self.release / f"{self.name}{TABLE_SUFFIX}"

    @property
    def expected(self) -> Path:
        return WRITTEN_DIR / self.release / f"{self.name}{EXPECTED_SUFFIX}"

    def manifest(self) -> Manifest:
        return _manifest(self.expected)

    def extract(self, dest: Path) -> Path:
        """The table's base path under ``dest / release`` (unpacked on first use)."""
        folder = dest / self.release
        folder.mkdir(parents=True, exist_ok=True)
        return unpack_table(self.table_archive, folder)


@functools.lru_cache(maxsize=None)
def _manifest(expected: Path) -> Manifest:
    return read_manifest(expected)


def written_tables() -> list[WrittenTable]:
    return sorted(
        WrittenTable(p.parent.name, p.name.removesuffix(EXPECTED_SUFFIX))
        for p in WRITTEN_DIR.glob(f"*/*{EXPECTED_SUFFIX}")
    )


def written_queries() -> list[tuple[WrittenTable, Query]]:
    """Every stored query of every table Hudi answered (its errors are listed by the report)."""
    return [(t, q) for t in written_tables() for q in t.manifest().queries if q.file is not None]


def base_file_rows(base: str | Path, latest_only: bool = False, instants: Iterable[str] | None = None) -> pa.Table:
    """The rows of a table's Parquet base files read straight from storage, with no Hudi logic:
    every version of every file group, or (``latest_only``) each group's newest version only; with
    ``instants``, only the versions those instants wrote.

    Base file names are ``<file id>_<write token>_<instant>.parquet``; the newest version of a group
    is the one with the greatest instant.
    """
    files = sorted(p for p in Path(base).rglob("*.parquet") if ".hoodie" not in p.relative_to(base).parts)
    if instants is not None:
        wanted = set(instants)
        files = [p for p in files if p.stem.split("_")[2] in wanted]
    if latest_only:
        newest: dict[str, Path] = {}
        for path in files:
            file_id, _, instant = path.stem.split("_")
            if file_id not in newest or newest[file_id].stem.split("_")[2] < instant:
                newest[file_id] = path
        files = sorted(newest.values())
    return pa.concat_tables(pq.read_table(path) for path in files)
