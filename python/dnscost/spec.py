"""Experiment specs: TOML in, a validated :class:`Spec` out. Every mistake is reported with the
field it is in (``study.toml: group "memory": connections: ...``). The reference is
``docs/experiments.md``.

A spec names targets and groups of trials. A group has a kind (``load``: the engine at a rate or
as fast as the target answers; ``idle``: hold connections open and measure memory; ``search``:
the highest UDP rate answered with less than ``max_loss`` loss; ``capacity``: the highest rate of
any transport or replayed profile answered with loss at most ``max_loss`` and p99 latency at
most ``max_p99``), transports, and engine knobs;
a knob given as a list is a sweep axis, and a group's trials are the product of its axes.
A group may replay real clients instead: ``profile`` names client profiles (shipped in
``experiments/profiles/``, or JSON files beside the spec) that ``dnscost observe`` extracted,
and ``clients`` how many such clients each trial replays, or ``rate`` the queries per second
they make together (as many clients as that takes, at most ``max_connections`` connections);
the profile sets the transport, connections per client, query rate per client, idle timeout,
lifetime, close and resumption.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_args, get_type_hints

from dnscost.cluster import ClusterSettings
from dnscost.contract import (
    ClientProfile,
    GroupSettings,
    Lifetime,
    PopulationRecord,
    RunSpecRecord,
    TrialKind,
    shape_problem,
)
from dnscost.errors import UsageError
from dnscost.jsonl import loads
from dnscost.network import NETWORKS
from dnscost.population import replay_of
from dnscost.proc import parse_cpus
from dnscost.shares import CURVE, load_share
from dnscost.targets.external import EXTERNAL, ExternalSettings, resolve_external
from dnscost.transports import KEY_TYPES, POPULATION, TRANSPORTS

__all__ = [
    "ANALYSES",
    "KINDS",
    "MAX_NAMES",
    "PROFILES_DIR",
    "PROFILE_SETS",
    "SWEEPABLE",
    "TRANSPORTS",
    "Group",
    "Spec",
    "duration_s",
    "lifetime_fields",
    "load_profile",
    "load_spec",
    "parse_spec",
]

TLS_GROUPS = ("x25519", "secp256r1", "secp384r1", "x25519mlkem768")
"""Key-exchange groups the engine can pin (``dnscost-engine generate --tls-group``)."""
KINDS: tuple[TrialKind, ...] = get_args(TrialKind)
MAX_NAMES = 10_000_000
"""The most synthetic names a spec's ``names`` or ``dnscost load --names`` asks for (at least 1)."""
ANALYSES = (
    "baseline",
    "memory",
    "connections",
    "establishment",
    "energy",
    "latency",
    "curve",
    "cost_model",
    "clients",
    "population",
)

SWEEPABLE = (
    "connections",
    "lifetime",
    "resumption",
    "rate",
    "in_flight",
    "open_rate",
    "doh_method",
    "doh_headers",
    "cert_key",
    "tls_group",
    "early_data",
    "profile",
    "clients",
)
"""Knobs a group can sweep (give a list); every other field takes one value."""

GROUP_ANALYSES = ("connections", "establishment", "clients")
"""The analyses that read load groups' trials (Figure 4; Figure 5, Table I and the ratios; real
clients replayed): a group feeds the one its ``analysis`` names, by default ``clients`` for a
group of profiles and otherwise the one its name names."""

SCHEDULE_FIELDS = ("arrival", "pacing_resolution_us")
"""How an open loop's queries are spaced (the engine's fields of the same names,
``docs/engine.md``): ``arrival`` constant or Poisson gaps, and the grid each sender thread wakes
on (``pacing_resolution_us``; the engine's default is 50 µs up to 2 000 queries/s a thread and
1 ms above, where a tick's queries leave together). One value a group; a group at a share of
capacity gives its own."""

PROFILES_DIR = Path(__file__).parent / "experiments" / "profiles"
"""The shipped client profiles (``<name>.json``), each from an observation on the project's machine."""

PROFILE_SETS = ("connections", "lifetime", "doh_method", "resumption")
"""Knobs a profile sets, which a group of profiles cannot also give."""

_DURATION = re.compile(r"([0-9]*\.?[0-9]+)(ms|s|m|h)?")
_DURATION_FIELDS = ("duration", "warmup", "timeout", "step_duration", "baseline", "max_p99")
_GROUP_FIELDS = {
    "name",
    "kind",
    "transports",
    "repetitions",
    "max_loss",
    "start_qps",
    "max_qps",
    "precision",
    "max_steps",
    "max_p99",
    "capacity_of",
    "targets",
    "analysis",
    "max_connections",
    "population",
    "population_classes",
    "capture_names",
    *SCHEDULE_FIELDS,
    *SWEEPABLE,
    *_DURATION_FIELDS,
}
_DEFAULTS_FIELDS = _GROUP_FIELDS - {
    "name",
    "kind",
    "transports",
    "capacity_of",
    "targets",
    "analysis",
    "population",
    "population_classes",
    "capture_names",
}
_TOP_FIELDS = {
    "name",
    "description",
    "targets",
    "seed",
    "repetitions",
    "names",
    "tld",
    "target_cpus",
    "generator_cpus",
    "target_processes",
    "network",
    "analyses",
    "defaults",
    "group",
    "cluster",
    "external",
}
_CLUSTER_FIELDS = {"address", "tls", "target_address"}


def duration_s(text: str) -> float:
    """``10s``, ``250ms``, ``2m``, ``1h`` or bare seconds, in seconds (as the engine);
    ValueError otherwise."""
    m = _DURATION.fullmatch(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a duration (examples: 10s, 250ms, 2m)")
    return float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}[m.group(2)]


def lifetime_fields(text: str) -> Lifetime:
    """``forever``, ``30s``, ``100q`` or ``30s,100q`` as the engine's ``lifetime``
    (``duration_ms``, ``queries``); ValueError otherwise."""
    life: Lifetime = {"duration_ms": None, "queries": None}
    if text.strip() == "forever":
        return life
    for part in text.split(","):
        part = part.strip()
        if part.endswith("q") and part[:-1].isdigit() and int(part[:-1]) > 0:
            life["queries"] = int(part[:-1])
        else:
            try:
                life["duration_ms"] = round(duration_s(part) * 1000)
            except ValueError:
                raise ValueError(f"{text!r} is not a lifetime (forever, 30s, 1q or 30s,100q)") from None
    return life


@dataclass(frozen=True)
class Group:
    """One group of trials. ``axes`` holds every sweepable knob as a tuple of values (one value
    when not swept); ``settings`` the group's other fields with the spec's defaults applied.
    ``targets``: the targets it runs on, None for the spec's; ``analysis``: the analysis that
    reads its trials (its name unless it says otherwise)."""

    name: str
    kind: TrialKind
    transports: tuple[str, ...]
    repetitions: int
    axes: dict[str, tuple[Any, ...]]
    settings: GroupSettings
    targets: tuple[str, ...] | None = None
    analysis: str = ""

    def runs_on(self, spec_targets: tuple[str, ...]) -> tuple[str, ...]:
        """The targets this group runs on in a spec whose targets are ``spec_targets``."""
        return self.targets if self.targets is not None else spec_targets


def _base(target: str) -> str:
    """A target name without its release or build (``dnsdist@trixie``: ``dnsdist``)."""
    return target.partition("@")[0]


@dataclass(frozen=True)
class Spec:
    """A validated experiment spec. ``source`` is the TOML text it came from."""

    name: str
    description: str
    targets: tuple[str, ...]
    seed: int
    names: int
    tld: str
    target_cpus: tuple[int, ...] | None
    generator_cpus: tuple[int, ...] | None
    analyses: tuple[str, ...]
    groups: tuple[Group, ...]
    source: str = ""
    origin: str = ""
    network: str | None = None
    """``loopback``, ``veth`` or ``veth-rps`` (see dnscost.network); None: ``--network``, else
    the default."""
    cluster: ClusterSettings | None = None
    """The ``[cluster]`` table: the Dask cluster every trial's load is split over
    (:mod:`dnscost.cluster`); None: ``--cluster``, else none."""
    target_processes: int = 1
    """How many processes each target runs as, sharing its ports (targets that split:
    knot-resolver, dnsdist, builtin), to hold more connections than one process's open files."""
    external: ExternalSettings | None = None
    """The ``[external]`` table, resolved (or ``--external-*``, which replace it): the server the
    operator started that target ``external`` stands for (:mod:`dnscost.targets.external`)."""

    def all_targets(self) -> tuple[str, ...]:
        """Every target some group runs on, in order: the spec's, then those groups add."""
        found = dict.fromkeys(self.targets)
        for g in self.groups:
            found.update(dict.fromkeys(g.runs_on(self.targets)))
        return tuple(found)

    def only(self, targets: tuple[str, ...]) -> Spec:
        """The spec run on ``targets`` alone (``--targets``): they replace the spec's, and a group
        with targets of its own keeps those among them (none: the group runs nowhere)."""
        groups = tuple(
            g
            if g.targets is None
            else dataclasses.replace(g, targets=tuple(t for t in targets if _base(t) in {_base(o) for o in g.targets}))
            for g in self.groups
        )
        return dataclasses.replace(self, targets=targets, groups=groups)

    def only_groups(self, names: tuple[str, ...]) -> Spec:
        """The spec with only the groups ``names`` (``--groups``), in the spec's order. An
        unknown name, or a group at a share of capacity without its saturation group, is one
        line (:class:`UsageError`)."""
        known = [g.name for g in self.groups]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(f"{self.origin}: no group {unknown[0]!r} (groups: {', '.join(known)})")
        groups = tuple(g for g in self.groups if g.name in names)
        for g in groups:
            needs = g.settings.get("capacity_of")
            if needs is not None and needs not in names:
                raise UsageError(f"{self.origin}: group {g.name!r} is a share of {needs!r}: select that group too")
        return dataclasses.replace(self, groups=groups)

    def to_dict(self) -> RunSpecRecord:
        """The resolved spec, as recorded in run.json."""
        return {
            "name": self.name,
            "description": self.description,
            "targets": list(self.targets),
            "seed": self.seed,
            "names": self.names,
            "tld": self.tld,
            "target_cpus": list(self.target_cpus) if self.target_cpus is not None else None,
            "generator_cpus": list(self.generator_cpus) if self.generator_cpus is not None else None,
            "target_processes": self.target_processes,
            "network": self.network,
            "analyses": list(self.analyses),
            "groups": [
                {
                    "name": g.name,
                    "kind": g.kind,
                    "transports": list(g.transports),
                    "targets": list(g.targets) if g.targets is not None else None,
                    "analysis": g.analysis,
                    "repetitions": g.repetitions,
                    "axes": {k: list(v) for k, v in g.axes.items()},
                    "settings": g.settings,
                }
                for g in self.groups
            ],
            "origin": self.origin,
            **({"cluster": self.cluster.to_dict()} if self.cluster is not None else {}),
            **({"external": self.external.to_dict()} if self.external is not None else {}),
        }


CLIENT_TABLES = {"check", "times", "pageload"}
"""The tables of a ``dnscost client`` spec (``dnscost.clientside.spec``), told apart from a run's."""


class _Checker:
    """Reads values from one table of the TOML document, naming the field in every error."""

    def __init__(self, origin: str, where: str, table: dict[str, object], allowed: set[str]) -> None:
        self.origin, self.where, self.table = origin, where, table
        unknown = sorted(set(table) - allowed)
        if unknown:
            self.fail(unknown[0], f"unknown field (known: {', '.join(sorted(allowed))})")

    def fail(self, key: str, reason: str) -> None:
        where = f"{self.where}: " if self.where else ""
        raise UsageError(f"{self.origin}: {where}{key}: {reason}")

    def integer(self, key: str, value: Any, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.fail(key, f"expected an integer in {low}..={high}, got {value!r}")
        return int(value)

    def number(self, key: str, value: Any, low: float, high: float) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            self.fail(key, f"expected a number in {low:g}..={high:g}, got {value!r}")
        return float(value)

    def string(self, key: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            self.fail(key, f"expected a non-empty string, got {value!r}")
        return str(value)

    def choice(self, key: str, value: Any, choices: tuple[str, ...]) -> str:
        if value not in choices:
            self.fail(key, f"expected one of {', '.join(choices)}, got {value!r}")
        return str(value)

    def strings(self, key: str, value: Any, choices: tuple[str, ...] | None = None) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            self.fail(key, f"expected a non-empty list of strings, got {value!r}")
        out = tuple(self.choice(key, v, choices) if choices else self.string(key, v) for v in value)
        if len(set(out)) != len(out):
            self.fail(key, "values repeat")
        return out

    def targets(self, key: str, value: Any) -> tuple[str, ...]:
        """Target names (``NAME``, ``NAME@RELEASE``, ``NAME@PATH`` or ``external``), each as
        :func:`dnscost.targets.target_name` writes it."""
        from dnscost.targets import target_name  # targets' modules read specs' vocabulary

        out = []
        for v in self.strings(key, value):
            try:
                out.append(v if v == EXTERNAL else str(target_name(v)))
            except UsageError as e:
                self.fail(key, str(e))
        if len(set(out)) != len(out):
            self.fail(key, "values repeat")
        return tuple(out)

    def duration(self, key: str, value: Any) -> float:
        try:
            if not isinstance(value, str):
                raise ValueError(f"expected a duration string such as 10s, got {value!r}")
            return duration_s(value)
        except ValueError as e:
            self.fail(key, str(e))
            raise AssertionError from None

    def cpus(self, key: str, value: Any) -> tuple[int, ...]:

        try:
            return tuple(parse_cpus(value if isinstance(value, str) else ",".join(map(str, value))))
        except (ValueError, TypeError) as e:
            self.fail(key, f'expected CPUs such as "0" or "1-3": {e}')
            raise AssertionError from None


def _knob(c: _Checker, key: str, value: Any) -> Any:
    """One value of a sweepable knob, checked and normalised."""
    if key in ("connections", "clients"):
        return c.integer(key, value, 1, 1_000_000)
    if key == "profile":
        return c.string(key, value)
    if key == "in_flight":
        return c.integer(key, value, 1, 65_535)
    if key in ("resumption", "early_data"):
        return c.number(key, value, 0.0, 1.0)
    if key == "open_rate":
        return c.number(key, value, 0.001, 1e7)
    if key == "rate":
        if value == "max":
            return "max"
        if isinstance(value, str):
            share = load_share(value)
            if share is None:
                c.fail(key, f'expected "max", a rate in qps or a share of capacity such as "50%", got {value!r}')
            return value
        return c.number(key, value, 0.001, 1e8)
    if key == "lifetime":
        try:
            lifetime_fields(value if isinstance(value, str) else "")
        except ValueError:
            c.fail(key, f"expected forever, a duration (30s) or a query count (1q), got {value!r}")
        return value
    if key == "doh_method":
        return c.choice(key, value, ("post", "get"))
    if key == "doh_headers":
        return c.choice(key, value, ("minimal", "browser"))
    if key == "cert_key":
        return c.choice(key, value, KEY_TYPES)
    if key == "tls_group":
        return c.choice(key, value, TLS_GROUPS)
    raise AssertionError(key)


def _settings(c: _Checker, table: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    out: dict[str, object] = {}
    for key in sorted(keys & set(table)):
        value = table[key]
        if key in _DURATION_FIELDS:
            out[key] = seconds = c.duration(key, value)
            if key == "max_p99" and seconds < 1e-6:
                c.fail(key, f"{value!r}: no query is answered that fast (the engine measures latency in µs)")
        elif key == "repetitions":
            out[key] = c.integer(key, value, 1, 1000)
        elif key == "max_loss":
            out[key] = c.number(key, value, 0.0, 0.5)
        elif key in ("start_qps", "max_qps"):
            out[key] = c.number(key, value, 1.0, 1e8)
        elif key == "precision":
            out[key] = c.number(key, value, 0.001, 1.0)
        elif key == "max_steps":
            out[key] = c.integer(key, value, 1, 100)
        elif key == "max_connections":
            out[key] = c.integer(key, value, 1, 1_000_000)
        elif key == "arrival":
            out[key] = c.choice(key, value, ("constant", "poisson"))
        elif key == "pacing_resolution_us":
            out[key] = c.integer(key, value, 10, 10_000)
        elif key in SWEEPABLE:
            values = value if isinstance(value, list) else [value]
            if not values:
                c.fail(key, "empty list")
            out[key] = tuple(_knob(c, key, v) for v in values)
    return out


AXIS_DEFAULTS: dict[str, tuple[object, ...]] = {
    "connections": (10,),
    "lifetime": ("forever",),
    "resumption": (0.0,),
    "rate": ("max",),
    "in_flight": (1,),
    "open_rate": (2000.0,),
    "cert_key": ("ecdsa-p256",),
    "tls_group": ("x25519",),
    "early_data": (0.0,),
    "clients": (1,),
}
SETTING_DEFAULTS: GroupSettings = {
    "duration": 10.0,
    "warmup": 2.0,
    "timeout": 2.0,
    "baseline": 1.0,
    "max_connections": 10_000,
    "max_loss": 0.01,
    "start_qps": 20_000.0,
    "max_qps": 2_000_000.0,
    "precision": 0.05,
    "max_steps": 12,
    "step_duration": 3.0,
    "max_p99": 0.05,
}
"""What a group takes when neither it nor the spec's ``[defaults]`` says: the values of its
sweep axes, and its other settings."""


def parse_spec(text: str, origin: str = "<spec>") -> Spec:
    """Validates a spec's TOML text; raises UsageError naming the field on any mistake."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{origin}: not valid TOML: {e}") from None
    if CLIENT_TABLES & set(doc) and not set(doc) & {"group", "targets"}:
        raise UsageError(f"{origin}: a client spec ([check], [times], [pageload]): run it with dnscost client run")
    top = _Checker(origin, "", doc, _TOP_FIELDS)
    name = top.string("name", doc.get("name"))
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        top.fail("name", f"use letters, digits, '-', '_' or '.', got {name!r}")
    targets = top.targets("targets", doc.get("targets"))
    seed = top.integer("seed", doc.get("seed", 1), 0, 2**63 - 1)
    names = top.integer("names", doc.get("names", 10_000), 1, MAX_NAMES)
    tld = top.string("tld", doc.get("tld", "test"))
    reps = top.integer("repetitions", doc.get("repetitions", 1), 1, 1000)
    target_cpus = top.cpus("target_cpus", doc["target_cpus"]) if "target_cpus" in doc else None
    generator_cpus = top.cpus("generator_cpus", doc["generator_cpus"]) if "generator_cpus" in doc else None
    target_processes = top.integer("target_processes", doc.get("target_processes", 1), 1, 256)
    network = top.choice("network", doc["network"], NETWORKS) if "network" in doc else None
    cluster = _cluster(origin, doc["cluster"]) if "cluster" in doc else None
    external = _external(origin, doc["external"]) if "external" in doc else None
    analyses = top.strings("analyses", doc.get("analyses", list(ANALYSES)), ANALYSES)
    raw_defaults = doc.get("defaults", {})
    if not isinstance(raw_defaults, dict):
        top.fail("defaults", "expected a table")
    dc = _Checker(origin, "defaults", raw_defaults, _DEFAULTS_FIELDS)
    defaults = {
        **AXIS_DEFAULTS,
        **SETTING_DEFAULTS,
        "repetitions": reps,
        **_settings(dc, raw_defaults, _DEFAULTS_FIELDS),
    }
    raw_groups = doc.get("group")
    if not isinstance(raw_groups, list) or not raw_groups or not all(isinstance(g, dict) for g in raw_groups):
        top.fail("group", "expected one or more [[group]] tables")
        raise AssertionError
    groups: list[Group] = []
    for i, raw in enumerate(raw_groups):
        label = f'group "{raw["name"]}"' if isinstance(raw.get("name"), str) else f"group {i + 1}"
        gc = _Checker(origin, label, raw, _GROUP_FIELDS)
        gname = gc.string("name", raw.get("name"))
        if not re.fullmatch(r"[a-z0-9][a-z0-9_]*", gname):
            gc.fail("name", f"use lower-case letters, digits and '_', got {gname!r}")
        if any(g.name == gname for g in groups):
            gc.fail("name", f"another group is already called {gname!r}")
        kind = cast(TrialKind, gc.choice("kind", raw.get("kind", "load"), KINDS))
        own_targets = gc.targets("targets", raw["targets"]) if "targets" in raw else None
        analysis = (
            gc.choice("analysis", raw["analysis"], GROUP_ANALYSES)
            if "analysis" in raw
            else ("clients" if "profile" in raw else "population" if "population" in raw else gname)
        )
        if "analysis" in raw and kind != "load":
            gc.fail("analysis", f"the {analysis} analysis reads load groups")
        if "capacity_of" in raw:
            groups.append(_share_group(gc, raw, gname, kind, groups))
            continue
        merged = {**defaults, **_settings(gc, raw, _GROUP_FIELDS)}
        if "capture_names" in raw and "population" not in raw:
            gc.fail("capture_names", "the capture's own names are a population's: give population too")
        if "population" in raw:
            merged["population"] = _population(gc, raw, kind, Path(origin).parent)
            for key in ("clients", "max_connections", *(k for k in SWEEPABLE if k != "rate")):
                merged.pop(key, None)
            if "rate" not in raw:
                merged.pop("rate", None)
            transports: tuple[str, ...] = (POPULATION,)
        elif "profile" in raw:
            profiles = _profiles(gc, raw, kind, merged["profile"], Path(origin).parent)
            merged["profiles"] = profiles
            transports = tuple(dict.fromkeys(str(p["transport"]) for p in profiles.values()))
        else:
            for key in ("clients", "max_connections"):
                if key in raw:
                    gc.fail(key, "is about the clients a profile stands for: give profile too")
                merged.pop(key, None)
            transports = gc.strings("transports", raw.get("transports"), TRANSPORTS)
        if kind == "search" and transports != ("udp",):
            gc.fail("transports", 'a search group measures the UDP baseline: transports = ["udp"]')
        if kind == "idle" and "udp" in transports:
            gc.fail("transports", "an idle group holds connections: udp has none")
        if kind in ("search", "capacity") and merged["start_qps"] > merged["max_qps"]:
            gc.fail("start_qps", f"above max_qps ({merged['max_qps']:g})")
        if kind == "capacity" and ("rate" in raw or "clients" in raw):
            gc.fail("rate" if "rate" in raw else "clients", "a capacity group searches the rate (and the clients)")
        if kind == "capacity" and "population" in raw:
            gc.fail("population", "a capacity group replays transports or profiles (a population: not yet)")
        axes = {k: merged.pop(k) for k in SWEEPABLE if k in merged}
        if any(load_share(r) is not None for r in axes.get("rate", ())):
            gc.fail("rate", 'a share of capacity ("50%") needs capacity_of: the saturation group it is a share of')
        repetitions = merged.pop("repetitions")
        settings = cast(GroupSettings, merged)  # checked: _settings and the defaults
        groups.append(Group(gname, kind, transports, repetitions, axes, settings, own_targets, analysis))
    return Spec(
        name=name,
        description=str(doc.get("description", "")),
        targets=targets,
        seed=seed,
        names=names,
        tld=tld,
        target_cpus=target_cpus,
        generator_cpus=generator_cpus,
        analyses=analyses,
        groups=tuple(groups),
        source=text,
        origin=origin,
        network=network,
        cluster=cluster,
        external=external,
        target_processes=target_processes,
    )


_EXTERNAL_FIELDS = {"endpoints", "pid", "cgroup", "ca", "sni", "version"}


def _external(origin: str, raw: Any) -> ExternalSettings:
    """The ``[external]`` table: ``endpoints`` (URLs, one per transport), ``pid`` or ``cgroup``
    (what to meter), ``ca`` (a file, or ``"insecure"``), ``sni``, ``version``; the fields of
    ``--external-*``, checked the same way (:func:`dnscost.targets.external.resolve_external`).
    A relative path counts from the spec's directory."""
    if not isinstance(raw, dict):
        raise UsageError(f"{origin}: external: expected a table")
    c = _Checker(origin, "external", raw, _EXTERNAL_FIELDS)
    here = Path(origin).parent

    def path(key: str) -> str | None:
        if key not in raw:
            return None
        value = c.string(key, raw[key])
        return value if value == "insecure" and key == "ca" else str(here / Path(value).expanduser())

    cgroup = path("cgroup")
    try:
        return resolve_external(
            c.strings("endpoints", raw.get("endpoints")),
            pid=c.integer("pid", raw["pid"], 1, 2**22) if "pid" in raw else None,
            cgroup=Path(cgroup) if cgroup is not None else None,
            ca=path("ca"),
            sni=c.string("sni", raw["sni"]) if "sni" in raw else None,
            version=c.string("version", raw["version"]) if "version" in raw else None,
        )
    except UsageError as e:
        raise UsageError(f"{origin}: external: {e}") from None


def _cluster(origin: str, raw: Any) -> ClusterSettings:
    """The ``[cluster]`` table: ``address`` (``tls://HOST:PORT`` or ``netns:N``), ``tls`` (a
    directory, relative to the spec's), ``target_address``."""
    if not isinstance(raw, dict):
        raise UsageError(f"{origin}: cluster: expected a table")
    c = _Checker(origin, "cluster", raw, _CLUSTER_FIELDS)
    tls = c.string("tls", raw["tls"]) if "tls" in raw else None
    if tls is not None:
        tls = str((Path(origin).parent / tls).resolve())
    settings = ClusterSettings(
        c.string("address", raw.get("address")),
        tls,
        c.string("target_address", raw["target_address"]) if "target_address" in raw else None,
    )
    try:
        settings.validate()
    except UsageError as e:
        raise UsageError(f"{origin}: cluster: {e}") from None
    return settings


def _share_group(gc: _Checker, raw: dict[str, object], name: str, kind: TrialKind, earlier: list[Group]) -> Group:
    """A group at a share of capacity (``capacity_of = "establishment"``, ``rate = "50%"``): the
    cells of an earlier saturation group, each run open loop at the share of the answered rate
    its saturation trial measured in the same round. A list of shares (``rate = ["1%", "3%",
    ...]``) is a ladder: every cell at every share, the cost curves' points (:data:`CURVE`).
    Its cells, durations and repetitions are the saturation group's; it chooses the share and
    may narrow the cells: fewer transports, fewer values of a swept knob
    (``cert_key = "ecdsa-p256"``). ``in_flight`` is the open
    loop's ceiling on outstanding queries per connection (default: the saturation cell's, whose
    closed loop it defined): a ceiling the schedule runs into holds queries back and sends them
    late, so the latency measured would be the generator's queue. ``arrival`` and
    ``pacing_resolution_us`` (:data:`SCHEDULE_FIELDS`) space its queries."""
    narrowing = {"transports", *SWEEPABLE} - {"rate", "in_flight"}
    extra = sorted(set(raw) - {"name", "kind", "capacity_of", "rate", "in_flight", *SCHEDULE_FIELDS, *narrowing})
    if extra:
        gc.fail(extra[0], "a group at a share of capacity takes its cells, targets and durations from capacity_of")
    if kind != "load":
        gc.fail("kind", "a group at a share of capacity is a load group")
    ref_name = gc.string("capacity_of", raw["capacity_of"])
    ref = next((g for g in earlier if g.name == ref_name), None)
    if ref is None:
        gc.fail("capacity_of", f"no earlier group is called {ref_name!r}")
        raise AssertionError
    if ref.kind != "load" or ref.axes.get("rate") != ("max",) or "capacity_of" in ref.settings:
        gc.fail("capacity_of", f'group {ref_name!r} is not a saturation group (kind load, rate = "max")')
    rate = raw.get("rate")
    rates = rate if isinstance(rate, list) else [rate]
    for r in rates:
        if load_share(r) is None:
            gc.fail("rate", f'expected a share of capacity such as "50%", or a list of them (a ladder), got {r!r}')
    if len({load_share(r) for r in rates}) < len(rates):
        gc.fail("rate", "a ladder's shares are distinct")
    transports = gc.strings("transports", raw["transports"], ref.transports) if "transports" in raw else ref.transports
    axes = {**ref.axes, "rate": tuple(str(r) for r in sorted(rates, key=lambda r: load_share(r) or 0.0))}
    for key in sorted(narrowing & set(raw) - {"transports"}):
        values = _settings(gc, {key: raw[key]}, {key})[key]
        if key not in ref.axes or not set(values) <= set(ref.axes[key]):
            gc.fail(key, f"narrows the cells of {ref_name!r}: expected values among {list(ref.axes.get(key, ()))}")
        axes[key] = values
    settings: GroupSettings = {**ref.settings, "capacity_of": ref_name}
    if "in_flight" in raw:
        if isinstance(raw["in_flight"], list):
            gc.fail("in_flight", "one value: the open loop's ceiling for every cell")
        settings["in_flight"] = _knob(gc, "in_flight", raw["in_flight"])
    settings.update(_settings(gc, raw, set(SCHEDULE_FIELDS)))  # type: ignore[typeddict-item]
    # A ladder (several shares) feeds the cost curves; one share, the latency table's share columns.
    return Group(
        name, kind, transports, ref.repetitions, axes, settings, ref.targets, CURVE if len(rates) > 1 else name
    )


def load_profile(name: str, spec_dir: Path) -> ClientProfile:
    """The client profile ``name``: a shipped one (:data:`PROFILES_DIR`), or a JSON file (a
    name ending in ``.json``, relative to the spec's directory). ValueError with the reason
    when it cannot be read or is not a profile; the engine checks the rest of it."""
    path = (spec_dir / name) if name.endswith(".json") else PROFILES_DIR / f"{name}.json"
    if not name.endswith(".json") and not path.exists():
        shipped = ", ".join(sorted(p.stem for p in PROFILES_DIR.glob("*.json"))) or "none"
        raise ValueError(f"no shipped profile {name!r} (shipped: {shipped})")
    try:
        doc = loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: {getattr(e, 'strerror', None) or e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or doc.get("transport") not in TRANSPORTS:
        raise ValueError(f"{path}: not a client profile (a name and a transport at least)")
    known = get_type_hints(ClientProfile)
    unknown = sorted(set(doc) - set(known))
    if unknown:
        raise ValueError(f"{path}: unknown field {unknown[0]!r} in a client profile (known: {', '.join(known)})")
    missing = sorted(ClientProfile.__required_keys__ - set(doc))
    problem = f"{missing[0]} is missing" if missing else shape_problem(doc, ClientProfile)
    if problem is not None:
        raise ValueError(f"{path}: {problem}")
    return cast(ClientProfile, doc)


def _profiles(
    gc: _Checker, raw: dict[str, object], kind: str, names: tuple[str, ...], spec_dir: Path
) -> dict[str, ClientProfile]:
    """A group of profiles' profiles by name, read once (recorded with the spec)."""
    if kind not in ("load", "capacity"):
        gc.fail("profile", "a profile is replayed by a load or capacity group")
    for key in ("transports", *PROFILE_SETS):
        if key in raw:
            gc.fail(key, "a group of profiles takes it from each profile")
    if kind == "load" and ("clients" in raw) == ("rate" in raw):
        gc.fail("profile", "give clients (how many clients to replay) or rate (the queries per second they make)")
    rate = raw.get("rate")
    rates: list[Any] = rate if isinstance(rate, list) else [rate]
    if "rate" in raw and not all(isinstance(r, int | float) and not isinstance(r, bool) for r in rates):
        gc.fail("rate", f"the clients' queries per second together, a number, got {raw['rate']!r}")
    out: dict[str, ClientProfile] = {}
    for name in names:
        try:
            out[name] = load_profile(name, spec_dir)
        except ValueError as e:
            gc.fail("profile", str(e))
    return out


def _population(gc: _Checker, raw: dict[str, object], kind: str, spec_dir: Path) -> PopulationRecord:
    """A population group's population (``dnscost population``'s TOML, relative to the spec's
    directory), read once and recorded with the spec: its source and its classes."""
    if kind != "load":
        gc.fail("population", "a population is replayed by a load group")
    for key in ("transports", "profile", "clients", "max_connections", *(k for k in SWEEPABLE if k != "rate")):
        if key in raw:
            gc.fail(key, "a population's classes set it (a population group sweeps rate only)")
    rate = raw.get("rate")
    rates: list[Any] = rate if isinstance(rate, list) else [rate] if rate is not None else []
    if not all(isinstance(r, int | float) and not isinstance(r, bool) and r > 0 for r in rates):
        gc.fail("rate", f"the whole population's queries per second, a positive number, got {rate!r}")
    name = raw["population"]
    if not isinstance(name, str):
        gc.fail("population", f"the path of a population TOML, got {name!r}")
        raise AssertionError
    names = raw.get("capture_names", False)
    if not isinstance(names, bool):
        gc.fail("capture_names", f"true or false, got {names!r}")
    path = spec_dir / name
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
        replay = replay_of(doc, str(path) if names else name, names=bool(names))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, UsageError) as e:
        field = "capture_names" if names and "names" in str(e) else "population"
        gc.fail(field, str(getattr(e, "strerror", None) or e))
        raise AssertionError from None
    keep = ("name", "transport", "clients", "rate_qps", "share", "profile")
    raw_classes = cast(list[dict[str, object]], doc["class"])
    assert len(replay.classes) == len(raw_classes)
    record: PopulationRecord = {"source": name, "classes": [{k: c[k] for k in keep if k in c} for c in raw_classes]}
    if "population_classes" in raw:
        only = raw["population_classes"]
        known = [c["name"] for c in replay.classes]
        if not isinstance(only, list) or not only or not all(isinstance(n, str) for n in only):
            gc.fail("population_classes", f"a list of the population's class names, got {only!r}")
            raise AssertionError
        unknown = [n for n in only if n not in known]
        if unknown:
            gc.fail("population_classes", f"{', '.join(unknown)}: no such class in {name} ({', '.join(known)})")
        record["only"] = list(dict.fromkeys(only))
    if replay.names is not None:
        # Where the names file is on this machine: read by every trial, not copied into the spec.
        record["names"] = {"file": replay.names, "repeat_share": replay.repeat_share, "queries": replay.names_queries}
    return record


def load_spec(path: Path) -> Spec:
    """Reads and validates the spec at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not a TOML spec (not UTF-8 text at byte {e.start})") from None
    return parse_spec(text, str(path))
