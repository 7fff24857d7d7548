package dev.hudiflight.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.arrow.flight.FlightInfo;
import org.apache.arrow.flight.FlightStatusCode;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.aggregate.Max;
import org.apache.spark.sql.connector.expressions.aggregate.Min;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownLimit;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.SupportsPushDownV2Filters;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * What Spark pushes into one query: the columns it needs (nested fields as dotted paths, so the
 * server reads only their column chunks), the filters the server carries ({@link Filters}; the rest
 * are returned to Spark), {@code COUNT(*)}, {@code COUNT(col)}, {@code MIN}, {@code MAX} answered
 * from the table's metadata when the server can (else the scan runs as usual), and a limit.
 */
final class HudiFlightScanBuilder implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownV2Filters,
    SupportsPushDownAggregates, SupportsPushDownLimit {
  private final HudiFlightTable table;
  private final int minPartitions;
  private final int maxCommitsPerTrigger;
  private QueryCommand query;
  private StructType required;
  private final List<Predicate> pushed = new ArrayList<>();
  private Aggregation askedAggregation;
  private AggregateAnswer answer;
  private boolean aggregated;

  HudiFlightScanBuilder(HudiFlightTable table, QueryCommand query, int minPartitions, int maxCommitsPerTrigger) {
    this.table = table;
    this.query = query;
    this.minPartitions = minPartitions;
    this.maxCommitsPerTrigger = maxCommitsPerTrigger;
    this.required = table.schema();
  }

  @Override
  public void pruneColumns(StructType requiredSchema) {
    this.required = requiredSchema;
  }

  @Override
  public Predicate[] pushPredicates(Predicate[] predicates) {
    Filters filters = new Filters(table.schema());
    List<Predicate> rest = new ArrayList<>();
    for (Predicate predicate : predicates) {
      List<List<Object>> translated = filters.translate(predicate);
      if (translated == null) {
        rest.add(predicate);
      } else {
        query = query.withFilters(translated);
        pushed.add(predicate);
      }
    }
    return rest.toArray(new Predicate[0]);
  }

  @Override
  public Predicate[] pushedPredicates() {
    return pushed.toArray(new Predicate[0]);
  }

  @Override
  public boolean supportCompletePushDown(Aggregation aggregation) {
    return answer(aggregation) != null;
  }

  @Override
  public boolean pushAggregation(Aggregation aggregation) {
    aggregated = answer(aggregation) != null;
    return aggregated;
  }

  @Override
  public boolean pushLimit(int limit) {
    query = query.withLimit(limit);
    return true;
  }

  @Override
  public Scan build() {
    if (aggregated) {
      return new HudiFlightScan(table.connection(), answer.query, ArrowTypes.toSpark(answer.plan.getSchema()),
          1, maxCommitsPerTrigger, describe(answer.query), answer.plan);
    }
    // every column: the command names none (or keeps the user's "columns" option, the table's schema then)
    QueryCommand scan = required.equals(table.schema()) ? query : query.withColumns(columns(required, table.schema()));
    StructType schema;
    try (FlightSession session = new FlightSession(table.connection())) {
      schema = ArrowTypes.toSpark(session.schema(scan.toJson(), "schema of " + scan.table()));
    }
    if (!Arrays.equals(schema.fieldNames(), required.fieldNames())) {
      // a query's own options (a catalog table's WITH ('query_type' = 'cdc')) gave other columns than
      // the table's, which Spark planned with: refused by name, never read under the wrong names
      throw new IllegalArgumentException("hudi-flight: the query's options change the columns of " + scan.table()
          + " (to " + String.join(", ", schema.fieldNames()) + "): give them when the table is loaded, "
          + "spark.read.format(\"hudi-flight\").options(...).load(\"" + scan.table() + "\")");
    }
    return new HudiFlightScan(table.connection(), scan, schema, minPartitions, maxCommitsPerTrigger, describe(scan), null);
  }

  private String describe(QueryCommand scan) {
    String read = scan.aggregates() != null ? "PushedAggregates: " + scan.aggregates()
        : "PushedColumns: " + (scan.columns() == null ? "*" : scan.columns());
    return read + ", PushedFilters: " + scan.filters()
        + (scan.limit() == null ? "" : ", PushedLimit: " + scan.limit());
  }

  /**
   * The server's columns for Spark's required schema: a whole top-level column, or the dotted paths
   * of the leaves Spark needs of a struct (lists and maps are taken whole).
   */
  static List<String> columns(StructType required, StructType full) {
    List<String> out = new ArrayList<>();
    for (StructField field : required.fields()) {
      paths(field.name(), field.dataType(), full.apply(field.name()).dataType(), out);
    }
    return out;
  }

  private static void paths(String path, DataType wanted, DataType whole, List<String> out) {
    if (wanted instanceof StructType && !wanted.equals(whole) && whole instanceof StructType) {
      boolean dotted = Arrays.stream(((StructType) wanted).fieldNames()).noneMatch(n -> n.contains("."));
      if (dotted && !path.contains(".")) {
        for (StructField child : ((StructType) wanted).fields()) {
          paths(path + "." + child.name(), child.dataType(), ((StructType) whole).apply(child.name()).dataType(), out);
        }
        return;
      }
    }
    out.add(path);
  }

  /** The server's answer to an aggregation from metadata, or null (not expressible, or not exact: then Spark scans). */
  private AggregateAnswer answer(Aggregation aggregation) {
    if (aggregation != askedAggregation) {
      askedAggregation = aggregation;
      answer = ask(aggregation);
    }
    return answer;
  }

  private AggregateAnswer ask(Aggregation aggregation) {
    if (aggregation.groupByExpressions().length > 0 || query.limit() != null) {
      return null;
    }
    List<List<String>> aggregates = new ArrayList<>();
    for (AggregateFunc func : aggregation.aggregateExpressions()) {
      List<String> one = aggregate(func);
      if (one == null) {
        return null;
      }
      aggregates.add(one);
    }
    QueryCommand asked = query.withAggregates(aggregates);
    try (FlightSession session = new FlightSession(table.connection())) {
      return new AggregateAnswer(asked, session.plan(asked.toJson(), "aggregates of " + asked.table()));
    } catch (FlightSession.ServerException err) {
      if (err.code() == FlightStatusCode.UNIMPLEMENTED || err.code() == FlightStatusCode.INVALID_ARGUMENT) {
        return null;  // not exact from metadata (or not a column the server aggregates): Spark scans
      }
      throw err;
    }
  }

  private static List<String> aggregate(AggregateFunc func) {
    if (func instanceof CountStar) {
      return List.of("count", "*");
    }
    String function;
    Expression column;
    if (func instanceof Count && !((Count) func).isDistinct()) {
      function = "count";
      column = ((Count) func).column();
    } else if (func instanceof Min) {
      function = "min";
      column = ((Min) func).column();
    } else if (func instanceof Max) {
      function = "max";
      column = ((Max) func).column();
    } else {
      return null;
    }
    if (!(column instanceof NamedReference)) {
      return null;
    }
    String[] names = ((NamedReference) column).fieldNames();
    if (Arrays.stream(names).anyMatch(n -> n.contains("."))) {
      return null;
    }
    return List.of(function, String.join(".", names));
  }

  private static final class AggregateAnswer {
    final QueryCommand query;
    final FlightInfo plan;

    AggregateAnswer(QueryCommand query, FlightInfo plan) {
      this.query = query;
      this.plan = plan;
    }
  }
}
