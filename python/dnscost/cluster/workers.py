"""The Dask side of a cluster trial: connecting to a scheduler over TLS, asking every worker what
it is (its host, CPUs, engine), and running one trial's shares on them, all starting at one
scheduled instant.

The instant: the orchestrator picks a wall-clock time a little ahead (:data:`LEAD_S`, plus
:data:`LEAD_PER_WORKER_S` per worker) and every worker sleeps until it before it spawns its engine
(:func:`run_share`). A field of the engine's configuration would do the same from inside the
engine, a few milliseconds later in its start-up; the sleep keeps the engine's configuration
(strictly validated, recorded, replayable with ``dnscost-engine generate --config``) free of a
time that means nothing once the trial is over. What the wait cannot make equal, the process's
start, is measured: each engine records its own start (``started_unix_ms``), the spread of the
workers' starts is recorded as ``start_skew_ms`` and a trial whose workers started more than
:func:`max_skew_ms` apart fails (its windows would not overlap). Hosts' clocks must agree (NTP):
on one machine's namespaces they are one clock.

Each worker runs ``dnscost-engine generate`` from its own installation of dnscost
(:func:`dnscost.engine.engine_path`, on the worker's host), on the CPUs its process may use,
from the source addresses ``$DNSCOST_WORKER_SOURCES`` lists (comma-separated; unset: the
host's route chooses), and hands back its records.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, TypedDict, cast

from dnscost.cluster.shares import merge_records, split_config
from dnscost.contract import ClusterRecord, EngineConfig, EngineRecord, WorkerShare, WorkerSummary
from dnscost.engine import start_of, summary_of
from dnscost.errors import DnscostError, EngineError, UsageError
from dnscost.results import write_atomic, write_json

__all__ = [
    "LEAD_S",
    "Cluster",
    "ClusterDescription",
    "ClusterTls",
    "Owned",
    "ShareResult",
    "WorkerFacts",
    "max_skew_ms",
    "run_share",
    "worker_facts",
]

LEAD_S = 2.0
"""How far ahead the common start is scheduled (plus :data:`LEAD_PER_WORKER_S` per worker): time
for every worker to receive its share. On the 2-core VM, four namespace workers sharing a core
with their engines and a page-loading browser on the other were once 2.1 s late with 1.4 s; a
late worker starts at once and records by how much (``late_ms``)."""
LEAD_PER_WORKER_S = 0.25
SOURCES_ENV = "DNSCOST_WORKER_SOURCES"
SHIPPED_FILES = ("ca_file", "queries_file")
"""Engine knobs naming files of this host (the target's CA, a query list): their contents go
with each share and the worker writes them where its engine reads them."""


@dataclass(frozen=True)
class ClusterTls:
    """The files of a cluster's TLS: its CA, and the certificate and key that the scheduler,
    the workers and the orchestrator present (one identity, signed by that CA)."""

    ca: Path
    cert: Path
    key: Path

    @classmethod
    def in_dir(cls, directory: Path) -> ClusterTls:
        """The files ``dnscost cluster tls DIR`` writes; UsageError naming the missing one."""
        tls = cls(directory / "ca.pem", directory / "cluster.pem", directory / "cluster.key")
        for path in (tls.ca, tls.cert, tls.key):
            if not path.is_file():
                raise UsageError(
                    f"cluster TLS: {path} not found (make the files with: dnscost cluster tls {directory})"
                )
        return tls

    def to_dict(self) -> dict[str, str]:
        return {k: str(v) for k, v in asdict(self).items()}


class WorkerFacts(TypedDict):
    """What a worker says of itself before the first trial."""

    address: str
    name: str
    host: str
    cpus: list[int]
    sources: list[str]
    engine: str
    engine_version: str


class ShareResult(TypedDict):
    """One worker's run of its share, as it hands it back."""

    address: str
    host: str
    config: EngineConfig
    """The share as the engine ran it (with the host's CPUs, threads and sources)."""
    late_ms: float
    """How long after the scheduled instant the engine was spawned (0: on time)."""
    records: list[EngineRecord]
    connections_log_gz: bytes | None


class ClusterDescription(TypedDict):
    """What run.json records of a run's cluster (``cluster``)."""

    address: str
    tls: dict[str, str]
    target_address: str
    workers: list[WorkerFacts]


def max_skew_ms(config: Mapping[str, Any]) -> float:
    """How far apart the workers' engines may start: half the warm-up, at least 100 ms."""
    return max(100.0, float(config.get("warmup_ms", 0)) / 2)


def _sources() -> list[str]:
    return [s.strip() for s in os.environ.get(SOURCES_ENV, "").split(",") if s.strip()]


def worker_facts(dask_worker: Any = None) -> WorkerFacts:
    """Runs on a worker (``Client.run``): its host, CPUs, sources and engine. Raises
    MachineError when the worker's host has no engine."""
    from dnscost.engine import engine_path, engine_version

    return {
        "address": str(dask_worker.address) if dask_worker is not None else "",
        "name": str(dask_worker.name) if dask_worker is not None else "",
        "host": socket.gethostname(),
        "cpus": sorted(os.sched_getaffinity(0)),
        "sources": _sources(),
        "engine": str(engine_path()),
        "engine_version": engine_version(),
    }


def run_share(
    share: dict[str, object], start_at_unix_ms: float, label: str, files: dict[str, bytes] | None = None
) -> ShareResult:
    """Runs on a worker: sleeps until ``start_at_unix_ms``, then runs the engine with ``share``
    on this process's CPUs and from this host's sources, the ``files`` it names
    (:data:`SHIPPED_FILES`) written on this host first; returns its records."""
    from distributed import get_worker

    from dnscost.engine import generate
    from dnscost.proc import owner_tag

    # Named by its owner (this worker): a later dnscost removes it if a SIGKILL took us.
    workdir = Path(tempfile.mkdtemp(prefix=f"dnscost-{label}-{owner_tag()}-"))
    try:
        cpus = sorted(os.sched_getaffinity(0))
        sources = _sources()
        raw = {**share, **({"sources": sources} if sources else {})}
        listed = cast(list[dict[str, Any]], raw.get("classes", []))
        classes = {str(c["name"]): {**c, "config": dict(c.get("config", {}))} for c in listed}
        for k, (knob, content) in enumerate((files or {}).items()):
            path = workdir / f"{k}-{knob.rpartition('/')[2]}.shipped"
            path.write_bytes(content)
            if knob.startswith("classes/"):  # classes/<name>/<knob>: that class's file
                _, name, own = knob.split("/", 2)
                if name in classes:
                    classes[name]["config"][own] = str(path)
            else:
                raw[knob] = str(path)
        if classes:
            raw["classes"] = list(classes.values())
        config = cast(EngineConfig, raw)  # the share, as Cluster.generate split it
        config["threads"] = max(1, min(len(cpus), int(config.get("connections", 1))))
        config["connections_log"] = str(workdir / "engine-connections.jsonl")
        wait_s = start_at_unix_ms / 1000 - time.time()
        if wait_s > 0:
            time.sleep(wait_s)
        late_ms = max(0.0, time.time() * 1000 - start_at_unix_ms)
        records = generate(config, workdir, cpus=cpus, name="engine")
        log = workdir / "engine-connections.jsonl"
        ran: EngineConfig = json.loads((workdir / "engine-config.json").read_text())
        return {
            "address": str(get_worker().address),
            "host": socket.gethostname(),
            "config": ran,
            "late_ms": round(late_ms, 1),
            "records": records,
            "connections_log_gz": gzip.compress(log.read_bytes(), 6) if log.exists() else None,
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _connections(records: Sequence[EngineRecord], config: Mapping[str, Any]) -> int:
    """The connection slots a share ran: its configuration's, or a population's classes' as the
    engine resolved them (its start record)."""
    classes = start_of(records).get("classes")
    if classes:
        return sum(int(c["config"]["connections"]) for c in classes)
    return int(config["connections"])


def _rate(records: Sequence[EngineRecord], config: Mapping[str, Any]) -> float | str:
    """The rate a share ran at: its configuration's, or a population's classes' together."""
    classes = start_of(records).get("classes")
    if classes:
        rates = [r for c in classes if isinstance(r := c["config"].get("rate"), int | float)]
        return float(sum(rates)) if len(rates) == len(classes) else "max"
    return cast(float | str, config.get("rate", "max"))


def _own_summary(records: Sequence[EngineRecord]) -> WorkerSummary:
    s = summary_of(records)
    m = s["measured"]
    return {
        "offered": m["queries"]["offered"],
        "answered": m["queries"]["answered"],
        "answered_qps": s["answered_qps"],
        "generator_kept_up": s["generator_kept_up"],
        "engine_cpu_us": m["engine"]["cpu_user_us"] + m["engine"]["cpu_system_us"],
        "latency_p50_us": m["latency"]["p50_us"],
        "latency_p99_us": m["latency"]["p99_us"],
    }


class Owned(Protocol):
    """A cluster dnscost started itself (:class:`dnscost.cluster.netns.NamespaceCluster`): what
    closing the connection to it must also stop."""

    def stop(self) -> None: ...


class Cluster:
    """A connected Dask cluster: the client, the workers' facts and, for a namespace cluster
    dnscost started itself, what to stop (``owned``)."""

    def __init__(
        self,
        address: str,
        tls: ClusterTls,
        *,
        target_address: str,
        expect_workers: int = 1,
        owned: Owned | None = None,
        connect_timeout_s: float = 10.0,
    ) -> None:
        from distributed import Client
        from distributed.security import Security

        if not address.startswith("tls://"):
            raise UsageError(f"cluster {address}: the scheduler's address must be tls://HOST:PORT (TLS only)")
        self.address, self.tls, self.target_address, self.owned = address, tls, target_address, owned
        security = Security(
            tls_ca_file=str(tls.ca), tls_client_cert=str(tls.cert), tls_client_key=str(tls.key), require_encryption=True
        )
        try:
            self.client = Client(address, security=security, timeout=f"{connect_timeout_s}s", set_as_default=False)
        except (OSError, TimeoutError) as e:
            raise UsageError(f"cluster {address}: scheduler not reachable ({e})") from None
        try:
            self.client.wait_for_workers(expect_workers, timeout=connect_timeout_s)
        except (OSError, TimeoutError):
            count = len(self.client.scheduler_info().get("workers", {}))
            self.client.close()
            raise UsageError(f"cluster {address}: {count} workers, {expect_workers} needed") from None
        facts = self.client.run(worker_facts, on_error="return")
        self.workers: list[WorkerFacts] = []
        for addr, fact in sorted(facts.items()):
            if isinstance(fact, BaseException):
                self.client.close()
                raise UsageError(f"cluster worker {addr}: {fact}") from None
            self.workers.append(fact)

    @property
    def generator_cores(self) -> int:
        """Distinct cores the workers run on (a host's CPUs counted once, whatever the number of
        workers sharing them)."""
        return len({(w["host"], c) for w in self.workers for c in w["cpus"]})

    def describe(self) -> ClusterDescription:
        """What run.json records of the cluster."""
        return {
            "address": self.address,
            "tls": self.tls.to_dict(),
            "target_address": self.target_address,
            "workers": list(self.workers),
        }

    def generate(
        self, config: EngineConfig, trial_dir: Path, *, watchdog: Callable[[], None] | None = None
    ) -> tuple[list[EngineRecord], ClusterRecord]:
        """Runs ``config`` (one trial's engine configuration) split over the workers, all
        starting together; writes each worker's records under ``trial_dir/workers/`` and the
        merged ones to ``trial_dir/engine.jsonl``. Returns the merged records and the record of
        the split."""
        shares = split_config(config, len(self.workers))
        named = {k: config.get(k) for k in SHIPPED_FILES}
        for c in config.get("classes", []):  # a population's: each class may name its own
            named.update({f"classes/{c['name']}/{k}": c.get("config", {}).get(k) for k in SHIPPED_FILES})
        files = {k: Path(str(path)).read_bytes() for k, path in named.items() if path}
        start_at = round(time.time() * 1000 + (LEAD_S + LEAD_PER_WORKER_S * len(self.workers)) * 1000)
        futures = [
            self.client.submit(
                run_share,
                share,
                start_at,
                f"w{k}",
                files,
                workers=[w["address"]],
                allow_other_workers=False,
                pure=False,
            )
            for k, (w, share) in enumerate(zip(self.workers, shares, strict=True))
        ]
        timeout_s = float(config.get("timeout_ms", 2000)) / 1000
        limit_s = (
            LEAD_S
            + LEAD_PER_WORKER_S * len(self.workers)
            + (float(config.get("warmup_ms", 0)) + float(config.get("duration_ms", 10_000))) / 1000
            + 2 * timeout_s
            + 60
        )
        deadline = time.monotonic() + limit_s
        try:
            while not all(f.done() for f in futures):
                time.sleep(0.2)
                if watchdog is not None:
                    watchdog()
                if time.monotonic() > deadline:
                    raise EngineError(f"cluster workers did not finish within {limit_s:.0f} s")
        except BaseException:
            self.client.cancel(futures)
            raise
        results: list[ShareResult] = []
        for w, f in zip(self.workers, futures, strict=True):
            try:
                results.append(f.result())
            except DnscostError:
                raise
            except Exception as e:
                raise EngineError(f"cluster worker {w['address']}: {e}") from None
        workers_dir = trial_dir / "workers"
        shares_out: list[WorkerShare] = []
        for k, (w, r) in enumerate(zip(self.workers, results, strict=True)):
            d = workers_dir / str(k)
            d.mkdir(parents=True, exist_ok=True)
            write_json(d / "engine-config.json", r["config"])
            write_atomic(d / "engine.jsonl", "".join(json.dumps(x) + "\n" for x in r["records"]))
            if r["connections_log_gz"] is not None:
                (d / "engine-connections.jsonl.gz").write_bytes(r["connections_log_gz"])
            start = start_of(r["records"])
            shares_out.append(
                {
                    "address": w["address"],
                    "name": w["name"],
                    "host": w["host"],
                    "dir": f"workers/{k}",
                    "connections": _connections(r["records"], r["config"]),
                    "rate": _rate(r["records"], r["config"]),
                    "cpus": list(r["config"].get("cpus", [])),
                    "sources": list(r["config"].get("sources", [])),
                    "late_ms": r["late_ms"],
                    "started_unix_ms": int(start["started_unix_ms"]),
                    "summary": _own_summary(r["records"]),
                }
            )
        skew = max_skew_ms(config)
        merged = merge_records([r["records"] for r in results], config, max_skew_ms=skew)
        write_json(trial_dir / "engine-config.json", config)
        write_atomic(trial_dir / "engine.jsonl", "".join(json.dumps(x) + "\n" for x in merged))
        starts = [s["started_unix_ms"] for s in shares_out]
        record: ClusterRecord = {
            "address": self.address,
            "tls_ca": str(self.tls.ca),
            "start_at_unix_ms": start_at,
            "start_skew_ms": max(starts) - min(starts),
            "max_skew_ms": skew,
            "generator_cores": self.generator_cores,
            "workers": shares_out,
        }
        return merged, record

    def close(self) -> None:
        """Closes the client, and stops the cluster when dnscost started it. Safe twice."""
        with contextlib.suppress(Exception):
            self.client.close()
        if self.owned is not None:
            self.owned.stop()
            self.owned = None
