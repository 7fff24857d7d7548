"""What no client may see in an error: the check every client's walk of user mistakes shares."""

from __future__ import annotations

import re

#: what no client may see: Python classes (and the traceback pyarrow would add), the engine's
#: error classes ("Binder Error:") and views, server paths, and gRPC's transport text
INTERNALS = re.compile(
    r"Public[A-Z]\w*|Python exception: [A-Z_]|Traceback|File \"|\.py\b|[A-Z][a-z]+ Error:|__hudi_|"
    r"/tmp/|ipv4:|ipv6:|last error|failed to connect to all addresses|Flight returned|TSI_|SSL_ERROR"
)


def assert_plain(text: str) -> None:
    found = INTERNALS.search(text)
    assert found is None, f"{found.group(0)!r} in {text!r}"


__all__ = ["INTERNALS", "assert_plain"]
