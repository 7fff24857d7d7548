"""Writers for synthetic Hudi tables (table version 8, timeline layout 2) and the table generator.

These are deliberately independent of the reader (:mod:`catalog` never imports them, and they import
nothing of it) so that a generated table checks the readers, and the ``hudi`` package checks the writers.

Modules: ``generator`` (entry point: :func:`~hudi_generator.generator.generate`, ``hudi-flight
generate``), ``data`` (deterministic synthetic rows), ``avro_schema``, ``commit_metadata``
(Avro instant files), ``log_writer`` (log blocks), ``hfile_writer`` (HFile v3),
``metadata_table`` (MDT ``files`` / ``column_stats`` / ``record_index``), ``column_stats``,
``properties`` (Java .properties text).
"""
