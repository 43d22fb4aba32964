"""The report's render kit, which every page of dnscost's reports uses (the run's
:mod:`.html`, ``dnscost observe``'s and ``dnscost client``'s reports): cells formatted once
(:func:`fmt`), tables of them for the templates (:func:`table`), matplotlib's SVG made fit to sit
inside a page (:func:`inline_svg`), and the autoescaped jinja2 templates of ``templates/``
(:data:`TEMPLATES`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import jinja2

__all__ = ["DASH", "TEMPLATES", "Cell", "Links", "Span", "Table", "TableRow", "fmt", "inline_svg", "table"]

DASH = "\u2013"
"""Shown for a missing value."""


def fmt(value: Any, digits: int = 3) -> str:
    """A cell's text: a dash for missing, ``yes``/``no``, integers with separators, floats with
    ``digits`` significant digits (whole numbers above 1000)."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:
            return DASH
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class Span:
    """A cell's text in a styled span (a verdict)."""

    text: str
    cls: str


@dataclass(frozen=True)
class Links:
    """A cell of links (text, href relative to the report): the pages over time of the trials
    a row came from."""

    items: tuple[tuple[str, str], ...]


Cell = str | Span | Links


@dataclass(frozen=True)
class TableRow:
    cells: list[Cell]
    cls: str = ""


@dataclass(frozen=True)
class Table:
    """A table for the template: cells already formatted (text, escaped by the template)."""

    headers: list[str]
    rows: list[TableRow]
    text_columns: frozenset[int]
    caption: str | None = None

    def align(self, i: int) -> str:
        return "text" if i in self.text_columns else "num"


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    text_columns: int | set[int] = 1,
    row_classes: Sequence[str] | None = None,
    caption: str | None = None,
) -> Table:
    """A table whose cells are formatted with :func:`fmt` (a :class:`Span` or :class:`Links`
    stays as it is).
    Text columns (the first ``text_columns``, or those indices) are left-aligned, the others
    (numbers) right-aligned."""
    text = frozenset(range(text_columns)) if isinstance(text_columns, int) else frozenset(text_columns)
    body = [
        TableRow([c if isinstance(c, Span | Links) else fmt(c) for c in row], row_classes[k] if row_classes else "")
        for k, row in enumerate(rows)
    ]
    return Table(list(headers), body, text, caption)


_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)


_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')


def inline_svg(svg_text: str, prefix: str) -> str:
    """A saved SVG made fit to sit inside HTML: no XML prolog, DOCTYPE or metadata, and every
    id (and every reference to one) prefixed, since matplotlib numbers its ids afresh in each
    figure and ids must be unique in the page."""
    text = _METADATA.sub("", _PROLOG.sub("", svg_text, count=1), count=1).strip()
    text = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', text)
    return _REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", text)


TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("dnscost.report", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
"""The reports' templates (``templates/``), autoescaped; a cell is tested ``span`` or ``links``."""
TEMPLATES.tests["span"] = lambda value: isinstance(value, Span)
TEMPLATES.tests["links"] = lambda value: isinstance(value, Links)
