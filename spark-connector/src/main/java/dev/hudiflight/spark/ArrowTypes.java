package dev.hudiflight.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Arrow -> Spark types, as PySpark maps them for the Python data source (so both give the same
 * schema): zone-less timestamps become TIMESTAMP_NTZ, lists arrays, maps maps, structs structs.
 * A type Spark cannot hold (unsigned integers, half floats, 256-bit decimals, times) is refused with
 * the column's name.
 */
final class ArrowTypes {
  private ArrowTypes() {}

  static StructType toSpark(Schema schema) {
    return structOf(schema.getFields());
  }

  private static StructType structOf(List<Field> fields) {
    List<StructField> out = new ArrayList<>();
    for (Field f : fields) {
      out.add(DataTypes.createStructField(f.getName(), toSpark(f), f.isNullable()));
    }
    return DataTypes.createStructType(out);
  }

  static DataType toSpark(Field field) {
    ArrowType type = field.getType();
    switch (type.getTypeID()) {
      case Bool:
        return DataTypes.BooleanType;
      case Int: {
        ArrowType.Int t = (ArrowType.Int) type;
        if (t.getIsSigned()) {
          switch (t.getBitWidth()) {
            case 8: return DataTypes.ByteType;
            case 16: return DataTypes.ShortType;
            case 32: return DataTypes.IntegerType;
            case 64: return DataTypes.LongType;
            default: break;
          }
        }
        break;
      }
      case FloatingPoint: {
        FloatingPointPrecision p = ((ArrowType.FloatingPoint) type).getPrecision();
        if (p == FloatingPointPrecision.SINGLE) {
          return DataTypes.FloatType;
        }
        if (p == FloatingPointPrecision.DOUBLE) {
          return DataTypes.DoubleType;
        }
        break;
      }
      case Utf8:
      case LargeUtf8:
        return DataTypes.StringType;
      case Binary:
      case LargeBinary:
      case FixedSizeBinary:
        return DataTypes.BinaryType;
      case Decimal: {
        ArrowType.Decimal t = (ArrowType.Decimal) type;
        if (t.getBitWidth() == 128 && t.getPrecision() <= 38) {
          return DataTypes.createDecimalType(t.getPrecision(), t.getScale());
        }
        break;
      }
      case Date:
        return DataTypes.DateType;
      case Timestamp:
        return ((ArrowType.Timestamp) type).getTimezone() == null ? DataTypes.TimestampNTZType : DataTypes.TimestampType;
      case Struct:
        return structOf(field.getChildren());
      case List:
      case LargeList:
      case FixedSizeList: {
        Field element = field.getChildren().get(0);
        return DataTypes.createArrayType(toSpark(element), element.isNullable());
      }
      case Map: {
        List<Field> entry = field.getChildren().get(0).getChildren();
        Field value = entry.get(1);
        return DataTypes.createMapType(toSpark(entry.get(0)), toSpark(value), value.isNullable());
      }
      case Null:
        return DataTypes.NullType;
      default:
        break;
    }
    throw new IllegalArgumentException(
        "hudi-flight: column '" + field.getName() + "' has Arrow type " + type + " that Spark cannot hold");
  }
}
