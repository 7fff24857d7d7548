package dev.hudiflight.spark;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A table served by hudi-flight, {@code namespace.table}: its schema comes from the server
 * ({@code get_schema}), each query gets a fresh {@link HudiFlightScanBuilder}. Read options (the
 * Python source's: {@code query_type}, {@code as_of}, {@code start}, {@code end}, {@code columns},
 * {@code filters}, {@code min_partitions}) come from the table's options, overridden by a query's.
 */
public class HudiFlightTable implements SupportsRead {
  private final ConnectionOptions connection;
  private final String name;
  private final Map<String, String> options;
  private StructType schema;

  public HudiFlightTable(ConnectionOptions connection, String name) {
    this(connection, name, Map.of());
  }

  public HudiFlightTable(ConnectionOptions connection, String name, Map<String, String> readOptions) {
    this.connection = connection;
    this.name = name;
    this.options = Map.copyOf(readOptions);
    QueryCommand.of(name, options);  // refuse bad options now, not at the first query
  }

  public ConnectionOptions connection() {
    return connection;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public synchronized StructType schema() {
    if (schema == null) {
      QueryCommand query = QueryCommand.of(name, options);
      try (FlightSession session = new FlightSession(connection)) {
        schema = ArrowTypes.toSpark(session.schema(query.toJson(), "schema of " + name));
      }
    }
    return schema;
  }

  @Override
  public Set<TableCapability> capabilities() {
    return Set.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ);
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap queryOptions) {
    Map<String, String> merged = new HashMap<>(options);
    merged.putAll(queryOptions.asCaseSensitiveMap());
    QueryCommand query = QueryCommand.of(name, merged);
    ConnectionOptions.Options opts = new ConnectionOptions.Options(merged);
    return new HudiFlightScanBuilder(this, query, opts.positiveInt("min_partitions", 2),
        opts.positiveInt("max_commits_per_trigger", 1));
  }
}
