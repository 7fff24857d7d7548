package dev.hudiflight.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.arrow.flight.FlightStatusCode;
import org.apache.spark.sql.catalyst.analysis.NoSuchNamespaceException;
import org.apache.spark.sql.catalyst.analysis.NoSuchTableException;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.connector.catalog.NamespaceChange;
import org.apache.spark.sql.connector.catalog.SupportsNamespaces;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCatalog;
import org.apache.spark.sql.connector.catalog.TableChange;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The tables of a hudi-flight server as a Spark catalog:
 * {@code spark.sql.catalog.lake = dev.hudiflight.spark.HudiFlightCatalog} with
 * {@code spark.sql.catalog.lake.uri = grpc://host:8815} (and the connector's credential and TLS
 * options under the same prefix). One level of namespaces, the server's; the tables each namespace
 * shows the caller (the server's grants decide).
 *
 * <p>Time travel: {@code VERSION AS OF '<instant>'} reads as of a Hudi instant
 * ({@code yyyyMMddHHmmss[SSS]}, or an ISO time as the connector's {@code as_of} takes it);
 * {@code TIMESTAMP AS OF} reads as of that moment (to the millisecond, the finest a Hudi instant
 * has). The other read options (read-optimized, incremental and CDC queries) are a query's options:
 * {@code SELECT ... FROM lake.ns.t WITH ('query_type' = 'incremental', 'start' = '...')} or
 * {@code spark.read.options(...).table("lake.ns.t")}; {@code lake.ns.t_ro} is the read-optimized
 * view of a merge-on-read table {@code t}, as Hive sync names it. A table's metadata tables are
 * tables too: {@code lake.ns.`t$timeline`}.
 *
 * <p>Read-only: every call that would create, change or drop a table or namespace is refused by name.
 */
public final class HudiFlightCatalog implements TableCatalog, SupportsNamespaces {
  static final String LIST_NAMESPACES = "list-namespaces";
  static final String LIST_TABLES = "list-tables";
  static final String TABLE_INFO = "table-info";
  /** Hive sync's name suffix of a merge-on-read table's read-optimized view. */
  static final String READ_OPTIMIZED_SUFFIX = "_ro";
  private static final String MERGE_ON_READ = "MERGE_ON_READ";
  private static final ObjectMapper JSON = new ObjectMapper();
  /** Hudi's instants have milliseconds: a moment between two of them sees the earlier. */
  private static final DateTimeFormatter ISO_MILLIS =
      DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);

  private String catalogName;
  private ConnectionOptions connection;

  @Override
  public void initialize(String name, CaseInsensitiveStringMap options) {
    this.catalogName = name;
    this.connection = ConnectionOptions.from(options.asCaseSensitiveMap());
  }

  @Override
  public String name() {
    return catalogName;
  }

  // -- namespaces -------------------------------------------------------------------------------

  @Override
  public String[][] listNamespaces() {
    List<String[]> out = new ArrayList<>();
    for (JsonNode namespace : action(LIST_NAMESPACES, Map.of(), "listing namespaces")) {
      out.add(new String[] {namespace.asText()});
    }
    return out.toArray(new String[0][]);
  }

  @Override
  public String[][] listNamespaces(String[] namespace) throws NoSuchNamespaceException {
    if (namespace.length == 0) {
      return listNamespaces();
    }
    requireNamespace(namespace);
    return new String[0][];  // one level: a namespace holds tables only
  }

  @Override
  public boolean namespaceExists(String[] namespace) {
    if (namespace.length != 1) {
      return false;
    }
    for (String[] known : listNamespaces()) {
      if (known[0].equals(namespace[0])) {
        return true;
      }
    }
    return false;
  }

  @Override
  public Map<String, String> loadNamespaceMetadata(String[] namespace) throws NoSuchNamespaceException {
    requireNamespace(namespace);
    return Map.of();
  }

  private void requireNamespace(String[] namespace) throws NoSuchNamespaceException {
    if (!namespaceExists(namespace)) {
      throw new NoSuchNamespaceException(namespace);
    }
  }

  // -- tables -----------------------------------------------------------------------------------

  @Override
  public Identifier[] listTables(String[] namespace) throws NoSuchNamespaceException {
    requireNamespace(namespace);
    List<Identifier> out = new ArrayList<>();
    for (JsonNode entry : action(LIST_TABLES, Map.of("namespace", namespace[0]), "listing tables of " + namespace[0])) {
      out.add(Identifier.of(namespace, entry.get("name").asText()));
    }
    return out.toArray(new Identifier[0]);
  }

  @Override
  public Table loadTable(Identifier ident) throws NoSuchTableException {
    return table(ident, Map.of());
  }

  /** {@code VERSION AS OF '<instant>'}: the table as of that Hudi instant. */
  @Override
  public Table loadTable(Identifier ident, String version) throws NoSuchTableException {
    return table(ident, Map.of("as_of", version));
  }

  /** {@code TIMESTAMP AS OF ...}: Spark's microseconds since the epoch, as an ISO instant in UTC. */
  @Override
  public Table loadTable(Identifier ident, long timestamp) throws NoSuchTableException {
    return table(ident, Map.of("as_of", asOf(timestamp)));
  }

  /** Microseconds since the epoch as the ISO-8601 UTC time of its millisecond ({@code ...T...:ss.SSSZ}). */
  static String asOf(long micros) {
    return ISO_MILLIS.format(Instant.EPOCH.plus(Math.floorDiv(micros, 1000L), ChronoUnit.MILLIS));
  }

  /**
   * The table, checked to exist now (Spark asks before planning, and reports a missing one by name).
   * {@code t_ro}, when no table of that name is served, is the read-optimized view of the
   * merge-on-read table {@code t}, as Hive sync names it (and as the server's SQL does).
   */
  private Table table(Identifier ident, Map<String, String> readOptions) throws NoSuchTableException {
    if (ident.namespace().length != 1) {
      throw new NoSuchTableException(ident);
    }
    String namespace = ident.namespace()[0];
    try {
      return loaded(namespace + "." + ident.name(), readOptions);
    } catch (FlightSession.ServerException err) {
      if (err.code() != FlightStatusCode.NOT_FOUND) {
        throw err;
      }
    }
    String base = readOptimizedBase(namespace, ident.name());
    if (base == null) {
      throw new NoSuchTableException(ident);
    }
    Map<String, String> options = new HashMap<>(readOptions);
    options.put("query_type", "read_optimized");
    return loaded(base, options);
  }

  private HudiFlightTable loaded(String name, Map<String, String> readOptions) {
    HudiFlightTable table = new HudiFlightTable(connection, name, readOptions);
    table.schema();
    return table;
  }

  /** {@code ns.t} when {@code name} is {@code t_ro} and {@code ns.t} is a merge-on-read table, else null. */
  private String readOptimizedBase(String namespace, String name) {
    if (!name.endsWith(READ_OPTIMIZED_SUFFIX) || name.length() == READ_OPTIMIZED_SUFFIX.length()) {
      return null;
    }
    String base = namespace + "." + name.substring(0, name.length() - READ_OPTIMIZED_SUFFIX.length());
    JsonNode info;
    try {
      info = answer(TABLE_INFO, Map.of("table", base), "describing " + base);
    } catch (FlightSession.ServerException err) {
      if (err.code() == FlightStatusCode.NOT_FOUND) {
        return null;
      }
      throw err;
    }
    return MERGE_ON_READ.equals(info.path("table_type").asText()) ? base : null;
  }

  /** The list a catalog action answers with (JSON). */
  private JsonNode action(String type, Map<String, String> body, String what) {
    JsonNode doc = answer(type, body, what);
    if (!doc.isArray()) {
      throw new IllegalStateException("hudi-flight server " + connection.uri() + " answered " + what + " without a list");
    }
    return doc;
  }

  /** The JSON document a catalog action answers with. */
  private JsonNode answer(String type, Map<String, String> body, String what) {
    byte[] answer;
    try (FlightSession session = new FlightSession(connection)) {
      answer = session.action(type, JSON.writeValueAsBytes(body), what);
    } catch (IOException err) {
      throw new IllegalStateException("hudi-flight: cannot write the body of " + type, err);
    }
    try {
      JsonNode doc = answer == null ? null : JSON.readTree(answer);
      if (doc == null) {
        throw new IllegalStateException("hudi-flight server " + connection.uri() + " answered " + what + " with nothing");
      }
      return doc;
    } catch (IOException err) {
      throw new IllegalStateException("hudi-flight server " + connection.uri() + " answered " + what + " with bad JSON");
    }
  }

  // -- read-only: every change is refused by name ------------------------------------------------

  private UnsupportedOperationException readOnly(String statement, String target) {
    return new UnsupportedOperationException("hudi-flight catalog '" + catalogName + "' is read-only: " + statement + " "
        + target + " is not carried (write Hudi tables with Hudi's own writer; the server serves them)");
  }

  private String qualified(Identifier ident) {
    return catalogName + "." + String.join(".", ident.namespace()) + "." + ident.name();
  }

  private String qualified(String[] namespace) {
    return catalogName + "." + String.join(".", namespace);
  }

  @Override
  public Table createTable(Identifier ident, Column[] columns, Transform[] partitions, Map<String, String> properties) {
    throw readOnly("CREATE TABLE", qualified(ident));
  }

  @Override
  @SuppressWarnings("deprecation")
  public Table createTable(Identifier ident, StructType schema, Transform[] partitions, Map<String, String> properties) {
    throw readOnly("CREATE TABLE", qualified(ident));
  }

  @Override
  public Table alterTable(Identifier ident, TableChange... changes) {
    throw readOnly("ALTER TABLE", qualified(ident));
  }

  @Override
  public boolean dropTable(Identifier ident) {
    throw readOnly("DROP TABLE", qualified(ident));
  }

  @Override
  public boolean purgeTable(Identifier ident) {
    throw readOnly("DROP TABLE ... PURGE", qualified(ident));
  }

  @Override
  public void renameTable(Identifier oldIdent, Identifier newIdent) {
    throw readOnly("ALTER TABLE ... RENAME", qualified(oldIdent));
  }

  @Override
  public void createNamespace(String[] namespace, Map<String, String> metadata) {
    throw readOnly("CREATE NAMESPACE", qualified(namespace));
  }

  @Override
  public void alterNamespace(String[] namespace, NamespaceChange... changes) {
    throw readOnly("ALTER NAMESPACE", qualified(namespace));
  }

  @Override
  public boolean dropNamespace(String[] namespace, boolean cascade) {
    throw readOnly("DROP NAMESPACE", qualified(namespace));
  }
}
