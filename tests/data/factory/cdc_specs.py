"""CDC cases beyond the factory's CDC matrix (``specs._cdc``): the inference cases a plain
insert/upsert/delete history does not reach, and Hudi's answer to a CDC query on a table written
without ``hoodie.table.cdc.enabled``.

Pure Python, like ``specs``; ``specs.all_specs`` adds these.
"""

from __future__ import annotations

from tests.data.factory.specs import CORE_STEPS, COW, DROP_PARTITION_COLUMNS, INSERT, MOR, TableSpec, Write, ids

#: record ids of partition ``p2`` among the inserted ones (``row`` puts id ``i`` in ``p{i % 3}``)
_P2_IDS = tuple(i for i in ids(0, 12) if i % 3 == 2)

#: a replacecommit (its replaced groups' rows are deletes, its new base files inserts), a delete
#: that empties a file group, and an upsert after both
_REPLACE_AND_EMPTY = (
    INSERT,
    Write("insert_overwrite", ids(0, 2), 2),
    Write("delete", _P2_IDS, 3),
    Write("upsert", ids(3, 6), 4),
)
_KEY_ONLY = {"hoodie.table.cdc.enabled": "true", "hoodie.table.cdc.supplemental.logging.mode": "OP_KEY_ONLY"}
_BEFORE_AFTER = {**_KEY_ONLY, "hoodie.table.cdc.supplemental.logging.mode": "DATA_BEFORE_AFTER"}


def cdc_inference_specs() -> list[TableSpec]:
    return [
        TableSpec("cow_cdc_replace", COW, _REPLACE_AND_EMPTY, _KEY_ONLY, features=("cdc", "insert_overwrite"),
                  releases=("1.2.0",)),
        TableSpec("mor_cdc_replace", MOR, _REPLACE_AND_EMPTY, _KEY_ONLY, features=("cdc", "insert_overwrite"),
                  releases=("1.2.0",)),
        # partition columns left out of the data files: the images carry them from the path
        *(TableSpec(f"{prefix}_cdc_drop_partition_columns", table_type, CORE_STEPS,
                    {**_BEFORE_AFTER, **DROP_PARTITION_COLUMNS}, features=("cdc", "drop_partition_columns"),
                    releases=("1.1.1",)) for table_type, prefix in ((COW, "cow"), (MOR, "mor"))),
        # no CDC logging: Spark's CDC query refuses the table, and so must we
        TableSpec("cow_cdc_disabled", COW, CORE_STEPS, {}, features=("cdc", "cdc_disabled"), releases=("1.2.0",)),
    ]
