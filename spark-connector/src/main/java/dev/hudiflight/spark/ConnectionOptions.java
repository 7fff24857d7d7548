package dev.hudiflight.spark;

import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Objects;

/**
 * How to reach a hudi-flight server: its URI, credentials and TLS material, taken from Spark options
 * with the Python data source's names ({@code uri}, {@code token} or {@code user}/{@code password},
 * {@code tls_root_certs}, {@code tls_cert_chain}, {@code tls_private_key}: PEM text or the path of a
 * PEM file readable where the driver and the executors run).
 *
 * <p>Plain data, so Spark can ship it to executors; {@link #toString()} never shows a credential.
 * The Spark catalog builds one from its {@code spark.sql.catalog.NAME.*} options the same way.
 */
public final class ConnectionOptions implements Serializable {
  private static final long serialVersionUID = 1L;

  static final String PLAIN_SCHEME = "grpc";
  static final String TCP_SCHEME = "grpc+tcp";
  static final String TLS_SCHEME = "grpc+tls";
  static final int DEFAULT_PORT = 8815;
  private static final String PEM_MARK = "-----BEGIN ";

  private final String uri;
  private final String token;
  private final String user;
  private final String password;
  private final String tlsRootCerts;
  private final String tlsCertChain;
  private final String tlsPrivateKey;

  private ConnectionOptions(
      String uri, String token, String user, String password, String tlsRootCerts, String tlsCertChain,
      String tlsPrivateKey) {
    this.uri = uri;
    this.token = token;
    this.user = user;
    this.password = password;
    this.tlsRootCerts = tlsRootCerts;
    this.tlsCertChain = tlsCertChain;
    this.tlsPrivateKey = tlsPrivateKey;
  }

  /** The connection named by options (keys compared without case, as Spark's options are). */
  public static ConnectionOptions from(Map<String, String> options) {
    Options opts = new Options(options);
    String uri = opts.get("uri");
    if (uri == null || uri.isBlank()) {
      throw new IllegalArgumentException(
          "hudi-flight: option \"uri\" is required, e.g. .option(\"uri\", \"grpc://host:8815\")");
    }
    ConnectionOptions conn = new ConnectionOptions(
        normalizeUri(uri), opts.get("token"), opts.get("user"), opts.get("password"), opts.get("tls_root_certs"),
        opts.get("tls_cert_chain"), opts.get("tls_private_key"));
    conn.check();
    return conn;
  }

  private void check() {
    if (token != null && user != null) {
      throw new IllegalArgumentException("hudi-flight: give either token or user/password, not both");
    }
    if (user != null && password == null) {
      throw new IllegalArgumentException("hudi-flight: user " + quoted(user) + " needs a password");
    }
    if ((tlsCertChain == null) != (tlsPrivateKey == null)) {
      throw new IllegalArgumentException(
          "hudi-flight: a client certificate needs both tls_cert_chain and tls_private_key");
    }
    if (!isTls() && (tlsRootCerts != null || tlsCertChain != null)) {
      throw new IllegalArgumentException(
          "hudi-flight: TLS settings need a " + TLS_SCHEME + ":// URI, got " + uri);
    }
  }

  /** {@code host:port} / {@code grpc://host[:port]} as a URI Arrow Flight takes (the Python client's rule). */
  static String normalizeUri(String raw) {
    String text = raw.strip();
    if (!text.contains("://")) {
      text = PLAIN_SCHEME + "://" + text;
    }
    int sep = text.indexOf("://");
    String scheme = text.substring(0, sep);
    String rest = text.substring(sep + 3);
    if (!scheme.equals(PLAIN_SCHEME) && !scheme.equals(TCP_SCHEME) && !scheme.equals(TLS_SCHEME)) {
      throw new IllegalArgumentException(
          "hudi-flight: unsupported URI scheme " + quoted(scheme) + " in " + quoted(text) + "; use grpc:// or grpc+tls://");
    }
    String hostPart = rest.contains("]") ? rest.substring(rest.lastIndexOf(']')) : rest;
    if (!hostPart.contains(":")) {
      rest = rest + ":" + DEFAULT_PORT;
    }
    return scheme + "://" + rest;
  }

  private static String quoted(String s) {
    return "'" + s + "'";
  }

  public String uri() {
    return uri;
  }

  public boolean isTls() {
    return isTls(uri);
  }

  static boolean isTls(String uri) {
    return uri.startsWith(TLS_SCHEME + "://");
  }

  String token() {
    return token;
  }

  String user() {
    return user;
  }

  String password() {
    return password;
  }

  /** The CA certificates (PEM) that sign the server's certificate, or null for the system's. */
  byte[] tlsRootCerts() {
    return pem(tlsRootCerts, "tls_root_certs");
  }

  byte[] tlsCertChain() {
    return pem(tlsCertChain, "tls_cert_chain");
  }

  byte[] tlsPrivateKey() {
    return pem(tlsPrivateKey, "tls_private_key");
  }

  /** PEM bytes from PEM text or a PEM file's path; errors name the option, never its value. */
  private static byte[] pem(String value, String option) {
    if (value == null) {
      return null;
    }
    byte[] data;
    if (value.contains(PEM_MARK)) {
      data = value.getBytes(StandardCharsets.US_ASCII);
    } else {
      try {
        data = Files.readAllBytes(Path.of(value));
      } catch (IOException | RuntimeException err) {
        throw new IllegalArgumentException(
            "hudi-flight: " + option + ": neither PEM text nor a readable PEM file (" + err.getClass().getSimpleName() + ")");
      }
    }
    if (!new String(data, StandardCharsets.US_ASCII).contains(PEM_MARK)) {
      throw new IllegalArgumentException("hudi-flight: " + option + ": not PEM data (expected '" + PEM_MARK + "...')");
    }
    return data;
  }

  @Override
  public boolean equals(Object other) {
    if (!(other instanceof ConnectionOptions)) {
      return false;
    }
    ConnectionOptions o = (ConnectionOptions) other;
    return uri.equals(o.uri) && Objects.equals(token, o.token) && Objects.equals(user, o.user)
        && Objects.equals(password, o.password) && Objects.equals(tlsRootCerts, o.tlsRootCerts)
        && Objects.equals(tlsCertChain, o.tlsCertChain) && Objects.equals(tlsPrivateKey, o.tlsPrivateKey);
  }

  @Override
  public int hashCode() {
    return Objects.hash(uri, user);
  }

  @Override
  public String toString() {
    return "ConnectionOptions(" + uri + (user != null ? ", user=" + user : "") + ")";
  }

  /** Spark's options with keys compared without case, empty values taken as absent. */
  static final class Options {
    private final Map<String, String> lower = new java.util.HashMap<>();

    Options(Map<String, String> options) {
      options.forEach((k, v) -> {
        if (v != null && !v.isBlank()) {
          lower.put(k.toLowerCase(java.util.Locale.ROOT), v);
        }
      });
    }

    String get(String key) {
      return lower.get(key);
    }

    int positiveInt(String key, int fallback) {
      String text = lower.get(key);
      if (text == null) {
        return fallback;
      }
      try {
        int value = Integer.parseInt(text.strip());
        if (value >= 1) {
          return value;
        }
      } catch (NumberFormatException ignored) {
        // refused below
      }
      throw new IllegalArgumentException(
          "hudi-flight: option " + quoted(key) + " must be a positive integer, got " + quoted(text));
    }
  }
}
