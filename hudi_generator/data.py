"""Deterministic, vectorised synthetic "trips" data and its evolution over commits.

Row ``i`` of the table is a pure function of ``(seed, i)``; which rows a commit updates or deletes
is a pure function of ``(seed, i, commit)``. So any file group can be generated (and its final
state recomputed for checking) without materialising the rest of the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BASE_TS_MS = 1_700_000_000_000
_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def trips_schema(partition_levels: int) -> pa.Schema:
    """The data schema (without Hudi meta columns): strings, numbers, a decimal, a timestamp,
    a nested struct, and one or two partition columns."""
    fields = [
        pa.field("uuid", pa.string()),
        pa.field("ts", pa.int64()),
        pa.field("rider", pa.string()),
        pa.field("driver", pa.string()),
        pa.field("fare", pa.float64()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("event_time", pa.timestamp("us", tz="UTC")),
        pa.field("trip_count", pa.int32()),
        pa.field("location", pa.struct([
            pa.field("lat", pa.float64()), pa.field("lon", pa.float64()), pa.field("zone", pa.string()),
        ])),
        pa.field("region", pa.string()),
    ]
    if partition_levels == 2:
        fields.append(pa.field("day", pa.string()))
    return pa.schema(fields)


def _mix(x: np.ndarray, salt: int) -> np.ndarray:
    """splitmix64 finaliser: a fast, well-spread hash of uint64 values."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64((0x9E3779B97F4A7C15 * (salt + 1)) & 0xFFFFFFFFFFFFFFFF)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return (z ^ (z >> np.uint64(31))) & _M64


def _prefixed(prefix: str, values: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise(prefix, pa.array(values).cast(pa.string()), "")


@dataclass(frozen=True)
class PartitionScheme:
    """Maps a partition index to its column values and its relative path."""

    count: int
    levels: int = 1
    hive_style: bool = True

    @property
    def fields(self) -> list[str]:
        return ["region", "day"][: self.levels]

    def _days_per_region(self) -> int:
        return min(self.count, 30)

    def values(self, p: int) -> tuple[str, ...]:
        if self.levels == 1:
            return (f"region-{p:05d}",)
        k = self._days_per_region()
        return (f"region-{p // k:05d}", (date(2024, 1, 1) + timedelta(days=p % k)).isoformat())

    def path(self, p: int) -> str:
        vals = self.values(p)
        if self.hive_style:
            return "/".join(f"{f}={v}" for f, v in zip(self.fields, vals))
        return "/".join(vals)


@dataclass(frozen=True)
class Evolution:
    """Which rows each commit touches. Commit 1 inserts every row; commits 2..n update
    ``update_fraction`` and delete ``delete_fraction`` of the rows still alive."""

    seed: int
    update_fraction: float
    delete_fraction: float

    def masks(self, rows: np.ndarray, commit: int) -> tuple[np.ndarray, np.ndarray]:
        h_upd = _mix(rows, self.seed * 7919 + commit) % np.uint64(1_000_000)
        h_del = _mix(rows, self.seed * 7919 + commit + 1_000_003) % np.uint64(1_000_000)
        upd = h_upd < np.uint64(int(self.update_fraction * 1_000_000))
        dele = (h_del < np.uint64(int(self.delete_fraction * 1_000_000))) & ~upd
        return upd, dele


def record_keys(rows: np.ndarray) -> pa.Array:
    """Record keys (the ``uuid`` column) of global row numbers: ``trip-`` + 10 zero-padded digits."""
    return pc.binary_join_element_wise("trip-", pc.utf8_lpad(pa.array(rows).cast(pa.string()), 10, "0"), "")


def trips_rows(seed: int, rows: np.ndarray, version: np.ndarray, scheme: PartitionScheme, partition: int) -> pa.Table:
    """The data columns of ``rows`` (global row numbers) at ``version`` (1 = as inserted, k = as
    updated by commit k), all in partition ``partition``."""
    n = len(rows)
    h = _mix(rows, seed)
    h2 = _mix(rows, seed + 1)
    ver = version.astype(np.int64)
    keys = record_keys(rows)
    ts = BASE_TS_MS + rows.astype(np.int64) * 1000 + ver
    rider = pc.binary_join_element_wise(
        _prefixed("rider-", (h % np.uint64(1000)).astype(np.int64)), _prefixed("v", ver), "-"
    )
    driver = _prefixed("driver-", (h2 % np.uint64(500)).astype(np.int64))
    driver_null = (h2 >> np.uint64(20)) % np.uint64(11) == 0
    driver = pc.if_else(pa.array(driver_null), pa.nulls(n, pa.string()), driver)
    fare = np.round((h % np.uint64(100_000)).astype(np.float64) / 100.0, 2) + (ver - 1)
    cents = ((h >> np.uint64(17)) % np.uint64(10_000_000)).astype(np.int64) + ver * 100
    dec = np.zeros((n, 2), dtype=np.int64)
    dec[:, 0] = cents
    amount = pa.Array.from_buffers(pa.decimal128(12, 2), n, [None, pa.py_buffer(dec.tobytes())])
    event_time = pa.array(ts * 1000, type=pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    trip_count = ((h >> np.uint64(40)) % np.uint64(50)).astype(np.int32) + ver.astype(np.int32)
    lat = np.round(((h >> np.uint64(8)) % np.uint64(180_000)).astype(np.float64) / 1000.0 - 90.0, 3)
    lon = np.round(((h2 >> np.uint64(8)) % np.uint64(360_000)).astype(np.float64) / 1000.0 - 180.0, 3)
    zone = _prefixed("zone-", ((h2 >> np.uint64(33)) % np.uint64(64)).astype(np.int64))
    location = pa.StructArray.from_arrays([pa.array(lat), pa.array(lon), zone], names=["lat", "lon", "zone"])
    cols = [keys, pa.array(ts), rider, driver, pa.array(fare), amount, event_time, pa.array(trip_count), location]
    for value in scheme.values(partition):
        cols.append(pa.array([value] * n, pa.string()) if n else pa.array([], pa.string()))
    return pa.Table.from_arrays(cols, schema=trips_schema(scheme.levels))
