package dev.hudiflight.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Makes each executor's columnar reader of an {@link EndpointGroup}; rows are never read one by one. */
final class EndpointReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;

  private final ConnectionOptions connection;
  private final StructType schema;

  EndpointReaderFactory(ConnectionOptions connection, StructType schema) {
    this.connection = connection;
    this.schema = schema;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    return new EndpointReader(connection, ((EndpointGroup) partition).endpoints, schema);
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("hudi-flight: the connector reads columnar batches only");
  }
}
