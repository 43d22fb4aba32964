"""The capacity planner (``dnscost plan``, the report's what-if table): from a run's cost model
and a traffic mix, the cores, memory and energy per day each target of the run needs, with
intervals. Pure: rows of the run's ``trials`` and ``memory_points`` tables and the mix in (client
profiles are read by the caller and handed in), a plan out. ``docs/capacity.md`` is the reference.

A mix is a mean rate ``Q`` (qps), a peak factor ``p`` (the peak rate is ``p x Q``) and shares
``s_i`` summing to 1, each a transport with a connection shape or a client profile. A share
becomes, per query, ``h_i`` handshakes (a share ``r_i`` of them resumed; for tcp, connections)
and ``c_i`` connection-seconds (:class:`Shape`). At a rate ``q`` its counts per second are
``q_i = s_i q`` queries, ``F_i = q_i h_i (1 - r_i)`` full and ``R_i = q_i h_i r_i`` resumed
handshakes, and ``N_i = q_i c_i`` connections held (connection-seconds per second). For a target
whose cost model (:mod:`dnscost.analysis.costmodel`) gives CPU-µs ``a`` per unit of each term::

    CPU(q)   = sum_i  q_i a_query + F_i a_full + R_i a_resumed + N_i a_connection_second   [CPU-µs/s]
    cores    = max(1, ceil(CPU(p Q) / 1e6))                                                   [cores]
    memory   = B + sum_i N_i(p Q) x (u_i + k_i)                                               [bytes]
    energy   = sum_i CPU_i(Q) x j_i x 86 400 / 3.6e6                                          [kWh/day]

``u`` and ``k`` are the user and kernel bytes per connection of the memory fit (``memory_fit``),
``B`` the target's memory idle with its cache filled (the smallest idle baseline, user + kernel, of
its valid load trials: the target as started, before earlier trials left memory in it),
``j`` the joules above idle per CPU-µs the run measured for the transport (``energy_marginal_j``
÷ ``target_cpu_us`` of its valid load trials: RAPL, or the CPU power model). Every count scales
with the rate, so CPU at peak is ``p`` times CPU at the mean rate; energy is for a day at the
mean rate.

Intervals. CPU: the plan is evaluated on each of the cost model's bootstrap resamples (the same
resamples, seed and identification that give the ``cost_model`` table its intervals), each
transport's resample ``b`` paired with the others' ``b``; the interval holds the central 95 % of
those totals. A resample that does not identify a term the mix needs is left out (the plan says
over how many it is); a fit with too few trials for a bootstrap enters every resample at its
estimate (the plan names it: its uncertainty is not in the interval). Cores: the CPU interval
rounded up the same way. Memory: conservative, the low ends of the user and kernel slopes' 95 %
intervals (clamped at 0) times the connections, added to ``B``, and the high ends. Energy: each
resample's CPU per transport times the lowest and the highest joules per CPU-µs the transport's
trials measured, the 2.5th percentile of the one and the 97.5th of the other.

A term the mix needs (a count above 0) that the run does not identify leaves CPU, cores and
energy "not identified" for that target, with the term and why; never a number. Memory is
judged on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnscost.analysis.costmodel import RESAMPLES, TransportFit, fit_transports
from dnscost.analysis.loadmodel import Price, busy_ranges, events, fit_load, gap_share, price, solve_mix
from dnscost.analysis.stats import median
from dnscost.analysis.tables import JOULES_PER_KWH, SECONDS_PER_DAY, memory_fit_rows, reference_key
from dnscost.contract import ClientProfile, Row
from dnscost.errors import UsageError
from dnscost.population import replay_of
from dnscost.transports import TRANSPORTS

__all__ = [
    "DEFAULT_QPS_PER_CONNECTION",
    "NOT_IDENTIFIED",
    "STANDARD_MIXES",
    "WHAT_IF_QPS",
    "CapacityPlan",
    "Estimate",
    "Mix",
    "RunModel",
    "Shape",
    "Share",
    "SharePlan",
    "TargetPlan",
    "mix_from_fields",
    "parse_mix",
    "plan",
    "run_model",
    "what_if_rows",
]

DEFAULT_QPS_PER_CONNECTION = 10.0
"""A connection-oriented share's queries per second per connection when the mix does not say:
the study's Table I (1 000 connections at 10 000 qps)."""
IDENTIFIED = "identified"
NOT_IDENTIFIED = "not identified"
LEVEL = 0.95
"""The intervals' coverage."""
SHARE_TOLERANCE = 1e-6
"""Shares must sum to 1 within this."""

ProfileLoader = Callable[[str], ClientProfile]
"""A client profile by name (``dnscost.spec.load_profile``); ValueError when there is none."""


# --- The mix ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """How one share's queries use connections, per query: ``handshakes_per_query`` (for tcp,
    connections opened per query), ``resumed_share`` of those resumed, and
    ``connection_s_per_query`` (connection-seconds per query, so connections held = rate x it);
    None for one query per connection, whose connections are held as long as the run's
    one-query trials of the transport measured (per target)."""

    transport: str
    handshakes_per_query: float
    resumed_share: float
    connection_s_per_query: float | None


@dataclass(frozen=True)
class Share:
    """One share of a mix: as given (``label``), its part of the queries, its shape."""

    label: str
    share: float
    shape: Shape


@dataclass(frozen=True)
class Mix:
    """The traffic to plan for: mean rate, peak factor and shares (summing to 1)."""

    qps: float
    peak: float
    shares: tuple[Share, ...]
    population: bool = False
    """A population's classes: per target, those over a transport the run has no trial of on it
    are left out and the rest take the rate (as a replay leaves out the classes a target does
    not serve)."""

    @property
    def peak_qps(self) -> float:
        return self.qps * self.peak


_SHARE_FIELDS = ("share", "transport", "profile", "lifetime", "resumption", "qps_per_connection")


def _fail(where: str, reason: str) -> UsageError:
    return UsageError(f"{where}: {reason}")


def _number(where: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(where, f"{name}: expected a number, got {value!r}")
    return float(value)


def _lifetime(where: str, value: Any) -> tuple[float | None, int | None]:
    """A lifetime as (seconds, queries), either None; (None, None) lives forever."""
    from dnscost.spec import lifetime_fields

    if value in ("forever", "persistent"):
        return None, None
    try:
        life = lifetime_fields(value if isinstance(value, str) else "")
    except ValueError as e:
        raise _fail(where, f"lifetime: {e}") from None
    if life["duration_ms"] is not None and life["duration_ms"] <= 0:
        raise _fail(where, f"lifetime: {value!r} is not a positive duration")
    return (life["duration_ms"] / 1000 if life["duration_ms"] is not None else None), life["queries"]


def _connected_shape(
    transport: str, seconds: float | None, queries: int | None, resumption: float, per_connection: float
) -> Shape:
    """A connection-oriented transport's shape: each connection carries ``per_connection`` qps
    and is renewed after ``seconds`` or ``queries``, whichever comes first (never, without
    either); one query per connection is held as long as the run measured."""
    if queries == 1:
        return Shape(transport, 1.0, resumption, None)
    renewals_per_s = max(1 / seconds if seconds else 0.0, per_connection / queries if queries else 0.0)
    return Shape(transport, renewals_per_s / per_connection, resumption, 1 / per_connection)


def _profile_shape(where: str, profile: ClientProfile) -> Shape:
    """A client profile's shape. A client makes ``queries_per_resolution`` queries every
    ``query_interval_ms`` over ``connections`` connections. When it closes a connection idle for
    ``idle_timeout_ms`` and that is shorter than the interval, every resolution opens its
    connections afresh and holds them for the idle timeout (or the lifetime, if shorter);
    otherwise it keeps them, renewed at their lifetime."""
    transport = profile.get("transport")
    if transport not in TRANSPORTS:
        raise _fail(where, f"profile: transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    interval_ms = profile.get("query_interval_ms")
    if isinstance(interval_ms, bool) or not isinstance(interval_ms, int | float) or interval_ms <= 0:
        raise _fail(where, f"profile: query_interval_ms must be above 0, got {interval_ms!r}")
    per_resolution = float(profile.get("queries_per_resolution") or 1)
    connections = float(profile.get("connections") or 1)
    if transport == "udp":
        return Shape("udp", 0.0, 0.0, 0.0)
    resumption = float(profile.get("resumption") or 0.0) if transport != "tcp" else 0.0
    interval_s = float(interval_ms) / 1000
    life = profile.get("lifetime") or {}
    life_s = float(duration) / 1000 if (duration := life.get("duration_ms")) else None
    life_q = int(queries) if (queries := life.get("queries")) else None
    idle_ms = profile.get("idle_timeout_ms")
    if idle_ms is not None and float(idle_ms) / 1000 < interval_s:
        held_s = min(float(idle_ms) / 1000, life_s or math.inf)
        per_connection = per_resolution / connections
        opened = connections * (math.ceil(per_connection / life_q) if life_q else 1.0)
        return Shape(str(transport), opened / per_resolution, resumption, connections * held_s / per_resolution)
    client_qps = per_resolution / interval_s
    return _connected_shape(str(transport), life_s, life_q, resumption, client_qps / connections)


def _share(where: str, raw: Mapping[str, Any], load_profile: ProfileLoader, label: str | None) -> Share:
    """One share from its fields (:data:`_SHARE_FIELDS`), validated."""
    unknown = sorted(set(raw) - set(_SHARE_FIELDS))
    if unknown:
        raise _fail(where, f"unknown field {unknown[0]!r} (known: {', '.join(_SHARE_FIELDS)})")
    if "share" not in raw:
        raise _fail(where, "share: missing (the share of the queries, 0 to 1)")
    share = _number(where, "share", raw["share"])
    if not 0 < share <= 1:
        raise _fail(where, f"share: expected above 0 and at most 1, got {share:g}")
    transport = raw.get("transport")
    if "profile" in raw:
        for knob in ("lifetime", "resumption", "qps_per_connection"):
            if knob in raw:
                raise _fail(where, f"{knob}: a profile sets its own connection behaviour")
        name = raw["profile"]
        if not isinstance(name, str) or not name:
            raise _fail(where, f"profile: expected a profile name, got {name!r}")
        try:
            profile = load_profile(name)
        except ValueError as e:
            raise _fail(where, f"profile: {e}") from None
        shape = _profile_shape(where, profile)
        if transport is not None and transport != shape.transport:
            raise _fail(where, f"transport: profile {name!r} is {shape.transport}, not {transport}")
        return Share(label or name, share, shape)
    if transport not in TRANSPORTS:
        raise _fail(where, f"transport: expected one of {', '.join(TRANSPORTS)} or a profile, got {transport!r}")
    if transport == "udp":
        for knob in ("lifetime", "resumption", "qps_per_connection"):
            if knob in raw:
                raise _fail(where, f"{knob}: udp has no connections")
        return Share(label or "udp", share, Shape("udp", 0.0, 0.0, 0.0))
    seconds, queries = _lifetime(where, raw.get("lifetime", "forever"))
    resumption = _number(where, "resumption", raw.get("resumption", 0.0))
    if not 0 <= resumption <= 1:
        raise _fail(where, f"resumption: expected 0 to 1, got {resumption:g}")
    if resumption and transport == "tcp":
        raise _fail(where, "resumption: tcp has no TLS to resume")
    if resumption and seconds is None and queries is None:
        raise _fail(where, "resumption: a connection that lives forever never resumes")
    per_connection = _number(where, "qps_per_connection", raw.get("qps_per_connection", DEFAULT_QPS_PER_CONNECTION))
    if per_connection <= 0:
        raise _fail(where, f"qps_per_connection: expected above 0, got {per_connection:g}")
    if queries == 1 and "qps_per_connection" in raw:
        raise _fail(where, "qps_per_connection: a connection carries one query (lifetime 1q)")
    shape = _connected_shape(str(transport), seconds, queries, resumption, per_connection)
    given = [f"{k}={raw[k]}" for k in ("lifetime", "resumption", "qps_per_connection") if k in raw]
    return Share(label or ":".join([str(transport), *given]), share, shape)


def mix_from_fields(
    qps: Any,
    peak: Any,
    shares: Sequence[Mapping[str, Any]],
    load_profile: ProfileLoader,
    where: str = "mix",
    labels: Sequence[str] | None = None,
) -> Mix:
    """A mix from its fields (as a mix file holds them; :func:`parse_mix` reads the command
    line's into them): ``qps`` above 0, ``peak`` at least 1 (None: 1), and shares (each with
    ``share`` and either ``transport`` and its shape or ``profile``) whose ``share`` fields sum
    to 1. UsageError naming the field otherwise."""
    if qps is None:
        raise _fail(where, "qps: missing (the mean rate, queries per second)")
    rate = _number(where, "qps", qps)
    if rate <= 0:
        raise _fail(where, f"qps: expected above 0, got {rate:g}")
    factor = _number(where, "peak", 1.0 if peak is None else peak)
    if factor < 1:
        raise _fail(where, f"peak: expected at least 1 (the peak rate ÷ the mean rate), got {factor:g}")
    if not shares:
        raise _fail(where, "share: no share given")
    parsed = tuple(
        _share(f"{where}: share {k + 1}", s, load_profile, labels[k] if labels else None) for k, s in enumerate(shares)
    )
    total = sum(s.share for s in parsed)
    if abs(total - 1) > SHARE_TOLERANCE:
        raise _fail(where, f"share: the shares sum to {total:g}, not 1")
    return Mix(rate, factor, parsed)


def _share_value(where: str, text: str) -> float:
    text = text.strip()
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise _fail(where, f"share: {text!r} is not a number (give each share as SHAPE=SHARE, e.g. udp=0.7)") from None


def parse_mix(text: str, qps: Any, peak: Any, load_profile: ProfileLoader, where: str = "--mix") -> Mix:
    """A mix from the command line: comma-separated ``SHAPE=SHARE`` (the share a fraction or a
    percentage; the last ``=`` separates it). A shape is a client profile's name (or a JSON
    file), or a transport followed by ``:`` options: a lifetime (``persistent``, ``30s``,
    ``1q``, ``100q``, or ``lifetime=...``; both a duration and a count only in a mix file, since
    ``,`` separates shares), ``resumption=R``,
    ``qps_per_connection=N``, or ``profile=NAME``. Examples: ``udp=0.7,chromium-1s-google=0.3``;
    ``dot:1s:resumption=0.5=1``."""
    shares: list[dict[str, object]] = []
    labels: list[str] = []
    items = [i.strip() for i in text.split(",")]
    if not any(items):
        raise _fail(where, "no share given (example: udp=0.7,chromium-1s-google=0.3)")
    for k, item in enumerate(items):
        at = f"{where}: share {k + 1} ({item})"
        shape, eq, value = item.rpartition("=")
        if not eq or not shape:
            raise _fail(at, "give it as SHAPE=SHARE (example: udp=0.7)")
        fields: dict[str, object] = {"share": _share_value(at, value)}
        head, *options = shape.split(":")
        if head in TRANSPORTS:
            fields["transport"] = head
        elif options:
            raise _fail(at, f"transport: {head!r} is not one of {', '.join(TRANSPORTS)}")
        else:
            fields["profile"] = head
        for option in options:
            name, is_set, setting = option.partition("=")
            if not is_set:
                fields["lifetime"] = name  # a bare lifetime: persistent, forever, 30s, 1q, 100q
            elif name in ("lifetime", "profile"):
                fields[name] = setting
            elif name in ("resumption", "qps_per_connection"):
                try:
                    fields[name] = float(setting)
                except ValueError:
                    raise _fail(at, f"{name}: {setting!r} is not a number") from None
            else:
                raise _fail(at, f"unknown option {name!r} (lifetime, resumption, qps_per_connection, profile)")
        shares.append(fields)
        labels.append(shape)
    return mix_from_fields(qps, peak, shares, load_profile, where, labels)


def mix_from_population(
    doc: Mapping[str, object],
    source: str,
    qps: Any,
    peak: Any,
    moves: Sequence[str] = (),
    load_profile: ProfileLoader | None = None,
) -> Mix:
    """A population (``dnscost population``'s TOML, parsed; from ``source``) as a mix at ``qps``:
    each class a share, its part of the queries as the replay sends them (its clients times a
    member's rate), its shape its profile's. ``moves``: what-ifs, each ``CLASS:FRACTION=SHAPE``
    (``udp-rate-1e0:0.33=doh:persistent``): that fraction of the class's queries moved to
    ``SHAPE``, a shape as ``--mix`` takes it."""
    if qps is None:
        raise _fail(source, "qps: missing (the mean rate, queries per second: --qps)")
    replay = replay_of(doc, source, rate=_number(source, "qps", qps))
    total = sum(float(k["config"].get("rate") or 0.0) for k in replay.classes)
    shares: dict[str, Share] = {}
    for k in replay.classes:
        profile = k["config"].get("profile")
        assert profile is not None  # replay_of gives every class its profile
        share = float(k["config"].get("rate") or 0.0) / total
        shares[k["name"]] = Share(k["name"], share, _profile_shape(f"{source}: class {k['name']}", profile))
    extra: list[Share] = []
    for move in moves:
        where = f"--move {move}"
        head, eq, shape = move.partition("=")
        name, colon, fraction = head.rpartition(":")
        if not eq or not colon or not shape:
            raise _fail(where, "give it as CLASS:FRACTION=SHAPE (example: udp-rate-1e0:0.33=doh:persistent)")
        if name not in shares:
            raise _fail(where, f"no class {name!r} in {source} (its classes: {', '.join(shares)})")
        part = _share_value(where, fraction)
        if not 0 < part <= 1:
            raise _fail(where, f"fraction: expected above 0 and at most 1, got {part:g}")
        moved = parse_mix(f"{shape}=1", 1.0, None, load_profile or _no_profiles, where).shares[0]
        was = shares[name]
        shares[name] = Share(was.label, was.share * (1 - part), was.shape)
        extra.append(Share(f"{name}:{part:g}={moved.label}", was.share * part, moved.shape))
    kept = tuple(s for s in (*shares.values(), *extra) if s.share > 0)
    factor = _number(source, "peak", 1.0 if peak is None else peak)
    if factor < 1:
        raise _fail(source, f"peak: expected at least 1 (the peak rate ÷ the mean rate), got {factor:g}")
    return Mix(float(qps), factor, kept, population=True)


def _served(tm: TargetModel, mix: Mix) -> tuple[Mix, list[str]]:
    """``mix`` as ``tm`` is planned: a population's classes over transports the run measured on
    it, their shares scaled to sum to 1, and the names of those left out."""
    if not mix.population:
        return mix, []
    kept = [s for s in mix.shares if s.shape.transport in tm.fits]
    left = [s.label for s in mix.shares if s.shape.transport not in tm.fits]
    if not left or not kept:
        return mix, []
    total = sum(s.share for s in kept)
    return Mix(mix.qps, mix.peak, tuple(Share(s.label, s.share / total, s.shape) for s in kept), True), left


def _no_profiles(name: str) -> ClientProfile:
    raise ValueError(f"no client profile {name!r} here (give a transport and its shape)")


# --- The run's model -------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class TargetModel:
    """What a run says about one target: its cost model per transport, memory fit per
    transport (``memory_fit`` rows), its idle memory with the cache filled (user + kernel
    bytes, the smallest baseline of its valid load trials: the bed is reused, and memory that
    earlier trials left in the target raises later baselines), joules above idle per CPU-µs per
    transport, and how long a one-query connection stayed
    open per transport (median over its valid one-query trials)."""

    target: str
    version: str | None
    fits: dict[str, TransportFit]
    load_fits: dict[str, TransportFit]
    busy_range: dict[str, tuple[float, float]]
    memory: dict[str, Row]
    base_bytes: float | None
    joules_per_cpu_us: dict[str, list[float]]
    energy_sources: list[str]
    one_query_hold_s: dict[str, float]


@dataclass(frozen=True, eq=False)
class RunModel:
    """Every target's :class:`TargetModel`, in the run's order."""

    targets: tuple[TargetModel, ...]


def run_model(trials: list[Row], memory_points: list[Row]) -> RunModel:
    """The run's model from its ``trials`` and ``memory_points`` tables' rows. Like the cost
    model it uses the default certificate key's trials; energy, idle memory and one-query hold
    times come from valid load trials."""
    fits = fit_transports(trials)
    load_fits = fit_load(trials)
    memory = memory_fit_rows(memory_points)
    usable = [r for r in reference_key(trials) if r["valid"] and r["kind"] == "load"]
    order = list(dict.fromkeys(str(r["target"]) for r in trials if r["kind"] in ("load", "idle")))
    out = []
    for target in order:
        mine = [r for r in usable if r["target"] == target]
        joules: dict[str, list[float]] = {}
        holds: dict[str, list[float]] = {}
        for r in mine:
            cpu, energy = r.get("target_cpu_us"), r.get("energy_marginal_j")
            if cpu and cpu > 0 and energy is not None:
                joules.setdefault(str(r["transport"]), []).append(float(energy) / float(cpu))
            if (
                r.get("lifetime") == "1q"
                and r.get("connections_established")
                and r.get("connection_seconds") is not None
            ):
                holds.setdefault(str(r["transport"]), []).append(
                    float(r["connection_seconds"]) / float(r["connections_established"])
                )
        base = [
            float(r["rss_baseline_bytes"]) + float(r["kernel_baseline_bytes"])
            for r in mine
            if r.get("rss_baseline_bytes") is not None and r.get("kernel_baseline_bytes") is not None
        ]
        versions = [str(r["target_version"]) for r in trials if r["target"] == target and r.get("target_version")]
        out.append(
            TargetModel(
                target=target,
                version=versions[0] if versions else None,
                fits={f.transport: f for f in fits if str(f.target) == target},
                load_fits={f.transport: f for f in load_fits if str(f.target) == target},
                busy_range=busy_ranges(trials, target),
                memory={str(m["transport"]): m for m in memory if str(m["target"]) == target},
                base_bytes=min(base, default=None),
                joules_per_cpu_us=joules,
                energy_sources=sorted({str(r["energy_source"]) for r in mine if r.get("energy_source")}),
                one_query_hold_s={t: float(median(v) or 0.0) for t, v in holds.items()},
            )
        )
    return RunModel(tuple(out))


# --- The plan --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A planned quantity: its value and 95 % interval (None where there is none), or, when
    the run cannot give it, no value, status "not identified" and why."""

    value: float | None
    low: float | None
    high: float | None
    status: str = IDENTIFIED
    reason: str | None = None

    @staticmethod
    def missing(reasons: Sequence[str]) -> Estimate:
        return Estimate(None, None, None, NOT_IDENTIFIED, "; ".join(dict.fromkeys(reasons)))


@dataclass(frozen=True)
class SharePlan:
    """One share's counts per second at the peak rate for one target, and the CPU-µs per second
    its estimates give (None when a term it needs is not identified)."""

    label: str
    transport: str
    share: float
    qps: float
    handshakes_full_per_s: float
    handshakes_resumed_per_s: float
    connections_held: float | None
    cpu_us_per_s: float | None


@dataclass(frozen=True)
class TargetPlan:
    """One target's plan: CPU-µs per second and cores at the peak rate, memory at the peak
    rate (bytes), energy of a day at the mean rate (kWh, above idle), connections held at the
    peak rate; per share, its counts; notes on the intervals."""

    target: str
    version: str | None
    cpu_us_per_s: Estimate
    cores: Estimate
    memory_bytes: Estimate
    energy_kwh_per_day: Estimate
    connections_held: float | None
    energy_source: str | None
    resamples: int
    shares: list[SharePlan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cores_serving: int = 1
    """The cores the target's CPU at peak is spread over (``--cores``, else the fewest that carry
    it): the load model's busy share is of their time."""
    busy_share: float | None = None
    """The share of those cores' time the target is busy at peak, as the load model solves it."""
    busy_share_measured: tuple[float, float] | None = None
    """The busy shares the load fits of the mix's transports were measured over, lowest to
    highest (a note names each transport whose own range the plan's busy share is outside)."""


@dataclass(frozen=True)
class CapacityPlan:
    """A mix planned on every target of a run."""

    mix: Mix
    targets: list[TargetPlan]


def _counts(shape: Shape, qps: float, hold_s: float | None) -> dict[str, float] | None:
    """A share's counts per second of each cost-model term at ``qps``; None when its
    connections are held as long as the run measured and it did not."""
    per_query = shape.connection_s_per_query if shape.connection_s_per_query is not None else hold_s
    if per_query is None:
        return None
    handshakes = qps * shape.handshakes_per_query
    return {
        "query": qps,
        "full_handshake": handshakes * (1 - shape.resumed_share),
        "resumed_handshake": handshakes * shape.resumed_share,
        "connection_second": qps * per_query,
    }


@dataclass
class _Cpu:
    """CPU of every share at one rate: per share its value (None: not identified) and its value
    in every resample (NaN where the resample does not identify a term it needs); the target's
    busy share solved with them and the cores it is a share of."""

    values: list[float | None] = field(default_factory=list)
    draws: list[np.ndarray[Any, np.dtype[np.float64]]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    constant: list[str] = field(default_factory=list)
    bounded: list[str] = field(default_factory=list)
    bootstrapped: bool = False
    busy_share: float | None = None
    cores: int = 1
    loaded: bool = False
    """Whether the load model priced any share (else every one is at its cost at saturation)."""


def _cpu(tm: TargetModel, mix: Mix, qps: float, cores: int | None = None) -> _Cpu:
    """Every share's CPU at ``qps``: the load model's where it identifies every term a share
    needs (its cost at the busy share the whole mix sets on ``cores``, by default the fewest
    that carry it; every share's events shorten the idle periods of each of those cores), else
    the constant cost model's (its cost at saturation, said in ``constant``)."""
    # What a share costs a busy target does not depend on the idle periods: it sets the cores.
    busy = sum(p.busy for s in mix.shares if (p := _price(tm, s, qps, 1.0, _Cpu())) is not None)
    n = cores if cores is not None else max(1, math.ceil(busy / 1e6))
    rate = sum(events(c) for s in mix.shares if (c := _share_counts(tm, s, qps)) is not None)
    out = _Cpu(cores=n)
    priced = [_price(tm, s, qps, gap_share(rate / n), out) for s in mix.shares]
    known = [p for p in priced if p is not None]
    idle, idle_draws = solve_mix(known, n * 1e6)
    out.busy_share = 1 - idle if out.loaded else None
    for q in priced:
        out.values.append(None if q is None else q.busy + q.wake * idle)
        out.draws.append(np.full(RESAMPLES, np.nan) if q is None else q.busy_draws + q.wake_draws * idle_draws)
    return out


def _share_counts(tm: TargetModel, s: Share, qps: float) -> dict[str, float] | None:
    return _counts(s.shape, s.share * qps, tm.one_query_hold_s.get(s.shape.transport))


def _price(tm: TargetModel, s: Share, qps: float, gap: float, out: _Cpu) -> Price | None:
    """Share ``s`` of ``qps`` priced by the load model at ``gap`` (the share of long idle
    periods), else by the constant cost model; None, and why in ``out``, when neither prices
    it."""
    t = s.shape.transport
    counts = _share_counts(tm, s, qps)
    fit, load = tm.fits.get(t), tm.load_fits.get(t)
    if fit is None:
        out.missing.append(f"{t}: no valid trial of it in this run")
        return None
    if counts is None:
        out.missing.append(
            f"{t} connection_second: no valid one-query trial says how long such a connection stays open"
        )
        return None
    if load is None:
        p = Price(missing=f"{t}: no load fit")
    elif load.boot is None:  # a fit too small for intervals is not one to plan on
        n = len(load.y)
        p = Price(missing=f"{t}: its load fit has {n} trial{'s' if n != 1 else ''}, too few for an interval")
    else:
        p = price(load, counts, gap)
    if p.missing is not None:
        why = p.missing
        p = price(fit, counts)
        if p.missing is None:
            out.constant.append(f"{s.label} ({why})")
    else:
        out.loaded = True
    if p.missing is not None:
        out.missing.append(p.missing)
        return None
    out.fixed += p.fixed
    out.bounded += p.bounded
    out.bootstrapped |= p.bootstrapped
    return p


def _percentiles(draws: np.ndarray[Any, np.dtype[np.float64]]) -> tuple[float, float, int]:
    kept = draws[~np.isnan(draws)]
    if not len(kept):
        return math.nan, math.nan, 0
    tail = (1 - LEVEL) / 2 * 100
    return float(np.percentile(kept, tail)), float(np.percentile(kept, 100 - tail)), len(kept)


def _cores(cpu: Estimate) -> Estimate:
    def up(v: float | None) -> float | None:
        return float(max(1, math.ceil(v / 1e6))) if v is not None else None

    if cpu.value is None:
        return cpu
    return Estimate(up(cpu.value), up(cpu.low), up(cpu.high))


def _energy(tm: TargetModel, mix: Mix, cpu: _Cpu) -> tuple[Estimate, list[str]]:
    """Energy of a day at the mean rate from the shares' CPU at the mean rate."""
    if any(v is None for v in cpu.values):
        return Estimate.missing(["CPU not identified"]), []
    missing = [
        f"{t}: no valid load trial measured its energy"
        for t in dict.fromkeys(s.shape.transport for s in mix.shares)
        if not tm.joules_per_cpu_us.get(t)
    ]
    if missing:
        return Estimate.missing(missing), []
    day = SECONDS_PER_DAY / JOULES_PER_KWH
    value = 0.0
    low_draws = np.zeros(RESAMPLES)
    high_draws = np.zeros(RESAMPLES)
    for s, v, d in zip(mix.shares, cpu.values, cpu.draws, strict=True):
        j = tm.joules_per_cpu_us[s.shape.transport]
        value += (v or 0.0) * float(median(j) or 0.0)
        low_draws = low_draws + d * min(j)
        high_draws = high_draws + d * max(j)
    low = _percentiles(low_draws)[0]
    high = _percentiles(high_draws)[1]
    if not cpu.bootstrapped or math.isnan(low) or math.isnan(high):
        return Estimate(value * day, None, None), []  # as CPU: no interval
    return Estimate(value * day, low * day, high * day), []


def _memory(tm: TargetModel, shares: list[SharePlan]) -> tuple[Estimate, list[str]]:
    """Memory at the peak rate: the idle target's, plus the connections held times the bytes
    each costs (user + kernel), with conservative intervals."""
    missing: list[str] = []
    notes: list[str] = []
    if tm.base_bytes is None:
        missing.append("no valid load trial recorded the target's idle memory")
    value = low = high = tm.base_bytes or 0.0
    for s in shares:
        if s.connections_held is None:
            missing.append(f"{s.transport}: connections held unknown (no valid one-query trial)")
            continue
        if s.connections_held == 0:
            continue
        m = tm.memory.get(s.transport)
        user = m.get("user_bytes_per_connection") if m else None
        kernel = m.get("kernel_bytes_per_connection") if m else None
        if m is None or user is None or kernel is None:
            missing.append(f"{s.transport}: no idle trials measured its memory per connection")
            continue
        per = float(user) + float(kernel)
        if per <= 0:
            missing.append(f"{s.transport}: memory per connection fitted at {per:.3g} bytes, not above 0")
            continue
        given = [m.get(f"{kind}_ci95_{end}") for kind in ("user", "kernel") for end in ("low", "high")]
        bounds = [float(b) for b in given if b is not None]
        if len(bounds) < len(given):
            notes.append(
                f"held at its estimate in the interval: {s.transport} memory per connection "
                f"(a fit of {m.get('points')} points, no interval)"
            )
            bounds = [float(user), float(user), float(kernel), float(kernel)]
        ul, uh, kl, kh = (max(0.0, b) for b in bounds)  # bytes per connection are never below 0
        measured = m.get("max_connections")
        if measured is not None and s.connections_held > float(measured):
            notes.append(
                f"memory: {s.transport}'s {s.connections_held:,.0f} connections are beyond the "
                f"{float(measured):,.0f} its memory fit measured (extrapolated)"
            )
        value += s.connections_held * per
        low += s.connections_held * (ul + kl)
        high += s.connections_held * (uh + kh)
    if missing:
        return Estimate.missing(missing), []
    if not any(s.connections_held for s in shares):
        return Estimate(value, None, None), notes  # the idle target's memory alone: one measurement
    return Estimate(value, low, high), notes


def _target_plan(tm: TargetModel, given: Mix, cores: int | None = None) -> TargetPlan:
    mix, left_out = _served(tm, given)
    peak = _cpu(tm, mix, mix.peak_qps, cores)
    notes: list[str] = []
    if peak.constant:
        notes.append("at their cost at saturation (the load model does not price them): " + "; ".join(peak.constant))
    if peak.bounded:
        notes.append("terms at their fitted value, not told from 0: " + "; ".join(dict.fromkeys(peak.bounded)))
    if left_out:
        notes.append(f"left out, their transports not measured on it in this run: {', '.join(left_out)}")
    used = [t for t in dict.fromkeys(s.shape.transport for s in mix.shares) if t in tm.busy_range]
    ranges = {t: tm.busy_range[t] for t in used}
    measured = (min(r[0] for r in ranges.values()), max(r[1] for r in ranges.values())) if ranges else None
    u = peak.busy_share
    outside = [
        f"{t} {low:.3g}-{high:.3g}" for t, (low, high) in ranges.items() if u is not None and not low <= u <= high
    ]
    if outside and not peak.missing:
        notes.append(
            f"busy share {u:.3g} at peak is outside what the load fits measured (extrapolated): {', '.join(outside)}"
        )
    shares = []
    held_total: float | None = 0.0
    for s, v in zip(mix.shares, peak.values, strict=True):
        q = s.share * mix.peak_qps
        counts = _counts(s.shape, q, tm.one_query_hold_s.get(s.shape.transport))
        held = counts["connection_second"] if counts is not None else None
        held_total = held_total + held if held_total is not None and held is not None else None
        shares.append(
            SharePlan(
                label=s.label,
                transport=s.shape.transport,
                share=s.share,
                qps=q,
                handshakes_full_per_s=q * s.shape.handshakes_per_query * (1 - s.shape.resumed_share),
                handshakes_resumed_per_s=q * s.shape.handshakes_per_query * s.shape.resumed_share,
                connections_held=held,
                cpu_us_per_s=v,
            )
        )
    resamples = 0
    if peak.missing:
        cpu = Estimate.missing(peak.missing)
    else:
        value = sum(v or 0.0 for v in peak.values)
        low, high, resamples = _percentiles(sum(peak.draws, np.zeros(RESAMPLES)))
        if not peak.bootstrapped or resamples == 0:
            cpu = Estimate(value, None, None)
            notes.append("CPU: no interval (no fit the mix uses has a bootstrap)" if resamples else "CPU: no interval")
            resamples = 0
        else:
            cpu = Estimate(value, low, high)
            if resamples < RESAMPLES:
                notes.append(
                    f"CPU interval over the {resamples} of {RESAMPLES} resamples that identify every term the mix needs"
                )
        for f in dict.fromkeys(peak.fixed):
            notes.append(f"held at its estimate in the interval: {f}")
    memory, memory_notes = _memory(tm, shares)
    notes += memory_notes
    energy, _ = _energy(tm, mix, _cpu(tm, mix, mix.qps, peak.cores))
    return TargetPlan(
        target=tm.target,
        version=tm.version,
        cpu_us_per_s=cpu,
        cores=_cores(cpu),
        memory_bytes=memory,
        energy_kwh_per_day=energy,
        connections_held=held_total,
        energy_source="+".join(tm.energy_sources) or None,
        resamples=resamples,
        shares=shares,
        notes=notes,
        cores_serving=peak.cores,
        busy_share=peak.busy_share if not peak.missing else None,
        busy_share_measured=measured,
    )


def plan(mix: Mix, model: RunModel, cores: int | None = None) -> CapacityPlan:
    """The mix planned on every target of the run (module docstring: equations, intervals),
    its CPU spread over ``cores`` (None: the fewest that carry the peak)."""
    return CapacityPlan(mix, [_target_plan(tm, mix, cores) for tm in model.targets])


# --- The report's what-if table --------------------------------------------------------------

STANDARD_MIXES: tuple[tuple[str, str], ...] = (
    ("udp=1", "all udp"),
    ("udp=0.7,chromium-1s-google=0.3", "30 % doh from browsers (Chromium, a resolution a second, one connection kept)"),
    (
        "udp=0.7,dnss-60s-google=0.3",
        "30 % doh from stubs (dnss, a query a minute, a connection each, closed 30 s idle)",
    ),
    ("dot:1s=1", "all dot, connections of 1 s (10 qps each, no resumption)"),
    ("doh:persistent=1", "all doh, persistent connections (10 qps each)"),
)
"""The report's what-if mixes: the mix as ``dnscost plan --mix`` takes it, and what it is."""
WHAT_IF_QPS = (10_000, 50_000)
"""The report's what-if rates (mean rate; peak factor 1)."""


def what_if_rows(model: RunModel, load_profile: ProfileLoader) -> list[Row]:
    """One row per standard mix x rate x target: cores, memory and kWh per day with their
    intervals, or not identified and why (:data:`STANDARD_MIXES`, :data:`WHAT_IF_QPS`)."""
    out: list[Row] = []
    for text, what in STANDARD_MIXES:
        for qps in WHAT_IF_QPS:
            p = plan(parse_mix(text, qps, 1.0, load_profile), model)
            for t in p.targets:
                row: Row = {"mix": text, "description": what, "qps": qps, "target": t.target}
                for name, e in (
                    ("cpu_us_per_s", t.cpu_us_per_s),
                    ("cores", t.cores),
                    ("memory_bytes", t.memory_bytes),
                    ("kwh_per_day", t.energy_kwh_per_day),
                ):
                    row[name] = e.value
                    row[f"{name}_low"] = e.low
                    row[f"{name}_high"] = e.high
                    row[f"{name}_reason"] = e.reason
                row["connections_held"] = t.connections_held
                out.append(row)
    return out
