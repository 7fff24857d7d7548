package dev.hudiflight.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.flight.FlightEndpoint;
import org.apache.arrow.flight.Location;

/**
 * One endpoint of a planned query as plain data (Spark serializes partitions; Flight objects do
 * not serialize): its ticket, the servers that can stream it, and its weight from the server's
 * {@code app_metadata} ({@code {"weight": w, ...}}, docs/flight.md).
 */
final class Endpoint implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final ObjectMapper JSON = new ObjectMapper();

  final byte[] ticket;
  final List<String> locations;
  final double weight;
  /** A weighted split streams its rows in one order, so a broken stream resumes past the rows delivered. */
  final boolean resumable;

  Endpoint(byte[] ticket, List<String> locations, double weight, boolean resumable) {
    this.ticket = ticket;
    this.locations = List.copyOf(locations);
    this.weight = weight;
    this.resumable = resumable;
  }

  static Endpoint of(FlightEndpoint endpoint) {
    List<String> locations = new ArrayList<>();
    for (Location location : endpoint.getLocations()) {
      locations.add(location.getUri().toString());
    }
    JsonNode weight = metadata(endpoint.getAppMetadata()).get("weight");
    boolean split = weight != null && weight.isNumber();
    return new Endpoint(endpoint.getTicket().getBytes(), locations, split ? weight.asDouble() : 1.0, split);
  }

  private static JsonNode metadata(byte[] appMetadata) {
    if (appMetadata == null || appMetadata.length == 0) {
      return JSON.createObjectNode();
    }
    try {
      JsonNode doc = JSON.readTree(appMetadata);
      return doc != null && doc.isObject() ? doc : JSON.createObjectNode();
    } catch (IOException err) {
      return JSON.createObjectNode();
    }
  }

  /** The host of the server that streams it (where a Spark task should run), or null: the planning server. */
  String host() {
    for (String location : locations) {
      if (!location.startsWith(FlightSession.REUSE_CONNECTION)) {
        String host = URI.create(location).getHost();
        if (host != null) {
          return host;
        }
      }
    }
    return null;
  }
}
