"""The study point by point: every number and statement of ``iscc2023.toml`` (read through
:func:`dnscost.study.published`, never copied here) beside what this run measured, with a
verdict. A statement this run cannot test says so ("not checked here", or "not measured here"
for what needs another kind of observation), never silently drops out.

Statements carry their figures in words ("about 20 %", "about 2x", "up to 15x"); each check below
reads the figure its statement names, the statement itself is the record's text. Figures the
record gives as numbers (``[table1_kwh]``, ``[baseline_udp]``, ``[wire_one_query]``) are read
from it, never repeated here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dnscost.analysis import Analysis
from dnscost.analysis.stats import LinearFit, fit_line
from dnscost.analysis.tables import reference_key
from dnscost.contract import Row
from dnscost.study import StudyUdp, WireCount, published

__all__ = ["AGREE", "DIFFER", "NOT_CHECKED", "NOT_MEASURED", "UNRESOLVED", "StudyPoint", "study_points"]

AGREE, DIFFER, NOT_MEASURED, NOT_CHECKED = "agrees", "differs", "not measured", "not checked here"
UNRESOLVED = "not resolved: the 95 % intervals overlap"
"""Two fitted figures whose intervals overlap: the run orders neither above the other."""
CONTEXT = "context (another machine)"
CLIENTS = "not measured by a study run: clients are observed apart (dnscost observe, docs/observe.md)"
FACTOR = 1.5
"""A ratio agrees with the study's when within this factor either way."""
SAME = 0.1
"""Two throughputs are "about the same" within this share; a drop "about 20 %" within ± this."""


@dataclass(frozen=True)
class StudyPoint:
    """One number or statement of the study beside ours."""

    section: str
    """The ``iscc2023.toml`` table it comes from."""
    study: str
    ours: str
    verdict: str


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value else None


def _rows(a: Analysis, name: str) -> list[Row]:
    table = a.tables.get(name)
    return list(table.rows) if table is not None else []


def _g(v: float | None, unit: str = "") -> str:
    return "—" if v is None else f"{v:.3g}{unit}"


def _within(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return NOT_MEASURED
    return AGREE if theirs / FACTOR <= ours <= theirs * FACTOR else DIFFER


def _all(checks: list[bool]) -> str:
    return NOT_MEASURED if not checks else (AGREE if all(checks) else DIFFER)


STUDY_RESOLVERS = ("dnsdist", "knot-resolver")
"""The resolvers the study measured: its statements about "both resolvers" and "every
transport" are about them, not about a target it did not run (CoreDNS, dnscost's own)."""


def _study_targets(a: Analysis) -> list[str]:
    """The run's targets the study measured too, else (a run without them) every target."""
    return [t for t in _targets(a) if t in STUDY_RESOLVERS] or _targets(a)


def _targets(a: Analysis) -> list[str]:
    names: dict[str, None] = {}
    for name in ("baseline", "memory_fit", "connections", "establishment", "table1"):
        for r in _rows(a, name):
            if r.get("target") is not None:
                names.setdefault(str(r["target"]), None)
    return list(names)


# --- [baseline_udp] ----------------------------------------------------------------------------


def _baseline(a: Analysis, section: Mapping[str, StudyUdp | str]) -> list[StudyPoint]:
    ours = {str(r.get("target")): r for r in _rows(a, "baseline")}
    out, capacity = [], {}
    for key, value in section.items():
        if not isinstance(value, dict):
            out.append(StudyPoint("baseline_udp", f"{key}: {value}", "", NOT_CHECKED))
            continue
        target = key.replace("_", "-")
        r = ours.get(target, {})
        sat, found = _num(r.get("udp_saturation_qps")), _num(r.get("udp_max_qps"))
        capacity[target] = (_num(value.get("answered_qps")), sat)
        out.append(
            StudyPoint(
                "baseline_udp",
                f"{target}: UDP answered {value.get('answered_qps')} qps, sent {value.get('sent_qps')} qps",
                f"{target}: {_g(sat)} qps at saturation (closed loop), {_g(found)} qps open loop < 1 % loss",
                CONTEXT if sat is not None or found is not None else NOT_MEASURED,
            )
        )
    if "dnsdist" in capacity and "knot-resolver" in capacity:
        (d_study, d_ours), (k_study, k_ours) = capacity["dnsdist"], capacity["knot-resolver"]
        theirs = d_study / k_study if d_study and k_study else None
        ours_ratio = d_ours / k_ours if d_ours and k_ours else None
        out.append(
            StudyPoint(
                "baseline_udp",
                f"dnsdist ÷ knot-resolver UDP capacity: {_g(theirs)}",
                f"{_g(ours_ratio)}",
                _within(ours_ratio, theirs),
            )
        )
    return out


# --- [memory] ----------------------------------------------------------------------------------


def _memory_fit(a: Analysis) -> dict[tuple[str, str], Row]:
    return {(str(r.get("target")), str(r.get("transport"))): r for r in _rows(a, "memory_fit")}


def _user(fit: dict[tuple[str, str], Row], target: str, transport: str) -> float | None:
    return _num(fit.get((target, transport), {}).get("user_bytes_per_connection"))


def _memory_points(a: Analysis, target: str, transport: str) -> dict[float, tuple[float, float]]:
    """The valid idle points of a target and transport: connections asked for → (connections
    held, user bytes above the idle baseline)."""
    out = {}
    for p in _rows(a, "memory_points"):
        if (p.get("target"), p.get("transport")) != (target, transport) or not p.get("valid"):
            continue
        asked, held = _num(p.get("connections")), _num(p.get("connections_held"))
        user = _num(p.get("rss_delta_bytes"))
        if asked is not None and user is not None:
            out[asked] = (held if held is not None else asked, user)
    return out


def _matched_user(a: Analysis, target: str, x: str, y: str) -> tuple[LinearFit | None, LinearFit | None, list[float]]:
    """User bytes per connection of two transports, each an OLS fit over only the connection
    counts measured valid for both (a fit that kept a point the other lost compares unlike
    with unlike), and those counts."""

    px, py = _memory_points(a, target, x), _memory_points(a, target, y)
    counts = sorted(set(px) & set(py))
    fits = [fit_line([points[c][0] for c in counts], [points[c][1] for c in counts]) for points in (px, py)]
    return fits[0], fits[1], counts


def _ordered(fx: LinearFit, fy: LinearFit, sign: int) -> bool | None:
    """Whether slope x lies above slope y (``sign`` 1) or below (-1) with the two 95 %
    intervals apart; None when the intervals overlap or a fit has none (two points)."""
    if None in (fx.ci95_low, fx.ci95_high, fy.ci95_low, fy.ci95_high):
        return None
    x_low, x_high = float(fx.ci95_low or 0.0), float(fx.ci95_high or 0.0)
    y_low, y_high = float(fy.ci95_low or 0.0), float(fy.ci95_high or 0.0)
    if x_low > y_high:
        return sign > 0
    if y_low > x_high:
        return sign < 0
    return None


def _fit_kib(f: LinearFit) -> str:
    if f.ci95_low is None or f.ci95_high is None:
        return _g(f.slope / 1024)
    return f"{_g(f.slope / 1024)} [{_g(f.ci95_low / 1024)} to {_g(f.ci95_high / 1024)}]"


def _kib(value: float | None) -> str:
    return _g(value / 1024 if value is not None else None)


def _counts_text(counts: list[float]) -> str:
    return "/".join(f"{c:,.0f}" for c in counts)


def _memory_statement(a: Analysis, statement: str) -> tuple[str, str]:
    fit, targets = _memory_fit(a), _targets(a)
    if statement.startswith("kernel memory per connection is the same"):
        parts, checks = [], []
        for t in targets:
            k = [_num(fit.get((t, x), {}).get("kernel_bytes_per_connection")) for x in ("tcp", "dot", "doh")]
            if all(v is not None and v > 0 for v in k):
                values = [v for v in k if v is not None]
                checks.append(max(values) / min(values) <= FACTOR)
                parts.append(f"{t}: kernel B/conn tcp {_g(k[0])}, dot {_g(k[1])}, doh {_g(k[2])}")
        return "; ".join(parts), _all(checks)
    pairs = {
        "both resolvers use more memory for DoT than for TCP": [(t, "dot", "tcp", 1) for t in targets],
        "knot-resolver uses more for DoH than for DoT": [("knot-resolver", "doh", "dot", 1)],
        "dnsdist uses less for DoH than for DoT": [("dnsdist", "doh", "dot", -1)],
    }
    for prefix, comparisons in pairs.items():
        if statement.startswith(prefix):
            parts, ordered = [], []
            for t, x, y, sign in comparisons:
                fx, fy, counts = _matched_user(a, t, x, y)
                if fx is not None and fy is not None:
                    ordered.append(_ordered(fx, fy, sign))
                    parts.append(
                        f"{t}: user KiB/conn {x} {_fit_kib(fx)}, {y} {_fit_kib(fy)} (95 % intervals) over the "
                        f"connections valid for both ({_counts_text(counts)}; every valid point: "
                        f"{x} {_kib(_user(fit, t, x))}, {y} {_kib(_user(fit, t, y))})"
                    )
            if ordered and None in ordered and False not in ordered:
                return "; ".join(parts), UNRESOLVED
            return "; ".join(parts), _all([o is True for o in ordered])
    if statement.startswith("memory is not the limiting factor below 400 000"):
        parts = []
        for (t, x), r in fit.items():
            u, kb = _num(r.get("user_bytes_per_connection")), _num(r.get("kernel_bytes_per_connection"))
            if u is not None and kb is not None:
                parts.append(f"{t} {x}: {(u + kb) * 400_000 / 2**30:.2g} GiB at 400 000")
        return "; ".join(parts), CONTEXT if parts else NOT_MEASURED
    return "", NOT_CHECKED


# --- [persistent] and [establishment] ----------------------------------------------------------


def _connections(a: Analysis, target: str, transport: str) -> list[Row]:
    rows = [
        r
        for r in _rows(a, "connections")
        if r.get("target") == target and r.get("transport") == transport and _num(r.get("qps_median")) is not None
    ]
    return sorted(rows, key=lambda r: _num(r.get("connections")) or 0.0)


def _persistent_qps(a: Analysis, target: str, transport: str, *others: str) -> tuple[float | None, float | None]:
    """Median qps at the fewest persistent connections measured valid for this transport and
    every one of ``others`` (Figure 4's first point common to them), and that count."""
    rows = _connections(a, target, transport)
    common = set.intersection(
        {_num(r.get("connections")) for r in rows},
        *({_num(r.get("connections")) for r in _connections(a, target, o)} for o in others),
    )
    rows = [r for r in rows if _num(r.get("connections")) in common]
    return (_num(rows[0].get("qps_median")), _num(rows[0].get("connections"))) if rows else (None, None)


def _persistent_statement(a: Analysis, statement: str) -> tuple[str, str]:
    targets = _targets(a)
    if statement.startswith("every connected transport is slower than UDP"):
        shares = [
            (str(r.get("target")), str(r.get("transport")), s)
            for r in _rows(a, "connections")
            if (s := _num(r.get("share_of_udp"))) is not None
        ]
        top = max(shares, key=lambda p: p[2], default=None)
        ours = f"highest share of UDP: {top[0]} {top[1]} {top[2]:.2f}" if top else ""
        return ours, _all([s < 1 for _, _, s in shares])
    if statement.startswith("dnsdist: DoT noticeably slower than TCP"):
        parts, checks = [], []
        for t in targets:
            (dot, n), (tcp, _) = _persistent_qps(a, t, "dot", "tcp"), _persistent_qps(a, t, "tcp", "dot")
            if dot and tcp:
                ratio = dot / tcp
                parts.append(f"{t}: DoT ÷ TCP {ratio:.2f} at {n:,.0f} connections (valid for both)")
                checks.append(ratio < 1 - SAME if t == "dnsdist" else abs(ratio - 1) <= SAME)
        return "; ".join(parts), _all(checks)
    if statement.startswith("DoH about half of the other connected transports"):
        parts, checks = [], []
        for t in _study_targets(a):
            doh, n = _persistent_qps(a, t, "doh", "tcp", "dot")
            known = [o for x, y in (("tcp", "dot"), ("dot", "tcp")) if (o := _persistent_qps(a, t, x, y, "doh")[0])]
            if doh and known:
                ratio = doh / (sum(known) / len(known))
                parts.append(f"{t}: DoH ÷ mean(TCP, DoT) {ratio:.2f} at {n:,.0f} connections (valid for all three)")
                checks.append(_within(ratio, 0.5) == AGREE)
        return "; ".join(parts), _all(checks)
    if statement.startswith("throughput drops as the number of connections grows"):
        parts = []
        drops: dict[str, float] = {}
        for t in targets:
            for x in ("tcp", "dot", "doh"):
                rows = _connections(a, t, x)
                if len(rows) >= 2:
                    first, last = _num(rows[0]["qps_median"]), _num(rows[-1]["qps_median"])
                    if first and last is not None:
                        drops[f"{t} {x}"] = 1 - last / first
                        parts.append(f"{t} {x}: {1 - last / first:+.0%}")
        checks = []
        if "dnsdist doh" in drops:
            checks.append(drops["dnsdist doh"] > SAME)
        if "dnsdist tcp" in drops:
            checks.append(drops["dnsdist tcp"] <= SAME)
        return "drop from fewest to most connections: " + "; ".join(parts) if parts else "", _all(checks)
    if statement.startswith("UDP to DoH: up to 70 % decrease"):
        doh_shares = [
            s for r in _rows(a, "connections") if r.get("transport") == "doh" and (s := _num(r.get("share_of_udp")))
        ]
        if not doh_shares:
            return "", NOT_MEASURED
        # Compared as what remains of UDP's throughput (0.30 for a 70 % decrease): a decrease of
        # 86 % leaves half of what 70 % does, which a comparison of decreases would hide.
        worst = min(doh_shares)
        return (
            f"largest decrease UDP → DoH: {1 - worst:.0%}, so {worst:.2f} of UDP remains against the study's 0.30",
            _within(worst, 0.3),
        )
    return "", NOT_CHECKED


def _establishment_qps(a: Analysis, target: str, transport: str, lifetime: str) -> float | None:
    for r in reference_key(_rows(a, "establishment")):
        if (
            r.get("target") == target
            and r.get("transport") == transport
            and (r.get("lifetime") or "forever") == lifetime
            and not r.get("resumption")
        ):
            return _num(r.get("qps_median"))
    return None


def _loss(a: Analysis, target: str, transport: str, lifetime: str) -> float | None:
    base, short = (
        _establishment_qps(a, target, transport, "forever"),
        _establishment_qps(a, target, transport, lifetime),
    )
    return 1 - short / base if base and short is not None else None


def _establishment_statement(a: Analysis, statement: str) -> tuple[str, str]:
    targets = _targets(a)
    rules: dict[str, tuple[str, Callable[[str, float], bool]]] = {
        "30 s lifetimes": ("30s", lambda x, loss: abs(loss - 0.2) <= SAME if x != "doh" else loss <= SAME),
        "1 s lifetimes": ("1s", lambda x, loss: loss <= SAME if x == "tcp" else loss > SAME),
    }
    for prefix, (lifetime, rule) in rules.items():
        if statement.startswith(prefix):
            parts, checks = [], []
            for t in targets:
                for x in ("tcp", "dot", "doh"):
                    loss = _loss(a, t, x, lifetime)
                    if loss is not None:
                        parts.append(f"{t} {x}: {loss:+.0%}")
                        checks.append(rule(x, loss))
            return ("loss against persistent: " + "; ".join(parts)) if parts else "", _all(checks)
    if statement.startswith("one query per connection: throughput collapses"):
        parts, checks = [], []
        udp = {str(r.get("target")): _num(r.get("udp_reference_qps")) for r in _rows(a, "baseline")}
        for t in _study_targets(a):
            for x in ("tcp", "dot", "doh"):
                one, ref = _establishment_qps(a, t, x, "1q"), udp.get(t)
                if one is not None and ref:
                    parts.append(f"{t} {x}: {one / ref:.2f} of UDP")
                    checks.append(one / ref < 0.25)
        return "; ".join(parts), _all(checks)
    return "", NOT_CHECKED


# --- [table1_kwh] and [table1_statements] ------------------------------------------------------


def _table1(a: Analysis) -> dict[tuple[str, str, str | None], Row]:
    return {
        (str(r.get("target")), str(r.get("transport")), r.get("lifetime")): r
        for r in _rows(a, "table1")
        if r.get("cert_key") in (None, "ecdsa-p256")
    }


_PROFILE = {"cx33_per_s": "30s", "cx1000_per_s": "1s", "one_query": "1q"}


def _table1_kwh(a: Analysis, section: Mapping[str, Mapping[str, float | dict[str, float]]]) -> list[StudyPoint]:
    cells = _table1(a)
    out = []
    for key, by_transport in section.items():
        target = key.replace("_", "-")
        for transport, value in by_transport.items():
            profiles = {None: value} if not isinstance(value, dict) else {_PROFILE[k]: v for k, v in value.items()}
            for lifetime, kwh in profiles.items():
                r = cells.get((target, transport, lifetime), {})
                label = f"{target} {transport}" + (f" {lifetime}" if lifetime else "")
                bound = "≤ " if r.get("below_saturation") else ""
                ours = (
                    f"{bound}{_g(_num(r.get('kwh_study_method')))} kWh (study's method"
                    f"{', below saturation: generator-bound' if bound else ''}), "
                    f"{_g(_num(r.get('kwh_model')))} kWh (cost model); ÷ UDP {_g(_num(r.get('ratio_to_udp')))} "
                    f"against the study's {_g(_num(r.get('study_ratio_to_udp')))}"
                )
                verdict = r.get("verdict")
                verdict = {"agree": AGREE, "differ": DIFFER}.get(str(verdict), NOT_MEASURED)
                if transport == "udp" and r:
                    verdict = CONTEXT
                out.append(StudyPoint("table1_kwh", f"{label}: {kwh} kWh/day at 10 000 qps", ours, verdict))
    return out


def _ratio(a: Analysis, transport: str, lifetime: str) -> list[tuple[str, float]]:
    return [
        (t, v)
        for (t, x, lt), r in _table1(a).items()
        if x == transport and lt == lifetime and (v := _num(r.get("ratio_to_udp"))) is not None
    ]


def _table1_statement(a: Analysis, statement: str) -> tuple[str, str]:
    if statement.startswith("fair connection use (30 s)"):
        parts, checks = [], []
        for transport, theirs in (("dot", 2.0), ("doh", 4.0)):
            for t, v in _ratio(a, transport, "30s"):
                parts.append(f"{t} {transport}: {v:.2g}x UDP")
                checks.append(_within(v, theirs) == AGREE)
        return "; ".join(parts), _all(checks)
    if statement.startswith("1 s lifetimes: up to 15x for DoH"):
        ratios = _ratio(a, "doh", "1s")
        if not ratios:
            return "", NOT_MEASURED
        t, v = max(ratios, key=lambda p: p[1])
        return f"largest: {t} {v:.2g}x UDP", _within(v, 15.0)
    if statement.startswith("one query per connection: unsustainable"):
        cells = _table1(a)
        udp, doh = cells.get(("dnsdist", "udp", None), {}), cells.get(("dnsdist", "doh", "1q"), {})
        u, d = _num(udp.get("kwh_study_method")), _num(doh.get("kwh_study_method"))
        ratio = _num(doh.get("ratio_to_udp"))  # against each round's own UDP reference
        record = published()["table1_kwh"].get("dnsdist", {})
        doh_1q, udp_kwh = record.get("doh"), record.get("udp")
        study_ratio = (
            doh_1q["one_query"] / udp_kwh if isinstance(doh_1q, dict) and isinstance(udp_kwh, int | float) else None
        )
        return f"dnsdist: {_g(u)} kWh (UDP) against {_g(d)} kWh (DoH one query), {_g(ratio)}x", _within(
            ratio, study_ratio
        )
    return "", NOT_CHECKED


# --- [wire_one_query] --------------------------------------------------------------------------


def _wire(a: Analysis, section: Mapping[str, WireCount]) -> list[StudyPoint]:
    rows = [
        r
        for r in reference_key(_rows(a, "wire"))
        if r.get("transport") == "udp" or (r.get("lifetime") == "1q" and not r.get("resumption"))
    ]
    out = []
    for transport, figure in section.items():
        mine = [r for r in rows if r.get("transport") == transport]
        packets = [(str(r.get("target")), _num(r.get("packets_per_query"))) for r in mine]
        octets = [(str(r.get("target")), _num(r.get("bytes_per_query"))) for r in mine]
        study_text = f"{transport}: {figure['messages']} messages" + (
            f", {figure['bytes']} bytes" if "bytes" in figure else ""
        )
        if "encrypted_dns_bytes" in figure:
            study_text += f" ({figure['encrypted_dns_bytes']} of them encrypted DNS)"
        ours = "; ".join(
            f"{t}: {_g(p)} packets, {_g(b)} payload bytes" for (t, p), (_, b) in zip(packets, octets, strict=True)
        )
        checks = [_within(p, float(figure["messages"])) == AGREE for _, p in packets if p is not None]
        out.append(StudyPoint("wire_one_query", study_text, ours, _all(checks)))
    return out


def study_points(a: Analysis) -> list[StudyPoint]:
    """Every number and statement of the study's record, in the record's order, beside ours."""
    record = published()
    out: list[StudyPoint] = []
    out += _baseline(a, record["baseline_udp"])
    memory = record["memory"]
    for s in memory["statements"]:
        out.append(StudyPoint("memory", s, *_memory_statement(a, s)))
    if "dnsdist_idle_buffer_release" in memory:
        out.append(
            StudyPoint(
                "memory",
                f"dnsdist idle buffer release: {memory['dnsdist_idle_buffer_release']}",
                "dnsdist's defaults",
                NOT_CHECKED,
            )
        )
    for s in record["persistent"]["statements"]:
        out.append(StudyPoint("persistent", s, *_persistent_statement(a, s)))
    establishment = record["establishment"]
    out.append(StudyPoint("establishment", f"{establishment['connections']} connections", "", CONTEXT))
    for s in establishment["statements"]:
        out.append(StudyPoint("establishment", s, *_establishment_statement(a, s)))
    out += _table1_kwh(a, record["table1_kwh"])
    for s in record["table1_statements"]["statements"]:
        out.append(StudyPoint("table1_statements", s, *_table1_statement(a, s)))
    out += _wire(a, record["wire_one_query"])
    for s in record["clients"]["statements"]:
        out.append(StudyPoint("clients", s, "", CLIENTS))
    return out
