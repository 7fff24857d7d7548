"""hudi-flight benchmark suite: ``python -m bench --size quick|full`` (``make bench``).

Each benchmark is a module ``bench/<name>.py`` exposing ``run(size: str) -> list[dict]``;
see :mod:`bench.common` for the row format and the helpers they share.
"""
