"""The tables benchmarks/report.py writes, one module per docs page, each listing its `TABLES`."""
