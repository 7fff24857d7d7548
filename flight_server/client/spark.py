"""PySpark Python Data Source (Spark 4.x) reading Hudi tables through a hudi-flight server.

::

    from flight_server.spark import HudiFlightDataSource
    spark.dataSource.register(HudiFlightDataSource)
    df = spark.read.format("hudi-flight").option("uri", "grpc://host:8815").load("ns.table")

The source speaks only Flight (``flight_server.client.session``), never reads storage itself, so
executors need nothing but network access to the server. The driver plans once
(``get_flight_info``) and packs the weighted endpoints into input partitions whose weights sum
to about 1, so many small splits do not become many tasks; executors ``do_get`` their tickets
(plain bytes: Spark pickles readers and partitions, Flight objects do not pickle) and hand the
Arrow record batches to Spark unchanged apart from a cast to Spark's Arrow layout.

Filters reach the server only through the ``filters`` option, never through Spark's
``pushFilters``: Spark (through 4.3) keeps the reader that ``pushFilters`` changed, with the
partitions planned for it, on the DataFrame's provider and reuses both for every later query of
that DataFrame that pushes no filter, so a pushed filter would outlive its query (issue 37:
``df.where(...).count()`` then ``df.count()`` counted the filtered rows). Spark evaluates its own
filters on the rows this source returns. See docs/spark.md.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Sequence

import pyarrow as pa

from catalog.optional import optional_dependency
from catalog.plan.filter_text import parse_filters
from catalog.plan.filters import FilterTuple
from catalog.plan.options import ReadOptions
from flight_server.client.session import HudiFlightClient, PlannedEndpoint

log = logging.getLogger(__name__)

with optional_dependency("spark", "the PySpark data source"):
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
    from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxFiles, SupportsTriggerAvailableNow
    from pyspark.sql.types import StructField, StructType

SOURCE_NAME = "hudi-flight"
#: the name of the same source for a session whose classpath holds the connector's jar, where
#: "hudi-flight" is the connector (Spark prefers a JVM source to a Python one of the same name)
PYTHON_SOURCE_NAME = "hudi-flight-python"
#: read options given to the source as plain strings (``columns`` is parsed; see _parse_columns)
_STRING_READ_OPTIONS = ("query_type", "as_of", "start", "end")
_RPC_TIMEOUT = 60.0
#: credential options -> HudiFlightClient keyword (values: strings; PEM text or a path readable
#: where the driver and the executors run). Kept out of repr and of every message.
_CREDENTIAL_OPTIONS = {
    "token": "token",
    "user": "user",
    "password": "password",
    "tls_root_certs": "tls_root_certs",
    "tls_cert_chain": "cert_chain",
    "tls_private_key": "private_key",
}


# -- options ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Query:
    """The source options, validated, as plain picklable data."""

    uri: str
    table: str
    options: ReadOptions = field(default_factory=ReadOptions)
    credentials: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # (client keyword, value)
    min_partitions: int = 2

    @classmethod
    def from_options(cls, options: Any) -> "_Query":
        opts = {k.lower(): v for k, v in dict(options).items()}
        uri = opts.get("uri")
        if not uri:
            raise ValueError(f'{SOURCE_NAME}: option "uri" is required, e.g. .option("uri", "grpc://host:8815")')
        table = opts.get("table") or opts.get("path")
        if not table or "." not in table:
            raise ValueError(f'{SOURCE_NAME}: name the table as "namespace.table" in load(...), got {table!r}')
        read = {name: opts[name] for name in _STRING_READ_OPTIONS if opts.get(name) is not None}
        _refuse_spark_pushdown(opts.get("pushdown"))
        try:
            read_options = ReadOptions(
                columns=_parse_columns(opts.get("columns")), filters=_parse_filters(opts.get("filters")), **read
            )
        except ValueError as err:
            raise ValueError(f"{SOURCE_NAME}: {err}") from err
        return cls(
            uri=uri,
            table=table,
            options=read_options,
            credentials=tuple((kw, opts[name]) for name, kw in _CREDENTIAL_OPTIONS.items() if opts.get(name)),
            min_partitions=_positive_int(opts, "min_partitions", 2),
        )

    def client(self) -> HudiFlightClient:
        credentials: dict[str, Any] = dict(self.credentials)
        return HudiFlightClient(self.uri, timeout=_RPC_TIMEOUT, **credentials)

    def with_options(self, **changes: Any) -> "_Query":
        return replace(self, options=self.options.replace(**changes))


def _positive_int(opts: dict[str, str], key: str, default: int) -> int:
    text = opts.get(key)
    try:
        value = default if text is None else int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{SOURCE_NAME}: option {key!r} must be a positive integer, got {text!r}")
    return value


def _parse_columns(value: str | None) -> tuple[str, ...] | None:
    """``"a,b"`` or a JSON list ``'["a", "b"]'`` -> ``("a", "b")``."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    names = json.loads(text) if text.startswith("[") else [c.strip() for c in text.split(",")]
    if not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"{SOURCE_NAME}: bad columns option {value!r}")
    return tuple(names)


def _parse_filters(value: str | None) -> tuple[FilterTuple, ...]:
    """The ``filters`` option: the filter grammar of docs/filters.md (``"region = 'eu' and fare > 3"``)
    or the JSON command's list (``'[["region", "=", "eu"]]'``); ReadOptions checks their shape."""
    if value is None or not value.strip():
        return ()
    text = value.strip()
    if not text.startswith("["):
        return tuple(parse_filters(text))
    parsed = json.loads(text)
    if not isinstance(parsed, list) or not all(isinstance(f, list) for f in parsed):
        raise ValueError(f"{SOURCE_NAME}: bad filters option {value!r}: expected a JSON list of [column, op, value]")
    return tuple(tuple(f) for f in parsed)  # shape checked by ReadOptions


def _refuse_spark_pushdown(value: str | None) -> None:
    """``pushdown=true`` asked for filters taken from Spark, which this source never takes (module doc)."""
    if value is not None and value.strip().lower() not in ("auto", "false"):
        raise ValueError(
            f'{SOURCE_NAME}: option "pushdown"={value!r} is not carried: Spark (through 4.3) reuses the filters '
            "pushed for one query of a DataFrame in its later queries, so this source takes no filters from "
            'Spark; give them in the "filters" option, or use the connector (docs/spark.md)'
        )


# -- types -----------------------------------------------------------------------------------


def spark_schema(schema: pa.Schema) -> StructType:
    """Arrow -> Spark schema (pyspark's own mapping; zone-less timestamps become TIMESTAMP_NTZ)."""
    fields = []
    for f in schema:
        try:
            data_type = from_arrow_type(f.type, prefer_timestamp_ntz=True)
        except Exception as err:
            raise ValueError(
                f"{SOURCE_NAME}: column {f.name!r} has Arrow type {f.type} that Spark cannot hold"
            ) from err
        fields.append(StructField(f.name, data_type, nullable=f.nullable))
    return StructType(fields)


def _conform(batches: Iterator[pa.RecordBatch], target: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Cast batches to the exact Arrow layout Spark expects (names of nested fields, units, zones)."""
    for batch in batches:
        yield batch if batch.schema.equals(target) else batch.cast(target)


# -- planning -------------------------------------------------------------------------------


class EndpointGroup(InputPartition):
    """One Spark input partition: a few endpoints whose weights sum to about 1."""

    def __init__(self, endpoints: Sequence[PlannedEndpoint]):
        super().__init__([ep.weight for ep in endpoints])
        self.endpoints = tuple(endpoints)

    def __repr__(self) -> str:
        return f"EndpointGroup({len(self.endpoints)} endpoints, weight={sum(self.value):.3f})"


def pack_endpoints(
    endpoints: Sequence[PlannedEndpoint], capacity: float = 1.0, min_partitions: int = 1
) -> list[EndpointGroup]:
    """Pack endpoints into partitions whose weights sum to at most ``capacity`` (like Trino's
    weighted splits), heaviest first, each into the least-loaded partition it fits in.

    At least ``min(min_partitions, len(endpoints))`` partitions are used, so a small table
    still spreads over the executor cores; beyond that a new partition opens only when no
    existing one has room. An endpoint heavier than ``capacity`` gets a partition of its own.
    Never returns an empty list: an empty table still yields one (empty) task.
    """
    bins: list[list[PlannedEndpoint]] = [[] for _ in range(min(min_partitions, len(endpoints)))]
    loads = [0.0] * len(bins)
    for ep in sorted(endpoints, key=lambda e: e.weight, reverse=True):
        weight = max(ep.weight, 0.0)
        fits = [i for i, load in enumerate(loads) if load + weight <= capacity + 1e-9]
        if fits:
            i = min(fits, key=loads.__getitem__)
        else:
            bins.append([])
            loads.append(0.0)
            i = len(bins) - 1
        bins[i].append(ep)
        loads[i] += weight
    return [EndpointGroup(b) for b in bins if b] or [EndpointGroup([])]


def packed_tasks(table: str, endpoints: Sequence[PlannedEndpoint], min_partitions: int) -> list[EndpointGroup]:
    """:func:`pack_endpoints`, told in the driver's log (INFO, logger ``flight_server.client.spark``):
    how many endpoints became how many Spark tasks, and each task's endpoints and weight, since
    Spark's progress counts tasks only (``0/2`` for a whole read of two heavy tasks)."""
    groups = pack_endpoints(endpoints, min_partitions=min_partitions)
    if log.isEnabledFor(logging.INFO):
        weights = ", ".join(f"{len(g.endpoints)}@{sum(g.value):.2f}" for g in groups)
        log.info("%s: %d endpoint(s), total weight %.2f, packed into %d Spark task(s) (endpoints@weight: %s)",
                 table, len(endpoints), sum(max(e.weight, 0.0) for e in endpoints), len(groups), weights)
    return groups


def _read_group(query: _Query, group: EndpointGroup, schema: StructType) -> Iterator[pa.RecordBatch]:
    target = to_arrow_schema(schema, timezone="UTC")
    if not group.endpoints:
        return
    with query.client() as client:
        for ep in group.endpoints:
            yield from _conform(client.fetch(ep), target)


# -- batch reads ----------------------------------------------------------------------------


class HudiFlightReader(DataSourceReader):
    """Batch reader of the planned query; Spark evaluates its own filters on the rows (module doc)."""

    def __init__(self, query: _Query, schema: StructType):
        self.query = query
        self.schema = schema

    def partitions(self) -> list[EndpointGroup]:
        with self.query.client() as client:
            endpoints = client.plan(self.query.table, self.query.options).endpoints
        return packed_tasks(self.query.table, endpoints, self.query.min_partitions)

    # Spark hands back the partitions this reader planned, so the parameter is narrower than InputPartition.
    def read(self, partition: EndpointGroup) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return _read_group(self.query, partition, self.schema)


# -- streaming ------------------------------------------------------------------------------

_DATA_ACTIONS = ("commit", "deltacommit", "replacecommit")
_BEGINNING = ""


class HudiFlightStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Follows a table commit by commit with incremental queries.

    Offsets are ``{"instant": t}``: every commit whose instant (completion time, or requested
    time where the table records none) is ``<= t`` has been read. Each micro-batch reads the
    incremental range ``(start, end]`` of at most ``max_commits_per_trigger`` commits (default 1),
    so a commit is seen exactly once. The ``start`` option sets where a new query begins
    (exclusive; default: before the first commit).
    """

    def __init__(self, query: _Query, schema: StructType, max_commits: int):
        start = query.options.start
        if start is not None and not start.isdigit():
            # Offsets are compared here, on the driver, which does not know the zone the server
            # writes a LOCAL timeline's instants in: a zoned start could only be guessed.
            raise ValueError(
                f"{SOURCE_NAME}: a stream's start option takes yyyyMMddHHmmss[SSS] or an ISO timestamp without a "
                f"zone (a time of the table's timeline zone), got {start}"
            )
        self.query = query
        self.schema = schema
        self.max_commits = max_commits
        self._target: str | None = None

    def _instants(self) -> list[str]:
        with self.query.client() as client:
            info = client.table_info(self.query.table)
        return sorted(
            {i.get("completion_time") or i["requested_time"] for i in info["timeline"] if i["action"] in _DATA_ACTIONS}
        )

    def initialOffset(self) -> dict:
        return {"instant": self.query.options.start or _BEGINNING}

    def getDefaultReadLimit(self) -> ReadLimit:
        # "files" are commits here: Spark has no commit-count limit of its own.
        return ReadMaxFiles(self.max_commits)

    def prepareForTriggerAvailableNow(self) -> None:
        instants = self._instants()
        self._target = instants[-1] if instants else _BEGINNING

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        pending = [t for t in self._instants() if t > start["instant"]]
        if self._target is not None:
            pending = [t for t in pending if t <= self._target]
        if not pending:
            return start
        if isinstance(limit, ReadMaxFiles):
            pending = pending[: max(limit.max_files, 1)]
        return {"instant": pending[-1]}

    def partitions(self, start: dict, end: dict) -> list[EndpointGroup]:
        if end["instant"] <= start["instant"]:
            return [EndpointGroup([])]
        options = self.query.options.replace(
            query_type="incremental", as_of=None, start=start["instant"] or None, end=end["instant"]
        )
        with self.query.client() as client:
            endpoints = client.plan(self.query.table, options).endpoints
        return packed_tasks(self.query.table, endpoints, self.query.min_partitions)

    # Spark hands back the partitions this reader planned, so the parameter is narrower than InputPartition.
    def read(self, partition: EndpointGroup) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return _read_group(self.query, partition, self.schema)

    def commit(self, end: dict) -> None:
        """Nothing to release: the service keeps no per-query state."""


# -- the data source ------------------------------------------------------------------------


class HudiFlightDataSource(DataSource):
    """``spark.read.format("hudi-flight")``: options ``uri`` (required), ``columns``,
    ``query_type``, ``as_of``, ``start``, ``end``, ``min_partitions`` (default 2);
    credentials ``token`` or ``user``/``password``, TLS ``tls_root_certs``, ``tls_cert_chain``,
    ``tls_private_key`` (PEM text or a path readable on the driver and the executors);
    ``filters`` (docs/filters.md grammar or a JSON list); for streams ``max_commits_per_trigger``.
    The table is the ``load()`` argument."""

    def __init__(self, options: dict[str, str]):
        super().__init__(options)
        self.query = _Query.from_options(options)
        opts = {k.lower(): v for k, v in dict(options).items()}
        self.max_commits = _positive_int(opts, "max_commits_per_trigger", 1)

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        with self.query.client() as client:
            return spark_schema(client.schema(self.query.table, self.query.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        return HudiFlightReader(self._projected(schema), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return HudiFlightStreamReader(self._projected(schema), schema, self.max_commits)

    def _projected(self, schema: StructType) -> _Query:
        """The query reading exactly the columns of ``schema``: the one Spark derived from
        :meth:`schema`, or the user's own ``.schema(...)``, whose columns become the plan's
        ``columns`` (the only column pruning a Python source gets, see docs/spark.md)."""
        wanted = schema.fieldNames()
        with self.query.client() as client:
            available = client.schema(self.query.table, self.query.options).names
        missing = [name for name in wanted if name not in available]
        if missing:
            raise ValueError(
                f"{SOURCE_NAME}: the schema names {', '.join(map(repr, missing))}, not a column of "
                f"{self.query.table} (columns: {', '.join(available)})"
            )
        if wanted == available:
            return self.query
        return self.query.with_options(columns=tuple(wanted))


class HudiFlightPythonDataSource(HudiFlightDataSource):
    """The same source as ``spark.read.format("hudi-flight-python")``, for a session that also has
    the connector's jar on its classpath (where "hudi-flight" names the connector)."""

    @classmethod
    def name(cls) -> str:
        return PYTHON_SOURCE_NAME


__all__ = [
    "EndpointGroup",
    "HudiFlightDataSource",
    "HudiFlightPythonDataSource",
    "HudiFlightReader",
    "HudiFlightStreamReader",
    "pack_endpoints",
    "packed_tasks",
    "spark_schema",
]
