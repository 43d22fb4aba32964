"""Comparing two stored runs (``dnscost compare RUN_A RUN_B``): the same metrics side by side,
matched by their keys, with the spread of each side and whether the difference stands out of it.

Runs from machines that differ in what decides the figures (CPU model, number of CPUs, kernel
major.minor, cgroup version, energy source), or made with a different ``--network`` (where the
kernel's packet work lands decides what the target is charged), are refused unless forced.

The ``headline`` table's figures (CPU per query, ratios to UDP and to persistent connections,
handshake costs, memory per connection: ``dnscost.analysis.headline``) come first, each with
its interval over rounds; ``rel_diff`` is (B - A) / A.

Metrics measured by repetitions (answered qps, CPU-µs per query and kWh per day at 10 000 qps of
the establishment and connections trials, the UDP baseline) are given as the median of the valid
repetitions with their min..max range; the difference is *significant* when the medians differ by
more than the two half-ranges together, and unknown (None) with fewer than two repetitions on a
side. Fitted metrics (memory per connection, cost-model terms) are given with their 95 %
intervals; the difference is significant when the intervals do not overlap.

A side that is not a finished run (still ``running``, ``interrupted``, ``incomplete``, ``failed``)
gets a note saying how many of its trials are done, and a trial whose record is damaged one naming
the file (:func:`dnscost.analysis.load.damage_notes`). Two runs with no figure measured in both
are refused (:class:`NothingInCommon`).

A regression gate (``--fail-on 'METRIC>+X%'``, :class:`Gate`, :func:`gate`) fails on every cell
of ``METRIC`` whose relative difference lies beyond ``X`` % in the direction given *and* is
significant as above; a cell whose significance is unknown (one repetition on a side) cannot
fail it and is counted apart, and a gate that could judge no cell at all is a usage error (a
gate that cannot fail is no gate).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from dnscost.analysis import Analysis, analyze
from dnscost.analysis.load import damage_notes, run_network, status_note
from dnscost.analysis.stats import median
from dnscost.analysis.tables import CELL, JOULES_PER_KWH, REFERENCE_QPS, SECONDS_PER_DAY
from dnscost.contract import Row
from dnscost.errors import UsageError
from dnscost.transports import DEFAULT_KEY_TYPE

__all__ = [
    "CompareRow",
    "Comparison",
    "Gate",
    "GateResult",
    "NothingInCommon",
    "Repeatability",
    "compare",
    "gate",
    "incompatibilities",
]


def _kernel_release(kernel: Any) -> str | None:
    m = re.match(r"(\d+)\.(\d+)", str(kernel or ""))
    return f"{m[1]}.{m[2]}" if m else None


def _energy_source(machine: Row) -> str | None:
    if "energy_source" in machine:
        return str(machine["energy_source"])
    readable = machine.get("rapl_readable", machine.get("rapl"))
    return None if readable is None else ("rapl" if readable else "model")


MACHINE_FACTS: dict[str, Callable[[Row], Any]] = {
    "cpu model": lambda m: m.get("cpu_model"),
    "CPUs": lambda m: m.get("cpus"),
    "kernel": lambda m: _kernel_release(m.get("kernel")),
    "cgroup version": lambda m: m.get("cgroup_version"),
    "energy source": _energy_source,
}
"""What two runs' machines must share to be compared, read from run.json's ``machine``."""


def incompatibilities(machine_a: Row, machine_b: Row) -> list[str]:
    """How two runs' machines differ in :data:`MACHINE_FACTS` (empty when comparable)."""
    out = []
    for name, read in MACHINE_FACTS.items():
        a, b = read(machine_a), read(machine_b)
        if a != b:
            out.append(f"{name} {a!r} vs {b!r}")
    return out


@dataclass(frozen=True)
class CompareRow:
    """One metric of one key in both runs. ``diff`` is B - A, ``ratio`` B / A; ``low``/``high``
    are the range (``spread`` = ``"range"``, min..max over valid repetitions) or the 95 %
    interval (``"ci95"``)."""

    table: str
    metric: str
    key: str
    a: float | None
    b: float | None
    diff: float | None
    ratio: float | None
    a_low: float | None
    a_high: float | None
    b_low: float | None
    b_high: float | None
    spread: str
    significant: bool | None

    @property
    def rel_diff(self) -> float | None:
        """(B - A) / A, None when either is missing or A is 0."""
        return self.diff / self.a if self.diff is not None and self.a else None

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "rel_diff": self.rel_diff}


@dataclass
class Comparison:
    """Two runs compared: their paths and ids, how their machines differ (non-empty only when
    forced), and one :class:`CompareRow` per metric and key, A's keys first."""

    run_a: Path
    run_b: Path
    id_a: str
    id_b: str
    machine_differences: list[str] = field(default_factory=list)
    target_differences: list[str] = field(default_factory=list)
    """One line per target compared across versions or places (A's and B's name and version)."""
    rows: list[CompareRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """One line per side that is not a finished run, and per trial whose record is damaged."""

    def render(self) -> str:
        """A readable text table, one section per source table."""
        lines = [f"A: {self.run_a} ({self.id_a})", f"B: {self.run_b} ({self.id_b})", *self.notes]
        if self.machine_differences:
            lines.append(
                "WARNING: compared across machines or set-ups (forced): " + "; ".join(self.machine_differences)
            )
        lines += [f"target versions differ: {d}" for d in self.target_differences]
        lines.append(
            "spread: min..max over valid repetitions (rounds), or the 95 % interval of a fit; "
            "significant: the difference exceeds both spreads together (fits: the intervals do not overlap)"
        )
        header = ["metric", "key", "A", "B", "B-A", "B/A", "A spread", "B spread", "significant"]
        for table in dict.fromkeys(r.table for r in self.rows):
            body = [header]
            for r in (r for r in self.rows if r.table == table):
                body.append(
                    [
                        r.metric,
                        r.key,
                        _fmt(r.a),
                        _fmt(r.b),
                        _fmt(r.diff),
                        _fmt(r.ratio),
                        _span(r.a_low, r.a_high),
                        _span(r.b_low, r.b_high),
                        {True: "yes", False: "no", None: "?"}[r.significant],
                    ]
                )
            widths = [max(len(row[i]) for row in body) for i in range(len(header))]
            lines += ["", f"[{table}]"]
            for row in body:
                cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
                lines.append("  ".join(cells).rstrip())
        if not self.rows:
            lines.append("no metric in common")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Repeatability:
    """How two runs of one spec agree on the headline ratios (``bench/repeatability``): the
    ``headline`` rows whose metric is a ratio or a share (CPU per query over UDP's, qps over
    UDP's, one query per connection over persistent, shares of reconnections resumed), each
    run's value the median over its rounds, and ``|B - A| / A`` for those measured in both."""

    tolerance: float
    rows: list[CompareRow]
    differences: list[float]
    """``|B - A| / A`` of every row measured in both runs, in the rows' order."""

    @classmethod
    def of(cls, comparison: Comparison, tolerance: float = 0.10) -> Repeatability:
        rows = [r for r in comparison.rows if r.table == "headline" and ("ratio" in r.metric or "share" in r.metric)]
        return cls(tolerance, rows, [abs(r.rel_diff) for r in rows if r.rel_diff is not None])

    @property
    def within(self) -> int:
        return sum(1 for d in self.differences if d <= self.tolerance)

    @property
    def median(self) -> float | None:
        """The median difference (the upper one of an even count)."""
        ordered = sorted(self.differences)
        return ordered[len(ordered) // 2] if ordered else None

    @property
    def largest(self) -> CompareRow | None:
        both = [r for r in self.rows if r.rel_diff is not None]
        return max(both, key=lambda r: abs(r.rel_diff or 0.0)) if both else None

    def summary(self) -> str:
        """``N of M headline ratios within ±10 %, median difference X %, largest Y %``."""
        if self.median is None or self.largest is None:
            return "no headline ratio in both runs"
        return (
            f"{self.within} of {len(self.differences)} headline ratios within ±{100 * self.tolerance:.0f} %, "
            f"median difference {100 * self.median:.1f} %, largest {100 * abs(self.largest.rel_diff or 0.0):.1f} %"
        )


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
        return f"{x:.4g}"
    return f"{x:,.4g}" if abs(x) < 1e4 else f"{x:,.0f}"


def _span(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"{_fmt(low)}..{_fmt(high)}"


@dataclass(frozen=True)
class _Side:
    value: float | None
    low: float | None
    high: float | None
    n: int


_Metrics = dict[tuple[str, str, str], _Side]
"""(table, metric, key) -> one side's figure."""


def _key(parts: list[tuple[str, Any]]) -> str:
    text = (f"{v:g}" if isinstance(v, float) else str(v) for k, v in parts)
    return " ".join(f"{k}={t}" if k else t for (k, v), t in zip(parts, text, strict=True) if v is not None)


def _repeated(values: list[float]) -> _Side:
    return _Side(median(values), min(values, default=None), max(values, default=None), len(values))


def _kwh_per_day(r: Row) -> float | None:
    e, q = r["energy_marginal_j"], r["queries_answered"]
    return e / q * REFERENCE_QPS * SECONDS_PER_DAY / JOULES_PER_KWH if e is not None and q else None


_PER_TRIAL: dict[str, Callable[[Row], float | None]] = {
    "answered_qps": lambda r: r["answered_qps"],
    "cpu_us_per_query": lambda r: r["cpu_us_per_query"],
    "latency_p99_us": lambda r: r.get("latency_p99_us"),
    "kwh_per_day_at_10k_qps": _kwh_per_day,
}

_GROUP_KEYS = {
    "establishment": CELL,
    "connections": ("target", "transport", "connections"),
}


def _label_value(r: Row, k: str) -> Any:
    """A cell's value in its label: none for 0-RTT off and for the default key (runs made before
    those axes have the same labels)."""

    if k == "early_data" and not r[k]:
        return None
    if k == "cert_key" and r[k] == DEFAULT_KEY_TYPE:
        return None
    return r[k]


def _metrics(a: Analysis, alias: dict[str, str] | None = None) -> _Metrics:
    """One side's figures; ``alias`` renames targets in the keys (:func:`target_pairs`)."""
    out: _Metrics = {}
    names = alias or {}
    trials = [{**r, "target": names.get(r["target"], r["target"])} for r in a.tables["trials"].rows]
    searches: dict[str, list[float]] = {}
    capacities: dict[str, list[float]] = {}
    for doc, r in zip(a.trials, trials, strict=True):
        if r["kind"] == "capacity":
            found = doc.get("search")
            best = found.get("max_qps") if isinstance(found, dict) else None
            parts = [("", r["target"]), ("", r["transport"]), ("profile", r.get("profile"))]
            if not r.get("profile"):
                parts += [("lifetime", r.get("lifetime")), ("connections", r.get("connections"))]
            values = capacities.setdefault(_key(parts), [])
            if r["valid"] and isinstance(best, int | float):
                values.append(float(best))
        if r["kind"] == "search":
            found = doc.get("search")
            best = found.get("max_qps") if isinstance(found, dict) else None
            values = searches.setdefault(_key([("", r["target"])]), [])
            if r["valid"] and isinstance(best, int | float):
                values.append(float(best))
    for r in a.tables["headline"].rows:
        label = _key([("", names.get(r["target"], r["target"])), ("", r["transport"]), ("", r["profile"])])
        out[("headline", r["figure"], label)] = _Side(r["value"], r["low"], r["high"], r["n"])
    for label, values in searches.items():
        out[("baseline", "udp_max_qps", label)] = _repeated(values)
    for label, values in capacities.items():
        out[("capacity", "capacity_qps", label)] = _repeated(values)
    for group, keys in _GROUP_KEYS.items():
        load = [r for r in trials if r["analysis"] == group and r["kind"] == "load"]
        grouped: dict[str, list[Row]] = {}
        for r in load:
            label = _key([(k if k not in ("target", "transport") else "", _label_value(r, k)) for k in keys])
            grouped.setdefault(label, []).append(r)
        for label, rows in grouped.items():
            for metric, read in _PER_TRIAL.items():
                if group == "connections" and metric == "kwh_per_day_at_10k_qps":
                    continue
                values = [v for r in rows if r["valid"] and (v := read(r)) is not None]
                out[(group, metric, label)] = _repeated(values)
    for r in a.tables["memory_fit"].rows:
        label = _key([("", names.get(r["target"], r["target"])), ("", r["transport"])])
        for kind in ("user", "kernel"):
            out[("memory_fit", f"{kind}_bytes_per_connection", label)] = _Side(
                r[f"{kind}_bytes_per_connection"], r[f"{kind}_ci95_low"], r[f"{kind}_ci95_high"], r["points"]
            )
    for r in a.tables["cost_model"].rows:
        label = _key([("", names.get(r["target"], r["target"])), ("", r["transport"])])
        out[("cost_model", f"{r['term']}_us", label)] = _Side(r["us"], r["ci95_low"], r["ci95_high"], 0)
    return out


_FITTED = {"memory_fit", "cost_model"}


_FITTED_HEADLINE = {"memory_bytes_per_connection", "cpu_us_per_connection_second"}


def _spread_kind(table: str, metric: str) -> str:
    if table in _FITTED or (table == "headline" and metric in _FITTED_HEADLINE):
        return "ci95"
    return "range"


def _significant(table: str, metric: str, a: _Side, b: _Side) -> bool | None:
    if a.value is None or b.value is None:
        return None
    if _spread_kind(table, metric) == "ci95":
        if None in (a.low, a.high, b.low, b.high):
            return None
        return bool(a.high < b.low or b.high < a.low)  # type: ignore[operator]
    if a.n < 2 or b.n < 2 or a.low is None or a.high is None or b.low is None or b.high is None:
        return None
    return abs(b.value - a.value) > (a.high - a.low) / 2 + (b.high - b.low) / 2


def target_pairs(a: Analysis, b: Analysis) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """Targets the two runs name differently or measured at different versions, paired by their
    adapter (``dnsdist`` and ``dnsdist@sid``; two builds ``dnsdist@PATH``) when each run has one
    of that adapter: both are compared under the adapter's name. Returns each side's renaming and
    one line per pair naming the difference."""

    def tokens(x: Analysis) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for t in dict.fromkeys(r["target"] for r in x.tables["trials"].rows):
            out.setdefault(str(t).partition("@")[0], []).append(str(t))
        return out

    ta, tb = tokens(a), tokens(b)
    va, vb = a.run.get("versions") or {}, b.run.get("versions") or {}
    alias_a: dict[str, str] = {}
    alias_b: dict[str, str] = {}
    lines = []
    for base in ta.keys() & tb.keys():
        if len(ta[base]) != 1 or len(tb[base]) != 1:
            continue
        x, y = ta[base][0], tb[base][0]
        if x == y and va.get(x) == vb.get(y):
            continue
        alias_a[x], alias_b[y] = base, base
        lines.append(f"{base}: A is {x} {va.get(x) or '?'}, B is {y} {vb.get(y) or '?'}")
    return alias_a, alias_b, sorted(lines)


def compare_analyses(a: Analysis, b: Analysis) -> list[CompareRow]:
    """Every metric of either analysis, matched by table, metric and key (A's order, then B's
    keys A lacks); targets of one adapter at different versions or places are matched
    (:func:`target_pairs`)."""
    alias_a, alias_b, _ = target_pairs(a, b)
    ma, mb = _metrics(a, alias_a), _metrics(b, alias_b)
    empty = _Side(None, None, None, 0)
    rows = []
    for k in [*ma, *(k for k in mb if k not in ma)]:
        sa, sb = ma.get(k, empty), mb.get(k, empty)
        if sa.value is None and sb.value is None:
            continue
        both = sa.value is not None and sb.value is not None
        rows.append(
            CompareRow(
                table=k[0],
                metric=k[1],
                key=k[2],
                a=sa.value,
                b=sb.value,
                diff=sb.value - sa.value if both else None,  # type: ignore[operator]
                ratio=sb.value / sa.value if both and sa.value else None,  # type: ignore[operator]
                a_low=sa.low,
                a_high=sa.high,
                b_low=sb.low,
                b_high=sb.high,
                spread=_spread_kind(k[0], k[1]),
                significant=_significant(k[0], k[1], sa, sb),
            )
        )
    return rows


class NothingInCommon(UsageError):
    """The two runs have no figure measured in both (no cell in common, or a side with no
    finished trial): there is nothing to compare."""


def _done_cells(a: Analysis) -> set[str]:
    """The cells of a run with a finished trial: trial IDs without their round."""
    return {re.sub(r"-r\d+$", "", str(t.get("id"))) for t in a.trials if t.get("status") == "done"}


def side_notes(side: str, run_dir: Path, a: Analysis) -> list[str]:
    """What a reader of a comparison must know about one side: the run is not finished (its
    status and how many of its trials are done), and which trials' records are damaged."""
    status = status_note(a.run, a.trials)
    notes = [f"{side} {status}"] if status else []
    return notes + [f"{side}: {line}" for line in damage_notes(run_dir, a.trials)]


def compare(run_a: Path, run_b: Path, *, force: bool = False) -> Comparison:
    """Analyses both runs and compares every metric they share. Raises
    :class:`dnscost.errors.UsageError` when a directory holds no run, or when the machines are
    incompatible (see :func:`incompatibilities`) and ``force`` is false, and
    :class:`NothingInCommon` when no figure is measured in both."""
    a, b = analyze(run_a), analyze(run_b)
    differences = incompatibilities(a.run.get("machine") or {}, b.run.get("machine") or {})
    net_a, net_b = run_network(a.run), run_network(b.run)
    if net_a != net_b:
        differences.append(f"network {net_a!r} vs {net_b!r}")
    if differences and not force:
        raise UsageError(
            f"{run_a} and {run_b} were measured on incompatible machines or set-ups ({'; '.join(differences)}): "
            "pass --force to compare them anyway"
        )
    notes = side_notes("A", run_a, a) + side_notes("B", run_b, b)
    rows = compare_analyses(a, b)
    if not any(r.a is not None and r.b is not None for r in rows):
        why = "".join(f"; {n}" for n in notes if " trials done" in n)
        common = sorted(_done_cells(a) & _done_cells(b))
        if common:
            raise NothingInCommon(
                f"{run_a} and {run_b} have no figure measured in both: "
                + (f"their {len(common)} cells in common" if len(common) > 1 else "their one cell in common")
                + f" ({', '.join(common[:3])}{', ...' * (len(common) > 3)}) "
                + ("yield" if len(common) > 1 else "yields")
                + f" no figure compare sets side by side (a rate, a cost, a fit){why}"
            )
        raise NothingInCommon(f"{run_a} and {run_b} have no figure measured in both (no cell in common{why})")
    return Comparison(
        run_a=run_a,
        run_b=run_b,
        id_a=str(a.run.get("run_id", run_a.name)),
        id_b=str(b.run.get("run_id", run_b.name)),
        machine_differences=differences,
        target_differences=target_pairs(a, b)[2],
        rows=rows,
        notes=notes,
    )


@dataclass(frozen=True)
class Gated:
    """A metric a gate may name: what it is, and which way it moves when it regresses (``>``:
    a rise is worse, as CPU, memory and latency; ``<``: a fall is, as rates and shares)."""

    what: str
    worse: Literal[">", "<"]


GATED_METRICS: dict[str, Gated] = {
    "cpu_us_per_query": Gated("target CPU-µs per answered query (UDP's in the headline; every load cell's)", ">"),
    "cpu_ratio_to_udp": Gated("CPU per query over UDP's, persistent connections (headline)", ">"),
    "cpu_ratio_to_persistent": Gated("CPU per query at one query per connection over persistent (headline)", ">"),
    "cpu_us_per_handshake": Gated("target CPU-µs per full, resumed or 0-RTT handshake (headline)", ">"),
    "resumed_share": Gated("share of the handshakes that resumed where the client asked to (headline)", "<"),
    "memory_bytes_per_connection": Gated("user + kernel bytes per idle connection, fitted (headline)", ">"),
    "user_bytes_per_connection": Gated("user bytes per idle connection, fitted (memory_fit)", ">"),
    "kernel_bytes_per_connection": Gated("kernel bytes per idle connection, fitted (memory_fit)", ">"),
    "latency_p99_us": Gated("p99 latency of every load cell, µs", ">"),
    "answered_qps": Gated("answered queries a second of every load cell, and UDP's (headline)", "<"),
    "capacity_per_core_qps": Gated("queries a second per core at the CPU per query measured (headline)", "<"),
    "udp_max_qps": Gated("the UDP search's highest rate with loss below its bound (baseline)", "<"),
    "capacity_qps": Gated("a capacity search's highest rate meeting its loss and p99 objective (capacity)", "<"),
    "qps_share_of_udp": Gated("answered qps over UDP's, persistent connections (headline)", "<"),
    "j_per_query": Gated("joules per query over UDP (headline)", ">"),
    "cpu_us_per_connection_second": Gated("target CPU-µs per idle connection-second, fitted (headline)", ">"),
}
"""What ``--fail-on`` may name, and the direction each one regresses in (``dnscost compare``;
docs/experiments.md, "A regression gate")."""

_GATE = re.compile(r"^(?P<metric>[a-z0-9_]+)(?P<op>[<>])(?P<pct>[+-]\d+(?:\.\d+)?)%$")


@dataclass(frozen=True)
class Gate:
    """``METRIC>+X%`` (fails when B rose more than X % over A) or ``METRIC<-X%`` (fell more), in the
    direction that is a regression of METRIC (:data:`GATED_METRICS`)."""

    metric: str
    op: str
    percent: float

    @classmethod
    def parse(cls, text: str) -> Gate:
        """Raises :class:`UsageError` naming what is wrong: a malformed gate, an unknown metric,
        or a bound in the direction that is not a regression of its metric (``cpu_us_per_query<+10%``
        would fail on an improvement and pass a regression)."""
        m = _GATE.match(text.replace(" ", ""))
        if not m:
            raise UsageError(f"--fail-on {text!r}: write METRIC>+X% or METRIC<-X% (e.g. 'cpu_us_per_query>+5%')")
        metric, op, percent = m["metric"], m["op"], float(m["pct"])
        gated = GATED_METRICS.get(metric)
        if gated is None:
            raise UsageError(f"--fail-on {text!r}: unknown metric {metric!r} (one of {', '.join(GATED_METRICS)})")
        if op != gated.worse or m["pct"][0] != ("+" if op == ">" else "-"):
            sign, way = ("+", "rise") if gated.worse == ">" else ("-", "fall")
            raise UsageError(
                f"--fail-on {text!r}: {metric} regresses when it {way}s: write {metric}{gated.worse}{sign}X% "
                f"(fails when B's {metric} {way}s more than X % from A's)"
            )
        if op == "<" and percent <= -100:
            raise UsageError(f"--fail-on {text!r}: {metric} cannot fall by 100 % or more: this gate cannot fail")
        return cls(metric, op, percent)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.percent:+g}%"

    def beyond(self, rel_diff: float) -> bool:
        """Whether a relative difference (B - A) / A lies beyond this gate's bound."""
        bound = self.percent / 100
        return rel_diff > bound if self.op == ">" else rel_diff < bound


@dataclass(frozen=True)
class GateResult:
    """What the gates found: one line per failing cell, and how many cells each gate judged
    (significance known) and could not judge (one repetition on a side)."""

    failures: list[str]
    judged: dict[str, int]
    unjudged: dict[str, int]

    def summary(self) -> str:
        parts = [
            f"{g}: {self.judged[g]} cells judged"
            + (f", {self.unjudged[g]} not (one repetition on a side)" if self.unjudged[g] else "")
            for g in self.judged
        ]
        n = len(self.failures)
        verdict = f"{n} regression{'s' if n > 1 else ''}" if n else "no regression"
        return f"gate: {verdict} ({'; '.join(parts)})"


def gate(comparison: Comparison, gates: list[Gate]) -> GateResult:
    """Every cell of every gate's metric measured in both runs: a failure line when its
    difference is beyond the gate and significant. Raises :class:`UsageError` for a gate that
    judged no cell (its metric in neither run, or no cell with an interval on both sides)."""
    failures: list[str] = []
    judged: dict[str, int] = {}
    unjudged: dict[str, int] = {}
    for g in gates:
        rows = [r for r in comparison.rows if r.metric == g.metric and r.rel_diff is not None]
        known = [r for r in rows if r.significant is not None]
        judged[str(g)], unjudged[str(g)] = len(known), len(rows) - len(known)
        if not known:
            why = "measured in both runs" if not rows else "with an interval on both sides (two repetitions or more)"
            raise UsageError(f"--fail-on {g}: no cell of {g.metric} {why}: this gate cannot fail")
        for r in known:
            if r.significant and g.beyond(r.rel_diff or 0.0):
                failures.append(
                    f"regression: {r.metric} [{r.table}] {r.key}: {_fmt(r.a)} -> {_fmt(r.b)} "
                    f"({100 * (r.rel_diff or 0.0):+.1f} %, beyond {g.percent:+g} %; "
                    f"A {_span(r.a_low, r.a_high)}, B {_span(r.b_low, r.b_high)})"
                )
    return GateResult(failures, judged, unjudged)
