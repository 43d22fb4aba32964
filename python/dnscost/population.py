"""A capture's clients as a population: the flows ``dnscost-engine capture`` reads from a pcap
(:class:`dnscost.contract.FlowRecord`) grouped by client, each client's use of its transport
measured, and the clients put into classes the generator can replay (docs/population.md).

A *client* is one source address (or one prefix of them, ``prefix``) on one transport: a
host that asks over Do53 and over DoH is two clients. Per client: its queries, its rate over
the capture, the gaps between its queries, and for the connection transports its connections:
their lifetime, their queries, who closed them and how, how long they stood idle before the
client closed them, and how often a reconnection offered a session to resume.

Clients fall into classes by transport and shape: for the connection transports by queries per
connection (``one`` 1, ``few`` 2-4, ``several`` 5-49, ``persistent`` 50 and more) and, but
for persistent ones, by who closes (the client, the server, nobody in the capture); for Do53 over UDP by rate decade
(``rate-1e1``: 3.2 to 32 queries a second). A
class gives its share of the capture's queries, its clients, the medians of its clients'
figures with their spread (the fit error: the median relative distance of a member's figure
from the class's), quantiles of its gaps and lifetimes, and the fields of a replayable
profile (:class:`dnscost.contract.ClientProfile`).

Pure: records in, classes out; the command reads the capture and writes the TOML."""

from __future__ import annotations

import ipaddress
import itertools
import json
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeGuard

from dnscost.contract import CaptureRecord, ClientClass, ClientProfile, FlowRecord, ReplayRecord
from dnscost.errors import UsageError
from dnscost.transports import TLS_TRANSPORTS, TRANSPORTS

__all__ = [
    "Client",
    "NameStats",
    "Population",
    "PopulationClass",
    "Replay",
    "classes_of",
    "clients_of",
    "name_stats",
    "population_toml",
    "replay_of",
    "replayed_names",
]

CONNECTED = tuple(t for t in TRANSPORTS if t != "udp")
"""The transports with connections (Do53 over UDP has none)."""

IDLE_CLOSE_MIN_S = 0.1
"""A class whose clients close a connection this long or longer after its last query closes
idle connections (its profile's ``idle_timeout_ms``); sooner, after a count of queries."""

QTYPES = {
    1: "A",
    2: "NS",
    5: "CNAME",
    6: "SOA",
    12: "PTR",
    15: "MX",
    16: "TXT",
    28: "AAAA",
    33: "SRV",
    64: "SVCB",
    65: "HTTPS",
}

SHAPES = ((1.5, "one"), (5.0, "few"), (50.0, "several"))
"""Queries per connection below each bound, and the shape's name; 50 and more: ``persistent``."""


def shape_of(queries_per_connection: float) -> str:
    return next((name for bound, name in SHAPES if queries_per_connection < bound), "persistent")


@dataclass
class Client:
    """One client: an address (or prefix) on one transport, and what its flows show."""

    address: str
    transport: str
    query_us: list[int] = field(default_factory=list)
    flows: list[FlowRecord] = field(default_factory=list)

    @property
    def queries(self) -> int:
        return len(self.query_us)

    def gaps_s(self) -> list[float]:
        t = sorted(self.query_us)
        return [(b - a) / 1e6 for a, b in itertools.pairwise(t)]

    def connections(self) -> list[FlowRecord]:
        return self.flows if self.transport in CONNECTED else []

    def queries_per_connection(self) -> float | None:
        c = self.connections()
        return statistics.median(f["queries"] for f in c) if c else None

    def lifetimes_s(self) -> list[float]:
        """Lifetimes of the connections the capture saw open and end."""
        seen = [f for f in self.connections() if f["seen_open"] and f["closer"] != "none"]
        return [(f["closed_us"] - f["opened_us"]) / 1e6 for f in seen]

    def idle_before_close_s(self) -> list[float]:
        """For the connections the client closed: the time from its last query to the close."""
        return [
            (f["closed_us"] - max(f["query_us"])) / 1e6
            for f in self.connections()
            if f["closer"] == "client" and f["query_us"]
        ]

    def closer(self) -> str:
        """Who closes most of its connections (``client``, ``server``, ``none``)."""
        counts = Counter(f["closer"] for f in self.connections())
        return counts.most_common(1)[0][0] if counts else "none"

    def resumption(self) -> float | None:
        """The share of its reconnections (every connection after its first) that offered a
        session to resume (TLS) or sent 0-RTT (QUIC); None when unknown or no reconnection."""
        again = [f.get("resumption_offered") for f in sorted(self.connections(), key=lambda f: f["opened_us"])[1:]]
        known = [r for r in again if r is not None]
        return sum(known) / len(known) if known else None


def _client_key(address: str, prefix: tuple[int, int] | None) -> str:
    if prefix is None:
        return address
    ip = ipaddress.ip_address(address)
    bits = prefix[0] if ip.version == 4 else prefix[1]
    return str(ipaddress.ip_network(f"{address}/{bits}", strict=False))


def clients_of(flows: Iterable[FlowRecord], prefix: tuple[int, int] | None = None) -> list[Client]:
    """Each client (an address, or with ``prefix`` (IPv4 bits, IPv6 bits) a prefix, on one
    transport) with its flows and queries."""
    clients: dict[tuple[str, str], Client] = {}
    for f in flows:
        key = (_client_key(f["client"], prefix), f["transport"])
        c = clients.get(key)
        if c is None:
            c = clients[key] = Client(*key)
        c.flows.append(f)
        c.query_us.extend(f["query_us"])
    return sorted(clients.values(), key=lambda c: (c.transport, c.address))


def quantiles(values: Sequence[float], qs: Sequence[float] = (0.1, 0.5, 0.9, 0.99)) -> dict[str, float] | None:
    """``{"p10": ..., "p50": ..., ...}`` (nearest rank), None for no values."""
    if not values:
        return None
    v = sorted(values)
    return {f"p{round(q * 100)}": v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))] for q in qs}


def _spread(values: Sequence[float]) -> float | None:
    """The fit error of a class's median: the median relative distance of its members' values
    from it (0: every member is the median)."""
    if not values:
        return None
    m = statistics.median(values)
    if m == 0:
        return 0.0 if all(v == 0 for v in values) else None
    return statistics.median(abs(v - m) / abs(m) for v in values)


@dataclass(frozen=True)
class PopulationClass:
    """A class of clients, as ``population.toml`` writes it (see the module)."""

    name: str
    transport: str
    shape: str
    clients: int
    queries: int
    share: float
    rate_qps: float
    """A member's queries per second over the capture (median over members)."""
    queries_per_connection: float | None
    lifetime_s: float | None
    idle_timeout_s: float | None
    closer: str
    close: str | None
    resumption: float | None
    connections_per_client: float | None
    queries_exact: bool
    fit: dict[str, float | None]
    gaps_s: dict[str, float] | None
    lifetimes_s: dict[str, float] | None
    qtypes: dict[str, int]

    def profile(self) -> dict[str, object]:
        """The fields of a replayable profile (:class:`dnscost.contract.ClientProfile`)."""
        out: dict[str, object] = {
            "name": self.name,
            "transport": self.transport,
            "query_interval_ms": max(1, round(1000 / self.rate_qps)) if self.rate_qps > 0 else 1000,
        }
        persistent = self.queries_per_connection is None or shape_of(self.queries_per_connection) == "persistent"
        if self.transport in CONNECTED and not persistent and self.closer == "client":
            # A client that closes at once after its last query closes by count; one that waits
            # closes when idle.
            assert self.queries_per_connection is not None
            if self.idle_timeout_s is not None and self.idle_timeout_s >= IDLE_CLOSE_MIN_S:
                out["idle_timeout_ms"] = round(self.idle_timeout_s * 1000)
            else:
                out["lifetime"] = {"queries": max(1, round(self.queries_per_connection))}
        if self.transport in CONNECTED:
            if self.close is not None:
                out["close"] = self.close
            if self.resumption is not None:
                out["resumption"] = round(self.resumption, 3)
        return out


@dataclass(frozen=True)
class NameStats:
    """The Do53 queries' names of a capture (``dnscost-engine capture --names``)."""

    queries: int
    distinct: int
    """Distinct (name, type) pairs."""
    repeat_share: float
    """The share of queries whose name and type were asked before in the capture: what a cache
    that kept every answer for the whole capture would answer (an upper bound of the hit ratio
    of the resolver the capture was taken at, whose TTLs and cache size cut it)."""
    file: str | None = None
    """The names file, relative to the population TOML's directory (what a replay asks)."""


def replayed_names(lines: Sequence[str], asked: int) -> NameStats:
    """:class:`NameStats` of the queries a replay asked: the names file's first ``asked`` lines,
    from the top again past its end (the engine asks a queries file in its order). Its
    ``repeat_share`` is the share a cache keeping every answer would have answered."""
    if not lines or asked <= 0:
        return NameStats(0, 0, 0.0)
    seen = {line.strip().lower() for line in lines[: min(asked, len(lines))]}
    return NameStats(asked, len(seen), (asked - len(seen)) / asked)


def name_stats(lines: Iterable[str]) -> NameStats:
    """:class:`NameStats` of a names file's lines (``name TYPE``)."""
    seen: set[str] = set()
    queries = 0
    for line in lines:
        queries += 1
        seen.add(line.strip().lower())
    return NameStats(queries, len(seen), (queries - len(seen)) / queries if queries else 0.0)


@dataclass(frozen=True)
class Population:
    """A capture's population: what was read, and its classes."""

    capture: CaptureRecord
    duration_s: float
    clients: int
    queries: int
    transports: dict[str, float]
    """Each transport's share of the queries."""
    classes: list[PopulationClass]
    names: NameStats | None = None


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def classes_of(clients: Sequence[Client], duration_s: float) -> list[PopulationClass]:
    """The clients in classes (see the module), the largest share first."""
    total = sum(c.queries for c in clients) or 1
    groups: dict[tuple[str, str], list[Client]] = defaultdict(list)
    for c in clients:
        if c.queries == 0:
            continue
        if c.transport in CONNECTED:
            qpc = c.queries_per_connection() or 0.0
            # Who closes a persistent connection is where the capture or the client's run ended:
            # not its shape.
            shape = "persistent" if shape_of(qpc) == "persistent" else f"{shape_of(qpc)}-{c.closer()}"
        else:
            rate = c.queries / duration_s if duration_s > 0 else 0.0
            shape = f"rate-1e{round(math.log10(rate))}" if rate > 0 else "rate-0"
        groups[(c.transport, shape)].append(c)
    out = []
    for (transport, shape), members in groups.items():
        queries = sum(c.queries for c in members)
        rates = [c.queries / duration_s if duration_s > 0 else 0.0 for c in members]
        qpcs = [q for c in members if (q := c.queries_per_connection()) is not None]
        lifetimes = [x for c in members for x in c.lifetimes_s()]
        idle = [x for c in members for x in c.idle_before_close_s()]
        member_lifetimes = [statistics.median(x) for c in members if (x := c.lifetimes_s())]
        closes = Counter(f["how"] for c in members for f in c.connections() if f["closer"] == "client")
        qtypes: Counter[str] = Counter()
        for c in members:
            for f in c.flows:
                qtypes.update({QTYPES.get(int(t), f"TYPE{t}"): n for t, n in f["qtypes"].items()})
        out.append(
            PopulationClass(
                name=f"{transport}-{shape}",
                transport=transport,
                shape=shape,
                clients=len(members),
                queries=queries,
                share=queries / total,
                rate_qps=statistics.median(rates),
                queries_per_connection=_median(qpcs),
                lifetime_s=_median(lifetimes),
                idle_timeout_s=_median(idle),
                closer=Counter(c.closer() for c in members).most_common(1)[0][0],
                close={"fin": "graceful", "rst": "rst", "fin+rst": "graceful"}.get(closes.most_common(1)[0][0])
                if closes
                else None,
                resumption=_median(c.resumption() for c in members),
                connections_per_client=statistics.median(len(c.connections()) for c in members)
                if transport in CONNECTED
                else None,
                queries_exact=all(f["queries_exact"] and not f["gap"] for c in members for f in c.flows),
                fit={
                    "rate_qps": _spread(rates),
                    "queries_per_connection": _spread(qpcs),
                    "lifetime_s": _spread(member_lifetimes),
                },
                gaps_s=quantiles([g for c in members for g in c.gaps_s()]),
                lifetimes_s=quantiles(lifetimes),
                qtypes=dict(qtypes.most_common(8)),
            )
        )
    return sorted(out, key=lambda k: (-k.share, k.name))


def population(
    flows: Sequence[FlowRecord],
    capture: CaptureRecord,
    prefix: tuple[int, int] | None = None,
    names: NameStats | None = None,
) -> Population:
    """The population of a capture's flows."""
    clients = clients_of(flows, prefix)
    starts = [f["opened_us"] for f in flows]
    ends = [f["closed_us"] for f in flows]
    duration_s = (max(ends) - min(starts)) / 1e6 if flows else 0.0
    queries = sum(c.queries for c in clients)
    by_transport: Counter[str] = Counter()
    for c in clients:
        by_transport[c.transport] += c.queries
    return Population(
        capture=capture,
        duration_s=duration_s,
        clients=len(clients),
        queries=queries,
        transports={t: n / queries for t, n in sorted(by_transport.items())} if queries else {},
        classes=classes_of(clients, duration_s),
        names=names,
    )


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        # Six decimals; a figure smaller than that (a rate over a very long capture) keeps six
        # significant digits rather than reading 0.
        r = round(v, 6)
        return repr(r if r or not v else float(f"{v:.6g}"))
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items() if x is not None) + " }"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML for {type(v).__name__}")


def _toml_key(k: object) -> str:
    text = str(k)
    return text if text.replace("_", "").replace("-", "").isalnum() and not text.isdigit() else _toml_value(text)


def population_toml(p: Population, source: str) -> str:
    """``population.toml``: the capture read, then one ``[[class]]`` table per class (fields
    unknown for a class are left out)."""
    lines = [
        f"# dnscost population of {source}",
        f"source = {_toml_value(source)}",
        f"duration_s = {_toml_value(p.duration_s)}",
        f"clients = {p.clients}",
        f"queries = {p.queries}",
        f"packets = {p.capture['packets']}",
        f"dns_packets = {p.capture['dns_packets']}",
        f"flows = {p.capture['flows']}",
        f"transports = {_toml_value(p.transports)}",
    ]
    if p.names is not None:
        n = p.names
        table: dict[str, object] = {"queries": n.queries, "distinct": n.distinct, "repeat_share": n.repeat_share}
        lines.append(f"names = {_toml_value({**({'file': n.file} if n.file else {}), **table})}")
    lines.append("")
    for k in p.classes:
        lines.append("[[class]]")
        fields: dict[str, object] = {
            "name": k.name,
            "transport": k.transport,
            "shape": k.shape,
            "clients": k.clients,
            "queries": k.queries,
            "share": k.share,
            "rate_qps": k.rate_qps,
            "queries_per_connection": k.queries_per_connection,
            "lifetime_s": k.lifetime_s,
            "idle_timeout_s": k.idle_timeout_s,
            "closer": k.closer,
            "close": k.close,
            "resumption": k.resumption,
            "connections_per_client": k.connections_per_client,
            "queries_exact": k.queries_exact,
            "fit": {n: v for n, v in k.fit.items() if v is not None},
            "gaps_s": k.gaps_s,
            "lifetimes_s": k.lifetimes_s,
            "qtypes": k.qtypes or None,
            "profile": k.profile(),
        }
        lines += [f"{name} = {_toml_value(v)}" for name, v in fields.items() if v is not None]
        lines.append("")
    return "\n".join(lines)


@dataclass(frozen=True)
class Replay:
    """A population as one trial replays it: every class at once, scaled by ``scale`` (its
    clients and its rate), as the engine's ``classes`` (without their targets, which are the
    trial's)."""

    source: str
    scale: float
    classes: list[ClientClass]
    rate_qps: float
    """The queries per second of every class together."""
    left_out: list[str] = field(default_factory=list)
    """Classes of the population not replayed (their transport not served: :meth:`served`)."""
    names: str | None = None
    """The capture's own names: the path of its Do53 queries' names file, asked by every class
    in turn; None for the synthetic set."""
    repeat_share: float | None = None
    """The capture's :attr:`NameStats.repeat_share`, to set the target's cache-hit ratio beside."""
    names_queries: int | None = None
    """The names file's queries (lines): a replay that asks more goes through it again."""

    def transports(self) -> list[str]:
        """The transports the classes use, in their order."""
        return list(dict.fromkeys(str(k["config"]["transport"]) for k in self.classes))

    def record(self) -> ReplayRecord:
        """As trial.json's ``population`` records it."""
        return {
            "source": self.source,
            "scale": self.scale,
            "rate_qps": self.rate_qps,
            "left_out": list(self.left_out),
            "names": self.names,
            "repeat_share": self.repeat_share,
            "names_queries": self.names_queries,
        }

    def checkable(self) -> list[ClientClass]:
        """The classes as ``generate --check`` can validate them before any target is up:
        certificates not made yet, so TLS classes trust any (the trial gives the CA)."""
        return [
            {
                "name": k["name"],
                "config": {
                    **k["config"],
                    **({"insecure": True} if k["config"]["transport"] in TLS_TRANSPORTS else {}),
                },
            }
            for k in self.classes
        ]


SHARE_SLACK = 0.01
"""How far from 1 a population's shares may sum (each is written rounded to 6 digits)."""


def _number(v: object) -> TypeGuard[int | float]:
    """A finite number, not a boolean (TOML's ``true`` is Python's 1)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _not_finite(v: object, path: str = "") -> str | None:
    """The path of the first nan or infinite number in ``v`` (tables and arrays gone through),
    None when there is none (JSON, which the engine reads, has neither)."""
    if isinstance(v, float) and not math.isfinite(v):
        return f"{path} = {_shown(v)}"
    items = v.items() if isinstance(v, Mapping) else enumerate(v) if isinstance(v, list) else ()
    for key, x in items:
        if (bad := _not_finite(x, f"{path}.{key}" if path else str(key))) is not None:
            return bad
    return None


def _shown(v: object) -> str:
    """A field's value as the TOML file has it, on one line."""
    if isinstance(v, str):
        return json.dumps(v)
    return _toml_value(v) if isinstance(v, bool | int | float) else f"a {type(v).__name__}"


def replay_of(
    doc: Mapping[str, object],
    source: str,
    *,
    scale: float | None = None,
    rate: float | None = None,
    served: Iterable[str] | None = None,
    names: bool = False,
    only: Iterable[str] | None = None,
) -> Replay:
    """The replay of a parsed ``population.toml`` (``doc``, from ``source``): each class's
    clients times ``scale`` (at least one) and its queries per second (its clients times a
    member's rate) times ``scale``, the profile's connection shape kept; or the scale that makes
    the classes replayed send ``rate`` queries per second. Neither: the capture's own size.
    ``served``: the transports a target serves; classes over others are left out, by name.
    ``names``: ask the capture's own names, its ``names.file`` (relative to ``source``'s
    directory), instead of the synthetic set. ``only``: replay these classes alone, each as
    the whole population replays it (the scale is the whole's): what one class costs within the
    mix."""
    if scale is not None and rate is not None:
        raise UsageError("give either a scale or a rate, not both")
    raw = doc.get("class")
    if not isinstance(raw, list) or not raw:
        raise UsageError(f"{source}: no [[class]] table (is it a population.toml of dnscost population?)")
    parsed: list[tuple[str, ClientProfile, int, float]] = []
    shares: list[float] = []
    for i, k in enumerate(raw):
        if not isinstance(k, Mapping):
            raise UsageError(f"{source}: class {i + 1} is not a table")
        name, profile, clients, per = k.get("name"), k.get("profile"), k.get("clients"), k.get("rate_qps")
        if (
            not isinstance(name, str)
            or not isinstance(profile, Mapping)
            or not isinstance(profile.get("transport"), str)
        ):
            raise UsageError(f"{source}: class {i + 1}: needs a name and a profile with a transport")
        label = name if name.isprintable() else json.dumps(name)
        # TOML's booleans are Python's ints, and its nan and inf are floats: neither is a figure
        # dnscost population writes.
        if not _number(clients) or not isinstance(clients, int) or clients < 1:
            raise UsageError(
                f"{source}: class {label}: clients = {_shown(clients)} is not a count of clients (1 or more)"
            )
        if not _number(per) or per < 0:
            raise UsageError(
                f"{source}: class {label}: rate_qps = {_shown(per)} is not a rate (a finite number, 0 or more)"
            )
        if (bad := _not_finite(profile)) is not None:
            raise UsageError(f"{source}: class {label}: profile.{bad} is not a finite number")
        if "share" in k:
            share = k["share"]
            if not _number(share) or not 0 <= share <= 1:
                raise UsageError(
                    f"{source}: class {label}: share = {_shown(share)} is not a share of the queries (0 to 1)"
                )
            shares.append(float(share))
        parsed.append((name, ClientProfile(**profile), clients, float(per)))  # type: ignore[typeddict-item]
    # The shares are each class's of the capture's queries: every class's together make 1 (as
    # written, rounded); fewer classes' (some without one) make no more.
    if shares and (sum(shares) > 1 + SHARE_SLACK or (len(shares) == len(parsed) and sum(shares) < 1 - SHARE_SLACK)):
        raise UsageError(
            f"{source}: the classes' shares sum to {sum(shares):g}: a population's shares of its queries sum to 1"
        )
    left_out: list[str] = []
    if served is not None:
        keep = set(served)
        left_out = [name for name, profile, _, _ in parsed if profile["transport"] not in keep]
        parsed = [c for c in parsed if c[1]["transport"] in keep]
        if not parsed:
            raise UsageError(f"{source}: no class over a transport served ({', '.join(sorted(keep))})")
    natural = sum(clients * per for _, _, clients, per in parsed)
    if rate is not None:
        if not rate > 0:
            raise UsageError(f"rate: {rate} is not a positive rate")
        if natural <= 0:
            raise UsageError(f"{source}: its classes send nothing (every rate_qps is 0): give a scale, not a rate")
        scale = rate / natural
    k_scale = 1.0 if scale is None else scale
    if not 0 < k_scale <= 1e6:
        raise UsageError(f"scale: {k_scale} is out of range (0, 1000000]")
    if only is not None:
        chosen = set(only)
        if missing := sorted(chosen - {name for name, _, _, _ in parsed} - set(left_out)):
            raise UsageError(f"{source}: no class {', '.join(missing)}")
        parsed = [c for c in parsed if c[0] in chosen]
        if not parsed:
            raise UsageError(f"{source}: {', '.join(sorted(chosen))}: over no transport served")
    classes: list[ClientClass] = []
    for name, profile, clients, per in parsed:
        class_rate = max(clients * per * k_scale, 0.001)
        config: dict[str, object] = {
            "transport": profile["transport"],
            "profile": profile,
            "clients": max(1, round(clients * k_scale)),
            "rate": round(class_rate, 3) or 0.001,
        }
        if profile["transport"] != "udp" and "lifetime" not in profile and "idle_timeout_ms" not in profile:
            # Clients that keep their connections had them open before the measured period (as
            # a group of profiles replays them): opened first, not in a burst with the queries.
            config["open_first"] = True
        classes.append({"name": name, "config": config})
    total = sum(float(c["config"]["rate"]) for c in classes)
    if not names:
        return Replay(source, k_scale, classes, total, left_out)
    table = doc.get("names")
    if not isinstance(table, Mapping):
        table = {}
    file = table.get("file")
    if not isinstance(file, str) or not file:
        raise UsageError(f"{source}: no names file (dnscost population --names FILE writes one and names it here)")
    path = (Path(source).parent / file).resolve()
    if not path.is_file():
        raise UsageError(f"{path}: no such names file (named by {source})")
    share, lines = table.get("repeat_share"), table.get("queries")
    repeat = float(share) if _number(share) else None
    count = lines if _number(lines) and isinstance(lines, int) else None
    return Replay(source, k_scale, classes, total, left_out, str(path), repeat, count)
