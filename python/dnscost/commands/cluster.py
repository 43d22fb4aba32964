"""The command line of clusters: ``--cluster`` and its companions on ``dnscost run``,
``reproduce`` and ``load``, and ``dnscost cluster tls DIR`` (a cluster's TLS files) and
``dnscost cluster netns N`` (a namespace cluster on this machine, until Ctrl-C)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from dnscost.cluster import ClusterSettings
from dnscost.errors import UsageError
from dnscost.network import DEFAULT_NETWORK

__all__ = ["add_options", "add_parser", "check_cluster", "main", "settings_from"]


def add_options(p: argparse.ArgumentParser) -> None:
    """``--cluster`` and its companions (docs/cluster.md)."""
    g = p.add_argument_group("cluster (load from Dask workers; docs/cluster.md)")
    g.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="split every trial's load over a Dask cluster: tls://HOST:PORT, or netns:N (N namespace hosts here)",
    )
    g.add_argument("--cluster-tls", type=Path, metavar="DIR", help="the cluster's TLS files (dnscost cluster tls DIR)")
    g.add_argument(
        "--cluster-target-address", metavar="ADDR", help="the address of this host the workers reach the target at"
    )


def settings_from(a: argparse.Namespace, spec_cluster: ClusterSettings | None = None) -> ClusterSettings | None:
    """The cluster of the command line, else the spec's (None: no cluster), validated."""
    if a.cluster is None:
        if a.cluster_tls is not None or a.cluster_target_address is not None:
            raise UsageError("--cluster-tls and --cluster-target-address go with --cluster")
        settings = spec_cluster
    else:
        settings = ClusterSettings(a.cluster, str(a.cluster_tls) if a.cluster_tls else None, a.cluster_target_address)
    if settings is not None:
        settings.validate()
    return settings


def check_cluster(cluster: ClusterSettings | None, network: str, *targets: str) -> None:
    """A cluster loads a target in the root namespace, where its workers reach it."""
    if cluster is None:
        return
    if network != DEFAULT_NETWORK:
        raise UsageError(f"--cluster loads the target where its workers reach it: --network {network} is not possible")
    if "external" in targets:
        raise UsageError("--cluster with an external target is not implemented")


def add_parser(sub: Any) -> None:
    c = sub.add_parser("cluster", help="a Dask cluster's TLS files, or a namespace cluster on this machine")
    csub = c.add_subparsers(dest="action", required=True)
    t = csub.add_parser("tls", help="make a CA and the certificate a cluster's scheduler, workers and dnscost present")
    t.add_argument("dir", type=Path)
    n = csub.add_parser("netns", help="start a scheduler and N workers in namespace hosts; Ctrl-C stops them")
    n.add_argument("hosts", type=int)
    n.add_argument("--dir", type=Path, required=True, help="working directory (TLS files, logs)")
    n.add_argument("--cpus", help="CPUs of the workers (default: all)")


def main(a: argparse.Namespace) -> int:
    if a.action == "tls":
        from dnscost.certs import make_cluster_tls

        ca, cert, key = make_cluster_tls(Path(a.dir))
        roles = "".join(f"      {r}: {{cert: {cert}, key: {key}}}\n" for r in ("scheduler", "worker", "client"))
        (Path(a.dir) / "distributed.yaml").write_text(
            "# Dask's TLS for every member of a dnscost cluster: copy to ~/.config/dask/ on each host\n"
            f"distributed:\n  comm:\n    require-encryption: true\n    tls:\n      ca-file: {ca}\n{roles}"
        )
        flags = f"--tls-ca-file {ca} --tls-cert {cert} --tls-key {key}"
        print(f"scheduler: python -m distributed.cli.dask_scheduler --protocol tls {flags}")
        print(f"worker:    python -m distributed.cli.dask_worker tls://SCHEDULER:8786 {flags}")
        print(
            f"dnscost:   dnscost run SPEC --cluster tls://SCHEDULER:8786 --cluster-tls {a.dir}"
            " --cluster-target-address ADDR"
        )
        print(
            f"or, for any Dask program (SSHCluster, dask-jobqueue): copy {Path(a.dir) / 'distributed.yaml'}"
            " to ~/.config/dask/"
        )
        return 0
    from dnscost.cluster.netns import NamespaceCluster
    from dnscost.proc import parse_cpus

    cpus = parse_cpus(a.cpus) if a.cpus else None
    ns = NamespaceCluster(a.hosts, Path(a.dir).resolve(), cpus=cpus)
    try:
        print(f"scheduler {ns.address} (TLS files in {ns.tls.ca.parent}); the target listens on {ns.target_address}")
        for k, h in enumerate(ns.hosts):
            print(
                f"host{k}: namespace {h.info.netns}, worker at {h.info.target_address}, sources {h.info.sources[0]}..."
            )
        print("Ctrl-C stops them", file=sys.stderr, flush=True)
        while True:
            ns.check_alive()
            time.sleep(1)
    finally:
        ns.stop()
