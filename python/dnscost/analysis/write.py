"""Derived tables' files: ``<name>.parquet`` (pyarrow) and ``<name>.csv`` (csv module), same
columns, same row order, written; and a CSV read back typed (:func:`read_table`). A column holds
one type: bool, integer, float, else text."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from dnscost.analysis.records import Analysis, Table
from dnscost.analysis.tables import TEXT_COLUMNS
from dnscost.contract import Row

__all__ = ["column_type", "csv_cell", "read_table", "write_tables"]


def column_type(name: str, values: list[Any]) -> pa.DataType:
    """The column's Parquet type: text for :data:`TEXT_COLUMNS`, else from its non-None values
    (float when it has none, text when they are mixed)."""
    present = [v for v in values if v is not None]
    if name in TEXT_COLUMNS:
        return pa.string()
    if not present:
        return pa.bool_() if name == "valid" else pa.float64()
    if present and all(isinstance(v, bool) for v in present):
        return pa.bool_()
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pa.int64()
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return pa.float64()
    return pa.string()


def _cast(value: Any, kind: pa.DataType) -> Any:
    if value is None:
        return None
    if kind == pa.float64():
        return float(value)
    if kind == pa.string():
        return csv_cell(value)
    return value


def csv_cell(value: Any) -> str:
    """A value as written in CSV: empty for None, ``true``/``false``, floats in full (repr)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _cell(name: str, text: str) -> Any:
    """A CSV cell as :func:`csv_cell` wrote it, read back."""
    if text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    if name in TEXT_COLUMNS:
        return text
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def read_table(path: Path) -> list[Row]:
    """A derived table's CSV as rows, typed back (empty cells None)."""
    with path.open(newline="") as f:
        return [{k: _cell(k, v) for k, v in row.items()} for row in csv.DictReader(f)]


def _write_parquet(table: Table, path: Path) -> None:
    arrays, fields = [], []
    for name in table.columns:
        values = table.column(name)
        kind = column_type(name, values)
        arrays.append(pa.array([_cast(v, kind) for v in values], type=kind))
        fields.append(pa.field(name, kind))
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), path)


def _write_csv(table: Table, path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(table.columns)
        for row in table.rows:
            w.writerow([csv_cell(row.get(c)) for c in table.columns])


def write_tables(a: Analysis, out_dir: Path) -> list[Path]:
    """Writes every table of ``a`` into ``out_dir`` (created) and returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in a.tables.items():
        parquet, text = out_dir / f"{name}.parquet", out_dir / f"{name}.csv"
        _write_parquet(table, parquet)
        _write_csv(table, text)
        written += [parquet, text]
    return written
