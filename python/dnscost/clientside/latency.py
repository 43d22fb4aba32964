"""The latency check dnscost passes on itself: over a clean emulated link of round-trip time r
(no loss, no rate limit), a query's response time is what the protocol's round trips make it:

========================  ==========================================================
udp                       r
tcp, a new connection     2r (SYN, then the query)
dot, doh, a new one       3r (SYN, the TLS 1.3 handshake, then the query), full or resumed
doq, doh3, a new one      2r (the QUIC handshake, then the query); r with 0-RTT
any, a reused connection  r
========================  ==========================================================

Each case is one engine run in the lab's client namespace against ``dnscost-engine serve`` in
the server's, one query at a time on a fixed schedule: a new connection for each query (the
client closes it when idle, before the next query is due) or one kept open. The engine measures
a query from the time it was due, so a new connection's set-up is in it.

Every case first runs over a link of no delay: its median there is the work of both ends (a TLS
or QUIC handshake's signatures and key exchange, the emulator's forwarding), the *baseline*. A
case passes at round-trip time r when its median lies between ``round trips * r`` and
``round trips * r + baseline``, each widened by 5 % of ``round trips * r`` plus
:data:`SLACK_MS`: no answer comes before its round trips, and none later than its round trips
and its ends' work. (With a delay, some of that work overlaps the link's: over no delay both
ends compute at once on a busy machine, over a delay in turn, so a median may fall short of
``round trips * r + baseline`` but never of ``round trips * r``.) Its minimum is shown beside it. The link's
own count of the delay it applied is kept with the results: the observer of r other than the
engine."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from dnscost.certs import make_tls
from dnscost.contract import EngineConfig, EngineRecord, SummaryRecord
from dnscost.engine import Responder, generate, summary_of
from dnscost.errors import UsageError
from dnscost.lab.lab import SERVER_ADDRESS, Lab
from dnscost.lab.presets import Preset
from dnscost.results import write_json
from dnscost.transports import TLS_TRANSPORTS

__all__ = ["CASES", "SLACK_MS", "Case", "cases_for", "engine_config", "judge", "run_check"]

SLACK_MS = 2.0
"""The constant of the check's tolerance, beside the measured baseline: the noise of a shared
machine between the baseline's run and the case's."""
TOLERANCE = 0.05
NAMES = 10_000


@dataclass(frozen=True)
class Case:
    transport: str
    shape: str
    """``reused`` (one connection for every query), ``full`` (a new connection per query, full
    handshake), ``resumed`` (new, TLS resumed), ``0rtt`` (new, resumed with 0-RTT data), or
    ``new`` (TCP and UDP, no TLS)."""
    round_trips: int


CASES: tuple[Case, ...] = (
    Case("udp", "new", 1),
    Case("tcp", "new", 2),
    Case("tcp", "reused", 1),
    Case("dot", "full", 3),
    Case("dot", "resumed", 3),
    Case("dot", "reused", 1),
    Case("doh", "full", 3),
    Case("doh", "resumed", 3),
    Case("doh", "reused", 1),
    Case("doq", "full", 2),
    Case("doq", "0rtt", 1),
    Case("doq", "reused", 1),
    Case("doh3", "full", 2),
    Case("doh3", "0rtt", 1),
    Case("doh3", "reused", 1),
)
LISTEN = {
    "udp": f"udp://{SERVER_ADDRESS}:53",
    "tcp": f"tcp://{SERVER_ADDRESS}:53",
    "dot": f"dot://{SERVER_ADDRESS}:853",
    "doh": f"doh://{SERVER_ADDRESS}:443/dns-query",
    "doq": f"doq://{SERVER_ADDRESS}:853",
    "doh3": f"doh3://{SERVER_ADDRESS}:443/dns-query",
}
PORTS = {"udp": 53, "tcp": 53, "dot": 853, "doh": 443, "doq": 853, "doh3": 443}


def cases_for(transports: Iterable[str]) -> list[Case]:
    wanted = list(transports)
    unknown = [t for t in wanted if t not in LISTEN]
    if unknown:
        raise UsageError(f"client check: unknown transport {unknown[0]!r} (known: {', '.join(LISTEN)})")
    return [c for c in CASES if c.transport in wanted]


def gap_ms(rtt_ms: float) -> float:
    """Time between queries: long enough for the slowest case's answer (3r) and the client's
    idle close (r + 30 ms after it) before the next query is due."""
    return 4 * rtt_ms + 100


def engine_config(case: Case, rtt_ms: float, queries: int, ca: Path) -> EngineConfig:
    """The engine configuration of one case (see the module's documentation)."""
    gap = gap_ms(rtt_ms)
    config: EngineConfig = {
        "transport": case.transport,
        "target": f"{SERVER_ADDRESS}:{PORTS[case.transport]}",
        "connections": 1,
        "rate": 1000 / gap,
        "arrival": "constant",
        "warmup_ms": round(2 * gap),  # the first connection (never resumed) is not measured
        "duration_ms": round(queries * gap),
        "timeout_ms": round(max(2000, 20 * rtt_ms)),
        "synthetic": NAMES,
        "tld": "test",
        "threads": 1,
    }
    if case.transport != "udp":
        if case.shape == "reused":
            config["open_first"] = True
        else:
            config["idle_timeout_ms"] = round(rtt_ms + 30)
    if case.transport in TLS_TRANSPORTS:
        config.update({"ca_file": str(ca), "sni": "localhost"})
        if case.shape != "reused":
            config["resumption"] = 0.0 if case.shape == "full" else 1.0
        if case.shape == "0rtt":
            config["early_data"] = 1.0
    return config


def judge(
    case: Case, rtt_ms: float, summary: SummaryRecord, baseline_ms: float = 0.0, slack_ms: float = SLACK_MS
) -> dict[str, object]:
    """One row of the check from the engine's summary record and the case's baseline (pure)."""
    m = summary["measured"]
    lat = m["latency"]
    expected = case.round_trips * rtt_ms + baseline_ms
    p50 = lat["p50_us"] / 1000
    allowed = TOLERANCE * case.round_trips * rtt_ms + slack_ms
    hs = m["handshakes"]
    conns = m["connections"]
    answered = m["queries"]["answered"]
    # A connection per query (the first of the window may have opened just before it).
    each = answered - 1
    shape_ok = {
        "new": case.transport == "udp" or conns["opened"] >= each,
        "reused": conns["opened"] == 0,
        "full": conns["opened"] >= each and hs["full"] >= each and hs["resumed"] == 0,
        "resumed": conns["opened"] >= each and hs["resumed"] >= each and hs["zero_rtt_accepted"] == 0,
        "0rtt": conns["opened"] >= each and hs["zero_rtt_accepted"] >= each,
    }[case.shape]
    within = case.round_trips * rtt_ms - allowed <= p50 <= expected + allowed
    ok = answered > 0 and m["queries"]["timed_out"] == 0 and shape_ok and within
    return {
        **asdict(case),
        "rtt_ms": rtt_ms,
        "baseline_ms": baseline_ms,
        "expected_ms": round(expected, 3),
        "allowed_ms": round(allowed, 3),
        "p50_ms": p50,
        "min_ms": lat["min_us"] / 1000,
        "p90_ms": lat["p90_us"] / 1000,
        "answered": answered,
        "timed_out": m["queries"]["timed_out"],
        "connections_opened": conns["opened"],
        "handshakes": hs,
        "shape_ok": shape_ok,
        "ok": ok,
    }


def run_check(
    out: Path, rtts_ms: Sequence[float], transports: Iterable[str], *, queries: int = 10, slack_ms: float = SLACK_MS
) -> list[dict[str, object]]:
    """Runs every case over a link of no delay (the baselines), then at every round-trip time,
    one lab per RTT; writes ``check.jsonl`` (a row per case, as they come) and ``check.json``;
    returns the rows (the baselines' first, at ``rtt_ms`` 0)."""
    cases = cases_for(transports)
    out.mkdir(parents=True, exist_ok=True)
    tls = make_tls(out / "tls", addresses=[SERVER_ADDRESS])
    rows: list[dict[str, object]] = []
    links: dict[str, object] = {}
    with (out / "check.jsonl").open("w") as log:
        baselines: dict[Case, float] = {}
        for rtt in [0.0, *rtts_ms]:
            preset = Preset(f"rtt-{rtt:g}ms", f"clean link, {rtt:g} ms RTT", "dnscost latency check", float(rtt))
            cell = out / f"rtt-{rtt:g}ms"
            lab = Lab.create(preset, workdir=cell)
            try:
                listen = [LISTEN[t] for t in dict.fromkeys(c.transport for c in cases)]
                responder = Responder(
                    cell,
                    listen,
                    synthetic=NAMES,
                    extra=[
                        "--cert",
                        str(tls.cert),
                        "--key",
                        str(tls.key),
                        "--connections-log",
                        str(cell / "server.jsonl"),
                    ],
                    exec_prefix=lab.exec_prefix("server"),
                )
                try:
                    for case in cases:
                        name = f"{case.transport}-{case.shape}"
                        records = generate(
                            engine_config(case, rtt, queries, tls.ca),
                            cell / name,
                            name="engine",
                            exec_prefix=lab.exec_prefix("client"),
                        )
                        row = judge(case, rtt, summary_of(records), baselines.setdefault(case, _p50(records)), slack_ms)
                        rows.append(row)
                        log.write(json.dumps(row) + "\n")
                        log.flush()
                finally:
                    responder.stop()
            finally:
                lab.remove()
            links[preset.name] = lab.link_stats()
    doc = {"rtts_ms": list(rtts_ms), "slack_ms": slack_ms, "tolerance": TOLERANCE, "rows": rows, "link": links}
    write_json(out / "check.json", doc)
    return rows


def _p50(records: Sequence[EngineRecord]) -> float:
    return float(summary_of(records)["measured"]["latency"]["p50_us"]) / 1000


def table(rows: Sequence[dict[str, object]]) -> str:
    """The check as a plain-text table."""
    lines = [f"{'rtt':>6} {'transport':<6} {'shape':<8} {'base':>7} {'expect':>8} {'median':>8} {'min':>8}  verdict"]
    for r in rows:
        verdict = "ok" if r["ok"] else ("FAIL" if r["shape_ok"] else "FAIL (shape)")
        lines.append(
            f"{r['rtt_ms']:>4g}ms {r['transport']:<6} {r['shape']:<8} {r['baseline_ms']:>5.2f}ms "
            f"{r['expected_ms']:>6.1f}ms "
            f"{r['p50_ms']:>6.1f}ms {r['min_ms']:>6.1f}ms  {verdict}"
        )
    return "\n".join(lines)
