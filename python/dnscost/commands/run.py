"""``dnscost run`` and ``dnscost reproduce``: an experiment spec planned, checked, run (or
resumed) and reported (ARCHITECTURE.md, "an experiment")."""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnscost.argtypes import cpu_list
from dnscost.cluster import ClusterSettings
from dnscost.commands.cluster import add_options as add_cluster_options
from dnscost.commands.cluster import check_cluster, open_run_cluster
from dnscost.commands.cluster import settings_from as cluster_settings
from dnscost.commands.external import add_options as add_external_options
from dnscost.commands.external import spec_external
from dnscost.commands.load import pin_self
from dnscost.commands.report import make_report
from dnscost.commands.target import add_roots_option
from dnscost.contract import RunSpecRecord
from dnscost.errors import TargetError, UsageError
from dnscost.network import DEFAULT_NETWORK, NETWORKS, check_network

if TYPE_CHECKING:
    from collections.abc import Sequence

    from dnscost.results import Run

__all__ = [
    "WRITE_ERRNOS",
    "add_parser",
    "experiments_dir",
    "external_unserved",
    "main",
    "parse_spec_targets",
    "stop_on_write_failure",
    "write_failure",
]


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
    from dnscost.runner import Progress, check_plan, check_split, default_cpus, preflight, run_plan
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
    check_plan(spec, plan, target_cpus, generator_cpus, network)
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
    progress = Progress(len(plan))
    print(f"dnscost: {len(plan)} trials of {spec.name} into {run.dir}", file=sys.stderr)
    if unserved:
        progress.note(f"external: no endpoint for {', '.join(unserved)}: their trials are left out")
    run.doc["status"] = "running"
    cluster = None
    try:
        if cluster_given is not None:
            cluster = open_run_cluster(cluster_given, run, generator_cpus)
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
        report = make_report(run.dir)
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
        if entry["status"] == "running":
            entry["status"], entry["error"] = "interrupted", f"{where}{e.strerror or e}"
    try:
        run.finish("interrupted")
    except OSError as again:
        run.doc["trials"] = json.loads(before)
        why = again.strerror or again
        print(f"dnscost: {run.dir / 'run.json'} still says running: it could not be rewritten ({why})", file=sys.stderr)
    else:
        print(f"dnscost: {run.dir / 'run.json'}: the run is marked interrupted", file=sys.stderr)
    print(f"dnscost: resume with: dnscost {command} --resume {run.dir}", file=sys.stderr)


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
        summary: Mapping[str, Any] = doc.get("summary") or {}
        v = summary.get("validity") or {}
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
