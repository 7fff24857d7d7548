"""Where an endpoint is read: the cluster's workers, the configured data locations, the serving
processes of ``serve --processes N``, or here."""

from __future__ import annotations

import threading

from flight_server.server.cluster.membership import Membership


class Placement:
    """Ranks the locations of endpoints.

    Args:
        locations: the configured data servers (``locations``), tried least-loaded first.
        cluster: a coordinator's live workers (their rank per file group wins over ``locations``).
    """

    def __init__(self, locations: list[str], cluster: Membership | None = None):
        self.cluster = cluster
        self._load = {loc: 0.0 for loc in locations}
        self._processes: dict[str, float] = {}
        self._lock = threading.Lock()

    def serve_from(self, processes: list[str]) -> None:
        """Name ``processes`` (the own ports of the serving processes of ``serve --processes N``,
        the live ones) in endpoints when no data server is configured, so that clients stream
        straight from them instead of through the one-port relay; empty: this server."""
        with self._lock:
            self._processes = {loc: self._processes.get(loc, 0.0) for loc in processes}

    def locations(self, weight: float, key: str) -> list[str]:
        """On a coordinator: the live workers ranked first and second for the file group ``key``
        (cluster.rendezvous). Else the configured locations, or else the serving processes:
        least-loaded first, the next one as a retry target. Empty: this server."""
        if self.cluster is not None:
            return self.cluster.locations(key)
        with self._lock:
            load = self._load or self._processes
            if not load:
                return []
            ranked = sorted(load, key=load.__getitem__)
            load[ranked[0]] += weight
        return ranked[:2]


__all__ = ["Placement"]
