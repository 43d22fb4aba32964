"""Reading a client TOML file (a client spec, a presets file) and checking its fields: each
mistake is one :class:`~dnscost.errors.UsageError` line naming the file, or the table and the
field (``preset lte: rtt_ms must be a number in [0, 10000], not -1``)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from dnscost.errors import UsageError

__all__ = ["fields", "number", "read_toml", "strings"]


def read_toml(path: Path, what: str) -> dict[str, object]:
    """The tables of the TOML file ``path``; ``what`` (``client spec``) begins the error."""
    try:
        return tomllib.loads(path.read_text())
    except OSError as e:
        raise UsageError(f"{what}: cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{what}: {path}: {e}") from None


def strings(where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise UsageError(f"{where} must be a non-empty list of strings")
    if len(set(value)) != len(value):
        raise UsageError(f"{where} names an entry twice")
    return tuple(value)


def number(where: str, value: Any, lo: float, hi: float, integer: bool = False) -> Any:
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok or not lo <= value <= hi:
        kind = "an integer" if integer else "a number"
        raise UsageError(f"{where} must be {kind} in [{lo:g}, {hi:g}], not {value!r}")
    return value


def fields(where: str, table: Any, known: set[str]) -> dict[str, object]:
    if not isinstance(table, dict):
        raise UsageError(f"{where} must be a table")
    unknown = sorted(set(table) - known)
    if unknown:
        raise UsageError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})")
    return table
