"""``dnscost load``: one measured trial against a target, its summary printed (ARCHITECTURE.md,
"data flow of one trial")."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from dnscost.argtypes import cpu_list, parse_duration_ms, parse_lifetime, parse_rate
from dnscost.commands.cluster import add_options as add_cluster_options
from dnscost.commands.cluster import check_cluster
from dnscost.commands.cluster import settings_from as cluster_settings
from dnscost.commands.external import add_options as add_external_options
from dnscost.commands.external import external_settings
from dnscost.commands.target import add_roots_option
from dnscost.contract import EngineConfig, RunSpecRecord, TrialRecord
from dnscost.errors import UsageError
from dnscost.jsonl import loads
from dnscost.network import DEFAULT_NETWORK, NETWORKS
from dnscost.targets.place import label_of
from dnscost.transports import DEFAULT_KEY_TYPE, KEY_TYPES, POPULATION, TRANSPORTS

if TYPE_CHECKING:
    from dnscost.population import Replay
    from dnscost.targets.base import SessionLimits, TicketKeys

__all__ = ["ENGINE_KNOBS", "add_parser", "engine_field_names", "engine_settings", "main", "pin_self", "print_summary"]


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
    (
        "--proxy-v2",
        "proxy_v2",
        str,
        "udp, tcp, dot, doh: a PROXY v2 header claiming a client of this network (10.0.0.0/16), one address "
        "per socket or connection; the target is told to take them from the load",
    ),
    ("--client-subnet", "client_subnet", str, "an EDNS Client Subnet option for this network (198.51.100.0/24)"),
    (
        "--cookie",
        "cookie",
        str,
        "a DNS cookie option, hexadecimal: a client cookie (16 digits), or client and server cookies (32 to 80)",
    ),
    (
        "--rate",
        "rate",
        parse_rate,
        "queries per second (open loop), max, or once (one query per connection, then idle)",
    ),
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


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ld = sub.add_parser("load", help="one measured trial against a target")
    add_roots_option(ld)
    ld.add_argument(
        "--target",
        required=True,
        help="dnsdist, knot-resolver, unbound, bind9, pdns-recursor, builtin, coredns, or external; "
        "NAME@RELEASE for a Debian release root (dnscost target prepare), NAME@PATH for your own build",
    )
    what = ld.add_mutually_exclusive_group(required=True)
    what.add_argument("--transport", choices=TRANSPORTS)
    what.add_argument(
        "--population",
        type=Path,
        metavar="TOML",
        help="replay a population (dnscost population's TOML): every class at once over its transport; "
        "--rate Q sets the whole population's queries per second, --scale K its size",
    )
    ld.add_argument("--scale", type=float, help="with --population: its clients and rate times K (default 1)")
    ld.add_argument(
        "--served-only",
        action="store_true",
        help="with --population: leave out the classes over transports the target does not serve (named)",
    )
    ld.add_argument(
        "--capture-names",
        action="store_true",
        help="with --population: ask the capture's own names (its names file) instead of synthetic ones; "
        "the target forwards every name and the upstream answers each",
    )
    for flag, field, kind, text in ENGINE_KNOBS:
        if kind is bool:
            ld.add_argument(flag, dest=f"engine_{field}", action="store_true", default=None, help=text)
        else:
            # The metavar names the flag, not the engine's field: `--duration 5000` is 5000 s, not ms.
            metavar = flag.lstrip("-").upper().replace("-", "_")
            if kind is parse_duration_ms:
                text += "; 10s, 250ms or 2m, a bare number is seconds"
            ld.add_argument(flag, dest=f"engine_{field}", type=kind, metavar=metavar, help=text)
    ld.add_argument("--engine-config", type=Path, help="JSON engine configuration to start from (flags override)")
    ld.add_argument("--target-cpus", type=cpu_list, default=[0], help="CPUs of the target (default 0)")
    ld.add_argument("--generator-cpus", type=cpu_list, help="CPUs of the generator (default: all others)")
    ld.add_argument(
        "--target-processes",
        type=int,
        default=1,
        metavar="N",
        help="run the target as N processes sharing its ports, past one process's open files (default 1)",
    )
    ld.add_argument(
        "--ticket-rotation",
        type=parse_duration_ms,
        metavar="DURATION",
        help="dot, doh: the target makes a new session-ticket key this often (whole seconds: 20s)",
    )
    ld.add_argument(
        "--ticket-keys",
        type=int,
        metavar="N",
        help="with --ticket-rotation: the target keeps its N newest keys to decrypt tickets (default its own; "
        "1 refuses every ticket sealed before the last rotation, as GnuTLS does)",
    )
    ld.add_argument(
        "--new-session-limit",
        type=int,
        metavar="N",
        help="dot, doh: the target refuses a client (an address) that opens more than N new TLS sessions "
        "(full handshakes) a second, for the --ban (dnsdist 2.0 and later)",
    )
    ld.add_argument(
        "--ban",
        type=parse_duration_ms,
        metavar="DURATION",
        help="with --new-session-limit: how long a client over it is refused (whole seconds; default 10s)",
    )
    ld.add_argument("--names", type=int, default=10_000, help="synthetic names (default 10000)")
    ld.add_argument("--tld", default="test")
    ld.add_argument("--no-fill", action="store_true", help="skip the cache pre-fill")
    ld.add_argument("--cert-key", choices=KEY_TYPES, default=DEFAULT_KEY_TYPE, help="the target's certificate key")
    ld.add_argument("--network", choices=NETWORKS, help=f"where the target sits (default {DEFAULT_NETWORK})")
    ld.add_argument("--output", type=Path, help="results directory (default results/load/<run-id>)")
    add_external_options(ld)
    add_cluster_options(ld)


def engine_settings(a: argparse.Namespace) -> EngineConfig:
    raw: dict[str, object] = {}
    if a.engine_config:
        try:
            raw = loads(a.engine_config.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise UsageError(f"{a.engine_config}: {e}") from e
        if not isinstance(raw, dict):
            raise UsageError(f"{a.engine_config}: not a JSON object")
        # Paths in the file are relative to where dnscost was started, as on the command line.
        for key in ("queries_file", "ca_file", "keylog_file"):
            if isinstance(path := raw.get(key), str):
                raw[key] = str(Path(path).expanduser().resolve())
    for _, field, _, _ in ENGINE_KNOBS:
        value = getattr(a, f"engine_{field}")
        if value is not None:
            raw[field] = value
    # The file's fields are the engine's to check (check_config names a wrong one, before
    # anything reads them); from here on the configuration has the engine's type.
    config = cast(EngineConfig, raw)
    config.setdefault("duration_ms", 20_000)
    config.setdefault("warmup_ms", 2_000)
    return config


def ticket_keys(a: argparse.Namespace) -> TicketKeys | None:
    """``--ticket-rotation`` and ``--ticket-keys`` as the target's session-ticket keys."""
    from dnscost.targets.base import TicketKeys

    if a.ticket_rotation is None:
        if a.ticket_keys is not None:
            raise UsageError("--ticket-keys needs --ticket-rotation (the keys kept over rotations)")
        return None
    return TicketKeys(a.ticket_rotation / 1000, a.ticket_keys)


def session_limits(a: argparse.Namespace) -> SessionLimits | None:
    """``--new-session-limit`` and ``--ban`` as the target's per-client new-session limit."""
    from dnscost.targets.base import SessionLimits

    if a.new_session_limit is None:
        if a.ban is not None:
            raise UsageError("--ban needs --new-session-limit (the limit a client is banned for exceeding)")
        return None
    if a.ban is None:
        return SessionLimits(a.new_session_limit)
    if a.ban % 1000:
        raise UsageError(f"--ban: {a.ban / 1000:g} s is not a whole number of seconds")
    return SessionLimits(a.new_session_limit, a.ban // 1000)


def engine_field_names(a: argparse.Namespace, config: EngineConfig) -> dict[str, str]:
    """What the user of ``dnscost load`` calls each field of its engine configuration
    ``config``, for the engine's messages: the flag that set it, else the ``--engine-config``
    file's field."""
    flags = {field: flag for flag, field, _, _ in ENGINE_KNOBS if getattr(a, f"engine_{field}") is not None}
    names = {key: flags.get(key) or (f"{a.engine_config}: {key}" if a.engine_config else key) for key in config}
    return {**names, "transport": "--transport", "synthetic": "--names", "tld": "--tld"}


def main(a: argparse.Namespace) -> int:
    from dnscost.engine import check_config, engine_version
    from dnscost.machine import check_generator, facts
    from dnscost.proc import use_ledger
    from dnscost.results import Run, new_run_id
    from dnscost.runner import open_run_cluster
    from dnscost.spec import MAX_NAMES
    from dnscost.trial import LoadSettings, run_trial

    if not 1 <= a.names <= MAX_NAMES:  # as a spec's names
        raise UsageError(f"--names: {a.names} is out of range 1..={MAX_NAMES}")
    generator_cpus = a.generator_cpus or sorted(set(os.sched_getaffinity(0)) - set(a.target_cpus))
    replay = population_replay(a)
    engine = engine_settings(a)
    if replay is not None:
        engine.pop("rate", None)  # the population's: each class its own
    # The engine checks the configuration first: the checks below read its fields as typed.
    checked: EngineConfig = {**engine, "synthetic": a.names, "tld": a.tld}
    if replay is None:
        checked["transport"] = a.transport
    else:
        checked["classes"] = replay.checkable()
    check_config(checked, "dnscost load", engine_field_names(a, engine))
    transport = a.transport or POPULATION
    settings = LoadSettings(
        a.target,
        transport,
        engine,
        a.target_cpus,
        generator_cpus,
        a.names,
        a.tld,
        fill=not a.no_fill,
        cert_key=a.cert_key,
        network=a.network or DEFAULT_NETWORK,
        external=external_settings(a, a.target),
        population=replay,
        target_processes=a.target_processes,
        ticket_keys=ticket_keys(a),
        session_limits=session_limits(a),
    )
    settings.validate()
    cluster_given = cluster_settings(a)
    check_cluster(cluster_given, settings.network, a.target)
    check_generator(
        int(engine.get("connections") or 0), 1 if cluster_given is None else cluster_given.engines, "dnscost load"
    )
    pin_self(generator_cpus)
    out = a.output or Path("results", "load", new_run_id()).resolve()
    trial_id = f"load-{label_of(a.target)}-{transport}"
    plan: list[TrialRecord] = [
        {"id": trial_id, "group": "load", "kind": "load", "target": a.target, "transport": transport}
    ]
    spec: RunSpecRecord = {
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
            cluster = open_run_cluster(cluster_given, run, generator_cpus)
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


def population_replay(a: argparse.Namespace) -> Replay | None:
    """``--population``'s replay at ``--scale`` or ``--rate`` (None without one); engine
    flags a population's classes set for themselves are refused."""
    from dnscost.population import replay_of
    from dnscost.trial import RUN_FIELDS

    if a.population is None:
        if a.scale is not None or a.served_only or a.capture_names:
            raise UsageError("--scale, --served-only and --capture-names need --population")
        return None
    try:
        doc = tomllib.loads(a.population.read_text())
    except OSError as e:
        raise UsageError(f"{a.population}: {e.strerror or e}") from e
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"{a.population}: {e}") from e
    for flag, field, _, _ in ENGINE_KNOBS:
        if field not in (*RUN_FIELDS, "rate") and getattr(a, f"engine_{field}") is not None:
            raise UsageError(f"{flag}: each class of a population has its own (from its profile)")
    rate = a.engine_rate
    if rate is not None and not isinstance(rate, int | float):
        raise UsageError(f"--rate {rate}: with --population, the whole population's queries per second")
    transports = None
    if a.served_only:
        from dnscost.targets import served

        offered = external_settings(a, a.target)
        transports = offered.parsed() if offered is not None else served(a.target)
    replay = replay_of(doc, str(a.population), scale=a.scale, rate=rate, served=transports, names=a.capture_names)
    if replay.left_out:
        print(f"dnscost load: left out (transport not served): {', '.join(replay.left_out)}", file=sys.stderr)
    return replay


def pin_self(cpus: Sequence[int]) -> None:
    """Runs dnscost itself (the runner, the sampler's threads, the ``ss`` it starts) on the
    generator's CPUs, never on the target's, with the highest open-files limit the machine
    allows (inherited by the target and the engine)."""
    from dnscost.machine import raise_open_files

    os.sched_setaffinity(0, set(cpus))
    raise_open_files()


def _fmt(v: float | None, unit: str = "", digits: int = 1) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}{unit}"


def print_summary(record: TrialRecord, out: Path) -> None:
    s = record["summary"]
    assert s is not None  # a trial done has its summary
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
            + (
                f", {faults:.2f} page faults/query (kernel)"
                if (faults := s.get("target_page_faults_per_query")) is not None
                else ""
            )
        )
    if (wakeups := s.get("wakeups_per_query")) is not None:
        print(
            f"  wake-ups        {wakeups:.3f}/query (voluntary switches), {_fmt(s.get('runs_per_query'), '', 3)} "
            f"runs/query; softirq {_fmt(s.get('softirq_us_per_query'), ' µs/query', 2)} on its cores"
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
    classes = s.get("classes")
    if classes:
        transports = s.get("transports", {})
        print(f"  classes         {len(classes)}, each counted apart by the engine (answered over the window):")
        for k in classes:
            print(
                f"    {k['name']:<24} {k['transport']:<5} {k['clients'] or '':>6} clients "
                f"{_fmt(k['answered_qps'], ' qps', 1):>12}, "
                f"p50 {k['latency_p50_us']} µs, p99 {k['latency_p99_us']} µs, "
                f"{k['connections_opened']} connections opened, {k['handshakes_resumed']} resumed"
            )
        for t, a in transports.items():
            target = "not counted per transport" if a["target_queries"] is None else a["target_queries"]
            print(
                f"    {t:<5} answers engine/target {a['engine_answered']}/{target} "
                f"({_fmt(a['agreement'] and 100 * a['agreement'], ' %', 2)})"
            )
    replay = record.get("population")
    if replay and replay.get("names"):
        repeat, upstream, asked = replay.get("repeat_share"), record.get("upstream_queries"), v["target_answered"]
        missed = upstream / asked if upstream is not None and asked else None
        print(
            f"  names           the capture's own ({replay['names']}): the target's cache answered "
            f"{_fmt(v['cache_hit_ratio'] and 100 * v['cache_hit_ratio'], ' %')} of the run's queries "
            f"(its counters), the upstream was asked {_fmt(upstream, '', 0)} "
            f"({_fmt(missed and 100 * missed, ' %')}: the misses, by its own log); "
            f"the capture asked {_fmt(repeat and 100 * repeat, ' %')} of its Do53 queries before"
        )
        sent, lines = record.get("names_replayed"), replay.get("names_queries")
        if sent and lines:
            print(
                f"                  the engine asked {sent['queries']:,} queries, the names file's first lines "
                f"in its order ({sent['queries'] / lines:.2f} times its {lines:,}): a cache keeping every answer "
                f"would have answered {100 * sent['repeat_share']:.1f} % of them"
            )
    if v.get("unchecked"):
        print(f"  not checked     {', '.join(v['unchecked'])} (docs/results.md, Validity)")
    if v["flags"]:
        print(f"  INVALID         {', '.join(v['flags'])} (docs/results.md, Validity)")
    print(f"  results         {out}")
