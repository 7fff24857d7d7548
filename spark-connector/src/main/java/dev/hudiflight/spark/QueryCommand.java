package dev.hudiflight.spark;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A hudi-flight query: the JSON command of {@code get_flight_info} ({@code schemas/command.schema.json}),
 * immutable; each pushdown returns a copy with its part set. Read options take the Python data
 * source's names: {@code query_type}, {@code as_of}, {@code start}, {@code end}, {@code columns}
 * ({@code "a,b"} or a JSON list) and {@code filters} (the command's JSON list of
 * {@code [column, op, value]}).
 */
public final class QueryCommand implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Set<String> QUERY_TYPES = Set.of("snapshot", "read_optimized", "incremental", "cdc");

  private final String table;
  private final Map<String, String> instants;  // query_type, as_of, start, end (as given)
  private final List<String> columns;  // null: every column; empty: a counting scan
  private final List<List<Object>> filters;
  private final Integer limit;
  private final List<List<String>> aggregates;

  private QueryCommand(String table, Map<String, String> instants, List<String> columns, List<List<Object>> filters,
      Integer limit, List<List<String>> aggregates) {
    this.table = table;
    this.instants = instants;
    this.columns = columns;
    this.filters = filters;
    this.limit = limit;
    this.aggregates = aggregates;
  }

  /** The query of a table named {@code namespace.table}, read options from {@code options}. */
  public static QueryCommand of(String table, Map<String, String> options) {
    if (table == null || !table.matches("[^.\\s]+\\.[^.\\s]+")) {
      throw new IllegalArgumentException(
          "hudi-flight: name the table as \"namespace.table\" in load(...), got " + (table == null ? "nothing" : "'" + table + "'"));
    }
    ConnectionOptions.Options opts = new ConnectionOptions.Options(options);
    Map<String, String> instants = new LinkedHashMap<>();
    for (String key : List.of("query_type", "as_of", "start", "end")) {
      String value = opts.get(key);
      if (value != null) {
        instants.put(key, value.strip());
      }
    }
    String queryType = instants.get("query_type");
    if (queryType != null && !QUERY_TYPES.contains(queryType)) {
      throw new IllegalArgumentException(
          "hudi-flight: option \"query_type\" takes snapshot, read_optimized, incremental or cdc, got '" + queryType + "'");
    }
    return new QueryCommand(table, Collections.unmodifiableMap(instants), parseColumns(opts.get("columns")),
        parseFilters(opts.get("filters")), null, null);
  }

  private static List<String> parseColumns(String value) {
    if (value == null) {
      return null;
    }
    List<String> names = new ArrayList<>();
    String text = value.strip();
    if (text.startsWith("[")) {
      for (JsonNode node : readJson(text, "columns")) {
        if (!node.isTextual() || node.asText().isEmpty()) {
          throw new IllegalArgumentException("hudi-flight: bad columns option " + value);
        }
        names.add(node.asText());
      }
    } else {
      for (String name : text.split(",")) {
        if (name.isBlank()) {
          throw new IllegalArgumentException("hudi-flight: bad columns option " + value);
        }
        names.add(name.strip());
      }
    }
    return List.copyOf(names);
  }

  private static List<List<Object>> parseFilters(String value) {
    if (value == null) {
      return List.of();
    }
    String text = value.strip();
    if (!text.startsWith("[")) {
      throw new IllegalArgumentException(
          "hudi-flight: the connector's \"filters\" option takes the JSON list of [column, op, value] "
              + "(docs/flight.md); write filters as text in df.where(...), which the connector pushes to the server");
    }
    List<List<Object>> parsed = new ArrayList<>();
    for (JsonNode filter : readJson(text, "filters")) {
      if (!filter.isArray() || filter.size() < 2 || filter.size() > 3 || !filter.get(0).isTextual()
          || !filter.get(1).isTextual()) {
        throw new IllegalArgumentException("hudi-flight: bad filters option: expected a JSON list of [column, op, value]");
      }
      parsed.add(JSON.convertValue(filter, JSON.getTypeFactory().constructCollectionType(List.class, Object.class)));
    }
    return List.copyOf(parsed);
  }

  private static JsonNode readJson(String text, String option) {
    try {
      JsonNode node = JSON.readTree(text);
      if (!node.isArray()) {
        throw new IllegalArgumentException("hudi-flight: option \"" + option + "\" must be a JSON list");
      }
      return node;
    } catch (JsonProcessingException err) {
      throw new IllegalArgumentException("hudi-flight: option \"" + option + "\" is not valid JSON");
    }
  }

  public String table() {
    return table;
  }

  public List<String> columns() {
    return columns;
  }

  public List<List<Object>> filters() {
    return filters;
  }

  public Integer limit() {
    return limit;
  }

  public List<List<String>> aggregates() {
    return aggregates;
  }

  /** A read option of the query as given ({@code query_type}, {@code as_of}, {@code start}, {@code end}), or null. */
  public String instant(String key) {
    return instants.get(key);
  }

  /** This query as the incremental query of the commits in {@code (start, end]} ({@code start} null: from the first). */
  public QueryCommand incremental(String start, String end) {
    Map<String, String> range = new LinkedHashMap<>();
    range.put("query_type", "incremental");
    if (start != null) {
      range.put("start", start);
    }
    range.put("end", end);
    return new QueryCommand(table, Collections.unmodifiableMap(range), columns, filters, limit, aggregates);
  }

  public QueryCommand withColumns(List<String> newColumns) {
    return new QueryCommand(table, instants, List.copyOf(newColumns), filters, limit, aggregates);
  }

  /** This query with more filters, ANDed to those it has. */
  public QueryCommand withFilters(List<List<Object>> more) {
    List<List<Object>> all = new ArrayList<>(filters);
    all.addAll(more);
    return new QueryCommand(table, instants, columns, Collections.unmodifiableList(all), limit, aggregates);
  }

  public QueryCommand withLimit(int newLimit) {
    return new QueryCommand(table, instants, columns, filters, newLimit, aggregates);
  }

  /** This query answered with aggregates from metadata instead of rows (no columns, no limit). */
  public QueryCommand withAggregates(List<List<String>> newAggregates) {
    return new QueryCommand(table, instants, null, filters, null, List.copyOf(newAggregates));
  }

  /** The UTF-8 JSON command. */
  public byte[] toJson() {
    Map<String, Object> doc = new LinkedHashMap<>();
    doc.put("table", table);
    if (columns != null) {
      doc.put("columns", columns);
    }
    if (!filters.isEmpty()) {
      doc.put("filters", filters);
    }
    doc.putAll(instants);
    if (limit != null) {
      doc.put("limit", limit);
    }
    if (aggregates != null) {
      doc.put("aggregates", aggregates);
    }
    try {
      return JSON.writeValueAsBytes(doc);
    } catch (JsonProcessingException err) {
      throw new IllegalStateException("hudi-flight: cannot write the query command", err);
    }
  }

  /** The command as text, for Spark's plan description. */
  @Override
  public String toString() {
    return new String(toJson(), java.nio.charset.StandardCharsets.UTF_8);
  }
}
