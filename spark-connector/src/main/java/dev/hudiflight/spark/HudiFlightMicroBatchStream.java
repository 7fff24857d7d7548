package dev.hudiflight.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxFiles;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.StructType;

/**
 * {@code spark.readStream.format("hudi-flight")}: follows a table commit by commit with incremental
 * queries, as the Python stream reader does. Offsets are instants ({@link InstantOffset}); each
 * micro-batch reads the incremental range {@code (start, end]} of at most
 * {@code max_commits_per_trigger} commits (default 1; Spark's file-count limit counts commits here),
 * so a commit is read exactly once. Option {@code start} sets where a new query begins (exclusive,
 * {@code yyyyMMddHHmmss[SSS]}; default: before the first commit). {@code Trigger.AvailableNow} reads
 * up to the commit that was latest when the query started.
 */
final class HudiFlightMicroBatchStream implements MicroBatchStream, SupportsTriggerAvailableNow {
  static final String TABLE_INFO = "table-info";
  /** The actions that write data (a clean, a rollback or a compaction plan adds no rows). */
  private static final Set<String> DATA_ACTIONS = Set.of("commit", "deltacommit", "replacecommit");
  private static final ObjectMapper JSON = new ObjectMapper();

  private final ConnectionOptions connection;
  private final QueryCommand query;
  private final StructType schema;
  private final int minPartitions;
  private final int maxCommits;
  private final InstantOffset start;
  private InstantOffset availableNowTarget;

  HudiFlightMicroBatchStream(ConnectionOptions connection, QueryCommand query, StructType schema, int minPartitions,
      int maxCommits) {
    String begin = query.instant("start");
    if (begin != null && !begin.chars().allMatch(Character::isDigit)) {
      // offsets are compared here, on the driver, which does not know the zone of the table's timeline
      throw new IllegalArgumentException("hudi-flight: a stream's start option takes yyyyMMddHHmmss[SSS], got '"
          + begin + "'");
    }
    this.connection = connection;
    this.query = query;
    this.schema = schema;
    this.minPartitions = minPartitions;
    this.maxCommits = maxCommits;
    this.start = begin == null ? InstantOffset.BEGINNING : new InstantOffset(begin);
  }

  /** The table's data commits, oldest first. */
  private List<String> instants() {
    byte[] answer;
    try (FlightSession session = new FlightSession(connection)) {
      answer = session.action(TABLE_INFO, JSON.writeValueAsBytes(Map.of("table", query.table())),
          "the timeline of " + query.table());
    } catch (IOException err) {
      throw new IllegalStateException("hudi-flight: cannot write the body of " + TABLE_INFO, err);
    }
    TreeSet<String> found = new TreeSet<>();
    try {
      JsonNode timeline = answer == null ? null : JSON.readTree(answer).get("timeline");
      if (timeline == null || !timeline.isArray()) {
        throw new IllegalStateException("hudi-flight server " + connection.uri() + " answered "
            + TABLE_INFO + " without a timeline");
      }
      for (JsonNode instant : timeline) {
        if (DATA_ACTIONS.contains(instant.path("action").asText())) {
          JsonNode completed = instant.get("completion_time");
          found.add(completed != null && completed.isTextual() ? completed.asText() : instant.get("requested_time").asText());
        }
      }
    } catch (IOException err) {
      throw new IllegalStateException("hudi-flight server " + connection.uri() + " answered " + TABLE_INFO
          + " with bad JSON");
    }
    return new ArrayList<>(found);
  }

  @Override
  public Offset initialOffset() {
    return start;
  }

  @Override
  public Offset deserializeOffset(String json) {
    return InstantOffset.parse(json);
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return ReadLimit.maxFiles(maxCommits);
  }

  @Override
  public void prepareForTriggerAvailableNow() {
    List<String> all = instants();
    availableNowTarget = all.isEmpty() ? InstantOffset.BEGINNING : new InstantOffset(all.get(all.size() - 1));
  }

  @Override
  public Offset latestOffset() {
    throw new UnsupportedOperationException("hudi-flight: the stream's offsets come from latestOffset(start, limit)");
  }

  @Override
  public Offset latestOffset(Offset startOffset, ReadLimit limit) {
    String from = ((InstantOffset) startOffset).instant;
    List<String> pending = new ArrayList<>();
    for (String instant : instants()) {
      if (instant.compareTo(from) > 0
          && (availableNowTarget == null || instant.compareTo(availableNowTarget.instant) <= 0)) {
        pending.add(instant);
      }
    }
    if (pending.isEmpty()) {
      return startOffset;
    }
    int take = limit instanceof ReadMaxFiles ? Math.max(((ReadMaxFiles) limit).maxFiles(), 1) : pending.size();
    return new InstantOffset(pending.get(Math.min(take, pending.size()) - 1));
  }

  @Override
  public InputPartition[] planInputPartitions(Offset startOffset, Offset endOffset) {
    String from = ((InstantOffset) startOffset).instant;
    String to = ((InstantOffset) endOffset).instant;
    if (to.compareTo(from) <= 0) {
      return new InputPartition[0];
    }
    QueryCommand range = query.incremental(from.isEmpty() ? null : from, to);
    try (FlightSession session = new FlightSession(connection)) {
      return EndpointGroup.partitions(session.plan(range.toJson(), "planning " + query.table()), minPartitions);
    }
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new EndpointReaderFactory(connection, schema);
  }

  @Override
  public void commit(Offset end) {
    // nothing to release: the server keeps no state per query
  }

  @Override
  public void stop() {
    // nothing to close: every call opens and closes its own session
  }
}
