package dev.hudiflight.spark;

import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.vector.BaseLargeVariableWidthVector;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.DateMilliVector;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.FixedSizeBinaryVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.TimeStampVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.complex.FixedSizeListVector;
import org.apache.arrow.vector.complex.LargeListVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.complex.MapVector;
import org.apache.arrow.vector.complex.StructVector;
import org.apache.arrow.vector.types.TimeUnit;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A Spark {@link ColumnVector} over one (relocated) Arrow vector, read in place: strings point into
 * the Arrow buffer, nested vectors wrap their children. Spark's own {@code ArrowColumnVector} cannot
 * be used, since it takes Spark's Arrow classes, not the connector's relocated ones.
 *
 * <p>Values come in Spark's internal units: timestamps in microseconds (any Arrow unit converted),
 * dates in days. The vector belongs to the Flight stream; it is valid until the stream's next batch.
 */
final class ArrowColumn extends ColumnVector {
  private final ValueVector vector;
  private final ArrowColumn[] children;
  private final long microsPerUnit;  // timestamps: multiply (or divide, when negative)

  ArrowColumn(ValueVector vector, DataType type) {
    super(type);
    this.vector = vector;
    this.children = childrenOf(vector, type);
    this.microsPerUnit = vector instanceof TimeStampVector ? microsPerUnit((TimeStampVector) vector) : 1;
  }

  private static ArrowColumn[] childrenOf(ValueVector vector, DataType type) {
    if (vector instanceof StructVector) {
      StructVector struct = (StructVector) vector;
      org.apache.spark.sql.types.StructField[] fields = ((org.apache.spark.sql.types.StructType) type).fields();
      ArrowColumn[] out = new ArrowColumn[fields.length];
      for (int i = 0; i < fields.length; i++) {
        out[i] = new ArrowColumn(struct.getChildByOrdinal(i), fields[i].dataType());
      }
      return out;
    }
    if (vector instanceof MapVector) {
      StructVector entries = (StructVector) ((MapVector) vector).getDataVector();
      org.apache.spark.sql.types.MapType map = (org.apache.spark.sql.types.MapType) type;
      return new ArrowColumn[] {
        new ArrowColumn(entries.getChildByOrdinal(0), map.keyType()),
        new ArrowColumn(entries.getChildByOrdinal(1), map.valueType()),
      };
    }
    ValueVector element = null;
    if (vector instanceof ListVector) {
      element = ((ListVector) vector).getDataVector();
    } else if (vector instanceof LargeListVector) {
      element = ((LargeListVector) vector).getDataVector();
    } else if (vector instanceof FixedSizeListVector) {
      element = ((FixedSizeListVector) vector).getDataVector();
    }
    if (element != null) {
      return new ArrowColumn[] {new ArrowColumn(element, ((org.apache.spark.sql.types.ArrayType) type).elementType())};
    }
    return new ArrowColumn[0];
  }

  private static long microsPerUnit(TimeStampVector vector) {
    TimeUnit unit = ((ArrowType.Timestamp) vector.getField().getType()).getUnit();
    switch (unit) {
      case SECOND: return 1_000_000L;
      case MILLISECOND: return 1_000L;
      case MICROSECOND: return 1L;
      default: return -1_000L;  // nanoseconds: divide by 1000
    }
  }

  @Override
  public void close() {
    // the Flight stream owns the vectors and releases them
  }

  @Override
  public boolean hasNull() {
    return vector.getNullCount() > 0;
  }

  @Override
  public int numNulls() {
    return vector.getNullCount();
  }

  @Override
  public boolean isNullAt(int rowId) {
    return vector.isNull(rowId);
  }

  @Override
  public boolean getBoolean(int rowId) {
    return ((BitVector) vector).get(rowId) == 1;
  }

  @Override
  public byte getByte(int rowId) {
    return ((TinyIntVector) vector).get(rowId);
  }

  @Override
  public short getShort(int rowId) {
    return ((SmallIntVector) vector).get(rowId);
  }

  @Override
  public int getInt(int rowId) {
    if (vector instanceof DateMilliVector) {
      return (int) Math.floorDiv(((DateMilliVector) vector).get(rowId), 86_400_000L);
    }
    if (vector instanceof DateDayVector) {
      return ((DateDayVector) vector).get(rowId);
    }
    return ((IntVector) vector).get(rowId);
  }

  @Override
  public long getLong(int rowId) {
    if (vector instanceof TimeStampVector) {
      long raw = ((TimeStampVector) vector).get(rowId);
      return microsPerUnit > 0 ? raw * microsPerUnit : Math.floorDiv(raw, -microsPerUnit);
    }
    return ((BigIntVector) vector).get(rowId);
  }

  @Override
  public float getFloat(int rowId) {
    return ((Float4Vector) vector).get(rowId);
  }

  @Override
  public double getDouble(int rowId) {
    return ((Float8Vector) vector).get(rowId);
  }

  @Override
  public Decimal getDecimal(int rowId, int precision, int scale) {
    if (isNullAt(rowId)) {
      return null;
    }
    return Decimal.apply(((DecimalVector) vector).getObject(rowId), precision, scale);
  }

  @Override
  public UTF8String getUTF8String(int rowId) {
    if (isNullAt(rowId)) {
      return null;
    }
    if (vector instanceof BaseVariableWidthVector) {
      BaseVariableWidthVector v = (BaseVariableWidthVector) vector;
      ArrowBuf offsets = v.getOffsetBuffer();
      int start = offsets.getInt((long) rowId * BaseVariableWidthVector.OFFSET_WIDTH);
      int end = offsets.getInt((long) (rowId + 1) * BaseVariableWidthVector.OFFSET_WIDTH);
      return UTF8String.fromAddress(null, v.getDataBuffer().memoryAddress() + start, end - start);
    }
    BaseLargeVariableWidthVector v = (BaseLargeVariableWidthVector) vector;
    ArrowBuf offsets = v.getOffsetBuffer();
    long start = offsets.getLong((long) rowId * BaseLargeVariableWidthVector.OFFSET_WIDTH);
    long end = offsets.getLong((long) (rowId + 1) * BaseLargeVariableWidthVector.OFFSET_WIDTH);
    return UTF8String.fromAddress(null, v.getDataBuffer().memoryAddress() + start, Math.toIntExact(end - start));
  }

  @Override
  public byte[] getBinary(int rowId) {
    if (isNullAt(rowId)) {
      return null;
    }
    if (vector instanceof FixedSizeBinaryVector) {
      return ((FixedSizeBinaryVector) vector).get(rowId);
    }
    if (vector instanceof BaseVariableWidthVector) {
      return ((BaseVariableWidthVector) vector).get(rowId);
    }
    return ((BaseLargeVariableWidthVector) vector).get(rowId);
  }

  @Override
  public ColumnarArray getArray(int rowId) {
    if (isNullAt(rowId)) {
      return null;
    }
    if (vector instanceof ListVector) {
      ArrowBuf offsets = ((ListVector) vector).getOffsetBuffer();
      int start = offsets.getInt((long) rowId * ListVector.OFFSET_WIDTH);
      int end = offsets.getInt((long) (rowId + 1) * ListVector.OFFSET_WIDTH);
      return new ColumnarArray(children[0], start, end - start);
    }
    if (vector instanceof LargeListVector) {
      ArrowBuf offsets = ((LargeListVector) vector).getOffsetBuffer();
      long start = offsets.getLong((long) rowId * LargeListVector.OFFSET_WIDTH);
      long end = offsets.getLong((long) (rowId + 1) * LargeListVector.OFFSET_WIDTH);
      return new ColumnarArray(children[0], Math.toIntExact(start), Math.toIntExact(end - start));
    }
    int size = ((FixedSizeListVector) vector).getListSize();
    return new ColumnarArray(children[0], rowId * size, size);
  }

  @Override
  public ColumnarMap getMap(int rowId) {
    if (isNullAt(rowId)) {
      return null;
    }
    ArrowBuf offsets = ((MapVector) vector).getOffsetBuffer();
    int start = offsets.getInt((long) rowId * MapVector.OFFSET_WIDTH);
    int end = offsets.getInt((long) (rowId + 1) * MapVector.OFFSET_WIDTH);
    return new ColumnarMap(children[0], children[1], start, end - start);
  }

  @Override
  public ColumnVector getChild(int ordinal) {
    return children[ordinal];
  }
}
