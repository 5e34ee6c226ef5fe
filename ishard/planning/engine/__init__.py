"""The column engine: DuckDB over an inventory's columns (read, checked, sorted, grouped and
its naming hints found without Python work per row, spilling past a memory limit), and over a
growing dataset's samples; its memory limits, which ``--memory-limit`` is checked against."""

MEMORY_LIMIT = 512 << 20  # bytes DuckDB may hold before it spills to its temporary folder
LEAST_MEMORY_LIMIT = 128 << 20  # (--memory-limit) at 64 MiB it cannot read some Parquet files
