"""The latency benchmark warms every file group up with keys its measured phase never asks for."""

from __future__ import annotations

import random

from bench.latency import KINDS, SIZES, _Keys
from hudi_generator.generator import GeneratorSpec, _group_rows


def test_warm_up_touches_every_file_group_and_no_measured_key():
    rows, partitions, files, _ = SIZES["quick"]
    spec = GeneratorSpec(rows=rows, partitions=partitions, files_per_partition=files)
    keys = _Keys(rows, spec.n_groups, tuple(f"p{i}" for i in range(partitions)))
    warm = {f[0][2] for f in keys.warmup("key =")}
    first_rows = {int(_group_rows(spec, g)[1][0]) for g in range(spec.n_groups)}
    assert warm == {f"trip-{i:010d}" for i in first_rows}  # one key in each file group
    rnd = random.Random(1)
    measured = {keys.measured("key =", rnd)[0][2] for _ in range(5_000)}
    assert not warm & measured and len(measured) > 4_000
    for kind in KINDS:  # other values than the measured ones: no cache keyed by a request is warmed
        assert not {str(f) for f in keys.warmup(kind)} & {str(keys.measured(kind, rnd)) for _ in range(200)}
