"""The tables Hudi's own Spark writer wrote (``tests/data/tables``, made by ``make tables``) and
Hudi's stored answers about them: where they are and how to unpack them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

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
