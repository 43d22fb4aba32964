"""Multi-host trials on Dask: one trial's load split over Dask workers, each running the engine
with its share, all starting at one scheduled instant; their records merged into one engine's
(``docs/cluster.md``).

::

    shares.py   pure: split_config (a trial's engine configuration → one share per worker),
                merge_records (the workers' records → one engine's), also run by the analysis
    workers.py  the Dask side: Cluster (TLS client, the workers' facts, generate), run_share
                and worker_facts (run on the workers)
    netns.py    NamespaceCluster: a scheduler and workers in network namespaces of one machine

A cluster is named by ``--cluster`` or a spec's ``[cluster]`` table (:class:`ClusterSettings`):
``tls://HOST:PORT`` for a running cluster (its TLS files from ``dnscost cluster tls``, the
address of this host that the workers reach the target at), or ``netns:N`` for N namespace
hosts dnscost starts on this machine for the run, with a CA made for it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dnscost.cluster.shares import merge_records, split_config
from dnscost.cluster.workers import Cluster, ClusterTls
from dnscost.errors import UsageError

__all__ = [
    "Cluster",
    "ClusterSettings",
    "ClusterTls",
    "merge_records",
    "open_cluster",
    "split_config",
]

_NETNS = re.compile(r"netns:(\d+)$")
_SCHEDULER = re.compile(r"tls://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::([0-9]*))?$")
"""``tls://HOST:PORT``, HOST a name, an IPv4 address or a bracketed IPv6 address."""


@dataclass(frozen=True)
class ClusterSettings:
    """Where a run's load comes from: a Dask scheduler's address (``tls://HOST:PORT``) with its
    TLS directory and the address of this host the workers reach the target at, or
    ``netns:N`` (N namespace hosts on this machine, started for the run)."""

    address: str
    tls: str | None = None
    """Directory of ``ca.pem``, ``cluster.pem``, ``cluster.key`` (``dnscost cluster tls DIR``)."""
    target_address: str | None = None
    """An address of this host, reachable from every worker: the target listens there."""

    @property
    def namespace_hosts(self) -> int | None:
        m = _NETNS.match(self.address)
        return int(m.group(1)) if m else None

    @property
    def engines(self) -> int | None:
        """How many engines a trial's load is split over, when known before the cluster is
        reached: one per namespace host (None for a scheduler's, known once connected)."""
        return self.namespace_hosts

    def validate(self) -> None:
        """One clear line for settings that cannot work, before anything starts."""
        hosts = self.namespace_hosts
        if hosts is not None:
            if hosts < 1:
                raise UsageError("--cluster netns:N needs at least one host")
            if self.tls or self.target_address:
                raise UsageError(
                    "--cluster netns:N makes its own TLS and addresses: leave out the cluster's tls and target address"
                )
            return
        if not self.address.startswith("tls://"):
            raise UsageError(f"--cluster {self.address}: give tls://HOST:PORT (a Dask scheduler, TLS only) or netns:N")
        m = _SCHEDULER.match(self.address)
        if m is None:
            raise UsageError(f"--cluster {self.address}: not an address: give tls://HOST:PORT")
        if not m.group(2):
            raise UsageError(f"--cluster {self.address}: no port: give tls://HOST:PORT (a Dask scheduler's is 8786)")
        if not 1 <= int(m.group(2)) <= 65535:
            raise UsageError(f"--cluster {self.address}: port {int(m.group(2))} is out of range 1..65535")
        if not self.tls:
            raise UsageError(f"--cluster {self.address}: give --cluster-tls DIR (made by: dnscost cluster tls DIR)")
        if not self.target_address:
            raise UsageError(
                f"--cluster {self.address}: give --cluster-target-address, an address of this host the workers reach"
            )

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClusterSettings:
        return cls(str(d["address"]), d.get("tls"), d.get("target_address"))


def open_cluster(settings: ClusterSettings, workdir: Path, *, cpus: Sequence[int] | None = None) -> Cluster:
    """Connects to the cluster of ``settings`` (starting it first for ``netns:N``, its files in
    ``workdir``, its workers on ``cpus``). Raises UsageError when the scheduler cannot be
    reached or has no worker."""
    settings.validate()
    hosts = settings.namespace_hosts
    if hosts is None:
        assert settings.tls is not None and settings.target_address is not None
        return Cluster(settings.address, ClusterTls.in_dir(Path(settings.tls)), target_address=settings.target_address)
    from dnscost.cluster.netns import NamespaceCluster

    ns = NamespaceCluster(hosts, workdir, cpus=cpus)
    try:
        return Cluster(
            ns.address, ns.tls, target_address=ns.target_address, expect_workers=hosts, owned=ns, connect_timeout_s=60
        )
    except BaseException:
        ns.stop()
        raise
