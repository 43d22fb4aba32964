"""Pages of the docs whose figures come from a stored run: a Jinja template (``docs/study.md.j2``)
rendered with the run's derived tables (``RUN_DIR/tables/*.csv``), its run.json and the study's
published numbers, so that every number
of the page is read from the data, never typed.

    python -m dnscost.report.docpage docs/study.md.j2 docs/study-run docs/study.md
    python -m dnscost.report.docpage docs/study.md.j2 docs/study-run docs/study.md --check

``--check`` renders into memory and exits 1, printing the first differing lines, when the page
on disk is not what the tables give (the docs check, ``python/tests/test_docs_numbers.py``, renders
docs/study.md so).

In the template, ``t(TABLE, key=value, ...)`` is the one row of ``TABLE`` with those values (an
error names the table and keys when none or several match), ``rows(TABLE, ...)`` every such row,
``run`` the run's facts, ``study`` the study's numbers (:func:`dnscost.study.published`),
``group(NAME)`` the run's spec group, and
``require(CONDITION, STATEMENT)`` stops the rendering when the data contradict a verdict the
words state.
Filters format a number the way the docs write it: ``f(2)`` fixed digits, ``n`` an integer with
spaces between thousands (``2 550``), ``k`` thousands (``255 k``), ``pct`` a share as a percent,
``iv(2)`` a table row's ``value [low-high]``.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import jinja2

from dnscost.analysis.stats import LinearFit, fit_line
from dnscost.analysis.table1 import key_match, verdict_counts
from dnscost.analysis.write import read_table
from dnscost.contract import Row, RunRecord, SpecGroupRecord
from dnscost.errors import UsageError
from dnscost.meter.energy import CpuPowerModel
from dnscost.results import read_json, run_problem
from dnscost.study import published
from dnscost.transports import display_name

__all__ = ["InvalidGroup", "RunTables", "invalid_trials", "main", "render_page"]


class RunTables:
    """The derived tables of one stored run, read once each, and its facts."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir
        self._tables: dict[str, list[Row]] = {}
        if not (run_dir / "tables").is_dir():
            raise UsageError(f"{run_dir}: no tables/ to render from (dnscost report {run_dir} writes them)")

    def rows(self, table: str, **keys: Any) -> list[Row]:
        if table not in self._tables:
            path = self.dir / "tables" / f"{table}.csv"
            if not path.is_file():
                raise UsageError(f"{path}: no such table")
            self._tables[table] = read_table(path)
        missing = [k for k in keys if self._tables[table] and k not in self._tables[table][0]]
        if missing:
            raise UsageError(f"{table}: no column {', '.join(missing)}")
        return [r for r in self._tables[table] if all(r.get(k) == v for k, v in keys.items())]

    def row(self, table: str, **keys: Any) -> Row:
        found = self.rows(table, **keys)
        if len(found) != 1:
            shown = ", ".join(f"{k}={v!r}" for k, v in keys.items())
            raise UsageError(f"{table}: {len(found)} rows with {shown}, not one")
        return found[0]

    def facts(self) -> RunRecord:
        """run.json's facts (not its plan or trials); none when the directory has no run.json."""
        path = self.dir / "run.json"
        if not path.is_file():
            return {}
        doc = read_json(path)
        problem = run_problem(doc)
        if problem is not None:
            raise UsageError(f"{path}: {problem}")
        run = cast(RunRecord, doc)
        run.pop("plan", None)
        run.pop("trials", None)
        run.pop("spec_toml", None)
        return run


def _number(v: Any) -> float:
    if not isinstance(v, int | float) or isinstance(v, bool):
        raise UsageError(f"not a number: {v!r}")
    return float(v)


def fixed(v: Any, digits: int = 1) -> str:
    return f"{_number(v):.{digits}f}"


def spaced(v: Any) -> str:
    """An integer with a space between thousands, as the docs write them: ``2 550``."""
    return f"{round(_number(v)):,}".replace(",", " ")


def thousands(v: Any) -> str:
    return f"{spaced(_number(v) / 1000)} k"


def percent(v: Any, digits: int = 0) -> str:
    return f"{100 * _number(v):.{digits}f} %"


def interval(row: Row, digits: int = 2, key: str = "value") -> str:
    """``value [low-high]`` of a table row (``key``'s interval columns: ``low``/``high``, or
    ``KEY_low``/``KEY_high``)."""
    low, high = ("low", "high") if key == "value" else (f"{key}_low", f"{key}_high")
    return f"{fixed(row[key], digits)} [{fixed(row[low], digits)}-{fixed(row[high], digits)}]"


FILTERS: dict[str, Callable[..., str]] = {
    "f": fixed,
    "n": spaced,
    "k": thousands,
    "pct": percent,
    "iv": interval,
}

LIFETIMES = {
    "forever": "on persistent connections",
    "30s": "with 30 s lifetimes",
    "1s": "with 1 s lifetimes",
    "1q": "at one query per connection",
}


def cell_words(r: Row) -> str:
    """A trial's cell as the docs name it: ``knot-resolver's TCP at one query per connection``."""
    what = f"{r['target']}'s {display_name(str(r['transport']))}"
    if r["kind"] == "idle":
        return f"{what} at {spaced(r['connections'])} idle connections"
    if r["kind"] == "search":
        return f"{what} open-loop search"
    if (r.get("analysis") or r["group"]) == "connections":
        what += f" at {spaced(r['connections'])} persistent connections"
    elif r.get("lifetime"):
        what += f" {LIFETIMES.get(str(r['lifetime']), 'with lifetime ' + str(r['lifetime']))}"
    extras = [
        "RSA-2048" if r.get("cert_key") == "rsa-2048" else "",
        "resumed" if (r.get("resumption") or 0) > 0 else "",
        "0-RTT" if (r.get("early_data") or 0) > 0 else "",
        str(r["group"]) if r["group"] not in ("connections", "establishment") else "",
    ]
    extra = ", ".join(e for e in extras if e)
    return f"{what} ({extra})" if extra else what


def _rounds(rounds: list[int]) -> str:
    n = len(set(rounds))
    return "every round" if n == 3 else f"{n} of 3 rounds" if n > 1 else "one round"


@dataclass(frozen=True)
class InvalidGroup:
    """Trials measured but invalid that share their flags."""

    flags: str
    n: int
    cells: list[str]
    """Each cell's words and the rounds it was invalid in."""


def invalid_trials(rows: list[Row]) -> list[InvalidGroup]:
    """The trials measured but invalid, grouped by their flags, most first."""
    groups: dict[str, dict[str, list[int]]] = {}
    for r in rows:
        if r["status"] == "done" and not r["valid"]:
            groups.setdefault(str(r["flags"]), {}).setdefault(cell_words(r), []).append(int(r["round"]))
    out = []
    for flags, cells in groups.items():
        words = [f"{cell}, {_rounds(rounds)}" for cell, rounds in cells.items()]
        out.append(InvalidGroup(flags, sum(len(v) for v in cells.values()), words))
    return sorted(out, key=lambda g: (-g.n, g.flags))


def utc(ms: Any, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """A run.json time (ms since the epoch) in UTC."""
    return time.strftime(fmt, time.gmtime(_number(ms) / 1000))


def model_term(r: Row) -> str:
    """A cost-model term as the docs' tables show it: ``value [low-high]``, three significant
    digits below 100, whole µs above."""

    def g(v: Any) -> str:
        x = _number(v)
        return f"{x:.0f}" if abs(x) >= 100 or (abs(x) >= 10 and x == round(x)) else f"{x:.3g}"

    return f"{g(r['us'])} [{g(r['ci95_low'])}-{g(r['ci95_high'])}]"


def memory_matched(points: list[Row], target: str, x: str, y: str, upto: float | None = None) -> dict[str, object]:
    """User memory per connection of transports ``x`` and ``y`` of ``target``, each the slope
    over only the connection counts measured valid for both (``memory_points``; with ``upto``,
    those up to it): ``points`` (those counts), ``ratio`` (x ÷ y), ``detail`` (both slopes in
    KiB, with their 95 % intervals when three points or more give one), ``x`` and ``y`` (each
    slope in KiB) and ``apart`` (the two intervals do not overlap: the data order the two)."""

    def valid(transport: str) -> dict[float, tuple[float, float]]:
        out = {}
        for p in points:
            if (p["target"], p["transport"]) == (target, transport) and p["valid"] and p["rss_delta_bytes"] is not None:
                held = p["connections_held"] or p["connections"]
                out[_number(p["connections"])] = (_number(held), _number(p["rss_delta_bytes"]))
        return out

    px, py = valid(x), valid(y)
    counts = sorted(c for c in set(px) & set(py) if upto is None or c <= upto)
    fits = []
    for pts in (px, py):
        f = fit_line([pts[c][0] for c in counts], [pts[c][1] for c in counts])
        if f is None:
            raise UsageError(f"memory_points: {target} {x} and {y} share fewer than two valid points")
        fits.append(f)

    def kib(f: LinearFit) -> str:
        if f.ci95_low is None or f.ci95_high is None:
            return f"{f.slope / 1024:.1f}"
        return f"{f.slope / 1024:.1f} [{f.ci95_low / 1024:.1f} to {f.ci95_high / 1024:.1f}]"

    fx, fy = fits
    detail = f"{display_name(x)} {kib(fx)}, {display_name(y)} {kib(fy)} KiB per connection"
    apart = False
    if None not in (fx.ci95_low, fx.ci95_high, fy.ci95_low, fy.ci95_high):
        apart = _number(fx.ci95_low) > _number(fy.ci95_high) or _number(fy.ci95_low) > _number(fx.ci95_high)
    return {
        "points": counts,
        "ratio": fx.slope / fy.slope,
        "detail": detail,
        "x": fx.slope / 1024,
        "y": fy.slope / 1024,
        "apart": apart,
    }


def require(condition: Any, statement: str) -> str:
    """Nothing, when the data bear out ``statement``, the verdict the page's words state; else
    an error naming it, so that a page whose words the data contradict is never rendered."""
    if not condition:
        raise UsageError(f"the tables contradict the page: {statement}")
    return ""


def render_page(template: Path, run_dir: Path) -> str:
    """The page ``template`` gives with the tables of the run in ``run_dir``."""
    tables = RunTables(run_dir)

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template.parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(FILTERS)
    env.filters.update(utc=utc, model_term=model_term, tr=lambda t: display_name(str(t)))
    env.tests["contains"] = lambda text, part: part in str(text or "")
    facts = tables.facts()
    groups = {g["name"]: g for g in facts.get("spec", {}).get("groups", [])}

    def group(name: str) -> SpecGroupRecord:
        if name not in groups:
            raise UsageError(f"{run_dir}: run.json has no spec group {name!r}")
        return groups[name]

    try:
        return env.get_template(template.name).render(
            t=tables.row,
            rows=tables.rows,
            run=facts,
            group=group,
            study=published(),
            power=CpuPowerModel(),
            invalid_trials=lambda: invalid_trials(tables.rows("trials")),
            verdict_counts=lambda: verdict_counts(tables.rows("table1")),
            key_match=lambda: key_match(tables.rows("table1")),
            memory_matched=lambda target, x, y, upto=None: memory_matched(
                tables.rows("memory_points"), target, x, y, upto
            ),
            require=require,
        )
    except jinja2.TemplateError as e:
        line = f" line {e.lineno}" if isinstance(e, jinja2.TemplateSyntaxError) else _template_line(e, template)
        raise UsageError(f"{template}{line}: {e}") from None
    except UsageError as e:
        raise UsageError(f"{template}{_template_line(e, template)}: {e}") from None


def _template_line(e: BaseException, template: Path) -> str:
    """`` line N``: the template's line a rendering error came from (Jinja keeps it in the traceback)."""
    lines = [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename.endswith(template.name)]
    return f" line {lines[-1]}" if lines else ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dnscost.report.docpage", description=__doc__.split("\n\n")[0])
    p.add_argument("template", type=Path)
    p.add_argument("run_dir", type=Path)
    p.add_argument("page", type=Path)
    p.add_argument("--check", action="store_true", help="do not write: exit 1 if the page differs")
    a = p.parse_args(argv)
    try:
        text = render_page(a.template, a.run_dir)
    except UsageError as e:
        print(f"docpage: {e}", file=sys.stderr)
        return 2
    if not a.check:
        a.page.write_text(text, encoding="utf-8")
        return 0
    old = a.page.read_text(encoding="utf-8") if a.page.is_file() else ""
    if old == text:
        return 0
    diff = difflib.unified_diff(old.splitlines(), text.splitlines(), str(a.page), "rendered", lineterm="", n=0)
    print("\n".join(list(diff)[:40]))
    print(f"docpage: {a.page} is not what {a.run_dir}'s tables give: render it again", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
