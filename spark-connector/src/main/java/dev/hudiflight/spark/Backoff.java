package dev.hudiflight.spark;

import java.util.concurrent.ThreadLocalRandom;

/**
 * Waits between the attempts of a call the server refused for load (the Python client's policy):
 * exponential from 50 ms to 5 s, with jitter, never shorter than the server's hint, for up to 30 s
 * in all; then the refusal is raised.
 */
final class Backoff {
  private static final long BUDGET_MILLIS = 30_000;
  private static final long LONGEST_MILLIS = 5_000;

  private final long deadline = System.currentTimeMillis() + BUDGET_MILLIS;
  private long next = 50;

  /** Sleeps before the next attempt; false (no sleep) once the budget is spent. */
  boolean await(FlightSession.ServerException busy) {
    double pause = Math.max(busy.retryAfterMillis(), next) * ThreadLocalRandom.current().nextDouble(1.0, 1.5);
    if (System.currentTimeMillis() + pause > deadline) {
      return false;
    }
    try {
      Thread.sleep((long) pause);
    } catch (InterruptedException err) {
      Thread.currentThread().interrupt();  // the task is being killed: give up now
      return false;
    }
    next = Math.min(2 * next, LONGEST_MILLIS);
    return true;
  }
}
