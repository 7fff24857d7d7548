package dev.hudiflight.spark;

import java.util.OptionalLong;
import org.apache.arrow.flight.FlightInfo;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;

/**
 * One query of a table, with everything Spark pushed into it. Planned on the driver once, when Spark
 * first asks for statistics or partitions ({@code get_flight_info}); each endpoint group becomes an
 * input partition. A new query of the same DataFrame gets a new scan: nothing pushed for one query
 * outlives it.
 */
final class HudiFlightScan implements Scan, Batch, SupportsReportStatistics {
  private final ConnectionOptions connection;
  private final QueryCommand query;
  private final StructType schema;
  private final int minPartitions;
  private final int maxCommitsPerTrigger;
  private final String pushed;
  private FlightInfo plan;

  /**
   * @param plan the query's plan when already made (an aggregate answered from metadata), else null
   * @param pushed what Spark pushed, for {@code explain()}
   */
  HudiFlightScan(ConnectionOptions connection, QueryCommand query, StructType schema, int minPartitions,
      int maxCommitsPerTrigger, String pushed, FlightInfo plan) {
    this.connection = connection;
    this.query = query;
    this.schema = schema;
    this.minPartitions = minPartitions;
    this.maxCommitsPerTrigger = maxCommitsPerTrigger;
    this.pushed = pushed;
    this.plan = plan;
  }

  private synchronized FlightInfo plan() {
    if (plan == null) {
      try (FlightSession session = new FlightSession(connection)) {
        plan = session.plan(query.toJson(), "planning " + query.table());
      }
    }
    return plan;
  }

  @Override
  public StructType readSchema() {
    return schema;
  }

  @Override
  public String description() {
    return "hudi-flight " + query.table() + " " + pushed;
  }

  @Override
  public ColumnarSupportMode columnarSupportMode() {
    return ColumnarSupportMode.SUPPORTED;
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public InputPartition[] planInputPartitions() {
    return EndpointGroup.partitions(plan(), minPartitions);
  }

  /** {@code spark.readStream}: the table followed commit by commit ({@link HudiFlightMicroBatchStream}). */
  @Override
  public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
    return new HudiFlightMicroBatchStream(connection, query, schema, minPartitions, maxCommitsPerTrigger);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new EndpointReaderFactory(connection, schema);
  }

  /** The plan's row count and bytes, as the server estimates them (docs/flight.md). */
  @Override
  public Statistics estimateStatistics() {
    FlightInfo info = plan();
    return new Statistics() {
      @Override
      public OptionalLong sizeInBytes() {
        return info.getBytes() >= 0 ? OptionalLong.of(info.getBytes()) : OptionalLong.empty();
      }

      @Override
      public OptionalLong numRows() {
        return info.getRecords() >= 0 ? OptionalLong.of(info.getRecords()) : OptionalLong.empty();
      }
    };
  }
}
