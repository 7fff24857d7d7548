"""The Spark side of the factory: one session per Hudi release, and a spec's steps run through it."""

from __future__ import annotations

from pathlib import Path

from tests.data.factory.archive import SOURCE_FOLDER
from tests.data.factory.specs import (
    HUDI_TYPES,
    LANCE_SCHEMA,
    LANCE_VARIANT_SCHEMA,
    PARTITIONS,
    SPARK_32_RELEASES,
    UNSET,
    Bootstrap,
    Sql,
    TableSpec,
    Write,
    row,
    spark_bundle,
)
from tests.data.factory.timeline import data_instants

#: Lance jars that must come before Spark's own Arrow on the class path (Hudi 1.2's Lance writer
#: needs a newer Arrow than Spark 3.5 ships); the rest of ``jars/lance`` duplicates Spark's jars
_LANCE_CLASSPATH_PREFIXES = ("lance-", "arrow-", "flatbuffers-java-", "jar-jni-")
#: the JDK packages Spark 3.2 reaches into by reflection: Java 17 refuses it unless they are opened
_SPARK_32_OPENS = " ".join(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in (
    "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio", "java.util",
    "java.util.concurrent", "java.util.concurrent.atomic", "sun.nio.ch", "sun.nio.cs", "sun.security.action",
    "sun.util.calendar"))
#: Hudi's bloom index broadcasts objects holding locks, and Spark's size estimate of a broadcast
#: reaches into them by reflection (Java 17 refuses it unless the package is opened)
_LOCKS_OPEN = "--add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED"


def session(release: str, jars: Path):
    """A local[1] Spark session with Hudi ``release``'s Spark bundle (and Lance for 1.2)."""
    from pyspark.sql import SparkSession

    bundle = jars / f"{spark_bundle(release)}-{release}.jar"
    if not bundle.is_file():
        raise SystemExit(f"{bundle} is missing: run `make tables` (it fetches the bundle)")
    builder = (
        SparkSession.builder.master("local[1]")
        .appName(f"hudi-factory-{release}")
        .config("spark.jars", str(bundle.resolve()))
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(Path(".cache/spark-warehouse").resolve()))
    )
    lance = jars / "lance"
    if release.startswith("1.2") and lance.is_dir():
        prefix = sorted(str(j.resolve()) for j in lance.glob("*.jar") if j.name.startswith(_LANCE_CLASSPATH_PREFIXES))
        builder = builder.config("spark.driver.extraClassPath", ":".join(prefix))
    opens = f"{_SPARK_32_OPENS} {_LOCKS_OPEN}" if release in SPARK_32_RELEASES else _LOCKS_OPEN
    builder = builder.config("spark.driver.extraJavaOptions", opens)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def writer_options(spec: TableSpec, release: str) -> dict[str, str]:
    """The factory's writer defaults (tiny, single-task, deterministic) under ``spec``'s options."""
    options = {
        "hoodie.table.name": spec.name,
        "hoodie.datasource.write.table.type": spec.table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.embed.timeline.server": "false",
        "hoodie.insert.shuffle.parallelism": "1",
        "hoodie.upsert.shuffle.parallelism": "1",
        "hoodie.delete.shuffle.parallelism": "1",
        "hoodie.bulkinsert.shuffle.parallelism": "1",
        "hoodie.metadata.enable": "true",
        # a tiny bloom filter in each base file's footer keeps the committed archives small
        "hoodie.index.bloom.num_entries": "100",
        "hoodie.bloom.index.filter.type": "SIMPLE",
    }
    if spec.partitioned:
        options["hoodie.datasource.write.partitionpath.field"] = "part"
    else:
        options["hoodie.datasource.write.partitionpath.field"] = ""
        options["hoodie.datasource.write.keygenerator.class"] = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    options.update(spec.options_for(release))
    return {key: value for key, value in options.items() if value != UNSET}


#: Hudi's bootstrap mode selectors, by mode
_BOOTSTRAP_SELECTORS = {
    "METADATA_ONLY": "org.apache.hudi.client.bootstrap.selector.MetadataOnlyBootstrapModeSelector",
    "FULL_RECORD": "org.apache.hudi.client.bootstrap.selector.FullRecordBootstrapModeSelector",
}


def _bootstrap(spark, spec: TableSpec, step: Bootstrap, options: dict[str, str], base: Path) -> None:
    """Write the source dataset (plain Parquet: ``source/<part>/`` keeping ``part`` in the files,
    or ``source/part=<part>/`` without it) and bootstrap the table at ``base`` from it."""
    source = base.parent / SOURCE_FOLDER
    frame = _frame(spark, spec, step)
    if step.hive_style:
        frame.coalesce(1).write.partitionBy("part").mode("overwrite").parquet(str(source))
    elif spec.partitioned:
        for value in PARTITIONS:
            frame.where(frame.part == value).coalesce(1).write.mode("overwrite").parquet(str(source / value))
    else:
        frame.coalesce(1).write.mode("overwrite").parquet(str(source))
    keygen = options.get("hoodie.datasource.write.keygenerator.class", "org.apache.hudi.keygen.SimpleKeyGenerator")
    (_dataframe(spark, spec, []).write.format("hudi").options(**options)
     .option("hoodie.datasource.write.operation", "bootstrap")
     .option("hoodie.bootstrap.base.path", str(source))
     .option("hoodie.bootstrap.keygen.class", keygen)
     .option("hoodie.bootstrap.mode.selector", _BOOTSTRAP_SELECTORS[step.mode])
     .option("hoodie.bootstrap.parallelism", "1")
     .mode("overwrite").save(str(base)))


def _frame(spark, spec: TableSpec, step: Write | Bootstrap):
    schema = (step.schema if isinstance(step, Write) else None) or spec.schema
    return _dataframe(spark, spec, [row(i, step.version, schema) for i in step.ids], schema)


def _dataframe(spark, spec: TableSpec, rows: list[tuple], schema: str | None = None):
    """``rows`` as a DataFrame of ``schema`` (``spec.schema`` unless a write names its own)."""
    schema = schema or spec.schema
    if schema in (LANCE_SCHEMA, LANCE_VARIANT_SCHEMA):  # Hudi 1.2 types, on Lance or Parquet
        return spark.createDataFrame(rows, _hudi_typed_struct(schema))
    if spark.version.startswith("3.2"):
        return _frame_from_sql(spark, rows, schema)
    return spark.createDataFrame(rows, schema)


def _frame_from_sql(spark, rows: list[tuple], schema: str):
    """``rows`` in ``schema`` built by Spark SQL alone: PySpark 3.2 cannot pickle a Python function
    on Python 3.11, which ``createDataFrame`` of Python rows does.

    A row of nulls, filtered out by the extra column ``keep``, keeps every column nullable as
    ``createDataFrame`` makes them (Hudi writes a non-nullable column without a null branch).
    """
    from pyspark.sql.types import _parse_datatype_string

    struct = _parse_datatype_string(schema)
    width = len(struct.fields)
    values = [f"({', '.join(_sql_literal(v) for v in r)}, true)" for r in rows] + [f"({'NULL, ' * width}false)"]
    columns = ", ".join(f"c{n}" for n in range(width))
    projection = ", ".join(f"CAST(c{n} AS {f.dataType.simpleString()}) AS {f.name}" for n, f in enumerate(struct.fields))
    return spark.sql(f"SELECT {projection} FROM VALUES {', '.join(values)} AS t({columns}, keep) WHERE keep")


def _sql_literal(value) -> str:
    """A Spark SQL literal of a ``row`` value (strings, numbers, dates, lists, dicts, structs)."""
    import datetime
    import decimal

    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, int):
        return f"{value}L"
    if isinstance(value, float):
        return f"{value!r}D"
    if isinstance(value, decimal.Decimal):
        return f"{value}BD"
    if isinstance(value, datetime.datetime):
        return f"TIMESTAMP '{value.astimezone(datetime.timezone.utc):%Y-%m-%d %H:%M:%S}'"
    if isinstance(value, datetime.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, list):
        return f"array({', '.join(_sql_literal(v) for v in value)})"
    if isinstance(value, dict):
        return f"map({', '.join(f'{_sql_literal(k)}, {_sql_literal(v)}' for k, v in value.items())})"
    if isinstance(value, tuple):  # a struct: its field names come from the schema's cast
        return f"struct({', '.join(_sql_literal(v) for v in value)})"
    raise TypeError(f"no Spark SQL literal for {type(value).__name__}")


def _hudi_typed_struct(schema: str):
    """``schema`` with the field metadata that gives columns their Hudi 1.2 type (``HUDI_TYPES``):
    Spark 3.5 has no VECTOR, BLOB or VARIANT type of its own."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    struct = _parse_datatype_string(schema)
    assert isinstance(struct, StructType)
    for f in struct.fields:
        if f.name in HUDI_TYPES:
            f.metadata = {"hudi_type": HUDI_TYPES[f.name]}
        if f.name == "embedding":
            f.dataType.containsNull = False  # VECTOR elements are never null
    return struct


def run_steps(spark, spec: TableSpec, release: str, base: Path) -> None:
    """Run every step of ``spec`` with Hudi ``release``; the first write creates the table at ``base``."""
    options = writer_options(spec, release)
    registered = False
    try:
        for index, step in enumerate(spec.steps):
            if isinstance(step, Bootstrap):
                _bootstrap(spark, spec, step, options, base)
                continue
            if isinstance(step, Write):
                frame = _frame(spark, spec, step)
                (frame.write.format("hudi").options(**options).options(**step.options)
                 .option("hoodie.datasource.write.operation", step.operation)
                 .mode("overwrite" if index == 0 else "append").save(str(base)))
                continue
            if not registered and "{table}" in step.statement:
                spark.sql(f"DROP TABLE IF EXISTS {spec.name}")
                spark.sql(f"CREATE TABLE {spec.name} USING hudi LOCATION '{base}'")
                registered = True
            instants = data_instants(base)
            spark.sql(step.statement.format(
                table=spec.name, path=str(base),
                last=instants[-1].requested if instants else "", first=instants[0].requested if instants else "",
            )).collect()
    finally:
        if registered:
            spark.sql(f"DROP TABLE IF EXISTS {spec.name}")
        spark.sql("RESET")  # a spec's SET statements end with it


def describe(step: Write | Sql | Bootstrap) -> str:
    if isinstance(step, Sql):
        return step.statement
    if isinstance(step, Bootstrap):
        folders = " (part=<value> source folders)" if step.hive_style else ""
        return f"bootstrap {step.mode} ids {step.ids[0]}..{step.ids[-1]} v{step.version}{folders}"
    extra = "".join(f" {k}={v}" for k, v in sorted(step.options.items()))
    columns = f" columns ({step.schema})" if step.schema else ""
    return f"{step.operation} ids {step.ids[0]}..{step.ids[-1]} v{step.version}{extra}{columns}"


def java_error(exc: BaseException) -> str:
    """The innermost Java (or Python) error message on one line, without a stack trace."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        text = f"{type(exc).__name__}: {exc}"
    else:
        cause = java
        while cause.getCause() is not None and cause.getCause() != cause:
            cause = cause.getCause()
        text = str(cause.toString())
    lines = [line.strip() for line in text.splitlines()]
    message = " ".join(line for line in lines if line and not line.startswith(("at ", "JVM stacktrace")))
    return message[:800]
