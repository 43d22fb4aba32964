"""The shapes the package's modules pass each other, named once.

``Row`` is one row of a derived table (``RUN_DIR/tables/*.csv``, ``*.parquet``; docs/results.md
lists their columns): column name to value, a number, a string, a boolean or None for an empty
cell. The analysis builds them, the report, the docs pages, the planner and ``compare`` read them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Row"]

Row = dict[str, Any]
"""One row of a derived table: column name to value (None for an empty cell)."""
