package dev.hudiflight.spark;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.arrow.flight.FlightEndpoint;
import org.apache.arrow.flight.FlightInfo;
import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One Spark input partition: endpoints streamed by one host whose weights sum to about 1, with that
 * host as the preferred location, so a coordinator's workers get the Spark tasks of their own data.
 */
final class EndpointGroup implements InputPartition {
  private static final long serialVersionUID = 1L;

  final List<Endpoint> endpoints;
  private final String host;

  EndpointGroup(List<Endpoint> endpoints, String host) {
    this.endpoints = List.copyOf(endpoints);
    this.host = host;
  }

  @Override
  public String[] preferredLocations() {
    return host == null ? new String[0] : new String[] {host};
  }

  /** The input partitions of a planned query: its endpoints, packed ({@link #pack}). */
  static InputPartition[] partitions(FlightInfo plan, int minPartitions) {
    List<Endpoint> endpoints = new ArrayList<>();
    for (FlightEndpoint endpoint : plan.getEndpoints()) {
      endpoints.add(Endpoint.of(endpoint));
    }
    return pack(endpoints, minPartitions).toArray(new InputPartition[0]);
  }

  /**
   * Packs endpoints, per host, into groups whose weights sum to at most 1 (Trino's weighted splits,
   * as the Python source packs them): heaviest first, each into the least-loaded group it fits in; at
   * least {@code minPartitions} groups (or one per endpoint, if fewer) so a small table still spreads
   * over the cores. Never empty: an empty result is one empty group.
   */
  static List<EndpointGroup> pack(List<Endpoint> endpoints, int minPartitions) {
    Map<String, List<Endpoint>> byHost = new LinkedHashMap<>();
    for (Endpoint endpoint : endpoints) {
      byHost.computeIfAbsent(String.valueOf(endpoint.host()), h -> new ArrayList<>()).add(endpoint);
    }
    List<EndpointGroup> groups = new ArrayList<>();
    for (List<Endpoint> hostEndpoints : byHost.values()) {
      groups.addAll(packHost(hostEndpoints, Math.max(1, minPartitions / byHost.size())));
    }
    if (groups.isEmpty()) {
      groups.add(new EndpointGroup(List.of(), null));
    }
    return groups;
  }

  private static List<EndpointGroup> packHost(List<Endpoint> endpoints, int minBins) {
    List<List<Endpoint>> bins = new ArrayList<>();
    List<Double> loads = new ArrayList<>();
    for (int i = 0; i < Math.min(minBins, endpoints.size()); i++) {
      bins.add(new ArrayList<>());
      loads.add(0.0);
    }
    List<Endpoint> heaviestFirst = new ArrayList<>(endpoints);
    heaviestFirst.sort(Comparator.comparingDouble((Endpoint e) -> e.weight).reversed());
    for (Endpoint endpoint : heaviestFirst) {
      double weight = Math.max(endpoint.weight, 0.0);
      int best = -1;
      for (int i = 0; i < bins.size(); i++) {
        if (loads.get(i) + weight <= 1.0 + 1e-9 && (best < 0 || loads.get(i) < loads.get(best))) {
          best = i;
        }
      }
      if (best < 0) {
        bins.add(new ArrayList<>());
        loads.add(0.0);
        best = bins.size() - 1;
      }
      bins.get(best).add(endpoint);
      loads.set(best, loads.get(best) + weight);
    }
    List<EndpointGroup> groups = new ArrayList<>();
    for (List<Endpoint> bin : bins) {
      groups.add(new EndpointGroup(bin, bin.get(0).host()));
    }
    return groups;
  }
}
