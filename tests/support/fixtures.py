"""The shared Spark-written fixture tables: where they are and how to unzip them.

Fixtures live in ``../shared/fixtures`` beside the repository (override with
``HUDI_FLIGHT_FIXTURES``). Zips are extracted once per test session into a temporary folder,
never into the repository.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

FIXTURES_DIR = Path(
    os.environ.get("HUDI_FLIGHT_FIXTURES", Path(__file__).resolve().parents[3] / "shared" / "fixtures")
)
HUDI_DIR = FIXTURES_DIR / "hudi"
#: tables written by other projects' test suites (their README lists them), one table per zip
EXTERNAL_DIR = FIXTURES_DIR / "external"


def all_table_names() -> list[str]:
    """Relative names such as ``sample_table/cow/v6_nonpartitioned`` for every zipped table."""
    return sorted(str(z.relative_to(HUDI_DIR).with_suffix("")) for z in HUDI_DIR.rglob("*.zip"))


def is_lance(name: str) -> bool:
    return "lance" in name.rsplit("/", 1)[-1]


def is_mor(name: str) -> bool:
    return "/mor/" in name


def extract_table(name: str, dest: Path) -> Path:
    """Unzip fixture ``name`` under ``dest`` (skipping ``__MACOSX``); return the table's base path."""
    zip_path = HUDI_DIR / f"{name}.zip"
    target = dest / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(zip_path) as zf:
            members = [m for m in zf.namelist() if not m.startswith("__MACOSX")]
            zf.extractall(target.parent, members)
    return target


def extract_external(name: str, dest: Path) -> Path:
    """Unzip external fixture ``name`` (e.g. ``trino/stock_ticks_mor``) under ``dest``; return the
    base path of the one table folder at the zip's root."""
    target = dest / "external" / name
    if not target.exists():
        target.mkdir(parents=True)
        with zipfile.ZipFile(EXTERNAL_DIR / f"{name}.zip") as zf:
            members = [m for m in zf.namelist() if not m.startswith("__MACOSX")]
            zf.extractall(target, members)
    (root,) = {m.split("/", 1)[0] for m in members_of(EXTERNAL_DIR / f"{name}.zip")}
    return target / root


def members_of(zip_path: Path) -> list[str]:
    with zipfile.ZipFile(zip_path) as zf:
        return [m for m in zf.namelist() if not m.startswith("__MACOSX")]


def sql_path(name: str) -> Path:
    return HUDI_DIR / f"{name}.sql"
