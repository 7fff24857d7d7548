package dev.hudiflight.spark;

import java.io.ByteArrayInputStream;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.flight.Action;
import org.apache.arrow.flight.CallOption;
import org.apache.arrow.flight.CallOptions;
import org.apache.arrow.flight.CallStatus;
import org.apache.arrow.flight.FlightCallHeaders;
import org.apache.arrow.flight.FlightClient;
import org.apache.arrow.flight.FlightDescriptor;
import org.apache.arrow.flight.FlightInfo;
import org.apache.arrow.flight.FlightRuntimeException;
import org.apache.arrow.flight.FlightStatusCode;
import org.apache.arrow.flight.FlightStream;
import org.apache.arrow.flight.HeaderCallOption;
import org.apache.arrow.flight.Location;
import org.apache.arrow.flight.Result;
import org.apache.arrow.flight.Ticket;
import org.apache.arrow.flight.auth2.BearerCredentialWriter;
import org.apache.arrow.flight.grpc.CredentialCallOption;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * A connection to a hudi-flight server and to the other servers its endpoints name, with the
 * credentials and TLS of {@link ConnectionOptions} applied to every one of them. Opened on the driver
 * to plan, and on each executor to stream its endpoints; closes every client and the Arrow memory.
 *
 * <p>Errors become {@link ServerException}s whose message names the server, the request and the
 * server's own first line (never a stack trace or a credential).
 */
public final class FlightSession implements AutoCloseable {
  /** A location meaning "the server that planned it" (Arrow Flight's convention). */
  static final String REUSE_CONNECTION = "arrow-flight-reuse-connection";
  /** Every call says this client reads every endpoint (the server then plans one per split). */
  static final String ALL_ENDPOINTS_HEADER = "x-hudi-flight-all-endpoints";
  /** Seconds allowed to a planning or schema call (a stream has no deadline: it may be long). */
  private static final long CALL_TIMEOUT_SECONDS = 60;

  private final ConnectionOptions connection;
  private final BufferAllocator allocator;
  private final Map<String, FlightClient> clients = new HashMap<>();
  private final List<CallOption> streamOptions = new ArrayList<>();

  public FlightSession(ConnectionOptions connection) {
    this.connection = connection;
    this.allocator = new RootAllocator(Long.MAX_VALUE);
    try {
      FlightClient main = client(connection.uri());
      FlightCallHeaders headers = new FlightCallHeaders();
      headers.insert(ALL_ENDPOINTS_HEADER, "true");
      streamOptions.add(new HeaderCallOption(headers));
      if (connection.token() != null) {
        streamOptions.add(new CredentialCallOption(new BearerCredentialWriter(connection.token())));
      } else if (connection.user() != null) {
        CredentialCallOption login = call("logging in as '" + connection.user() + "'",
            () -> main.authenticateBasicToken(connection.user(), connection.password()))
            .orElseThrow(() -> new ServerException(FlightStatusCode.UNAUTHENTICATED,
                "hudi-flight server " + connection.uri() + " returned no token for user '" + connection.user() + "'"));
        streamOptions.add(login);
      }
    } catch (RuntimeException err) {
      close();
      throw err;
    }
  }

  public ConnectionOptions connection() {
    return connection;
  }

  public BufferAllocator allocator() {
    return allocator;
  }

  /** Plans a query ({@code get_flight_info}); a broken connection is tried once more (planning is idempotent). */
  public FlightInfo plan(byte[] command, String what) {
    FlightDescriptor descriptor = FlightDescriptor.command(command);
    return idempotent(what, () -> client(connection.uri()).getInfo(descriptor, callOptions()));
  }

  /** The schema of a query's answer ({@code get_schema}), without planning it. */
  public Schema schema(byte[] command, String what) {
    FlightDescriptor descriptor = FlightDescriptor.command(command);
    return idempotent(what, () -> client(connection.uri()).getSchema(descriptor, callOptions()).getSchema());
  }

  /** Runs a Flight action ({@code do_action}): its first result's body, or null when it returns none. */
  public byte[] action(String type, byte[] body, String what) {
    return idempotent(what, () -> {
      Iterator<Result> results = client(connection.uri()).doAction(new Action(type, body), callOptions());
      byte[] first = null;
      while (results.hasNext()) {
        Result result = results.next();
        if (first == null) {
          first = result.getBody();
        }
      }
      return first;
    });
  }

  /** Starts streaming a ticket from one server ({@link #targets} gives where, in order). */
  public FlightStream stream(String target, byte[] ticket) {
    return call("reading an endpoint", target,
        () -> client(target).getStream(new Ticket(ticket), streamOptions.toArray(new CallOption[0])));
  }

  /**
   * Where to read an endpoint, in order: its locations, then this server (with no other location,
   * twice: one retry). A TLS session never follows a plaintext location: credentials would cross the
   * network in the clear.
   */
  public List<String> targets(List<String> locations) {
    LinkedHashSet<String> uris = new LinkedHashSet<>();
    for (String location : locations) {
      String uri = location.startsWith(REUSE_CONNECTION) ? connection.uri() : location;
      if (!connection.isTls() || ConnectionOptions.isTls(uri)) {
        uris.add(uri);
      }
    }
    uris.add(connection.uri());
    List<String> order = new ArrayList<>(uris);
    if (order.size() == 1) {
      order.add(order.get(0));
    }
    return order;
  }

  private CallOption[] callOptions() {
    List<CallOption> options = new ArrayList<>(streamOptions);
    options.add(CallOptions.timeout(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS));
    return options.toArray(new CallOption[0]);
  }

  private synchronized FlightClient client(String uri) {
    FlightClient client = clients.get(uri);
    if (client == null) {
      FlightClient.Builder builder;
      try {
        builder = FlightClient.builder(allocator, new Location(uri));
      } catch (URISyntaxException err) {
        throw new IllegalArgumentException("hudi-flight: bad server URI " + uri);
      }
      if (ConnectionOptions.isTls(uri)) {
        builder.useTls();
        byte[] roots = connection.tlsRootCerts();
        if (roots != null) {
          builder.trustedCertificates(new ByteArrayInputStream(roots));
        }
        byte[] chain = connection.tlsCertChain();
        if (chain != null) {
          builder.clientCertificate(new ByteArrayInputStream(chain), new ByteArrayInputStream(connection.tlsPrivateKey()));
        }
      }
      client = builder.build();
      clients.put(uri, client);
    }
    return client;
  }

  /**
   * A planning or schema call: retried with {@link Backoff} while the server refuses it for load, and
   * once more when the connection broke (gRPC reconnects: a server that closed an idle connection answers).
   */
  private <T> T idempotent(String what, java.util.function.Supplier<T> request) {
    Backoff backoff = new Backoff();
    boolean reconnect = true;
    while (true) {
      try {
        return call(what, request);
      } catch (ServerException err) {
        if (err.isBusy() ? !backoff.await(err) : !err.isTransport() || !reconnect) {
          throw err;
        }
        reconnect = err.isBusy() && reconnect;
      }
    }
  }

  private <T> T call(String what, java.util.function.Supplier<T> request) {
    return call(what, connection.uri(), request);
  }

  static <T> T call(String what, String server, java.util.function.Supplier<T> request) {
    try {
      return request.get();
    } catch (FlightRuntimeException err) {
      throw ServerException.of(err, server, what);
    }
  }

  @Override
  public synchronized void close() {
    List<Exception> failures = new ArrayList<>();
    for (FlightClient client : clients.values()) {
      try {
        client.close();
      } catch (Exception err) {
        failures.add(err);
      }
    }
    clients.clear();
    allocator.close();
    if (!failures.isEmpty()) {
      throw new IllegalStateException("hudi-flight: closing the Flight clients failed", failures.get(0));
    }
  }

  /** A Flight status error, with the server's message and the request it answered. */
  public static final class ServerException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    /** The gRPC trailer of a status' details: a google.rpc.Status (flight_server/protocol/retry.py). */
    private static final String STATUS_DETAILS = "grpc-status-details-bin";
    private final FlightStatusCode code;
    private final long retryAfterMillis;  // the server's retry hint of a refusal for load, else -1

    ServerException(FlightStatusCode code, String message) {
      this(code, message, -1);
    }

    private ServerException(FlightStatusCode code, String message, long retryAfterMillis) {
      super(message, null, false, false);
      this.code = code;
      this.retryAfterMillis = retryAfterMillis;
    }

    /** The retry hint of a refusal for load: a RetryInfo in the status' details (UNAVAILABLE), else -1. */
    private static long retryAfterMillis(CallStatus status) {
      if (status.code() != FlightStatusCode.UNAVAILABLE || status.metadata() == null
          || !status.metadata().containsKey(STATUS_DETAILS)) {
        return -1;
      }
      try {
        com.google.rpc.Status details = com.google.rpc.Status.parseFrom(status.metadata().getByte(STATUS_DETAILS));
        for (com.google.protobuf.Any detail : details.getDetailsList()) {
          if (detail.is(com.google.rpc.RetryInfo.class)) {
            com.google.protobuf.Duration delay = detail.unpack(com.google.rpc.RetryInfo.class).getRetryDelay();
            return delay.getSeconds() * 1000 + delay.getNanos() / 1_000_000;
          }
        }
      } catch (com.google.protobuf.InvalidProtocolBufferException err) {
        return -1;
      }
      return -1;
    }

    static ServerException of(FlightRuntimeException err, String server, String what) {
      CallStatus status = err.status();
      String description = status.description() == null ? "" : status.description().split("\n", 2)[0];
      String detail = description.split("\\. Detail:", 2)[0];
      String text = switch (status.code()) {
        case UNAVAILABLE -> "hudi-flight server " + server + " is unreachable (" + what + "): " + detail;
        case NOT_FOUND -> what + ": " + detail;
        case UNAUTHENTICATED, UNAUTHORIZED -> what + " refused by " + server + ": " + detail;
        case INVALID_ARGUMENT -> what + " rejected by " + server + ": " + detail;
        default -> "hudi-flight server " + server + " (" + what + "): " + status.code() + ": " + detail;
      };
      long retryAfter = retryAfterMillis(status);
      return new ServerException(status.code(), retryAfter >= 0 ? "hudi-flight server " + server + " is busy ("
          + what + "): " + detail : text, retryAfter);
    }

    public FlightStatusCode code() {
      return code;
    }

    /** The server refused for load and said when to try again. */
    boolean isBusy() {
      return retryAfterMillis >= 0;
    }

    long retryAfterMillis() {
      return retryAfterMillis;
    }

    /** The connection broke or the server is gone (not a refusal for load, nor the server's own time limit). */
    boolean isTransport() {
      return !isBusy() && (code == FlightStatusCode.UNAVAILABLE
          || code == FlightStatusCode.TIMED_OUT && !getMessage().contains(": limit "));
    }
  }
}
