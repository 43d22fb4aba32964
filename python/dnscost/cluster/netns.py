"""A Dask cluster on one machine whose workers each live in a network namespace of their own:
"hosts" with their own addresses, for tests and for splitting load on one machine.

Dask's ``LocalCluster`` starts its workers as processes of the caller, in the caller's network
namespace, and cannot place them anywhere else. So this is its equivalent built from Dask's own
command-line programs: the scheduler (``python -m distributed.cli.dask_scheduler``) in the root
namespace, listening on the root side of the first host's veth pair, and one worker process per
host (``nsenter --net=... python -m distributed.cli.dask_worker``, no nanny, one thread) in that
host's namespace (:meth:`dnscost.network.Network.cluster_host`), all speaking TLS with a
certificate from a CA made for the cluster (:func:`dnscost.certs.make_cluster_tls`).

The target a cluster trial loads listens on the same root-side address as the scheduler: an
address of the root namespace is local to it whichever veth a packet came in by, so every host
reaches it through its own link. Every process is a :class:`dnscost.proc.Child` (stopped by
PID) and every namespace is named after dnscost's PID (removed by :meth:`stop`, at exit, or by
the next dnscost after a kill).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from dnscost.certs import make_cluster_tls
from dnscost.cluster.workers import SOURCES_ENV, ClusterTls
from dnscost.errors import MachineError, UsageError
from dnscost.network import Network
from dnscost.proc import Child

__all__ = ["NamespaceCluster"]

MAX_HOSTS = 64


class NamespaceCluster:
    """``hosts`` namespace hosts, a scheduler and one worker per host, started in ``workdir``
    (TLS files, logs); worker processes (and so their engines) on ``cpus``."""

    def __init__(self, hosts: int, workdir: Path, *, cpus: Sequence[int] | None = None, sources: int = 8) -> None:
        if not 1 <= hosts <= MAX_HOSTS:
            raise UsageError(f"a namespace cluster has 1 to {MAX_HOSTS} hosts, not {hosts}")
        self.workdir = workdir
        self.hosts: list[Network] = []
        self.children: list[Child] = []
        try:
            ca, cert, key = make_cluster_tls(workdir / "tls")
            self.tls = ClusterTls(ca, cert, key)
            for _ in range(hosts):
                self.hosts.append(Network.cluster_host(sources))
            self.target_address = self.hosts[0].info.generator_address
            tls_flags = ["--tls-ca-file", str(ca), "--tls-cert", str(cert), "--tls-key", str(key)]
            scheduler_file = workdir / "scheduler.json"
            scheduler_file.unlink(missing_ok=True)
            self.children.append(
                Child(
                    "dask-scheduler",
                    [
                        sys.executable,
                        "-m",
                        "distributed.cli.dask_scheduler",
                        "--protocol",
                        "tls",
                        "--host",
                        self.target_address,
                        "--port",
                        "0",
                        "--no-dashboard",
                        "--scheduler-file",
                        str(scheduler_file),
                        *tls_flags,
                    ],
                    log=workdir / "scheduler.log",
                    cpus=cpus,
                )
            )
            self.children[0].wait_for(scheduler_file.exists, 30, "while starting")
            self.address = str(json.loads(_read_when_complete(scheduler_file))["address"])
            for k, host in enumerate(self.hosts):
                info = host.info
                self.children.append(
                    Child(
                        f"dask-worker-host{k}",
                        [
                            *host_prefix(host),
                            sys.executable,
                            "-m",
                            "distributed.cli.dask_worker",
                            self.address,
                            "--name",
                            f"host{k}",
                            "--host",
                            info.target_address,
                            "--nthreads",
                            "1",
                            "--no-nanny",
                            "--no-dashboard",
                            "--memory-limit",
                            "0",
                            "--local-directory",
                            str(workdir / f"host{k}"),
                            *tls_flags,
                        ],
                        log=workdir / f"host{k}.log",
                        cpus=cpus,
                        env={**os.environ, SOURCES_ENV: ",".join(info.sources)},
                    )
                )
        except BaseException:
            self.stop()
            raise

    def check_alive(self) -> None:
        """Raises MachineError when the scheduler or a worker has exited."""
        for c in self.children:
            if not c.alive():
                raise MachineError(f"{c.name} ended: {c.last_words()}")

    def stop(self) -> None:
        """Stops the workers, then the scheduler (by PID), then removes the hosts. Safe twice."""
        try:
            for c in reversed(self.children):
                c.stop()
            self.children = []
        finally:
            for h in self.hosts:
                h.remove()
            self.hosts = []


def host_prefix(host: Network) -> list[str]:
    """The command prefix that runs a program in ``host``'s namespace."""
    return ["nsenter", f"--net=/run/netns/{host.info.netns}", "--"]


def _read_when_complete(path: Path, timeout_s: float = 10.0) -> str:
    """The scheduler file once it parses (it may be caught half-written)."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = path.read_text()
        try:
            json.loads(text)
            return text
        except json.JSONDecodeError:
            if time.monotonic() > deadline:
                raise MachineError(f"{path}: not a scheduler file: {text[:80]!r}") from None
            time.sleep(0.05)
