package dev.hudiflight.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.Map;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * A stream's position: every commit whose instant (completion time, or requested time where the
 * timeline records none) is at most {@link #instant} has been read; {@code ""} is before the first
 * commit. JSON {@code {"instant": "..."}}, as the Python stream reader writes its offsets.
 */
final class InstantOffset extends Offset {
  private static final ObjectMapper JSON = new ObjectMapper();
  static final InstantOffset BEGINNING = new InstantOffset("");

  final String instant;

  InstantOffset(String instant) {
    this.instant = instant;
  }

  static InstantOffset parse(String json) {
    try {
      JsonNode doc = JSON.readTree(json);
      JsonNode instant = doc == null ? null : doc.get("instant");
      if (instant == null || !instant.isTextual()) {
        throw new IllegalArgumentException("hudi-flight: a stream offset is {\"instant\": \"...\"}, got " + json);
      }
      return new InstantOffset(instant.asText());
    } catch (IOException err) {
      throw new IllegalArgumentException("hudi-flight: a stream offset is {\"instant\": \"...\"}, got " + json);
    }
  }

  @Override
  public String json() {
    try {
      return JSON.writeValueAsString(Map.of("instant", instant));
    } catch (IOException err) {
      throw new IllegalStateException("hudi-flight: cannot write a stream offset", err);
    }
  }
}
