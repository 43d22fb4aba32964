"""The analysis's two data types (re-exported by :mod:`dnscost.analysis`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dnscost.contract import Row, RunRecord, TrialRecord

__all__ = ["Analysis", "Table"]


@dataclass
class Table:
    """A derived table: ordered columns, one dict per row (missing values are None)."""

    name: str
    columns: list[str]
    rows: list[Row] = field(default_factory=list)

    def column(self, name: str) -> list[Any]:
        """One column's values, in row order."""
        return [r.get(name) for r in self.rows]


@dataclass
class Analysis:
    """A run's record (run.json), its trials (trial.json documents, in plan order) and every
    derived table by name."""

    run: RunRecord
    trials: list[TrialRecord]
    tables: dict[str, Table]
