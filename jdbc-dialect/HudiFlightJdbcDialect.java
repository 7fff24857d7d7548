package hudiflight.spark;

import java.sql.Types;
import org.apache.spark.sql.jdbc.JdbcDialect;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.MetadataBuilder;
import scala.Option;

/**
 * Spark's JDBC source over the Arrow Flight SQL JDBC driver ({@code jdbc:arrow-flight-sql:} URLs),
 * for the columns Spark's generic mapping refuses or widens.
 *
 * <p>The driver reports every column's {@code java.sql.Types} from its Arrow type and no column as
 * signed, so without a dialect Spark stops at {@code TIMESTAMP_WITH_TIMEZONE} (a zoned timestamp),
 * {@code JAVA_OBJECT} (struct, map) and {@code ARRAY} (UNRECOGNIZED_SQL_TYPE), and types every
 * {@code BIGINT}, counts included, {@code decimal(20,0)}. Here:
 *
 * <ul>
 *   <li>{@code BIGINT} of precision 19 (a signed 64-bit integer: hudi-flight advertises precision 20
 *       for an unsigned one) is {@code bigint}; any other stays {@code decimal(20,0)};
 *   <li>{@code TIMESTAMP_WITH_TIMEZONE} is {@code timestamp} (an instant; Spark reads it with
 *       {@code getTimestamp}, which the driver answers right only in a JVM whose zone is UTC);
 *   <li>{@code JAVA_OBJECT} and {@code ARRAY} are {@code string}: the driver's JSON text of the
 *       value.
 * </ul>
 *
 * <p>Every other type is left to Spark's mapping ({@code INTEGER}, reported unsigned, stays
 * {@code bigint}: a 32-bit column may be unsigned, and the driver's metadata cannot say).
 */
public final class HudiFlightJdbcDialect extends JdbcDialect {
  private static final long serialVersionUID = 1L;

  /** URLs of the Arrow Flight SQL JDBC driver. */
  public static final String URL_PREFIX = "jdbc:arrow-flight-sql:";

  /** Decimal digits of the largest signed 64-bit integer. */
  private static final int SIGNED_BIGINT_PRECISION = 19;

  @Override
  public boolean canHandle(String url) {
    return url.startsWith(URL_PREFIX);
  }

  @Override
  public Option<DataType> getCatalystType(int sqlType, String typeName, int size, MetadataBuilder md) {
    switch (sqlType) {
      case Types.BIGINT:
        return size == SIGNED_BIGINT_PRECISION ? Option.apply(DataTypes.LongType) : Option.empty();
      case Types.TIMESTAMP_WITH_TIMEZONE:
        return Option.apply(DataTypes.TimestampType);
      case Types.JAVA_OBJECT:
      case Types.ARRAY:
        return Option.apply(DataTypes.StringType);
      default:
        return Option.empty();
    }
  }
}
