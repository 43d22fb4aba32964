"""``dnscost run`` and ``dnscost reproduce``: an experiment spec planned, checked, run (or
resumed) and reported (ARCHITECTURE.md, "an experiment")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dnscost.argtypes import cpu_list
from dnscost.cluster import ClusterSettings
from dnscost.commands.cluster import add_options as add_cluster_options
from dnscost.commands.cluster import check_cluster
from dnscost.commands.cluster import settings_from as cluster_settings
from dnscost.commands.external import add_options as add_external_options
from dnscost.commands.external import spec_external
from dnscost.commands.load import pin_self
from dnscost.commands.report import make_report
from dnscost.commands.target import add_roots_option
from dnscost.contract import RunSpecRecord
from dnscost.errors import TargetError, UsageError
from dnscost.network import DEFAULT_NETWORK, NETWORKS, check_network

__all__ = ["add_parser", "experiments_dir", "main", "parse_spec_targets"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    add_external_options(p)
    add_cluster_options(p)


def experiments_dir() -> Path:
    """Where the shipped specs are (``experiments/`` in the repository)."""
    return Path(__file__).parent.parent / "experiments"


def main(a: argparse.Namespace) -> int:
    """``dnscost run`` and ``dnscost reproduce``: plan, check, run (or resume), report."""
    from dnscost.engine import engine_version
    from dnscost.machine import facts
    from dnscost.plan import expand
    from dnscost.proc import use_ledger
    from dnscost.results import Run, new_run_id
    from dnscost.runner import check_plan, default_cpus, execute, external_unserved
    from dnscost.spec import load_spec, parse_spec

    if a.resume:
        run, leftovers = Run.resume(a.resume)
        for what in leftovers:
            print(f"dnscost: stopped {what}, left running by the interrupted run", file=sys.stderr)
        was = run.doc["spec"]
        spec = parse_spec(run.doc["spec_toml"], was["origin"])
        # Runs made before groups had targets of their own recorded no only_targets.
        only_recorded = was.get("only_targets", was.get("targets"))
        only = tuple(only_recorded) if only_recorded is not None else None
        if only is not None:
            spec = spec.only(only)
        groups_recorded = was.get("only_groups")
        groups = tuple(groups_recorded) if groups_recorded is not None else None
        if groups is not None:
            spec = spec.only_groups(groups)
        cpus = was.get("cpus", {})
        target_cpus, generator_cpus = cpus.get("target", []), cpus.get("generator", [])
        network = was.get("network") or DEFAULT_NETWORK
        if a.network and a.network != network:
            raise UsageError(f"{a.resume}: the run was made with --network {network}, not {a.network}")
        recorded = was.get("cluster")
        cluster_given = cluster_settings(a, ClusterSettings.from_dict(recorded) if recorded else None)
        spec = spec_external(a, spec, was.get("external"))
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
    check_cluster(cluster_given, network, *spec.all_targets())
    plan = expand(spec)
    unserved = external_unserved(spec)
    if not plan:
        if unserved:
            raise UsageError(f"{spec.origin}: no trial to run: no --external-endpoint for {', '.join(unserved)}")
        raise UsageError(f"{spec.origin}: no trial to run (do the targets serve the transports?)")
    if a.resume and [t.id for t in plan] != [t["id"] for t in run.doc["plan"]]:
        raise UsageError(f"{a.resume}: the plan no longer matches the recorded one (dnscost changed?)")
    check_plan(spec, plan, target_cpus, generator_cpus, network, 1 if cluster_given is None else cluster_given.engines)
    pin_self(generator_cpus)
    if not a.resume:
        out = a.output or Path("results", spec.name, new_run_id()).resolve()
        resolved: RunSpecRecord = {
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
    outcome = execute(
        run,
        spec,
        plan,
        target_cpus=target_cpus,
        generator_cpus=generator_cpus,
        network=network,
        cluster_settings=cluster_given,
        command=a.command,
    )
    if outcome.stopped_by is not None:
        return 1  # said, with how to resume
    print(f"dnscost: {outcome.line()}", file=sys.stderr)
    if outcome.done == 0:
        raise TargetError(f"no trial finished, so no report was made; see {run.dir}/run.json for each trial's error")
    if not a.no_report:
        report = make_report(run.dir)
        print(f"report: {report}")
    else:
        print(f"results: {run.dir}")
    return 0 if outcome.complete else 4


def parse_spec_targets(text: str) -> list[str]:
    from dnscost.targets import target_name
    from dnscost.targets.external import EXTERNAL

    names = [n if n == EXTERNAL else str(target_name(n)) for n in (n.strip() for n in text.split(",")) if n]
    if not names:
        raise UsageError("--targets: give at least one target")
    return names
