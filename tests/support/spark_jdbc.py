"""Spark's JDBC source over the Arrow Flight SQL JDBC driver, in its own process (a JVM of its
own, with the driver jar on ``spark.jars``; the test process may already hold a SparkContext).

``python -m tests.support.spark_jdbc JARS FLIGHT_URI TABLE PARTITION_COLUMN [BY_NAME...]`` prints one
JSON object: what ``spark.read.jdbc`` returned for a count, a pruned column, a filter, a limit and
a partitioned read, and the same through the Python data source (``format("hudi-flight-python")``);
then, with the project's dialect registered, each ``BY_NAME`` table read by its name.

Without the dialect Spark's generic JDBC mapping refuses ``TIMESTAMP WITH TIME ZONE`` columns
(java.sql.Types 2014, UNRECOGNIZED_SQL_TYPE) and nested ones: the first reads go through a
subquery that casts them (:func:`readable_dbtable`).
"""

from __future__ import annotations

import json
import sys

from flight_server.client.spark_jdbc import DRIVER_CLASS, register_jdbc_dialect
from flight_server.protocol.headers import ALL_ENDPOINTS_HEADER

JVM_OPTIONS = "--add-opens=java.base/java.nio=ALL-UNNAMED -Duser.timezone=UTC"


def session(jars: str):
    """A local session with the JDBC ``jars`` (comma-separated) and the JVM options they need."""
    from tests.support.spark import local_spark

    return local_spark("hudi-flight-jdbc", jars, "1g", JVM_OPTIONS)


#: Spark types -> the SQL type a column is cast to so Spark's generic JDBC dialect can read it
_CASTS = {"timestamp": "TIMESTAMP", "struct": "VARCHAR", "array": "VARCHAR", "map": "VARCHAR"}


def readable_dbtable(schema, table: str) -> str:
    """A ``dbtable`` subquery Spark's JDBC source can read (``schema``: the table's Spark schema):
    zoned timestamps cast to ``TIMESTAMP``, nested columns (JAVA_OBJECT, ARRAY) to text, every
    other column as it is. The server reads only the columns Spark's query then uses."""
    items = []
    for f in schema:
        cast = _CASTS.get(f.dataType.typeName())
        items.append(f'CAST("{f.name}" AS {cast}) AS "{f.name}"' if cast else f'"{f.name}"')
    return f"(SELECT {', '.join(items)} FROM {table}) AS t"


def jdbc_url(flight_uri: str, all_endpoints: bool = False) -> str:
    """The JDBC URL of a plain server; ``all_endpoints``: the driver says it reads every endpoint."""
    host_port = flight_uri.split("://", 1)[1]
    url = f"jdbc:arrow-flight-sql://{host_port}/?useEncryption=false"
    return url + f"&{ALL_ENDPOINTS_HEADER}=true" if all_endpoints else url


def by_name(spark, flight_uri: str, tables: list[str]) -> dict:
    """Each table read by its name through the dialect: Spark types, rows as Spark's JSON, and the
    type and value of a ``count(*)`` the server computes."""
    register_jdbc_dialect(spark)
    url = jdbc_url(flight_uri, all_endpoints=True)
    properties = {"driver": DRIVER_CLASS}
    out = {}
    for table in tables:
        df = spark.read.jdbc(url, table, properties=properties)
        counted = spark.read.jdbc(url, f"(SELECT count(*) AS n FROM {table}) AS q", properties=properties)
        out[table] = {
            "types": df.dtypes,
            "rows": df.toJSON().collect(),
            "count": df.count(),
            "count_type": counted.dtypes[0][1],
            "counted": counted.first()[0],
        }
    return out


def main(jars: str, flight_uri: str, table: str, partition_column: str, *tables: str) -> dict:
    from flight_server.client.spark import PYTHON_SOURCE_NAME

    spark = session(jars)
    url = jdbc_url(flight_uri)
    options = {"driver": DRIVER_CLASS}

    python = spark.read.format(PYTHON_SOURCE_NAME).option("uri", flight_uri).load(table)
    dbtable = readable_dbtable(python.schema, table)

    def jdbc(**extra: str):
        return spark.read.format("jdbc").options(url=url, dbtable=dbtable, **options, **extra).load()

    df = jdbc()
    # the driver reports no column as signed: Spark widens BIGINT to decimal(20,0), INTEGER to bigint
    python_types = dict(python.dtypes)
    same_types = df.select(*[df[c].cast(python_types[c]).alias(c) for c in df.columns])
    bounds = python.selectExpr(f"min({partition_column})", f"max({partition_column})").first()
    partitioned = jdbc(partitionColumn=partition_column, lowerBound=str(bounds[0]), upperBound=str(bounds[1]),
                       numPartitions="3")
    out = {
        "columns": df.columns,
        "types": dict(df.dtypes),
        "python_types": dict(python.dtypes),
        "python_columns": python.columns,
        "count": df.count(),
        "count_aggregate_pushed": jdbc(pushDownAggregate="true").count(),
        "python_count": python.count(),
        "pruned": sorted(r[0] for r in df.select("txn_id").collect()),
        "python_pruned": sorted(r[0] for r in python.select("txn_id").collect()),
        "filtered": sorted(r[0] for r in df.filter("region = 'us' AND amount > 100").select("txn_id").collect()),
        "python_filtered": sorted(
            r[0] for r in python.filter("region = 'us' AND amount > 100").select("txn_id").collect()),
        "limited": len(df.limit(3).collect()),
        "partitions": partitioned.rdd.getNumPartitions(),
        "partitioned": sorted(r[0] for r in partitioned.select("txn_id").collect()),
        "rows": sorted(json.dumps(r.asDict(), default=str, sort_keys=True) for r in same_types.collect()),
        "python_rows": sorted(json.dumps(r.asDict(), default=str, sort_keys=True) for r in python.collect()),
        "by_name": by_name(spark, flight_uri, list(tables)),
    }
    spark.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])))
