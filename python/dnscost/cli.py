"""The ``dnscost`` command. User mistakes print one line and exit non-zero, without a traceback.

Environment variables read here and nowhere else: ``DNSCOST_ENGINE`` (path of
``dnscost-engine``, see :func:`dnscost.engine.engine_path`), ``DNSCOST_ROOTS`` (where release
roots live, :mod:`dnscost.targets.roots`; ``--roots`` overrides it).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnscost import __version__
from dnscost.argtypes import cpu_list, parse_duration_ms, parse_lifetime, parse_rate
from dnscost.certs import DEFAULT_KEY_TYPE, KEY_TYPES
from dnscost.cluster import ClusterSettings
from dnscost.cluster.command import add_options as add_cluster_options
from dnscost.cluster.command import add_parser as add_cluster_parser
from dnscost.cluster.command import settings_from as cluster_settings
from dnscost.engine import TRANSPORTS
from dnscost.errors import DnscostError, TargetError, UsageError
from dnscost.network import DEFAULT_NETWORK, NETWORKS, check_network
from dnscost.targets.command import add_parser as add_target_parser
from dnscost.targets.command import add_roots_option
from dnscost.targets.place import label_of

if TYPE_CHECKING:
    from dnscost.results import Run

__all__ = ["main"]


# Engine knobs offered by `dnscost load`: flag, JSON field, type, help.
ENGINE_KNOBS: list[tuple[str, str, Any, str]] = [
    ("--connections", "connections", int, "concurrent connection slots (udp: sockets)"),
    ("--lifetime", "lifetime", parse_lifetime, "forever, 30s, 100q or 30s,100q"),
    ("--idle-timeout", "idle_timeout_ms", parse_duration_ms, "client closes idle connections after this"),
    ("--open-rate", "open_rate", float, "ceiling on new connections per second"),
    ("--open-first", "open_first", bool, "open every connection before any query (until the warm-up ends)"),
    ("--resumption", "resumption", float, "share of reconnections resuming TLS (0..1)"),
    ("--early-data", "early_data", float, "doq, doh3: share of resumed connections sending 0-RTT data (0..1)"),
    ("--in-flight", "in_flight", int, "outstanding queries per connection"),
    ("--close", "close", str, "graceful, fin or rst; doq, doh3: graceful or silent"),
    ("--rate", "rate", parse_rate, "queries per second (open loop) or max"),
    ("--arrival", "arrival", str, "constant or poisson"),
    ("--duration", "duration_ms", parse_duration_ms, "measured period (default 20s)"),
    ("--warmup", "warmup_ms", parse_duration_ms, "load before the measured period (default 2s)"),
    ("--timeout", "timeout_ms", parse_duration_ms, "query timeout"),
    ("--doh-method", "doh_method", str, "post or get"),
    ("--doh-headers", "doh_headers", str, "minimal or browser"),
    ("--tls-version", "tls_version", str, "1.2 or 1.3"),
    ("--tls-group", "tls_group", str, "x25519, secp256r1, secp384r1, x25519mlkem768"),
    ("--edns-size", "edns_udp_size", int, "EDNS UDP size, 0 for none"),
    ("--threads", "threads", int, "generator threads (default: one per generator CPU)"),
    ("--seed", "seed", int, "seed of arrivals and resumption draws"),
]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dnscost", description="Measure what DNS transports cost resolvers.")
    p.add_argument("--version", action="version", version=f"dnscost {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("doctor", help="check this machine and say what is missing")

    add_target_parser(sub)

    ld = sub.add_parser("load", help="one measured trial against a target")
    add_roots_option(ld)
    ld.add_argument(
        "--target",
        required=True,
        help="dnsdist, knot-resolver, unbound, bind9, pdns-recursor, builtin, coredns, or external; "
        "NAME@RELEASE for a Debian release root (dnscost target prepare), NAME@PATH for your own build",
    )
    ld.add_argument("--transport", required=True, choices=TRANSPORTS)
    for flag, field, kind, text in ENGINE_KNOBS:
        if kind is bool:
            ld.add_argument(flag, dest=f"engine_{field}", action="store_true", default=None, help=text)
        else:
            ld.add_argument(flag, dest=f"engine_{field}", type=kind, help=text)
    ld.add_argument("--engine-config", type=Path, help="JSON engine configuration to start from (flags override)")
    ld.add_argument("--target-cpus", type=cpu_list, default=[0], help="CPUs of the target (default 0)")
    ld.add_argument("--generator-cpus", type=cpu_list, help="CPUs of the generator (default: all others)")
    ld.add_argument("--names", type=int, default=10_000, help="synthetic names (default 10000)")
    ld.add_argument("--tld", default="test")
    ld.add_argument("--no-fill", action="store_true", help="skip the cache pre-fill")
    ld.add_argument("--cert-key", choices=KEY_TYPES, default=DEFAULT_KEY_TYPE, help="the target's certificate key")
    ld.add_argument("--network", choices=NETWORKS, help=f"where the target sits (default {DEFAULT_NETWORK})")
    ld.add_argument("--output", type=Path, help="results directory (default results/load/<run-id>)")
    _external_options(ld)
    add_cluster_options(ld)

    r = sub.add_parser("run", help="run an experiment spec (TOML) and write its report")
    r.add_argument("spec", type=Path, nargs="?", help="the spec (not needed with --resume)")
    r.add_argument("--output", type=Path, help="run directory (default results/<experiment>/<run-id>)")
    r.add_argument("--resume", type=Path, metavar="RUN_DIR", help="finish an interrupted run, keeping its trials")
    _run_options(r)

    rp = sub.add_parser("reproduce", help="reproduce the reference study (ISCC 2023) on this machine")
    rp.add_argument("--output", type=Path, help="run directory (default results/study/<run-id>)")
    rp.add_argument(
        "--quick",
        action="store_true",
        help="fewer points, short trials, three rounds (two for QUIC): about a quarter of an hour",
    )
    rp.add_argument("--resume", type=Path, metavar="RUN_DIR", help="finish an interrupted run")
    _run_options(rp)

    rep = sub.add_parser("report", help="recompute tables, figures and report.html of a run")
    rep.add_argument("run_dir", type=Path)
    rep.add_argument("--check", action="store_true", help="open the report in headless Chromium and check it")

    ob = sub.add_parser("observe", help="watch how a real client uses DNS connections, in a lab of namespaces")
    ob.add_argument("--client", help="chromium, firefox, dnss, unbound-dot, knot-dot, or external (with --command)")
    ob.add_argument("--delay", default="50ms,1s,60s", help="times between resolutions (default 50ms,1s,60s)")
    ob.add_argument("--policy", default="google,cloudflare,quad9", help="the resolver's policies (default: three)")
    ob.add_argument("--duration", type=parse_duration_ms, help="per observation (default 30m; --quick: 2m)")
    ob.add_argument("--quick", action="store_true", help="two minutes per observation")
    ob.add_argument(
        "--command", dest="external_command", help="--client external: the stub to run (listens on 127.0.0.1:53)"
    )
    ob.add_argument("--policies", type=Path, help="a TOML file of more policies (see observe/policies.toml)")
    ob.add_argument("--output", type=Path, help="directory (default results/observe/<run-id>)")
    ob.add_argument("--capture", action="store_true", help="also capture packets at the resolver (capture.pcap)")
    ob.add_argument("--pcap", type=Path, help="observe nothing: analyse this capture's connections with --server")
    ob.add_argument("--server", help="--pcap: the resolver's ADDRESS:PORT")
    ob.add_argument(
        "--from",
        dest="from_dir",
        type=Path,
        metavar="DIR",
        help="observe nothing: recompute DIR's summaries and figures",
    )

    from dnscost.client.command import add_parser as add_client_parser

    add_client_parser(sub)

    from dnscost.capacity_command import add_parser as add_plan_parser

    add_plan_parser(sub)
    add_cluster_parser(sub)

    from dnscost.keep import add_parser as add_keep_parser

    add_keep_parser(sub)

    cmp = sub.add_parser("compare", help="differences between two runs, with their uncertainty")
    cmp.add_argument("run_a", type=Path)
    cmp.add_argument("run_b", type=Path)
    cmp.add_argument(
        "--force", action="store_true", help="compare runs from different machines or --network set-ups anyway"
    )
    cmp.add_argument("--json", action="store_true", help="one JSON document (every row, rel_diff included)")
    return p


def _external_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("external target (--target external: a server you started; docs/targets.md)")
    g.add_argument(
        "--external-endpoint",
        action="append",
        default=[],
        metavar="URL",
        help="udp|tcp|dot|tls|doh|https|doq|quic|doh3|h3://ADDR:PORT[/path], once per transport",
    )
    g.add_argument("--external-pid", type=int, metavar="PID", help="meter this process (and its threads)")
    g.add_argument("--external-cgroup", type=Path, metavar="DIR", help="meter this cgroup (v2, or v1 cpuacct)")
    g.add_argument("--external-ca", metavar="FILE", help="CA of its certificates, or 'insecure' (not verified)")
    g.add_argument("--external-sni", metavar="NAME", help="TLS server name (default: the engine's)")
    g.add_argument("--external-version", metavar="TEXT", help="its version, recorded as given")


def spec_external(a: argparse.Namespace, spec: Any, recorded: dict[str, Any] | None = None) -> Any:
    """``spec`` with the external target's settings it runs with: ``--external-*`` when given
    (they replace the spec's ``[external]`` table), else the table, else those ``recorded`` in
    the run being resumed. One line when the spec loads the external target without them, or
    when they are given for a spec that does not load it."""
    import dataclasses

    from dnscost.targets.external import EXTERNAL, ExternalSettings, resolve_external

    loads = EXTERNAL in spec.all_targets()
    given = [a.external_endpoint, a.external_pid, a.external_cgroup, a.external_ca, a.external_sni, a.external_version]
    if any(v for v in given):
        if not loads:
            raise UsageError("--external-* options are for the external target: add --target external")
        settings = resolve_external(
            a.external_endpoint,
            pid=a.external_pid,
            cgroup=a.external_cgroup,
            ca=a.external_ca,
            sni=a.external_sni,
            version=a.external_version,
        )
    elif spec.external is not None:
        settings = spec.external
    elif recorded is not None:
        settings = ExternalSettings.from_dict(recorded)
    else:
        settings = None
    if loads and settings is None:
        raise UsageError(
            f"{spec.origin}: target external needs --external-endpoint URL and --external-pid PID or "
            "--external-cgroup DIR (or the spec's [external] table)"
        )
    return dataclasses.replace(spec, external=settings if loads else None)


def external_settings(a: argparse.Namespace, target: str) -> Any:
    """The external target's settings, resolved once; None for other targets (whose
    ``--external-*`` options are refused)."""
    from dnscost.targets.external import EXTERNAL, resolve_external

    given = [a.external_endpoint, a.external_pid, a.external_cgroup, a.external_ca, a.external_sni]
    if target != EXTERNAL:
        if any(v for v in given) or a.external_version:
            raise UsageError(f"--external-* options are for --target external, not {target}")
        return None
    return resolve_external(
        a.external_endpoint,
        pid=a.external_pid,
        cgroup=a.external_cgroup,
        ca=a.external_ca,
        sni=a.external_sni,
        version=a.external_version,
    )


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--targets",
        "--target",
        help="comma-separated targets, replacing the spec's (external: a server you started; NAME@RELEASE: a Debian "
        "release root; NAME@PATH: your own build)",
    )
    p.add_argument("--groups", help="comma-separated groups of the spec to run, the others left out")
    add_roots_option(p)
    p.add_argument("--target-cpus", type=cpu_list, help="CPUs of the target (default: the spec's, else 0)")
    p.add_argument("--generator-cpus", type=cpu_list, help="CPUs of the generator (default: all others)")
    p.add_argument("--no-report", action="store_true", help="measure only; `dnscost report` makes the report later")
    p.add_argument(
        "--network", choices=NETWORKS, help=f"where the target sits (default: the spec's, else {DEFAULT_NETWORK})"
    )
    _external_options(p)
    add_cluster_options(p)


def _observe_pcap(a: argparse.Namespace) -> int:
    """``observe --pcap FILE --server ADDR:PORT``: a capture's connections, as a table and
    (with --output) ``capture.json``."""
    from collections import Counter

    from dnscost.observe.capture import analyse

    if not a.server:
        raise UsageError("observe: --pcap needs --server ADDRESS:PORT")
    captured = analyse(a.pcap, a.server)
    print(f"{'client':<24} {'proto':<5} {'opened':>10} {'seconds':>9} {'closer':<7} {'how':<8} {'octets in/out':>15}")
    t0 = min((c.opened_unix_s for c in captured), default=0.0)
    for c in captured:
        octets = f"{c.octets_from_client}/{c.octets_from_server}"
        print(
            f"{c.client:<24} {c.transport:<5} {c.opened_unix_s - t0:>10.3f} {c.closed_unix_s - c.opened_unix_s:>9.3f} "
            f"{c.closer:<7} {c.how:<8} {octets:>15}"
        )
    closes = Counter(f"{c.closer} {c.how}" for c in captured)
    print(f"{len(captured)} connections; closed: " + ", ".join(f"{k} {v}" for k, v in sorted(closes.items())))
    if a.output:
        a.output.mkdir(parents=True, exist_ok=True)
        path = a.output / "capture.json"
        path.write_text(json.dumps({"connections": [c.as_dict() for c in captured]}, indent=2) + "\n")
        print(f"observe: wrote {path}")
    return 0


def cmd_observe(a: argparse.Namespace) -> int:
    from dnscost.observe.analysis import summary_line
    from dnscost.observe.observation import Plan, load_policies, observe, resummarise
    from dnscost.observe.report import write_all
    from dnscost.results import new_run_id

    if a.pcap is not None:
        return _observe_pcap(a)
    if a.from_dir is not None:
        cells = resummarise(a.from_dir)
        if not cells:
            raise UsageError(f"observe: --from {a.from_dir}: no observation.json under <client>/<cell>/")
        for path in write_all(a.from_dir):
            print(f"observe: wrote {path}")
        return 0
    if not a.client:
        raise UsageError("observe: give --client (or --from DIR)")

    try:
        delays = [parse_duration_ms(d) / 1000 for d in a.delay.split(",") if d.strip()]
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"observe: --delay: {e}") from None
    if not delays or min(delays) <= 0:
        raise UsageError("observe: --delay needs positive durations")
    policies = load_policies(a.policies)
    chosen = [p.strip() for p in a.policy.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in policies]
    if unknown:
        raise UsageError(f"observe: unknown policy {unknown[0]!r} (known: {', '.join(policies)})")
    if a.duration is not None and a.duration <= 0:
        # 0 used to fall through to the 30-minute default.
        raise UsageError("observe: --duration needs a positive duration (default 30m; --quick: 2m)")
    duration_s = (a.duration / 1000) if a.duration is not None else (120.0 if a.quick else 1800.0)
    out = a.output or Path("results", "observe", new_run_id()).resolve()
    for delay in delays:
        for policy in chosen:
            cell = out / a.client / f"{delay:g}s-{policy}"
            print(f"observe: {a.client}, one query every {delay:g} s, {policy}, {duration_s:g} s -> {cell}", flush=True)
            plan = Plan(a.client, delay, policy, duration_s, cell, a.external_command, a.capture)
            print(f"  {summary_line(observe(plan, policies)['summary'])}", flush=True)
    for path in write_all(out):
        print(f"observe: wrote {path}")
    return 0


def cmd_doctor() -> int:
    from dnscost.machine import checks

    failed = 0
    for c in checks():
        mark = "ok " if c.ok else ("MISSING" if c.required else "warn")
        print(f"{mark:7} {c.name:24} {c.detail}")
        if not c.ok:
            print(f"{'':7} {'':24} fix: {c.fix}")
            failed += c.required
    print("\nready" if not failed else f"\n{failed} required item(s) missing")
    return 0 if not failed else 3


def engine_settings(a: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if a.engine_config:
        try:
            config = json.loads(a.engine_config.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise UsageError(f"{a.engine_config}: {e}") from e
        if not isinstance(config, dict):
            raise UsageError(f"{a.engine_config}: not a JSON object")
        # Paths in the file are relative to where dnscost was started, as on the command line.
        for key in ("queries_file", "ca_file", "keylog_file"):
            if isinstance(config.get(key), str):
                config[key] = str(Path(config[key]).expanduser().resolve())
    for _, field, _, _ in ENGINE_KNOBS:
        value = getattr(a, f"engine_{field}")
        if value is not None:
            config[field] = value
    config.setdefault("duration_ms", 20_000)
    config.setdefault("warmup_ms", 2_000)
    return config


def engine_field_names(a: argparse.Namespace, config: dict[str, Any]) -> dict[str, str]:
    """What the user of ``dnscost load`` calls each field of its engine configuration
    ``config``, for the engine's messages: the flag that set it, else the ``--engine-config``
    file's field."""
    flags = {field: flag for flag, field, _, _ in ENGINE_KNOBS if getattr(a, f"engine_{field}") is not None}
    names = {key: flags.get(key) or (f"{a.engine_config}: {key}" if a.engine_config else key) for key in config}
    return {**names, "transport": "--transport", "synthetic": "--names", "tld": "--tld"}


def cmd_load(a: argparse.Namespace) -> int:
    from dnscost.engine import check_config, engine_version
    from dnscost.machine import facts
    from dnscost.proc import use_ledger
    from dnscost.results import Run, new_run_id
    from dnscost.spec import MAX_NAMES
    from dnscost.trial import LoadSettings, run_trial

    if not 1 <= a.names <= MAX_NAMES:  # as a spec's names
        raise UsageError(f"--names: {a.names} is out of range 1..={MAX_NAMES}")
    generator_cpus = a.generator_cpus or sorted(set(os.sched_getaffinity(0)) - set(a.target_cpus))
    settings = LoadSettings(
        a.target,
        a.transport,
        engine_settings(a),
        a.target_cpus,
        generator_cpus,
        a.names,
        a.tld,
        fill=not a.no_fill,
        cert_key=a.cert_key,
        network=a.network or DEFAULT_NETWORK,
        external=external_settings(a, a.target),
    )
    settings.validate()
    cluster_given = cluster_settings(a)
    _check_cluster(cluster_given, settings.network, a.target)
    check_config(
        {**settings.engine, "transport": a.transport, "synthetic": a.names, "tld": a.tld},
        "dnscost load",
        engine_field_names(a, settings.engine),
    )
    pin_self(generator_cpus)
    out = a.output or Path("results", "load", new_run_id()).resolve()
    trial_id = f"load-{label_of(a.target)}-{a.transport}"
    plan = [{"id": trial_id, "group": "load", "kind": "load", "target": a.target, "transport": a.transport}]
    spec = {
        "command": "load",
        "settings": asdict(settings),
        **({"cluster": cluster_given.to_dict()} if cluster_given else {}),
    }
    # A run here that measured nothing (a target that did not start, say) is replaced.
    run = Run.create(
        out,
        "load",
        spec=spec,
        spec_toml="",
        plan=plan,
        facts=facts(),
        versions={"dnscost-engine": engine_version()},
        reuse_unmeasured=True,
    )
    use_ledger(run.ledger)
    cluster = None
    try:
        if cluster_given is not None:
            cluster = _open_cluster(cluster_given, run, generator_cpus)
        record = run_trial(settings, run.trial_dir(trial_id), cluster)
    except BaseException as e:
        run.set_trial(trial_id, "interrupted" if isinstance(e, KeyboardInterrupt) else "failed", str(e))
        run.finish("interrupted" if isinstance(e, KeyboardInterrupt) else "failed")
        raise
    finally:
        if cluster is not None:
            cluster.close()
    run.doc["versions"][a.target] = record.get("target_version", "")
    run.set_trial(trial_id, "done")
    run.finish("done")
    print_summary(record, out)
    return 0


def pin_self(cpus: Sequence[int]) -> None:
    """Runs dnscost itself (the runner, the sampler's threads, the ``ss`` it starts) on the
    generator's CPUs, never on the target's, with the highest open-files limit the machine
    allows (inherited by the target and the engine)."""
    from dnscost.machine import raise_open_files

    os.sched_setaffinity(0, set(cpus))
    raise_open_files()


def _fmt(v: float | None, unit: str = "", digits: int = 1) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}{unit}"


def print_summary(record: dict[str, Any], out: Path) -> None:
    s = record["summary"]
    v = s["validity"]
    lat = s["latency_us"]

    def kib(b: float | None) -> float | None:
        return None if b is None else b / 1024

    print(
        f"{record['settings']['target']} {record.get('target_version', '')} over {record['settings']['transport']}: "
        f"{_fmt(s['answered_qps'], ' qps', 0)} answered for {s['measured_s']} s"
    )
    if "cpu-unresolved" in v.get("flags", []):
        print("  target CPU      below the meter's resolution (clock ticks of /proc): not measured at this rate")
    else:
        print(
            f"  target CPU      {_fmt(s['target_cpu_us_per_query'], ' µs/query', 2)}, "
            f"{_fmt(s['target_cpu_share'] and 100 * s['target_cpu_share'], ' % of a core')}"
        )
    cluster = record.get("cluster")
    if cluster:
        print(
            f"  generator CPU   {_fmt(s.get('generator_cpu_us_per_query'), ' µs/query', 2)} (the engines' own), "
            f"{_fmt(100 * v['generator_busy_share'] if v.get('generator_busy_share') is not None else None, ' %')} "
            f"of the workers' {cluster['generator_cores']} cores busy"
        )
        print(f"  cluster         {len(cluster['workers'])} workers, started within {cluster['start_skew_ms']} ms:")
        for w in cluster["workers"]:
            own, who = w["summary"], w["name"] or w["address"]
            print(
                f"    {who:<12} {w['connections']} connections, {_fmt(own['answered_qps'], ' qps', 0)} "
                f"answered, p50 {own['latency_p50_us']} µs, p99 {own['latency_p99_us']} µs, "
                f"kept up: {own['generator_kept_up']}"
            )
    else:
        own_cpu = s["engine_cpu_us"] / s["queries_answered"] if s["queries_answered"] else None
        print(
            f"  generator CPU   {_fmt(s.get('generator_cpu_us_per_query'), ' µs/query', 2)} (kernel's accounting; "
            f"engine's own {_fmt(own_cpu, '', 2)}), "
            f"{_fmt(100 * v['generator_busy_share'] if v.get('generator_busy_share') is not None else None, ' %')} "
            f"of its cores busy"
        )
    print(
        f"  memory          {_fmt(kib(s['user_bytes_per_connection']), ' KiB')} user, "
        f"{_fmt(kib(s['kernel_bytes_per_connection']), ' KiB')} kernel per open connection "
        f"({_fmt(s['mean_active_connections'], '', 0)} open)"
    )
    print(f"  energy          {_fmt(s['energy_j_per_1000_queries'], ' J/1000 queries', 3)} ({s['energy_source']})")
    print(
        f"  latency         p50 {lat['p50_us']} µs, p90 {lat['p90_us']} µs, p99 {lat['p99_us']} µs, "
        f"max {lat['max_us']} µs"
    )
    agreement = v["answer_count_agreement"]
    print(
        f"  validity        generator kept up: {v['generator_kept_up']}, "
        f"loss {_fmt(v['loss'] and 100 * v['loss'], ' %', 2)}, "
        f"cache hits {_fmt(v['cache_hit_ratio'] and 100 * v['cache_hit_ratio'], ' %')}, "
        f"answers engine/target {v['engine_answered']}/{v['target_answered']} "
        f"({_fmt(agreement and 100 * agreement, ' %', 2)})"
    )
    if v.get("unchecked"):
        print(f"  not checked     {', '.join(v['unchecked'])} (docs/results.md, Validity)")
    if v["flags"]:
        print(f"  INVALID         {', '.join(v['flags'])} (docs/results.md, Validity)")
    print(f"  results         {out}")


def experiments_dir() -> Path:
    """Where the shipped specs are (``experiments/`` in the repository)."""
    return Path(__file__).parent / "experiments"


def cmd_run(a: argparse.Namespace) -> int:
    """``dnscost run`` and ``dnscost reproduce``: plan, check, run (or resume), report."""
    from dnscost.engine import engine_version
    from dnscost.machine import facts
    from dnscost.plan import expand
    from dnscost.proc import use_ledger
    from dnscost.results import Run, new_run_id
    from dnscost.runner import Progress, check_plan, check_split, default_cpus, preflight, run_plan
    from dnscost.spec import load_spec, parse_spec

    if a.resume:
        run, leftovers = Run.resume(a.resume)
        for what in leftovers:
            print(f"dnscost: stopped {what}, left running by the interrupted run", file=sys.stderr)
        spec = parse_spec(run.doc["spec_toml"], run.doc["spec"]["origin"])
        # Runs made before groups had targets of their own recorded no only_targets.
        only = run.doc["spec"].get("only_targets", run.doc["spec"]["targets"])
        if only is not None:
            spec = spec.only(tuple(only))
        groups = run.doc["spec"].get("only_groups")
        if groups is not None:
            spec = spec.only_groups(tuple(groups))
        cpus = run.doc["spec"].get("cpus", {})
        target_cpus, generator_cpus = cpus.get("target"), cpus.get("generator")
        network = run.doc["spec"].get("network", "loopback")
        if a.network and a.network != network:
            raise UsageError(f"{a.resume}: the run was made with --network {network}, not {a.network}")
        recorded = run.doc["spec"].get("cluster")
        cluster_given = cluster_settings(a, ClusterSettings.from_dict(recorded) if recorded else None)
        spec = spec_external(a, spec, run.doc["spec"].get("external"))
    else:
        if a.command == "reproduce":
            path = experiments_dir() / ("study-quick.toml" if a.quick else "study.toml")
        elif a.spec is None:
            raise UsageError("give a spec (TOML) or --resume RUN_DIR")
        else:
            path = a.spec
        spec = load_spec(path)
        only = tuple(parse_spec_targets(a.targets)) if a.targets else None
        if only is not None:
            spec = spec.only(only)
        groups = tuple(g.strip() for g in a.groups.split(",") if g.strip()) if a.groups else None
        if groups is not None:
            spec = spec.only_groups(groups)
        target_cpus, generator_cpus = default_cpus(
            a.target_cpus or spec.target_cpus, a.generator_cpus or spec.generator_cpus
        )
        network = a.network or spec.network or DEFAULT_NETWORK
        cluster_given = cluster_settings(a, spec.cluster)
        spec = spec_external(a, spec)
    if set(target_cpus) & set(generator_cpus) or not generator_cpus:
        raise UsageError(
            f"target CPUs {target_cpus} and generator CPUs {generator_cpus} must be disjoint and non-empty"
        )
    check_network(network)
    _check_cluster(cluster_given, network, *spec.all_targets())
    plan = expand(spec)
    unserved = external_unserved(spec)
    if not plan:
        if unserved:
            raise UsageError(f"{spec.origin}: no trial to run: no --external-endpoint for {', '.join(unserved)}")
        raise UsageError(f"{spec.origin}: no trial to run (do the targets serve the transports?)")
    if a.resume and [t.id for t in plan] != [t["id"] for t in run.doc["plan"]]:
        raise UsageError(f"{a.resume}: the plan no longer matches the recorded one (dnscost changed?)")
    check_plan(spec, plan, target_cpus, generator_cpus, network)
    pin_self(generator_cpus)
    if not a.resume:
        out = a.output or Path("results", spec.name, new_run_id()).resolve()
        resolved = {
            **spec.to_dict(),
            "only_targets": list(only) if only is not None else None,
            "only_groups": list(groups) if groups is not None else None,
            "cpus": {"target": target_cpus, "generator": generator_cpus},
            "network": network,
            **({"cluster": cluster_given.to_dict()} if cluster_given else {}),
        }
        run = Run.create(
            out,
            spec.name,
            spec=resolved,
            spec_toml=spec.source,
            plan=[t.to_dict() for t in plan],
            facts=facts(),
            versions={"dnscost-engine": engine_version()},
        )
    use_ledger(run.ledger)
    progress = Progress(len(plan))
    print(f"dnscost: {len(plan)} trials of {spec.name} into {run.dir}", file=sys.stderr)
    if unserved:
        progress.note(f"external: no endpoint for {', '.join(unserved)}: their trials are left out")
    run.doc["status"] = "running"
    cluster = None
    try:
        if cluster_given is not None:
            cluster = _open_cluster(cluster_given, run, generator_cpus)
            progress.note(f"cluster {cluster.address}: {len(cluster.workers)} workers, {cluster.generator_cores} cores")
            check_split(spec, plan, len(cluster.workers), target_cpus, generator_cpus)
        remaining = [t for t in plan if not run.done(t.id)]
        preflight(
            spec,
            remaining,
            run.dir / "preflight",
            target_cpus=target_cpus,
            generator_cpus=generator_cpus,
            progress=progress,
            network=network,
        )
        run_plan(
            run,
            spec,
            plan,
            target_cpus=target_cpus,
            generator_cpus=generator_cpus,
            progress=progress,
            network=network,
            cluster=cluster,
        )
    except BaseException as e:
        failed_write = write_failure(e, run.dir)
        if failed_write is not None:
            stop_on_write_failure(run, failed_write, a.command)
            return 1
        run.finish("interrupted" if isinstance(e, KeyboardInterrupt) else "failed")
        if isinstance(e, KeyboardInterrupt):
            print(f"dnscost: resume with: dnscost {a.command} --resume {run.dir}", file=sys.stderr)
        raise
    finally:
        if cluster is not None:
            cluster.close()
    counts = run.trial_counts()
    done = counts.get("done", 0)
    # A trial not run because its reference measured no valid capacity is no failure of the run.
    complete = done + counts.get("not-run", 0) == len(plan) and not counts.get("failed")
    run.finish("done" if complete else "failed" if done == 0 else "incomplete")
    print(f"dnscost: {_count_line(run, plan)}", file=sys.stderr)
    if done == 0:
        raise TargetError(f"no trial finished, so no report was made; see {run.dir}/run.json for each trial's error")
    if not a.no_report:
        report = _report(run.dir)
        print(f"report: {report}")
    else:
        print(f"results: {run.dir}")
    return 0 if complete else 4


WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})
"""Errors of a write that stop a run wherever they are met: the disk is full or read-only."""


def write_failure(e: BaseException, run_dir: Path) -> OSError | None:
    """The write that stopped a run, when ``e`` is one: an :class:`OSError` on a file of the run
    directory or a full or read-only disk (:data:`WRITE_ERRNOS`). A failed write is often
    followed by another (the trial's record written on the way out): the first is the cause,
    named by the first of the chain that names a file with the same error (a failed ``write``
    names none). None for any other exception."""
    chain: list[OSError] = []
    x: BaseException | None = e
    while isinstance(x, OSError) and x not in chain:
        chain.append(x)
        x = x.__cause__ or (None if x.__suppress_context__ else x.__context__)
    chain.reverse()  # in the order raised
    if not chain:
        return None
    first = chain[0]
    named = next((c for c in chain if c.filename and c.errno == first.errno), None)
    inside = [c for c in chain if c.filename and Path(os.fsdecode(c.filename)).is_relative_to(run_dir)]
    if first.errno not in WRITE_ERRNOS and not inside:
        return None
    if first.filename is None and named is not None:
        return OSError(first.errno, first.strerror, named.filename)
    return first


def stop_on_write_failure(run: Run, e: OSError, command: str) -> None:
    """Says which write stopped the run, marks the run (and the trial it was measuring)
    ``interrupted`` in run.json when run.json can still be written (says so when it cannot),
    and how to resume; the trials done stay as they are."""
    where = f"{os.fsdecode(e.filename)}: " if e.filename else f"{run.dir}: "
    print(f"dnscost: {where}{e.strerror or e}", file=sys.stderr)
    before = json.dumps(run.doc["trials"])
    for entry in run.doc["trials"].values():
        if entry.get("status") == "running":
            entry.update(status="interrupted", error=f"{where}{e.strerror or e}")
    try:
        run.finish("interrupted")
    except OSError as again:
        run.doc["trials"] = json.loads(before)
        why = again.strerror or again
        print(f"dnscost: {run.dir / 'run.json'} still says running: it could not be rewritten ({why})", file=sys.stderr)
    else:
        print(f"dnscost: {run.dir / 'run.json'}: the run is marked interrupted", file=sys.stderr)
    print(f"dnscost: resume with: dnscost {command} --resume {run.dir}", file=sys.stderr)


def _check_cluster(cluster: ClusterSettings | None, network: str, *targets: str) -> None:
    """A cluster loads a target in the root namespace, where its workers reach it."""
    if cluster is None:
        return
    if network != DEFAULT_NETWORK:
        raise UsageError(f"--cluster loads the target where its workers reach it: --network {network} is not possible")
    if "external" in targets:
        raise UsageError("--cluster with an external target is not implemented")


def _open_cluster(settings: ClusterSettings, run: Any, generator_cpus: Sequence[int]) -> Any:
    """Connects to (for netns:N, starts) the cluster and records its workers in run.json."""
    from dnscost.cluster import open_cluster

    cluster = open_cluster(settings, run.dir / "cluster", cpus=generator_cpus)
    run.doc["cluster"] = cluster.describe()
    return cluster


def _count_line(run: Any, plan: Sequence[Any]) -> str:
    """``60 of 60 trials done, 0 failed; 2 invalid (generator-bound 2)``, validity as today's
    analysis judges the raw records (as ``dnscost report``), not as stored when measured."""
    from collections import Counter

    from dnscost.runner import read_record

    counts = run.trial_counts()
    text = f"{counts.get('done', 0)} of {len(plan)} trials done, {counts.get('failed', 0)} failed"
    if counts.get("not-run"):
        text += f", {counts['not-run']} not run"
    flags: Counter[str] = Counter()
    invalid = 0
    for t in plan:
        if not run.done(t.id):
            continue
        doc = read_record(run.trial_dir(t.id))
        if doc is None:
            continue
        v = (doc.get("summary") or {}).get("validity") or {}
        if v.get("valid") is False:
            invalid += 1
            flags.update(v.get("flags") or [])
    if invalid:
        text += f"; {invalid} invalid ({', '.join(f'{f} {n}' for f, n in flags.most_common())})"
    return text


def external_unserved(spec: Any) -> list[str]:
    """The transports the spec loads the external target over that it has no endpoint for."""
    from dnscost.targets.external import EXTERNAL

    if spec.external is None:
        return []
    served = spec.external.parsed()
    wanted = {t for g in spec.groups if EXTERNAL in g.runs_on(spec.targets) for t in g.transports}
    return sorted(wanted - set(served))


def parse_spec_targets(text: str) -> list[str]:
    from dnscost.targets import target_name
    from dnscost.targets.external import EXTERNAL

    names = [n if n == EXTERNAL else str(target_name(n)) for n in (n.strip() for n in text.split(",")) if n]
    if not names:
        raise UsageError("--targets: give at least one target")
    return names


def _report(run_dir: Path) -> Path:
    """Tables, figures and report.html of a run; prints the headline figures."""
    from dnscost.analysis import analyze, headline, write_tables
    from dnscost.analysis.load import damage_notes, status_note
    from dnscost.report import render_report

    a = analyze(run_dir)
    for line in damage_notes(run_dir, a.trials):
        print(f"dnscost: {line}", file=sys.stderr)
    if not any(t.get("status") == "done" for t in a.trials):
        raise TargetError(f"{run_dir}: no trial of this run finished, so there is nothing to report")
    status = status_note(a.run, a.trials)
    if status is not None:
        print(f"dnscost: {run_dir} {status}; the report covers those", file=sys.stderr)
    write_tables(a, run_dir / "tables")
    rows = headline(a)
    path = render_report(a, run_dir, headline=rows)
    for line in format_headline(rows, a.tables["consistency"].rows, a.tables["clients"].rows):
        print(line)
    return path


def _iv(s: Any, digits: int = 2, scale: float = 1.0, unit: str = "") -> str:
    """A figure over rounds as ``median [min-max]`` (one value alone when min = max)."""
    if s is None or s.median is None:
        return "n/a"
    mid = f"{s.median * scale:,.{digits}f}{unit}"
    if s.low is None or s.high is None or s.n < 2:
        return mid
    return f"{mid} [{s.low * scale:,.{digits}f}-{s.high * scale:,.{digits}f}]"


def _flag_share(s: Any) -> str:
    """A share of UDP; one above 1 (a connected transport answering more than UDP in its own
    round) is marked, since it contradicts every measurement so far."""
    text = _iv(s)
    return text + " (!)" if s is not None and s.median is not None and s.median > 1 else text


def _nonnegative(v: Any) -> str:
    """A fitted cost that cannot be negative: its slope and 95 % interval, or, when the interval
    reaches 0 or below, only its upper bound (the data cannot tell it from no cost at all)."""
    if v.low is None or v.high is None:
        return f"{v.median:,.2f}"
    if v.low <= 0:
        return f"below {max(v.high, 0):,.2f} (not distinguishable from 0)"
    return f"{v.median:,.2f} [{v.low:,.2f}-{v.high:,.2f}]"


def _flag_resumed(full: Any, resumed: Any) -> str:
    """A resumed handshake's cost; one whose median is above the full handshake's is marked,
    since a resumption skips the certificate and its signature: noise or a bug until shown
    otherwise, not a result."""
    text = _iv(resumed, 0)
    dearer = (
        full is not None
        and resumed is not None
        and full.median is not None
        and resumed.median is not None
        and resumed.median > full.median
    )
    return text + " (!)" if dearer else text


def _resumed_share(handshakes: dict[str, Any]) -> str:
    """Said when the server let fewer than 95 % of the resumption trial's reconnections resume
    (dnsdist 1.7 issues no new ticket on a resumed handshake: two of three resume)."""
    share = handshakes.get("resumed_share")
    if share is None or share.median is None or share.median >= 0.95:
        return ""
    return f" ({share.median:.0%} of reconnections resumed)"


def format_headline(
    rows: list[dict[str, Any]], contradictions: Sequence[dict[str, Any]] = (), clients: Sequence[dict[str, Any]] = ()
) -> list[str]:
    """Per target: CPU per query (the primary figure, with capacity per core), measured qps,
    ratios to UDP and to persistent connections, handshake costs, memory per connection, real
    clients replayed (the ``clients`` table), each with its interval; then the contradictions
    the consistency checks found."""
    from dnscost.analysis.rounds import Spread
    from dnscost.analysis.tables import REFERENCE_QPS

    lines = []
    rounds = max((r["rounds"] for r in rows), default=0)
    marked = dearer = False
    for r in rows:
        udp = r["udp"]
        persistent, collapse = r["persistent"], r["collapse_1q"]

        def each(table: dict[str, Any], show: Any) -> str:
            return ", ".join(f"{t} {show(v)}" for t, v in sorted(table.items())) or "n/a"

        shares = each(persistent, lambda v: _flag_share(v["share"]))
        marked = marked or "(!)" in shares
        memory = ", ".join(
            f"{t} {_fmt(v['total_bytes'] / 1024 if v['total_bytes'] is not None else None, ' KiB')}"
            + (
                f" [{v['total_low'] / 1024:,.1f}-{v['total_high'] / 1024:,.1f}]"
                if v.get("total_low") is not None and v.get("total_high") is not None
                else ""
            )
            for t, v in sorted(r["memory_per_connection"].items())
        )
        hs = r.get("handshake_us", {})
        handshakes = ", ".join(
            f"{t} {_iv(v['full'], 0)} / {_flag_resumed(v['full'], v['resumed'])}{_resumed_share(v)}"
            + (f" / 0-RTT {_flag_resumed(v['full'], v['zero_rtt'])}" if v.get("zero_rtt") else "")
            for t, v in sorted(hs.items())
            if t != "tcp"
        )
        dearer = dearer or "(!)" in handshakes
        if "tcp" in hs:
            handshakes = ", ".join(x for x in (handshakes, f"tcp {_iv(hs['tcp']['full'], 0)}") if x)
        idle_cpu = ", ".join(
            f"{t} {_nonnegative(v['cpu_us_per_connection_second'])}"
            for t, v in sorted(r["memory_per_connection"].items())
            if v.get("cpu_us_per_connection_second") is not None
        )
        lines += [
            f"{r['target']} {r['target_version'] or ''}: UDP {_iv(udp['cpu_us_per_query'])} CPU-µs/query = "
            f"{_iv(udp['capacity_per_core_qps'], 0, 1e-3, 'k')} qps per core; measured "
            f"{_iv(udp['qps'], 0, 1e-3, 'k')} qps at saturation, "
            f"{_fmt(r['udp_max_qps'], ' qps', 0)} with loss below 1 % (open loop)",
            f"  persistent, CPU per query ÷ UDP's          {each(persistent, lambda v: _iv(v['cpu_ratio']))}",
            f"  persistent, measured qps share of UDP      {shares}",
            f"  1 query/connection, CPU per query ÷ persistent  {each(collapse, lambda v: _iv(v['cpu_ratio'], 1))}",
            f"  1 query/connection, qps share of persistent     {each(collapse, lambda v: _iv(v['qps_ratio'], 3))}",
            f"  CPU-µs per handshake, full / resumed       {handshakes or 'n/a'}",
            f"  memory per idle connection                 {memory or 'n/a'}",
            f"  CPU-µs per idle connection-second          {idle_cpu or 'n/a'}",
        ]
        if udp["j_per_query"].median is not None:
            lines.append(
                f"  energy per query ÷ UDP's (RAPL)           {each(persistent, lambda v: _iv(v['energy_ratio']))}"
            )
        replayed = [c for c in clients if c["target"] == r["target"]]
        if replayed:
            ratios = ", ".join(
                f"{c['profile']} "
                + _iv(
                    Spread(
                        c["cpu_ratio_to_udp"], c["cpu_ratio_to_udp_min"], c["cpu_ratio_to_udp_max"], c["valid_reps"]
                    ),
                    1,
                )
                + ("" if (c["rate_qps"] or 0) >= 0.99 * REFERENCE_QPS else f" (at {c['rate_qps']:,.0f} qps)")
                for c in replayed
            )
            lines.append(f"  real clients, CPU per query ÷ UDP's        {ratios}")
    lines.append(
        f"intervals: median [min-max] over {rounds} round{'s' if rounds != 1 else ''}, each ratio within its round; "
        "memory and idle CPU: fitted slope [95 % t interval]"
    )
    if marked:
        lines.append("(!) a share of UDP above 1: a connected transport answered more than UDP in its round")
    if dearer:
        lines.append(
            "(!) a resumed handshake measured dearer than a full one: a resumption skips the certificate and "
            "its signature, so this is noise or a bug until shown otherwise; do not publish it"
        )
    for c in contradictions:
        lines.append(
            f"inconsistent: {c['cell']} against {c['against']}: {c['what']}, "
            f"{c['value']:.2f} [{c['low']:.2f}-{c['high']:.2f}] ({c['flag']})"
        )
    return lines


def cmd_report(a: argparse.Namespace) -> int:
    path = _report(a.run_dir)
    print(f"report: {path}")
    if a.check:
        from dnscost.report.browser import check

        result = check(path, a.run_dir / "report.png")
        print(
            f"browser: {result.figures_rendered}/{result.figures_total} figures rendered, "
            f"{len(result.console_errors)} console errors, screenshot {result.screenshot}"
        )
        if not result.ok:
            raise DnscostError(f"{path}: the report did not render cleanly in Chromium: {result.console_errors}")
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    from dnscost.compare import compare

    c = compare(a.run_a, a.run_b, force=a.force)
    if a.json:
        doc = {
            "run_a": str(c.run_a),
            "run_b": str(c.run_b),
            "machine_differences": c.machine_differences,
            "target_differences": c.target_differences,
            "notes": c.notes,
            "rows": [r.as_dict() for r in c.rows],
        }
        print(json.dumps(doc, indent=1))
    else:
        print(c.render())
    return 0


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


PATH_ARGS = (
    "output", "spec", "resume", "engine_config", "dir", "run_dir", "run_a", "run_b", "policies", "from_dir", "pcap",
    "presets", "mix_file", "external_cgroup", "cluster_tls", "roots", "dest",
)  # fmt: skip
"""Every path a user gives: made absolute once, here, so that no later step (a resolver
started in its own working directory, say) depends on where dnscost was started."""


def absolute_paths(args: argparse.Namespace) -> argparse.Namespace:
    for name in PATH_ARGS:
        value = getattr(args, name, None)
        if isinstance(value, Path):
            setattr(args, name, value.expanduser().resolve())
    return args


def main(argv: list[str] | None = None) -> int:
    args = absolute_paths(build_parser().parse_args(argv))
    from dnscost.targets.roots import set_roots_dir

    roots = getattr(args, "roots", None) or os.environ.get("DNSCOST_ROOTS")
    set_roots_dir(Path(roots) if roots else None)
    # SIGTERM ends a run like Ctrl-C: children are stopped and measured data kept. SIGINT is
    # taken explicitly: a process started from a script's background job inherits it ignored.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        if args.command == "doctor":
            return cmd_doctor()
        if args.command == "target":
            from dnscost.targets.command import main as target_main

            return target_main(args)
        if args.command == "load":
            return cmd_load(args)
        if args.command in ("run", "reproduce"):
            return cmd_run(args)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "observe":
            return cmd_observe(args)
        if args.command == "client":
            from dnscost.client.command import main as client_main

            return client_main(args)
        if args.command == "cluster":
            from dnscost.cluster.command import main as cluster_main

            return cluster_main(args)
        if args.command == "plan":
            from dnscost.capacity_command import main as plan_main

            return plan_main(args)
        if args.command == "keep":
            from dnscost.keep import main as keep_main

            return keep_main(args)
        return cmd_compare(args)
    except DnscostError as e:
        print(f"dnscost: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        # An unwritable disk or directory met mid-way: one line; what was written stays.
        where = f"{e.filename}: " if e.filename else ""
        print(f"dnscost: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dnscost: interrupted; measured data kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
