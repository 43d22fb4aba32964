"""The spec of a ``dnscost client`` experiment (TOML; ``experiments/client.toml`` is the shipped
one): up to three parts, each optional, every field checked with an error naming it.

.. code-block:: toml

    [check]                      # the latency check (clientside/latency.py)
    rtt_ms = [20, 50]
    transports = ["udp", "tcp", "dot", "doh", "doq", "doh3"]
    queries = 10

    [times]                      # response times per transport (clientside/times.py)
    presets = ["native", "lte", "lossy-lte", "3g"]
    upstream = "upstream"        # the resolver's link to the authoritative server
    targets = ["unbound", "knot-resolver"]
    transports = ["udp", "tcp", "dot", "doh"]
    qps = 4
    queries = 200
    caches = ["cold", "warm"]

    [pageload]                   # page loads with a browser (clientside/pageload.py)
    presets = ["native", "lte", "lossy-lte", "3g"]
    browser = "chromium"
    pages = 10
    rounds = 3
    transports = ["do53", "dot", "doh"]

``presets_file`` at the top adds presets of the user's (the form of ``lab/presets.toml``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dnscost.errors import UsageError
from dnscost.lab.fields import fields, number, read_toml, strings
from dnscost.lab.presets import Preset, load_presets
from dnscost.transports import TRANSPORTS

__all__ = ["CheckSpec", "ClientSpec", "PageSpec", "TimesSpec", "load_spec"]


@dataclass(frozen=True)
class CheckSpec:
    rtt_ms: tuple[float, ...] = (20.0, 50.0)
    transports: tuple[str, ...] = TRANSPORTS
    queries: int = 10


@dataclass(frozen=True)
class TimesSpec:
    presets: tuple[Preset, ...]
    upstream: Preset
    targets: tuple[str, ...] = ("unbound",)
    transports: tuple[str, ...] = ("udp", "tcp", "dot", "doh")
    qps: float = 4.0
    queries: int = 200
    caches: tuple[str, ...] = ("cold", "warm")


@dataclass(frozen=True)
class PageSpec:
    presets: tuple[Preset, ...]
    browser: str = "chromium"
    pages: int = 10
    rounds: int = 3
    transports: tuple[str, ...] = ("do53", "dot", "doh")


@dataclass(frozen=True)
class ClientSpec:
    path: Path | None
    check: CheckSpec | None = None
    times: TimesSpec | None = None
    pageload: PageSpec | None = None
    presets: dict[str, Preset] = field(default_factory=dict)
    """Every preset the spec uses, by name (recorded with the results)."""

    def to_dict(self) -> dict[str, object]:
        def part(p: Any) -> Any:
            if p is None:
                return None
            d = dict(p.__dict__)
            for k in ("presets",):
                if k in d:
                    d[k] = [x.name for x in d[k]]
            if "upstream" in d:
                d["upstream"] = d["upstream"].name
            return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

        return {
            "spec": str(self.path) if self.path else None,
            "check": part(self.check),
            "times": part(self.times),
            "pageload": part(self.pageload),
            "presets": {n: p.to_dict() for n, p in self.presets.items()},
        }


def _presets(where: str, names: Any, known: dict[str, Preset]) -> tuple[Preset, ...]:
    chosen = strings(where, names)
    for n in chosen:
        if n not in known:
            raise UsageError(f"{where}: unknown preset {n!r} (known: {', '.join(known)})")
    return tuple(known[n] for n in chosen)


def parse_spec(doc: dict[str, object], path: Path | None = None) -> ClientSpec:
    """A spec from its parsed TOML (see the module's documentation)."""
    from dnscost.clientside.latency import LISTEN
    from dnscost.clientside.pageload_plan import SETUPS
    from dnscost.lab.browsers import BROWSERS
    from dnscost.targets import TARGETS

    fields("client spec", doc, {"check", "times", "pageload", "presets_file"})
    extra = doc.get("presets_file")
    if extra is not None and not isinstance(extra, str):
        raise UsageError("presets_file must be a path")
    extra_path = None if extra is None else (path.parent if path else Path.cwd()) / extra
    known = load_presets(extra_path)
    used: dict[str, Preset] = {}

    def choose(where: str, names: Any) -> tuple[Preset, ...]:
        ps = _presets(where, names, known)
        used.update({p.name: p for p in ps})
        return ps

    def subset(where: str, values: Any, allowed: Any) -> tuple[str, ...]:
        chosen = strings(where, values)
        for v in chosen:
            if v not in allowed:
                raise UsageError(f"{where}: unknown {v!r} (known: {', '.join(allowed)})")
        return chosen

    check = times = page = None
    if "check" in doc:
        t = fields("check", doc["check"], {"rtt_ms", "transports", "queries"})
        rtts = t.get("rtt_ms", [20, 50])
        if not isinstance(rtts, list) or not rtts:
            raise UsageError("check.rtt_ms must be a non-empty list of numbers")
        check = CheckSpec(
            tuple(float(number("check.rtt_ms", r, 1, 2000)) for r in rtts),
            subset("check.transports", t.get("transports", list(CheckSpec.transports)), LISTEN),
            number("check.queries", t.get("queries", 10), 3, 1000, integer=True),
        )
    if "times" in doc:
        t = fields("times", doc["times"], {"presets", "upstream", "targets", "transports", "qps", "queries", "caches"})
        if "presets" not in t:
            raise UsageError("times.presets is missing")
        upstream = t.get("upstream", "upstream")
        if not isinstance(upstream, str) or upstream not in known:
            raise UsageError(f"times.upstream: unknown preset {upstream!r} (known: {', '.join(known)})")
        used[upstream] = known[upstream]
        times = TimesSpec(
            choose("times.presets", t["presets"]),
            known[upstream],
            subset("times.targets", t.get("targets", ["unbound"]), TARGETS),
            subset("times.transports", t.get("transports", ["udp", "tcp", "dot", "doh"]), TRANSPORTS),
            float(number("times.qps", t.get("qps", 4.0), 0.1, 100)),
            number("times.queries", t.get("queries", 200), 10, 100_000, integer=True),
            subset("times.caches", t.get("caches", ["cold", "warm"]), ("cold", "warm")),
        )
    if "pageload" in doc:
        t = fields("pageload", doc["pageload"], {"presets", "browser", "pages", "rounds", "transports"})
        if "presets" not in t:
            raise UsageError("pageload.presets is missing")
        browser = t.get("browser", "chromium")
        if browser not in BROWSERS:
            raise UsageError(f"pageload.browser: unknown {browser!r} (known: {', '.join(BROWSERS)})")
        page = PageSpec(
            choose("pageload.presets", t["presets"]),
            browser,
            number("pageload.pages", t.get("pages", 10), 1, 1000, integer=True),
            number("pageload.rounds", t.get("rounds", 3), 1, 1000, integer=True),
            subset("pageload.transports", t.get("transports", ["do53", "dot", "doh"]), SETUPS),
        )
    if check is None and times is None and page is None:
        raise UsageError("client spec: give at least one of [check], [times], [pageload]")
    return ClientSpec(path, check, times, page, used)


def load_spec(path: Path) -> ClientSpec:
    return parse_spec(read_toml(path, "client spec"), path)
