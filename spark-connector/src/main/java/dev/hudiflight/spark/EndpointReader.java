package dev.hudiflight.spark;

import java.util.List;
import org.apache.arrow.flight.FlightRuntimeException;
import org.apache.arrow.flight.FlightStream;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Streams a group's endpoints one after another and hands each Flight record batch to Spark as a
 * {@link ColumnarBatch} over the Arrow vectors themselves (no copy, no rows).
 *
 * <p>A stream that breaks for a transport reason (server gone, connection reset) is read again from
 * the endpoint's next location (then the planning server), skipping the rows already delivered: a
 * weighted split always streams its rows in one order, so nothing is lost or repeated. An endpoint
 * that is not a split is read again only if it had delivered nothing. Any other error is raised.
 */
final class EndpointReader implements PartitionReader<ColumnarBatch> {
  private final FlightSession session;
  private final List<Endpoint> endpoints;
  private final StructType schema;
  private int next;  // the next endpoint to open
  private Endpoint endpoint;
  private List<String> targets;
  private int attempt;
  private Backoff backoff;
  private long delivered;  // rows of the current endpoint handed to Spark
  private long skip;  // rows of the current stream already handed to Spark by an earlier one
  private FlightStream stream;
  private VectorSchemaRoot sliced;  // a batch cut past rows delivered before a resume, ours to close
  private ColumnarBatch batch;

  EndpointReader(ConnectionOptions connection, List<Endpoint> endpoints, StructType schema) {
    this.session = new FlightSession(connection);
    this.endpoints = endpoints;
    this.schema = schema;
  }

  @Override
  public boolean next() {
    closeSliced();
    while (true) {
      try {
        if (stream == null && !open()) {
          return false;
        }
        if (!stream.next()) {
          closeStream();
          endpoint = null;
          continue;
        }
        VectorSchemaRoot root = stream.getRoot();
        int rows = root.getRowCount();
        if (skip >= rows) {
          skip -= rows;
          continue;
        }
        if (skip > 0) {
          root = sliced = root.slice((int) skip, rows - (int) skip);
          skip = 0;
        }
        delivered += root.getRowCount();
        batch = columnar(root);
        return true;
      } catch (FlightRuntimeException err) {
        resumeAfter(FlightSession.ServerException.of(err, targets.get(attempt), "reading an endpoint"));
      } catch (FlightSession.ServerException err) {  // refused when the stream opened
        resumeAfter(err);
      }
    }
  }

  /**
   * After a failed stream: the same server again after a backoff when it was busy, the next target
   * when the connection broke, skipping the rows delivered; else (or when no row may be skipped) raises.
   */
  private void resumeAfter(FlightSession.ServerException failure) {
    closeStream();
    boolean canResume = endpoint.resumable || delivered == 0;
    if (failure.isBusy() && canResume && backoff.await(failure)) {
      skip = delivered;
      return;
    }
    if (!failure.isTransport() || attempt == targets.size() - 1 || !canResume) {
      throw failure;
    }
    attempt++;
    skip = delivered;
  }

  /** Opens the current endpoint's stream at its current target, moving to the next endpoint first if done. */
  private boolean open() {
    if (endpoint == null) {
      if (next == endpoints.size()) {
        return false;
      }
      endpoint = endpoints.get(next++);
      targets = session.targets(endpoint.locations);
      attempt = 0;
      delivered = 0;
      skip = 0;
      backoff = new Backoff();
    }
    stream = session.stream(targets.get(attempt), endpoint.ticket);
    return true;
  }

  private ColumnarBatch columnar(VectorSchemaRoot root) {
    List<FieldVector> vectors = root.getFieldVectors();
    StructField[] fields = schema.fields();
    if (vectors.size() != fields.length) {
      throw new IllegalStateException("hudi-flight: the server streamed " + vectors.size()
          + " columns where the plan has " + fields.length);
    }
    ColumnVector[] columns = new ColumnVector[fields.length];
    for (int i = 0; i < fields.length; i++) {
      columns[i] = new ArrowColumn(vectors.get(i), fields[i].dataType());
    }
    return new ColumnarBatch(columns, root.getRowCount());
  }

  @Override
  public ColumnarBatch get() {
    return batch;
  }

  private void closeSliced() {
    if (sliced != null) {
      sliced.close();
      sliced = null;
    }
  }

  private void closeStream() {
    if (stream != null) {
      FlightStream open = stream;
      stream = null;
      try {
        open.close();
      } catch (Exception err) {
        // a broken stream may fail to close; its buffers are released with the session's allocator
      }
    }
  }

  @Override
  public void close() {
    closeSliced();
    if (stream != null) {
      stream.cancel("the Spark task ended", null);
    }
    closeStream();
    session.close();
  }
}
