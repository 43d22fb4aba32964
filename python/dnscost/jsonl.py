"""JSON lines, read one way. Every JSON-lines file the package reads (the engine's output and
connection logs, the meter's samples, a run's ledger of the processes it started, a browser's
beacons) goes through :func:`parse_lines`: each line with its number, its text and its record
(a JSON object) or None when it is not one (cut short by a crash, or some other value). The
readers differ only in what they do with those: skip them (:func:`read_records`), refuse the
file (``strict``), name them (``dnscost report``'s check of a finished trial), or keep the
text as it was (``dnscost keep``)."""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dnscost.errors import DamagedLineError, UsageError

__all__ = ["Line", "NestedTooDeep", "json_kind", "loads", "parse_lines", "read_lines", "read_records", "split_lines"]


class NestedTooDeep(json.JSONDecodeError):
    """A JSON document nested deeper than Python's parser goes (its recursion limit): malformed
    for every reader here, like any other :class:`json.JSONDecodeError`."""

    def __str__(self) -> str:
        return self.msg


def loads(text: str) -> Any:
    """``json.loads``, but a document nested too deeply to parse (``[`` 100 000 times) raises
    :class:`NestedTooDeep`, a :class:`json.JSONDecodeError`, not a :class:`RecursionError`: every
    reader of a stored document takes it as the malformed JSON it is, in one line."""
    try:
        return json.loads(text)
    except RecursionError:
        limit = sys.getrecursionlimit()
        raise NestedTooDeep(f"nested too deeply to read (more than about {limit} levels)", text, 0) from None


@dataclass(frozen=True)
class Line:
    """One line of a JSON-lines file."""

    number: int
    """From 1."""
    text: str
    record: dict[str, Any] | None
    """The line's JSON object, or None when the line is not one."""
    problem: str | None = None
    """Why ``record`` is None: JSON's message, or the kind of value the line holds."""


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, cut at ``\\n`` only: JSON leaves U+2028, U+0085 and the like
    unescaped inside strings, which ``str.splitlines`` would cut. A last empty line (the file's
    final newline) is not one."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def read_lines(path: Path) -> list[str]:
    """The lines of a JSON-lines file, or of ``<name>.gz`` beside it when it alone is there (a
    kept run's, as ``dnscost keep`` stores them); a missing file has none."""
    packed = path.with_name(path.name + ".gz")
    try:
        if not path.exists() and packed.exists():
            with gzip.open(packed, "rt") as f:
                return split_lines(f.read())
        return split_lines(path.read_text())
    except FileNotFoundError:
        return []
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise UsageError(f"{packed}: unreadable ({e})") from None


def parse_lines(lines: Iterable[str]) -> list[Line]:
    """Every line, numbered from 1, with its record (None, and why, when it is not a JSON
    object). Blank lines are left out."""
    out = []
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            value = loads(text)
        except json.JSONDecodeError as e:
            out.append(Line(number, text, None, e.msg))
            continue
        if isinstance(value, dict):
            out.append(Line(number, text, value))
        else:
            out.append(Line(number, text, None, json_kind(value)))
    return out


def read_records(path: Path, *, strict: bool = False) -> list[dict[str, Any]]:
    """The records (JSON objects) of a JSON-lines file, in order; a missing file has none; read
    compressed as :func:`read_lines` says. A line that is not a record (cut short by a crash) is
    skipped, or, with ``strict`` (a file written whole), raises :class:`DamagedLineError`
    naming the file and the line."""
    out = []
    for line in parse_lines(read_lines(path)):
        if line.record is not None:
            out.append(line.record)
        elif strict:
            raise DamagedLineError(path, line.number, line.problem or "not a record")
    return out


def json_kind(value: Any) -> str:
    """What JSON calls the type of ``value``, for a message: ``an array``, ``a string``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"
