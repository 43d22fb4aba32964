"""From a spec to the ordered list of trials. Pure: the same spec gives the same plan.

Each group's trials are the product of its transports, its sweep axes and its repetitions,
for every target that serves the transport. Knobs that mean nothing for a trial are
normalised away before duplicates are dropped: udp has no lifetime, resumption or open rate;
tcp no resumption; a connection that lives forever never resumes.

Trials run target by target (each target's cache is filled once), and within a target in
*rounds*: round ``r`` holds repetition ``r`` of every cell (a group with fewer repetitions
takes part in its first rounds only), in an order shuffled with a seed of its own
(:func:`round_seed`, recorded in every trial's plan entry), so that slow drift of the machine
lines up with no parameter. Every round that loads the target holds a UDP reference trial
(closed loop, at saturation): the spec's ``reference`` group when it has one (any UDP load
knobs, with as many repetitions as rounds), else one added with :data:`REFERENCE_KNOBS`. A
ratio to UDP divides values of one round, measured minutes apart
(:mod:`dnscost.analysis.rounds`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from dnscost.contract import (
    ClientProfile,
    DerivedRate,
    EngineConfig,
    GroupSettings,
    TrialKind,
    TrialParams,
    TrialRecord,
)
from dnscost.population import Replay, replay_of
from dnscost.shares import load_share
from dnscost.spec import Group, Spec, lifetime_fields
from dnscost.targets import served as served_by
from dnscost.targets.place import label_of
from dnscost.transports import DEFAULT_KEY_TYPE, POPULATION, TLS_TRANSPORTS

__all__ = [
    "REFERENCE_GROUP",
    "REFERENCE_KNOBS",
    "TrialPlan",
    "capacity_step",
    "client_qps",
    "engine_knobs",
    "estimate_s",
    "expand",
    "round_seed",
    "share_rate",
]


@dataclass(frozen=True)
class TrialPlan:
    """One trial to run: identity, parameters in the spec's vocabulary, and repetition."""

    id: str
    group: str
    kind: TrialKind
    target: str
    transport: str
    params: TrialParams
    rep: int
    round: int = 0
    """The round it runs in (its repetition: round ``r`` holds repetition ``r`` of every cell)."""
    round_seed: int | None = None
    """The seed its round's order was shuffled with (:func:`round_seed`)."""
    reference: str | None = None
    """For a rate given as a share of capacity (``"50%"``): the id of the saturation trial of
    the same cell and round whose answered rate it takes a share of (:func:`share_rate`)."""
    analysis: str = ""
    """The analysis that reads it: its group's ``analysis`` (``establishment`` for a group of
    QUIC cells named otherwise), else its group's name."""

    def to_dict(self) -> TrialRecord:
        return {
            "id": self.id,
            "group": self.group,
            "kind": self.kind,
            "target": self.target,
            "transport": self.transport,
            "params": self.params,
            "rep": self.rep,
            "round": self.round,
            "round_seed": self.round_seed,
            "reference": self.reference,
            "analysis": self.analysis or self.group,
        }


REFERENCE_GROUP = "reference"
"""The group of the UDP reference trials :func:`expand` adds to rounds that have none."""


_NOT_TLS: dict[str, object] = {"resumption": 0.0, "cert_key": None, "tls_group": None, "early_data": 0.0}
_NOT_DOH: dict[str, object] = {"doh_method": None, "doh_headers": None}
IRRELEVANT: dict[str, dict[str, object]] = {
    "udp": {"lifetime": "forever", "open_rate": None, **_NOT_TLS, **_NOT_DOH},
    "tcp": {**_NOT_TLS, **_NOT_DOH},
    "dot": {"early_data": 0.0, **_NOT_DOH},
    "doh": {"early_data": 0.0},
    "doq": _NOT_DOH,
    # The engine's DoH/3 sends POST or GET requests, with minimal headers.
    "doh3": {"doh_headers": None},
}
"""Per transport, the knobs that mean nothing for it and the value they are set to (0-RTT is
QUIC's)."""


def client_qps(profile: ClientProfile) -> float:
    """The queries per second one client of ``profile`` makes (as ``ClientProfile::apply`` in
    the engine counts them, which sets the rate the trial runs at)."""
    return float(profile.get("queries_per_resolution", 1)) * 1000.0 / float(profile["query_interval_ms"])


def _replay(p: dict[str, object], profile: ClientProfile, max_connections: int) -> dict[str, object]:
    """A trial's knobs when it replays clients of ``profile`` (the profile itself in
    ``profile``): ``clients`` of them, or when the group gives a ``rate`` as many as make it
    within ``max_connections``; connections as many as the clients keep, ``rate`` the queries
    per second they make together, resumption the profile's. Lifetime is the profile's to set
    (the engine applies it), so None here."""
    per_client = int(profile.get("connections", 1))
    rate, clients = p.get("rate"), p.get("clients")
    if isinstance(rate, int | float):
        clients = max(1, min(round(rate / client_qps(profile)), max_connections // per_client))
    if not isinstance(clients, int):
        raise TypeError(f"a replay's clients must be a count, not {clients!r}")
    return {
        **p,
        "profile": profile,
        "clients": clients,
        "connections": clients * per_client,
        "rate": round(clients * client_qps(profile), 3),
        "lifetime": None,
        "resumption": float(profile.get("resumption") or 0.0),
        "doh_method": None,
    }


def capacity_step(t: TrialPlan, rate: float) -> TrialPlan:
    """One step of the capacity search ``t``: a load trial at ``rate`` qps, open loop; for a
    replayed profile, as many clients as make that rate within the group's connections (so
    the step's own ``rate`` may fall short of it: capped)."""
    p: dict[str, object] = dict(t.params)
    profile = t.params.get("profile")
    if profile:
        p = _replay({**p, "rate": rate}, profile, int(t.params.get("max_connections", 10_000)))
    else:
        p["rate"] = float(rate)
    return dataclasses.replace(t, kind="load", params=cast(TrialParams, p))


def _normalise(kind: str, transport: str, p: dict[str, object]) -> dict[str, object]:
    p = {**p, **IRRELEVANT[transport]}
    if "profile" in p:  # a replay: lifetime and resumption are the profile's
        return p
    if p["lifetime"] == "forever":
        p["resumption"] = 0.0
    if not p["resumption"]:
        p["early_data"] = 0.0
    if kind == "idle":
        p.update(lifetime="forever", resumption=0.0, early_data=0.0, rate=None, in_flight=1)
    if kind in ("search", "capacity"):
        p.update(rate=None)
    return p


def _warmup_s(kind: str, transport: str, p: Mapping[str, object], settings: GroupSettings) -> float:
    """The warm-up: the group's, stretched so that every connection is open (at the open-rate
    ceiling, with margin for TLS handshakes) before the measured period starts."""
    warmup = float(settings["warmup"])
    open_rate, connections = p.get("open_rate"), p.get("connections")
    if transport != "udp" and isinstance(open_rate, int | float) and open_rate and isinstance(connections, int):
        opening = connections / open_rate * (1.5 if transport in TLS_TRANSPORTS else 1.2)
        warmup = max(warmup, math.ceil((opening + 0.5) * 10) / 10)
    return warmup


def _label(key: str, value: Any) -> str:
    short = {
        "connections": "c",
        "lifetime": "l",
        "resumption": "res",
        "early_data": "e",
        "rate": "q",
        "in_flight": "f",
        "open_rate": "o",
    }
    if key in ("doh_method", "doh_headers", "cert_key", "tls_group"):
        return str(value)
    if key == "profile":
        return str(value["name"])
    if key == "clients":
        return f"n{value}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{short[key]}{value}"


def _population_trials(g: Group, target: str, served: tuple[str, ...]) -> list[TrialPlan]:
    """A population group's trials on ``target``: one per rate (the population's own without
    one) and round, over the classes whose transports the target serves (none: no trial), of
    its ``population_classes`` when it names some."""
    population = g.settings["population"]
    only = population.get("only")
    classes = [c for c in population["classes"] if only is None or c["name"] in only]
    if not {str(c["transport"]) for c in classes} & set(served):
        return []
    rates = g.axes.get("rate", (None,))
    out = []
    for rate in rates:
        params: TrialParams = {
            "population": population["source"],
            "rate": rate,
            "duration_s": g.settings["duration"],
            "warmup_s": g.settings["warmup"],
            "timeout_s": g.settings["timeout"],
            "baseline_s": g.settings["baseline"],
            **_schedule(g.settings),
        }
        labels = [_label("rate", rate)] if len(rates) > 1 else []
        for rep in range(g.repetitions):
            tid = "-".join([g.name, label_of(target), POPULATION, *labels, f"r{rep}"])
            out.append(TrialPlan(tid, g.name, g.kind, target, POPULATION, params, rep, rep, analysis=g.analysis))
    return out


def population_replay(spec: Spec, t: TrialPlan, served: tuple[str, ...]) -> Replay:
    """A population trial's replay: its group's population at its rate, over the transports
    the target serves (the classes over the others left out, by name), only the group's
    ``population_classes`` when it names some."""
    g = next(g for g in spec.groups if g.name == t.group)
    population = g.settings["population"]
    rate = t.params.get("rate")
    qps = float(rate) if isinstance(rate, int | float) else None
    doc: dict[str, object] = {"class": population["classes"]}
    if "names" in population:
        doc["names"] = population["names"]
    # The names file's path is absolute: the source's directory does not move it.
    return replay_of(
        doc, population["source"], rate=qps, served=served, names="names" in population, only=population.get("only")
    )


def _group_trials(spec: Spec, g: Group, target: str, served: tuple[str, ...]) -> list[TrialPlan]:
    if "population" in g.settings:
        return _population_trials(g, target, served)
    swept = [k for k, v in g.axes.items() if len(v) > 1]
    out: list[TrialPlan] = []
    seen: set[tuple[Any, ...]] = set()
    for transport in g.transports:
        if transport not in served:
            continue
        for combo in itertools.product(*g.axes.values()):
            p = dict(zip(g.axes, combo, strict=True))
            if "profile" in p:
                profile = g.settings["profiles"][p["profile"]]
                if profile["transport"] != transport:
                    continue
                p = _replay(p, profile, int(g.settings["max_connections"]))
            else:
                p.pop("clients", None)
            p = _normalise(g.kind, transport, p)
            key = (transport, *sorted((k, str(v)) for k, v in p.items()))
            if key in seen:
                continue
            seen.add(key)
            # A lifetime longer than the measured period does not stretch it: the engine gives each
            # slot's first connection a uniform share of its lifetime, so renewals run at
            # connections ÷ lifetime from the start of the window.
            duration = g.settings["step_duration" if g.kind in ("search", "capacity") else "duration"]
            # The group's knobs (spec.SWEEPABLE, by name: held to TrialParams by test_contract).
            params = cast(TrialParams, dict(p))
            params.update(
                {
                    "duration_s": duration,
                    "warmup_s": _warmup_s(g.kind, transport, p, g.settings),
                    "timeout_s": g.settings["timeout"],
                    "baseline_s": g.settings["baseline"],
                }
            )
            if g.kind in ("search", "capacity"):
                params.update(
                    {
                        "max_loss": g.settings["max_loss"],
                        "start_qps": g.settings["start_qps"],
                        "max_qps": g.settings["max_qps"],
                        "precision": g.settings["precision"],
                        "max_steps": g.settings["max_steps"],
                    }
                )
            if g.kind != "idle" and p.get("rate") != "max":  # the open loop's spacing
                params.update(_schedule(g.settings))
            if g.kind == "capacity":
                params["max_p99_ms"] = g.settings["max_p99"] * 1000
                if "profile" in p:
                    params["max_connections"] = int(g.settings["max_connections"])
            labels = [
                _label(k, p[k])
                for k in swept
                if p.get(k) is not None
                and k not in IRRELEVANT[transport]
                and not (k == "early_data" and not p["resumption"])  # none without resumption
            ]
            if "profile" in p and "profile" not in swept:
                labels.insert(0, _label("profile", p["profile"]))
            for rep in range(g.repetitions):
                tid = "-".join([g.name, label_of(target), transport, *labels, f"r{rep}"])
                out.append(TrialPlan(tid, g.name, g.kind, target, transport, params, rep, rep, analysis=g.analysis))
    return out


def _share_trials(spec: Spec, g: Group, target: str, served: tuple[str, ...]) -> list[TrialPlan]:
    """The trials of a group at a share of capacity: every trial of the saturation group it
    names (``capacity_of``) over its transports, renamed, at the share (and the group's
    in-flight ceiling), each referencing the saturation trial of its cell and round."""
    ref = next(r for r in spec.groups if r.name == g.settings["capacity_of"])
    shares = g.axes["rate"]
    out = []
    for t in _group_trials(spec, ref, target, served):
        narrowed = all(t.params.get(k) in v for k, v in g.axes.items() if k != "rate" and t.params.get(k) is not None)
        if t.transport not in g.transports or not narrowed:
            continue
        cell, rnd = t.id[len(ref.name) :].rsplit("-r", 1)
        for share in shares:
            # A ladder's trials carry their share in their id (``-at3pct``); one share's do not.
            at = f"-at{share.rstrip('%')}pct" if len(shares) > 1 else ""
            params: TrialParams = {
                **t.params,
                "rate": share,
                "in_flight": g.settings.get("in_flight", t.params["in_flight"]),
                **_schedule(g.settings),
            }
            tid = f"{g.name}{cell}{at}-r{rnd}"
            out.append(dataclasses.replace(t, id=tid, group=g.name, params=params, reference=t.id, analysis=g.analysis))
    return out


def _schedule(settings: GroupSettings) -> TrialParams:
    """The open loop's spacing a group gives (spec.SCHEDULE_FIELDS), for its trials' params."""
    out: TrialParams = {}
    if "arrival" in settings:
        out["arrival"] = settings["arrival"]
    if "pacing_resolution_us" in settings:
        out["pacing_resolution_us"] = settings["pacing_resolution_us"]
    return out


def round_seed(seed: int, target: str, rnd: int) -> int:
    """The seed of one target's round ``rnd``: from the spec's seed, stable across Python
    versions and runs (a hash, not Python's salted ``hash``)."""
    digest = hashlib.sha256(f"{seed}:{target}:{rnd}".encode()).digest()
    return int.from_bytes(digest[:6], "big")


REFERENCE_KNOBS = {"connections": 16, "in_flight": 8}
"""The UDP reference a round gets when the spec has no ``reference`` group: enough queries
outstanding that one generator core saturates the target (as the baseline search's 16 sockets),
where one query per socket at a time leaves it waiting on round trips, and no more than the
target's receive buffer holds. 16 x 64 sent at once overflowed it: every reference of
docs/versions-run but dnsdist 1.9's and 2.1's dropped 829-831 of the first burst (the kernel's
RcvbufErrors in the bed's namespace, equal to the engine's timeouts; test_docs_numbers
recomputes them), whose slots then sat dead for the 2 s timeout;
16 x 8 saturates both as well (99 % busy, the same CPU per query within the runs' spread: 5.25
and 5.28 against 5.24 and 6.05 CPU-us for dnsdist, 6.66 and 6.88 against 6.69 and 7.60 for
knot-resolver) and dropped none (2026-11-28, two runs each)."""


def _reference_trial(target: str, rnd: int, round_trials: list[TrialPlan]) -> TrialPlan | None:
    """The UDP reference of a round that loads the target: closed loop with
    :data:`REFERENCE_KNOBS`, timed as the round's first closed-loop load trial (else, in a round
    of real clients replayed, all open loop, as its first replay); a round of other open-loop
    trials alone gets none."""
    loads = [t for t in round_trials if t.kind == "load"]
    replays = [t for t in loads if t.params.get("profile")]
    model = next((t for t in loads if t.params.get("rate") == "max"), replays[0] if replays else None)
    if model is None:
        return None
    knobs = {k: v for k, v in model.params.items() if k not in ("profile", "clients")}
    p = _normalise("load", "udp", {**knobs, **REFERENCE_KNOBS, "rate": "max"})
    tid = f"{REFERENCE_GROUP}-{label_of(target)}-udp-r{rnd}"
    return TrialPlan(tid, REFERENCE_GROUP, "load", target, "udp", cast(TrialParams, p), rnd, rnd)


def expand(spec: Spec) -> list[TrialPlan]:
    """Every trial of ``spec``, in run order: target by target, round by round, each round
    shuffled with its own seed and holding a UDP reference when it loads the target."""

    plan: list[TrialPlan] = []
    for target in spec.all_targets():
        # The external target serves what the operator gave endpoints for (none yet: nothing).
        if target == "external":
            served = tuple(spec.external.parsed()) if spec.external is not None else ()
        else:
            served = served_by(target)
        trials = [
            t
            for g in spec.groups
            if target in g.runs_on(spec.targets)
            for t in (_share_trials if "capacity_of" in g.settings else _group_trials)(spec, g, target, served)
            # The external target's certificate is the operator's: a cell of another key would
            # measure the same one again.
            if target != "external" or t.params.get("cert_key") in (None, DEFAULT_KEY_TYPE)
        ]
        for rnd in sorted({t.rep for t in trials}):
            members = [t for t in trials if t.rep == rnd]
            loads = any(t.kind == "load" for t in members)
            if loads and "udp" in served and not any(t.group == REFERENCE_GROUP for t in members):
                ref = _reference_trial(target, rnd, members)
                if ref is not None:
                    members.append(ref)
            seed = round_seed(spec.seed, target, rnd)
            members = [dataclasses.replace(t, round=rnd, round_seed=seed) for t in members]
            random.Random(seed).shuffle(members)
            # A target's certificate is set when it starts: trials of one key type run together
            # (shuffled among themselves), so the target restarts once per key type and round.
            # A trial at a share of capacity runs after the saturation trials it derives its rate
            # from (every one of its key type in the round).
            members.sort(key=lambda t: (str(t.params.get("cert_key") or ""), t.reference is not None))
            plan.extend(members)
    ids = [t.id for t in plan]
    assert len(set(ids)) == len(ids), "trial ids repeat"
    position = {tid: i for i, tid in enumerate(ids)}
    assert all(position[t.reference] < position[t.id] for t in plan if t.reference), "a share before its reference"
    return plan


def engine_knobs(t: TrialPlan) -> EngineConfig:
    """The engine configuration fields of a load or idle trial (target and TLS are added by the
    testbed)."""
    p = t.params
    timing: EngineConfig = {
        "duration_ms": round(p["duration_s"] * 1000),
        "warmup_ms": round(p["warmup_s"] * 1000),
        "timeout_ms": round(p["timeout_s"] * 1000),
    }
    if t.transport == POPULATION:  # each class has its own (dnscost.plan.population_replay)
        return {**timing, **_schedule_config(p)}
    config: EngineConfig = {"connections": p["connections"], **timing}
    if p.get("profile"):
        # The engine applies the profile (transport, connections, rate, idle timeout, lifetime,
        # close, resumption). Clients that keep their connections had them open before the
        # measured period; clients that close them idle open them as their queries come, from
        # the start, as such clients do all the time.
        profile = p["profile"]
        config.update({"profile": profile, "clients": p["clients"], "in_flight": p["in_flight"]})
        if "idle_timeout_ms" not in profile and "lifetime" not in profile:
            config["open_first"] = True
        if p.get("open_rate"):
            config["open_rate"] = p["open_rate"]
        if p.get("early_data"):
            config["early_data"] = p["early_data"]
        return config
    if t.kind == "idle":
        # Figure 3 as the study measured it: every connection carries one query as soon as it
        # is open (so the target builds its TLS and HTTP/2 state), then stays idle.
        config.update({"rate": "once", "in_flight": 1})
    else:
        config.update({"rate": _engine_rate(p["rate"]), "in_flight": p["in_flight"]})
    if t.transport != "udp":
        # Every connection is open before load starts: the set-up of the last ones does not
        # compete with queries on the first (Figure 4 is about N open connections). Not for an
        # idle trial: its one query per connection goes as that connection opens, at the open
        # rate; held back until all were open, 100 000 first queries reached a cold cache at once
        # and 87 % of them timed out (knot-resolver, 8 processes on one core).
        # Nor for one query per connection in an open loop: such a client opens its connection
        # when its query is due (the engine then opens every one so), so that the window
        # measures establishment at the schedule's rate; opened first, 200 connections carried
        # the 24 queries of a ladder's 1 % step and none was opened in the window (not-one-query).
        config["open_first"] = t.kind != "idle" and not (p["lifetime"] == "1q" and p["rate"] != "max")
        if (lifetime := p.get("lifetime")) is None:  # only a replay's is None, returned above
            raise ValueError(f"{t.id}: a {t.transport} trial with no lifetime (forever, 30s, 100q)")
        config["lifetime"] = lifetime_fields(lifetime)
        if p.get("open_rate"):
            config["open_rate"] = p["open_rate"]
    if t.transport in TLS_TRANSPORTS and p["lifetime"] != "forever":
        config["resumption"] = p["resumption"]
    if p.get("early_data"):
        config["early_data"] = p["early_data"]
    if p.get("doh_method"):
        config["doh_method"] = p["doh_method"]
    if p.get("doh_headers"):
        config["doh_headers"] = p["doh_headers"]
    if (group := p.get("tls_group")) is not None:
        config["tls_group"] = group
    return {**config, **_schedule_config(p)}


def _schedule_config(p: TrialParams) -> EngineConfig:
    """The engine's fields of an open loop's spacing, where the trial's group gave them."""
    out: EngineConfig = {}
    if "arrival" in p:
        out["arrival"] = p["arrival"]
    if "pacing_resolution_us" in p:
        out["pacing_resolution_us"] = p["pacing_resolution_us"]
    return out


def _engine_rate(rate: float | str | None) -> float | Literal["max"]:
    """A load trial's rate as the engine takes it: queries per second, or ``"max"`` (a share of
    capacity was resolved to its rate before, by the runner)."""
    if isinstance(rate, int | float):
        return rate
    if rate == "max":
        return "max"
    raise ValueError(f"a rate of {rate!r} is not one the engine takes")


def estimate_s(t: TrialPlan) -> float:
    """Rough wall time of a trial, for progress (target start and fill excluded)."""
    p = t.params
    per_run = float(p["warmup_s"] + p["duration_s"] + p["baseline_s"]) + 1.5
    if t.kind in ("search", "capacity"):
        return per_run * 7
    if t.kind == "idle":
        return per_run + 3
    return per_run


def share_rate(t: TrialPlan, reference: TrialRecord | None) -> DerivedRate:
    """The open-loop rate of trial ``t`` (whose rate is a share such as ``"50%"``) from the
    record (``trial.json``) of its reference, the saturation trial of the same cell and round:
    the share times the reference's answered rate. The answered rate, not CPU per query: it is
    the capacity of this very cell as measured (the target's CPU need not have been the limit,
    and a capacity from CPU per query assumes cost per query constant up to a full core).
    A reference whose one flag is ``generator-bound`` answered less than the cell's capacity:
    its answered rate is a lower bound of it, and the trial runs at most at the share
    (``capacity_lower_bound`` true; the latency table writes its share ``≤50%``). Returns what
    the trial records as ``derived_rate``; ValueError with the reason when the reference was
    not run, failed or is invalid for any other reason."""
    share = load_share(t.params.get("rate"))
    if share is None or t.reference is None:
        raise ValueError(f"{t.id}: its rate {t.params.get('rate')!r} is not a share of capacity")
    if reference is None:
        raise ValueError(f"reference {t.reference} was not run")
    if reference.get("status") != "done":
        raise ValueError(f"reference {t.reference} {reference.get('status') or 'did not finish'}")
    summary: Mapping[str, Any] = reference.get("summary") or {}
    validity = summary.get("validity") or {}
    bound = list(validity.get("flags") or []) == ["generator-bound"]
    if not validity.get("valid", False) and not bound:
        flags = ", ".join(validity.get("flags") or []) or "no validity"
        raise ValueError(f"reference {t.reference} is invalid ({flags})")
    answered = summary.get("answered_qps")
    if not isinstance(answered, int | float) or answered <= 0:
        raise ValueError(f"reference {t.reference} answered no queries")
    return {
        "reference": t.reference,
        "share": share,
        "reference_answered_qps": float(answered),
        "rate_qps": round(share * float(answered), 3),
        "capacity_lower_bound": bound,
    }
