"""The real-writer table factory: Hudi's own Spark writer writes a matrix of small tables per
release, and Spark's Hudi datasource stores its answers beside them (``make tables``)."""
