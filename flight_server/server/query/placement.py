"""Where an endpoint is read: the cluster's workers, the configured data locations, or here."""

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
        self._lock = threading.Lock()

    def locations(self, weight: float, key: str) -> list[str]:
        """On a coordinator: the live workers ranked first and second for the file group ``key``
        (cluster.rendezvous). Else the configured locations: least-loaded first, the next one as a
        retry target. Empty: this server."""
        if self.cluster is not None:
            return self.cluster.locations(key)
        if not self._load:
            return []
        with self._lock:
            ranked = sorted(self._load, key=self._load.__getitem__)
            self._load[ranked[0]] += weight
        return ranked[:2]


__all__ = ["Placement"]
