"""JSON Schemas of hudi-flight's wire format (Flight commands and action bodies), loaded by name."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=None)
def load(name: str) -> Any:
    """Parse ``schemas/<name>`` (a ``.json`` file) and return the JSON value."""
    return json.loads(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))
