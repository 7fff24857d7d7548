package dev.hudiflight.spark;

import java.util.Map;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.read.format("hudi-flight").option("uri", "grpc://host:8815").load("ns.table")}: the
 * DataSource V2 entry point (registered in {@code META-INF/services}). Options: {@code uri}
 * (required), credentials and TLS ({@link ConnectionOptions}), read options ({@link HudiFlightTable});
 * the table is the {@code load()} argument (or option {@code table}).
 */
public final class HudiFlightSource implements TableProvider, DataSourceRegister {
  public static final String SHORT_NAME = "hudi-flight";

  @Override
  public String shortName() {
    return SHORT_NAME;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return table(options).schema();
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return table(properties);
  }

  private static HudiFlightTable table(Map<String, String> options) {
    ConnectionOptions.Options opts = new ConnectionOptions.Options(options);
    String name = opts.get("table") != null ? opts.get("table") : opts.get("path");
    return new HudiFlightTable(ConnectionOptions.from(options), name, options);
  }
}
