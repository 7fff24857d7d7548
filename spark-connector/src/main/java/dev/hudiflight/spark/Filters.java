package dev.hudiflight.spark;

import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.Literal;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Spark's V2 predicates -> the server's {@code [column, op, value]} filters, for exactly those the
 * server evaluates as Spark does (the server applies its filters to the rows, exactly: docs/reading.md).
 * Pushed: {@code = <> < <= > >=}, {@code IN}, {@code NOT IN} (no null in the list), {@code IS [NOT] NULL}
 * and {@code AND} of those, on a top-level column, comparing strings (Spark's default collation),
 * booleans, integers, decimals and dates. Floating-point columns take only {@code =} and {@code IN}
 * of numbers (Spark orders NaN above every number, Arrow's comparisons leave it out); timestamps,
 * binary and nested columns only the null tests. Everything else stays with Spark.
 */
final class Filters {
  private static final Map<String, String> COMPARISONS = Map.of(
      "=", "=", "<>", "!=", "<", "<", "<=", "<=", ">", ">", ">=", ">=");
  private static final Map<String, String> FLIPPED = Map.of(
      "=", "=", "<>", "!=", "<", ">", "<=", ">=", ">", "<", ">=", "<=");

  private final StructType schema;

  Filters(StructType schema) {
    this.schema = schema;
  }

  /** The server's filters equal to {@code predicate}, or null when the server cannot carry all of it. */
  List<List<Object>> translate(Predicate predicate) {
    Expression[] args = predicate.children();
    switch (predicate.name()) {
      case "AND": {
        List<List<Object>> left = translate((Predicate) args[0]);
        List<List<Object>> right = left == null ? null : translate((Predicate) args[1]);
        if (right == null) {
          return null;
        }
        List<List<Object>> both = new ArrayList<>(left);
        both.addAll(right);
        return both;
      }
      case "IS_NULL":
      case "IS_NOT_NULL": {
        String column = column(args[0]);
        return column == null ? null : one(column, predicate.name().equals("IS_NULL") ? "is null" : "is not null", null);
      }
      case "IN":
        return in(args, "in");
      case "NOT":
        return args[0] instanceof Predicate && ((Predicate) args[0]).name().equals("IN")
            ? in(((Predicate) args[0]).children(), "not in") : null;
      default:
        return comparison(predicate.name(), args);
    }
  }

  private List<List<Object>> comparison(String name, Expression[] args) {
    if (!COMPARISONS.containsKey(name) || args.length != 2) {
      return null;
    }
    boolean flipped = args[0] instanceof Literal;
    Expression ref = flipped ? args[1] : args[0];
    Expression lit = flipped ? args[0] : args[1];
    String column = column(ref);
    if (column == null || !(lit instanceof Literal)) {
      return null;
    }
    DataType type = schema.apply(column).dataType();
    boolean ordered = !name.equals("=");
    Object value = value(type, (Literal<?>) lit, ordered);
    return value == null ? null : one(column, (flipped ? FLIPPED : COMPARISONS).get(name), value);
  }

  private List<List<Object>> in(Expression[] args, String op) {
    String column = column(args[0]);
    if (column == null || args.length < 2) {
      return null;
    }
    DataType type = schema.apply(column).dataType();
    List<Object> values = new ArrayList<>();
    for (int i = 1; i < args.length; i++) {
      Object value = args[i] instanceof Literal ? value(type, (Literal<?>) args[i], op.equals("not in")) : null;
      if (value == null) {
        return null;
      }
      values.add(value);
    }
    return one(column, op, values);
  }

  /** A top-level column of the table (nested paths stay with Spark), or null. */
  private String column(Expression expression) {
    if (!(expression instanceof NamedReference)) {
      return null;
    }
    String[] names = ((NamedReference) expression).fieldNames();
    if (names.length != 1) {
      return null;
    }
    for (StructField field : schema.fields()) {
      if (field.name().equals(names[0])) {
        return names[0];
      }
    }
    return null;
  }

  /**
   * The JSON value of a literal compared with a column of {@code type}, or null when the server
   * would not compare it as Spark does ({@code ordered}: an order or a negation, where NaN matters).
   */
  private static Object value(DataType type, Literal<?> literal, boolean ordered) {
    Object v = literal.value();
    if (v == null) {
      return null;
    }
    if (type.equals(DataTypes.StringType) && v instanceof UTF8String) {
      return v.toString();
    }
    if (type instanceof BooleanType && v instanceof Boolean) {
      return v;
    }
    if ((type instanceof ByteType || type instanceof ShortType || type instanceof IntegerType || type instanceof LongType)
        && (v instanceof Byte || v instanceof Short || v instanceof Integer || v instanceof Long)) {
      return ((Number) v).longValue();
    }
    if (type instanceof DecimalType && v instanceof Decimal) {
      return ((Decimal) v).toJavaBigDecimal().toPlainString();
    }
    if (type instanceof DateType && v instanceof Integer) {
      return LocalDate.ofEpochDay((Integer) v).toString();
    }
    if ((type instanceof FloatType || type instanceof DoubleType) && !ordered
        && (v instanceof Float || v instanceof Double) && Double.isFinite(((Number) v).doubleValue())) {
      return ((Number) v).doubleValue();
    }
    return null;
  }

  private static List<List<Object>> one(String column, String op, Object value) {
    List<Object> filter = new ArrayList<>();
    filter.add(column);
    filter.add(op);
    if (value != null) {
      filter.add(value);
    }
    return List.of(filter);
  }
}
