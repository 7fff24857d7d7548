"""Shared benchmark harness: timing helpers, result rows, and the report writers.

Contract for a benchmark module (``bench/<name>.py``, discovered by ``python -m bench``):

    def run(size: str) -> list[dict]:
        '''size is "quick" (a CI-sized smoke run, well under a minute) or "full".'''

Each returned row is a dict with at least these keys (build it with :func:`row`):

    name        what was measured, e.g. "mor_read/1M rows"
    competitor  who did it, e.g. "hudi-flight" or "hudi-rs"
    metric      e.g. "median wall time", "p99 latency", "storage requests"
    value       float
    unit        e.g. "s", "ms", "rows/s", "requests"

Optional keys: ``params`` (dict, free-form, e.g. rows/partitions) and ``repeats`` (int).
Rows that share ``name`` and ``metric`` but differ in ``competitor`` are compared against
each other by :func:`ratio` in the Markdown report.

Typical use::

    from bench.common import measure, row, table_dir

    def run(size):
        path = table_dir("mor_read", size)          # cached generated table location
        t = measure(lambda: HudiTable.open(path).read(), repeat=3)
        return [row("mor_read", "hudi-flight", "median wall time", t.median, "s", repeats=t.repeats)]

Synthetic tables come from the generator (``catalog.testing.generator``)::

    from hudi_generator.generator import GeneratorSpec, generate, expected_table
    generate(str(path), GeneratorSpec(rows=..., partitions=..., files_per_partition=..., commits=...,
                                      table_type="MERGE_ON_READ", metadata_table=True, column_stats=False))

Tables are deterministic for a given spec (same seed, same rows), so they can be cached under
:func:`table_dir` keyed by their parameters; ``expected_table(spec)`` gives the rows to check
answers against.

The runner (:func:`write_results`) stores ``bench/results/results.json``, ``results.md`` (a Markdown
table the README embeds) and, when matplotlib is installed, ``results.png``.
"""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hudi_generator.generator import GeneratorSpec

SIZES = ("quick", "full")
RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: Scratch space for generated benchmark tables (not results; reused between runs).
DATA_DIR = RESULTS_DIR / "data"
REQUIRED_KEYS = ("name", "competitor", "metric", "value", "unit")


@dataclass(frozen=True)
class Timing:
    """Wall-clock samples of one measured callable, in seconds."""

    samples: tuple[float, ...]
    result: Any = field(default=None, repr=False, compare=False)

    @property
    def repeats(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def best(self) -> float:
        return min(self.samples)

    def percentile(self, p: float) -> float:
        return percentile(self.samples, p)


def check_size(size: str) -> str:
    """Validate a ``--size`` value."""
    if size not in SIZES:
        raise ValueError(f"unknown benchmark size {size!r}; expected one of {SIZES}")
    return size


def measure(fn: Callable[[], Any], repeat: int = 5, warmup: int = 1) -> Timing:
    """Call ``fn`` ``warmup`` times untimed, then ``repeat`` times timed (GC collected before each)."""
    if repeat < 1:
        raise ValueError("repeat must be >= 1")
    result = None
    for _ in range(warmup):
        result = fn()
    samples = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return Timing(tuple(samples), result)


def round_robin(competitors: dict[str, Callable[[], Any]], expected: Any, repeat: int) -> dict[str, list[float]]:
    """Time each competitor once per round, ``repeat`` rounds after one warm-up round.

    Interleaving spreads load from other processes over all competitors alike (this machine is
    noisy). Every call's result must equal ``expected`` (e.g. a row count), or the run fails.
    """
    samples: dict[str, list[float]] = {c: [] for c in competitors}
    for r in range(repeat + 1):
        for competitor, fn in competitors.items():
            t = measure(fn, repeat=1, warmup=0)
            if t.result != expected:
                raise AssertionError(f"{competitor} returned {t.result}, expected {expected}")
            if r:
                samples[competitor].append(t.best)
    return samples


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def filtered_rows(client: Any, table: str, filters: list[list[Any]]) -> int:
    """Rows of one JSON-command query of ``table`` with ``filters`` through a ``pyarrow.flight``
    client, every endpoint read."""
    from pyarrow import flight

    info = client.get_flight_info(flight.FlightDescriptor.for_command(
        json.dumps({"table": table, "filters": filters}).encode()))
    return sum(client.do_get(ep.ticket).read_all().num_rows for ep in info.endpoints)


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile (``p`` in [0, 100]) of ``values``."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} outside [0, 100]")
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def ratio(baseline: float, candidate: float) -> float:
    """How many times faster ``candidate`` is than ``baseline`` for a lower-is-better metric."""
    if candidate <= 0:
        return math.inf
    return baseline / candidate


def row(
    name: str,
    competitor: str,
    metric: str,
    value: float,
    unit: str,
    **extra: Any,
) -> dict[str, Any]:
    """Build one result row (see the module docstring)."""
    return {"name": name, "competitor": competitor, "metric": metric, "value": float(value), "unit": unit, **extra}


def validate_rows(rows: Iterable[dict], source: str) -> list[dict]:
    """Check that every row has the required keys and a finite numeric value."""
    out = []
    for r in rows:
        missing = [k for k in REQUIRED_KEYS if k not in r]
        if missing:
            raise ValueError(f"benchmark {source}: row {r!r} lacks {missing}")
        value = float(r["value"])
        if math.isnan(value):
            raise ValueError(f"benchmark {source}: row {r['name']!r} has a NaN value")
        out.append({**r, "value": value, "benchmark": source})
    return out


def base_file_paths(table_path: str | Path) -> list[str]:
    """Full paths of the base files a snapshot of the table reads (for direct-Parquet competitors)."""
    from catalog import HudiTable, ReadOptions
    from catalog.plan.planner import file_slices

    table = HudiTable.open(str(table_path))
    return [str(Path(table_path) / fs.base_file_path) for fs in file_slices(table.state, ReadOptions()) if fs.base_file_path]


def generated_once(path: Path, spec: GeneratorSpec, marker: Path) -> None:
    """Generate the table of ``spec`` at ``path`` unless ``marker`` shows an
    earlier run finished that exact table; a half-written table of a killed run is replaced."""
    from hudi_generator.generator import generate

    if marker.exists():
        return
    shutil.rmtree(path, ignore_errors=True)
    generate(str(path), spec)
    marker.touch()


def table_dir(benchmark: str, size: str) -> Path:
    """A per-benchmark, per-size folder for generated tables, created on demand."""
    path = DATA_DIR / check_size(size) / benchmark
    path.mkdir(parents=True, exist_ok=True)
    return path


def _fmt(value: float) -> str:
    if value == 0 or 0.01 <= abs(value) < 1e6:
        return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{value:.3e}"


def markdown_table(rows: Sequence[dict]) -> str:
    """Markdown table of rows; a ``vs`` column gives each row's speed relative to hudi-flight's
    row of the same name and metric (``2.0x`` = hudi-flight is twice as fast), for lower-is-better
    time units."""
    lower_is_better = {"s", "ms", "us", "requests", "bytes"}
    ours = {(r["name"], r["metric"]): r["value"] for r in rows if r["competitor"] == "hudi-flight"}
    lines = [
        "| benchmark | measurement | competitor | metric | value | unit | hudi-flight speed-up |",
        "|---|---|---|---|---:|---|---:|",
    ]
    for r in rows:
        rel = ""
        mine = ours.get((r["name"], r["metric"]))
        if r["competitor"] != "hudi-flight" and mine is not None and r["unit"] in lower_is_better:
            rel = f"{ratio(r['value'], mine):.2f}x"
        lines.append(
            f"| {r.get('benchmark', '')} | {r['name']} | {r['competitor']} | {r['metric']} "
            f"| {_fmt(r['value'])} | {r['unit']} | {rel} |"
        )
    return "\n".join(lines) + "\n"


def _chart(rows: Sequence[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    by_unit: dict[str, list[dict]] = {}
    for r in rows:
        by_unit.setdefault(r["unit"], []).append(r)
    heights = [max(1.5, 0.4 * len(group)) for group in by_unit.values()]
    fig, axes = plt.subplots(len(by_unit), 1, figsize=(10, sum(heights) + 1), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, (unit, group) in zip(axes[:, 0], by_unit.items()):
        labels = [f"{r['name']} | {r['metric']} | {r['competitor']}" for r in group]
        colors = ["tab:blue" if r["competitor"] == "hudi-flight" else "tab:gray" for r in group]
        ax.barh(range(len(group)), [r["value"] for r in group], color=colors)
        ax.set_yticks(range(len(group)), labels, fontsize=6)
        ax.invert_yaxis()
        ax.set_xlabel(unit)
    axes[0, 0].set_title("hudi-flight benchmarks (blue = hudi-flight)")
    fig.tight_layout()
    # every row is a bar, so the chart is tall: a low resolution and an indexed palette keep
    # the committed file small (the numbers themselves are in results.md and results.json)
    fig.savefig(path, dpi=40)
    plt.close(fig)
    from PIL import Image  # matplotlib's own dependency

    with Image.open(path) as image:
        image.convert("RGB").quantize(colors=16).save(path, optimize=True)
    return True


def write_results(rows: Sequence[dict], size: str, out_dir: Path = RESULTS_DIR, errors: dict | None = None) -> dict:
    """Write ``results.json``, ``results.md`` and (if matplotlib exists) ``results.png``;
    return the paths written. Each row keeps the ``size`` it was measured at (a merged report's
    rows already carry theirs)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [{**r, "size": r.get("size", size)} for r in rows]
    meta = {
        "size": size,
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": __import__("os").cpu_count(),
    }
    written = {}
    json_path = out_dir / "results.json"
    json_path.write_text(json.dumps({"meta": meta, "rows": list(rows), "errors": errors or {}}, indent=2, default=str))
    written["json"] = json_path
    md = [f"Benchmarks (`--size {size}`, {meta['finished']}, {meta['cpus']} CPUs, Python {meta['python']})\n"]
    md.append(markdown_table(rows))
    if errors:
        md.append("\nFailed benchmarks:\n")
        md.extend(f"- `{name}`: {msg}\n" for name, msg in errors.items())
    md_path = out_dir / "results.md"
    md_path.write_text("\n".join(md))
    written["markdown"] = md_path
    png_path = out_dir / "results.png"
    if rows and _chart(rows, png_path):
        written["png"] = png_path
    return written


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        try:
            pages = int(Path(f"/proc/{p}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        total += pages * os.sysconf("SC_PAGE_SIZE")
    return total


class ServedWarehouse:
    """``hudi-flight serve`` in a subprocess (``extra_args``: more serve flags; ``scheme`` of its URI;
    ``users``: the names of users, e.g. of static tokens, made admins in its catalog)."""

    def __init__(
        self, warehouse: Path, processes: int, extra_args: Sequence[str] = (), scheme: str = "grpc",
        users: Sequence[str] = (),
    ):
        from tests.support.credentials import prepare_state
        from tests.support.processes import ServeProcess

        self.state = tempfile.mkdtemp(prefix="hudi-flight-bench-")
        if users:  # they may read every table
            prepare_state(self.state, tuple(users))
        self.process = ServeProcess("--port", "0", "--warehouse", str(warehouse), "--state-dir", self.state,
                                    "--processes", str(processes), *extra_args, log=Path(self.state) / "serve.log")
        self.uri = f"{scheme}://127.0.0.1:{self.process.port}"

    def close(self) -> None:
        self.process.stop()
