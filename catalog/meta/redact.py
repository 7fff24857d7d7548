"""Secret-looking table properties, shown without their values.

A table's ``hoodie.properties`` (and the properties a client registers a table with) may hold
credentials that a writer copied there: ``hoodie.aws.secret.access.key``, ``fs.s3a.secret.key``,
``hoodie.datasource.hive_sync.password``. Whoever may read a table's settings need not see them,
so every place that shows properties (the ``$properties`` metadata table, ``table-info``) shows
the value of a key matching :data:`SECRET_KEY` as :data:`REDACTED` (docs/sql.md, "Metadata
tables"). The match is on the key's words, case-insensitively: ``secret``, ``password``,
``passwd``, ``pwd``, ``token``, ``credential(s)``, ``signature``, or ``key`` after ``access``,
``account``, ``private``, ``api``, ``session`` or ``sas`` (``fs.azure.account.key.<account>``).
"""

from __future__ import annotations

import re
from typing import Mapping

#: a property key that names a secret (its value is never shown)
SECRET_KEY = re.compile(
    r"(?:^|[._\-])(?:secret|passw(?:or)?d|pwd|tokens?|credentials?|signature"
    r"|(?:access|account|private|api|session|sas)[._\-]?keys?)(?:[._\-]|$)",
    re.IGNORECASE,
)
#: what a secret property's value reads as
REDACTED = "<redacted>"


def is_secret_key(key: str) -> bool:
    """Whether the property ``key`` names a secret (:data:`SECRET_KEY`)."""
    return SECRET_KEY.search(key) is not None


def redacted(properties: Mapping[str, str]) -> dict[str, str]:
    """``properties`` with every secret-looking key's value replaced by :data:`REDACTED`."""
    return {k: REDACTED if is_secret_key(k) else v for k, v in properties.items()}


__all__ = ["REDACTED", "SECRET_KEY", "is_secret_key", "redacted"]
