"""``dnscost client``: what clients pay, per transport, under emulated networks.

dnscost client check [--rtt 20ms,50ms] [--transports udp,tcp,dot,doh,doq,doh3]
dnscost client presets [--presets FILE]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dnscost.argtypes import parse_duration_ms
from dnscost.errors import UsageError

__all__ = ["add_parser", "main"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from dnscost.clientside.latency import LISTEN

    c = sub.add_parser("client", help="what clients pay per transport, under emulated networks")
    csub = c.add_subparsers(dest="action", required=True)
    ch = csub.add_parser(
        "check", help="the latency check: response times over a clean link are the protocols' round trips"
    )
    ch.add_argument("--rtt", default="20ms,50ms", help="round-trip times of the clean links (default 20ms,50ms)")
    ch.add_argument("--transports", default=",".join(LISTEN), help=f"default {','.join(LISTEN)}")
    ch.add_argument("--queries", type=int, default=10, help="measured queries per case (default 10)")
    ch.add_argument("--output", type=Path, help="directory (default results/client/<run-id>)")
    run = csub.add_parser("run", help="run a client spec (default experiments/client.toml) and write its report")
    run.add_argument("spec", type=Path, nargs="?", help="the spec (TOML; see experiments/client.toml)")
    run.add_argument("--quick", action="store_true", help="experiments/client-quick.toml: a few minutes")
    run.add_argument("--output", type=Path, help="directory (default results/client/<run-id>)")
    tm = csub.add_parser("times", help="response times per transport and cache, through a real resolver")
    tm.add_argument("--preset", default="lte", help="network presets, comma-separated (default lte)")
    tm.add_argument("--upstream", default="upstream", help="the resolver's link to the authoritative server")
    tm.add_argument("--target", default="unbound", help="the resolver (default unbound)")
    tm.add_argument("--transports", default="udp,tcp,dot,doh", help="default udp,tcp,dot,doh")
    tm.add_argument("--qps", type=float, default=4.0, help="the client's queries a second (default 4)")
    tm.add_argument("--queries", type=int, default=200, help="queries per run (default 200)")
    tm.add_argument("--presets", type=Path, help="a TOML file of more presets")
    tm.add_argument("--output", type=Path, help="directory (default results/client/<run-id>)")
    rp = csub.add_parser("report", help="recompute a client run's report.html from its records")
    rp.add_argument("run_dir", type=Path)
    pr = csub.add_parser("presets", help="the network presets, their parameters and sources")
    pr.add_argument("--presets", type=Path, help="a TOML file of more presets (see lab/presets.toml)")


def _durations_ms(text: str, what: str) -> list[float]:
    try:
        values = [parse_duration_ms(d) for d in text.split(",") if d.strip()]
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"client: {what}: {e}") from None
    if not values or min(values) <= 0:
        raise UsageError(f"client: {what} needs positive durations")
    return [float(v) for v in values]


def main(a: argparse.Namespace) -> int:
    if a.action == "presets":
        from dnscost.lab.presets import load_presets

        for p in load_presets(a.presets).values():
            rates = f"{p.down_kbps or 0:g}/{p.up_kbps or 0:g} kbit/s" if (p.down_kbps or p.up_kbps) else "no rate limit"
            print(f"{p.name:<10} {p.rtt_ms:>6g} ms RTT  ±{p.jitter_ms:g} ms  {p.loss_pct:g} % loss  {rates}")
            print(f"{'':<10} {p.source}")
        return 0
    from dnscost.clientside.report import write_report
    from dnscost.results import new_run_id

    if a.action == "report":
        if not (a.run_dir / "client.json").exists():
            raise UsageError(f"client report: {a.run_dir} has no client.json")
        print(f"client: wrote {write_report(a.run_dir)}")
        return 0
    out = a.output or Path("results", "client", new_run_id()).resolve()
    if a.action == "run":
        return _run(a, out)
    if a.action == "times":
        return _times(a, out)
    return _check(a, out)


def _run(a: argparse.Namespace, out: Path) -> int:
    from importlib import resources

    from dnscost.clientside.report import write_report
    from dnscost.clientside.run import run_client
    from dnscost.clientside.spec import load_spec

    if a.spec is not None and a.quick:
        raise UsageError("client run: give a spec or --quick, not both")
    name = "client-quick.toml" if a.quick else "client.toml"
    path = a.spec or Path(str(resources.files("dnscost.experiments").joinpath(name)))
    spec = load_spec(path)
    print(f"client: {path} -> {out}", flush=True)
    try:
        run_client(spec, out, say=lambda text: print(text, flush=True))
    finally:
        if (out / "client.json").exists():
            print(f"client: wrote {write_report(out)}")
    return 0


def _times(a: argparse.Namespace, out: Path) -> int:
    from dnscost.clientside.report import write_report
    from dnscost.clientside.run import run_client
    from dnscost.clientside.spec import parse_spec

    doc: dict[str, object] = {
        "times": {
            "presets": [p.strip() for p in a.preset.split(",") if p.strip()],
            "upstream": a.upstream,
            "targets": [a.target],
            "transports": [t.strip() for t in a.transports.split(",") if t.strip()],
            "qps": a.qps,
            "queries": a.queries,
        }
    }
    if a.presets is not None:
        doc["presets_file"] = str(a.presets)
    run_client(parse_spec(doc), out, say=lambda text: print(text, flush=True))
    print(f"client: wrote {write_report(out)}")
    return 0


def _check(a: argparse.Namespace, out: Path) -> int:
    from dnscost.clientside.latency import run_check, table

    rtts = _durations_ms(a.rtt, "--rtt")
    if a.queries < 3:
        raise UsageError("client check: --queries must be at least 3")
    transports = [t.strip() for t in a.transports.split(",") if t.strip()]
    print(f"client check: {len(rtts)} round-trip times, transports {','.join(transports)} -> {out}", flush=True)
    rows = run_check(out, rtts, transports, queries=a.queries)
    print(table(rows))
    failed = [r for r in rows if not r["ok"]]
    print(
        f"client check: {len(rows) - len(failed)} of {len(rows)} cases within ±5 % + slack; wrote {out / 'check.json'}"
    )
    return 1 if failed else 0
