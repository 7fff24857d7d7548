// Runs JDBC steps against hudi-flight through the Arrow Flight SQL JDBC driver and prints one JSON
// object per step (the Python tests assert on them). Launched as a single-file program:
//   java --add-opens=java.base/java.nio=ALL-UNNAMED -cp flight-sql-jdbc-driver.jar JdbcChecks.java STEPS
// STEPS holds one step per line, fields separated by tabs: id, JDBC URL, kind, text, parameters...
//   kind "meta":      text is "namespace.table"; DatabaseMetaData of the catalog and that table
//   kind "query":     text is SQL run with Statement.executeQuery
//   kind "prepared":  text is SQL with ? parameters; each parameter is "type:value" with type one of
//                     int, long, double, string, bool, date (yyyy-mm-dd), timestamp (ISO instant), null
//   kind "timezone":  text is a time zone id made the JVM default for the following steps
// A URL may carry user=...&password=... and TLS options; connections are opened once per URL.
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.*;
import java.time.Instant;
import java.util.*;

public class JdbcChecks {
  private static final Map<String, Connection> CONNECTIONS = new HashMap<>();

  public static void main(String[] args) throws Exception {
    for (String line : Files.readAllLines(Path.of(args[0]))) {
      if (line.isBlank()) continue;
      String[] f = line.split("\t", -1);
      StringBuilder out = new StringBuilder("{\"id\":").append(json(f[0]));
      try {
        switch (f[2]) {
          case "meta" -> meta(connection(f[1]), f[3], out);
          case "query" -> {
            try (Statement s = connection(f[1]).createStatement(); ResultSet rs = s.executeQuery(f[3])) {
              result(rs, out);
            }
          }
          case "prepared" -> {
            try (PreparedStatement p = connection(f[1]).prepareStatement(f[3])) {
              ParameterMetaData pm = p.getParameterMetaData();
              List<String> types = new ArrayList<>();
              for (int i = 1; i <= pm.getParameterCount(); i++) types.add(pm.getParameterTypeName(i));
              out.append(",\"parameter_types\":").append(jsonList(types));
              for (int i = 4; i < f.length; i++) bind(p, i - 3, f[i]);
              try (ResultSet rs = p.executeQuery()) {
                result(rs, out);
              }
            }
          }
          case "timezone" -> TimeZone.setDefault(TimeZone.getTimeZone(f[3]));
          default -> throw new IllegalArgumentException("unknown step kind " + f[2]);
        }
        out.append(",\"ok\":true}");
      } catch (Exception e) {
        out.append(",\"ok\":false,\"error\":").append(json(String.valueOf(e.getMessage()))).append("}");
      }
      System.out.println(out);
    }
    for (Connection c : CONNECTIONS.values()) {
      try {
        c.close();
      } catch (SQLException e) {
        System.err.println("closing a connection: " + e.getMessage());
      }
    }
  }

  private static Connection connection(String url) throws SQLException {
    Connection c = CONNECTIONS.get(url);
    if (c == null) {
      c = DriverManager.getConnection(url);
      CONNECTIONS.put(url, c);
    }
    return c;
  }

  private static void bind(PreparedStatement p, int i, String spec) throws SQLException {
    String type = spec.substring(0, spec.indexOf(':'));
    String v = spec.substring(spec.indexOf(':') + 1);
    switch (type) {
      case "int" -> p.setInt(i, Integer.parseInt(v));
      case "long" -> p.setLong(i, Long.parseLong(v));
      case "double" -> p.setDouble(i, Double.parseDouble(v));
      case "string" -> p.setString(i, v);
      case "bool" -> p.setBoolean(i, Boolean.parseBoolean(v));
      case "date" -> p.setDate(i, java.sql.Date.valueOf(v));
      case "timestamp" -> p.setTimestamp(i, Timestamp.from(Instant.parse(v)));
      case "null" -> p.setNull(i, Types.VARCHAR);
      default -> throw new IllegalArgumentException("unknown parameter type " + type);
    }
  }

  private static void meta(Connection c, String table, StringBuilder out) throws SQLException {
    DatabaseMetaData md = c.getMetaData();
    String ns = table.substring(0, table.indexOf('.'));
    String name = table.substring(table.indexOf('.') + 1);
    out.append(",\"product\":").append(json(md.getDatabaseProductName()));
    out.append(",\"catalogs\":").append(column(md.getCatalogs(), "TABLE_CAT"));
    out.append(",\"schemas\":").append(column(md.getSchemas(), "TABLE_SCHEM"));
    out.append(",\"table_types\":").append(column(md.getTableTypes(), "TABLE_TYPE"));
    out.append(",\"tables\":").append(rows(md.getTables(null, ns, "%", null), "TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "TABLE_TYPE"));
    out.append(",\"tables_of_type_table\":").append(column(md.getTables(null, ns, "%", new String[] {"TABLE"}), "TABLE_NAME"));
    out.append(",\"columns\":").append(rows(md.getColumns(null, ns, name, "%"),
        "COLUMN_NAME", "DATA_TYPE", "TYPE_NAME", "COLUMN_SIZE", "DECIMAL_DIGITS", "NULLABLE", "ORDINAL_POSITION"));
    out.append(",\"primary_keys\":").append(rows(md.getPrimaryKeys(null, ns, name), "COLUMN_NAME", "KEY_SEQ"));
    out.append(",\"imported_keys\":").append(count(md.getImportedKeys(null, ns, name)));
    out.append(",\"exported_keys\":").append(count(md.getExportedKeys(null, ns, name)));
    out.append(",\"cross_reference\":").append(count(md.getCrossReference(null, ns, name, null, ns, name)));
  }

  private static String column(ResultSet rs, String label) throws SQLException {
    try (rs) {
      List<String> values = new ArrayList<>();
      while (rs.next()) values.add(rs.getString(label));
      return jsonList(values);
    }
  }

  private static String rows(ResultSet rs, String... labels) throws SQLException {
    try (rs) {
      StringBuilder b = new StringBuilder("[");
      while (rs.next()) {
        if (b.length() > 1) b.append(',');
        List<String> values = new ArrayList<>();
        for (String label : labels) values.add(rs.getString(label));
        b.append(jsonList(values));
      }
      return b.append(']').toString();
    }
  }

  private static int count(ResultSet rs) throws SQLException {
    try (rs) {
      int n = 0;
      while (rs.next()) n++;
      return n;
    }
  }

  private static void result(ResultSet rs, StringBuilder out) throws SQLException {
    ResultSetMetaData m = rs.getMetaData();
    out.append(",\"columns\":[");
    for (int i = 1; i <= m.getColumnCount(); i++) {
      if (i > 1) out.append(',');
      out.append(jsonList(Arrays.asList(m.getColumnLabel(i), String.valueOf(m.getColumnType(i)), m.getColumnTypeName(i),
          String.valueOf(m.getPrecision(i)), String.valueOf(m.getScale(i)), m.getCatalogName(i), m.getSchemaName(i),
          m.getTableName(i))));
    }
    out.append("],\"rows\":[");
    boolean first = true;
    while (rs.next()) {
      if (!first) out.append(',');
      first = false;
      List<String> values = new ArrayList<>();
      for (int i = 1; i <= m.getColumnCount(); i++) values.add(value(rs, i, m.getColumnType(i)));
      out.append(jsonList(values));
    }
    out.append(']');
  }

  private static String value(ResultSet rs, int i, int type) throws SQLException {
    if (type == Types.TIMESTAMP || type == Types.TIMESTAMP_WITH_TIMEZONE) {
      Timestamp t = rs.getTimestamp(i);
      return t == null ? null : t.toInstant().toString() + " " + rs.getString(i);
    }
    Object v = rs.getObject(i);
    return v == null ? null : v.toString();
  }

  private static String jsonList(List<String> values) {
    StringBuilder b = new StringBuilder("[");
    for (String v : values) {
      if (b.length() > 1) b.append(',');
      b.append(json(v));
    }
    return b.append(']').toString();
  }

  private static String json(String s) {
    if (s == null) return "null";
    StringBuilder b = new StringBuilder("\"");
    for (char ch : s.toCharArray()) {
      switch (ch) {
        case '"' -> b.append("\\\"");
        case '\\' -> b.append("\\\\");
        case '\n' -> b.append("\\n");
        case '\r' -> b.append("\\r");
        case '\t' -> b.append("\\t");
        default -> {
          if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
          else b.append(ch);
        }
      }
    }
    return b.append('"').toString();
  }
}
