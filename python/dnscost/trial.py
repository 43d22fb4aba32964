"""One measured trial, end to end: start the target on its cores (its cache filled from
dnscost's own authoritative responder), meter it, run the engine on the other cores, stop
everything, and write the trial's raw data and summary as they are produced.

::

    responder (generator CPUs) ◄── target (target CPUs, own cgroup) ◄── engine (generator CPUs)
                                        ▲ sampler (10 Hz: CPU, memory, sockets, energy)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dnscost import meter
from dnscost.certs import TlsFiles, make_tls
from dnscost.contract import EngineConfig, FirstAttempt, SummaryRecord, TargetCounters, TrialRecord
from dnscost.engine import Endpoint, Responder, generate, summary_of
from dnscost.errors import EngineError, TargetError, UsageError
from dnscost.jsonl import read_records
from dnscost.machine import FD_HEADROOM, connections_per_process
from dnscost.meter.sockets import listen_backlogs
from dnscost.network import (
    DEFAULT_NETWORK,
    Network,
    NetworkInfo,
    check_network,
    read_softnet,
    softnet_delta,
)
from dnscost.population import Replay, replayed_names
from dnscost.results import write_json
from dnscost.targets import adapter, make_target, served
from dnscost.targets.base import (
    SessionLimits,
    Target,
    TicketKeys,
    check_session_limits,
    check_ticket_keys,
    free_port,
    proxy_v2_refusal,
)
from dnscost.targets.external import EXTERNAL, ExternalSettings, ExternalTarget, pid_affinity
from dnscost.transports import DEFAULT_KEY_TYPE, STREAM_TRANSPORTS
from dnscost.trial_summary import CounterDelta, SummaryContext, summarize_trial
from dnscost.validity import KERNEL_ACCEPT_NOISE, MAX_NEW_CONNECTIONS

if TYPE_CHECKING:
    from dnscost.cluster import Cluster

__all__ = [
    "LoadSettings",
    "Testbed",
    "check_doh_method",
    "check_target",
    "cluster_network",
    "describe_failure",
    "engine_config",
    "fill_cache",
    "measure",
    "one_query_slots",
    "run_trial",
    "start_bed",
    "upstream_listeners",
    "warm_cache",
]


@dataclass
class LoadSettings:
    """Everything one trial needs, resolved."""

    target: str
    transport: str
    engine: EngineConfig = field(default_factory=lambda: EngineConfig())
    """Engine configuration fields (see `dnscost-engine schema`), without target and transport."""
    target_cpus: list[int] = field(default_factory=lambda: [0])
    generator_cpus: list[int] = field(default_factory=lambda: [1])
    names: int = 10_000
    tld: str = "test"
    fill: bool = True
    baseline_s: float = 1.0
    cert_key: str = DEFAULT_KEY_TYPE
    """Key type of the target's certificate (``dnscost.transports.KEY_TYPES``)."""
    network: str = DEFAULT_NETWORK
    """Where the target sits: ``loopback``, ``veth`` or ``veth-rps`` (see dnscost.network)."""
    external: ExternalSettings | None = None
    """With target ``external``: the operator's server (dnscost.targets.external)."""
    population: Replay | None = None
    """A population replayed in one run (``dnscost load --population``): its classes over
    their transports, at once; ``transport`` is then :data:`dnscost.transports.POPULATION`."""
    target_processes: int = 1
    """How many processes the target runs as, sharing its ports (a target that splits:
    :attr:`dnscost.targets.base.Target.splits`), past one process's open files."""
    ticket_keys: TicketKeys | None = None
    """The target's session-ticket keys rotated on a schedule (None: as it does by itself)."""
    session_limits: SessionLimits | None = None
    """The target's per-client limit on new TLS sessions (None: none, its default)."""

    def transports(self) -> list[str]:
        """The transports the load uses: the population's, or the one."""
        return self.population.transports() if self.population is not None else [self.transport]

    def any_name(self) -> bool:
        """Whether the load asks a capture's own names (a population's names file), which the
        target must forward and the upstream answer, instead of the synthetic set."""
        return self.population is not None and self.population.names is not None

    def validate(self) -> None:
        """Fails early, before anything starts, on settings that cannot be run."""
        self.validate_bed()
        if self.target != EXTERNAL:
            for t in self.transports():
                check_doh_method(self.target, t, self.engine.get("doh_method"))
        if self.engine.get("proxy_v2") is not None:
            check_proxy_v2(self.target, self.transports())
        if self.ticket_keys is not None:
            if self.target == EXTERNAL:
                raise UsageError("external target: its session-ticket keys are the operator's to rotate")
            check_ticket_keys(self.target, adapter(self.target).ticket_key_transports, self.transports())
        if self.session_limits is not None:
            if self.target == EXTERNAL:
                raise UsageError("external target: its per-client limits are the operator's to set")
            check_session_limits(self.target, adapter(self.target).session_limit_transports, self.transports())

    def validate_bed(self) -> None:
        """Fails early on a bed that cannot be started (the target, its network and CPUs),
        whatever load it is then given: ``dnscost target start`` starts one without a trial."""
        check_network(self.network)
        if self.target == EXTERNAL:
            if self.external is None:
                raise UsageError("--target external needs at least one --external-endpoint URL")
            served = self.external.parsed()
            for t in self.transports():
                if t not in served:
                    raise UsageError(f"external target: no --external-endpoint for {t} (given: {', '.join(served)})")
            if self.any_name():
                raise UsageError(
                    "external target: a capture's own names need a target that forwards them to "
                    "dnscost's upstream (leave the population's names out to replay synthetic ones)"
                )
            if self.network != DEFAULT_NETWORK:
                raise UsageError(
                    f"external target: --network {self.network} is not possible (dnscost places only its own targets)"
                )
        else:
            for t in self.transports():
                try:
                    check_target(self.target, t)
                except UsageError as e:
                    if self.population is None:
                        raise
                    raise UsageError(f"{e}: --served-only leaves out the population's classes over it") from None
        if self.target != EXTERNAL:
            check_processes(self.target, self.target_processes, int(self.engine.get("connections") or 0))
        if set(self.target_cpus) & set(self.generator_cpus):
            raise UsageError(f"target CPUs {self.target_cpus} and generator CPUs {self.generator_cpus} overlap")
        if not self.generator_cpus:
            raise UsageError("no CPU left for the generator: give --target-cpus and --generator-cpus")


def _tls_options(transport: str, target: Target, ep: Endpoint) -> EngineConfig:
    opts = target.client_tls(transport)
    if transport in ("doh", "doh3") and ep.path:
        opts["doh_path"] = ep.path
    return opts


def upstream_listeners(host: str = "127.0.0.1") -> list[str]:
    """UDP and TCP on one port: resolvers retry truncated answers, and dnsdist forwards TCP
    queries, to the port they query over UDP."""

    port = free_port()
    return [f"udp://{host}:{port}", f"tcp://{host}:{port}"]


@dataclass
class Testbed:
    """A target (not yet started) with its per-run CA and, for a resolver, the authoritative
    upstream it fills its cache from, running on the generator's CPUs, and the network set-up
    between them and the generator (removed with the bed)."""

    target: Target
    responder: Responder | None
    tls: TlsFiles
    network: Network = field(default_factory=Network.loopback)

    @classmethod
    def create(
        cls,
        name: str,
        workdir: Path,
        *,
        target_cpus: Sequence[int],
        upstream_cpus: Sequence[int],
        names: int,
        tld: str,
        transports: Sequence[str] | None = None,
        cert_key: str = DEFAULT_KEY_TYPE,
        network: Network | None = None,
        external: ExternalSettings | None = None,
        any_name: bool = False,
        processes: int = 1,
    ) -> Testbed:
        """``any_name``: every name is answered (the upstream with an address of its own, and
        the resolver forwards every name to it), for a capture's own names."""
        net = network or Network.loopback()
        if external is not None:
            ca = Path(external.ca) if external.ca else workdir / "no-ca"
            files = TlsFiles(ca=ca, cert=ca, key=ca, leaf=ca)
            return cls(
                ExternalTarget(workdir / "target", external, cpus=target_cpus, tls=files, tld=tld, synthetic=names),
                None,
                files,
                net,
            )
        tls = make_tls(workdir / "tls", addresses=[net.info.target_address], key_type=cert_key)
        responder = None
        if name != "builtin":  # only builtin answers without an upstream
            responder = Responder(
                workdir / "upstream",
                upstream_listeners(net.info.generator_address),
                cpus=upstream_cpus,
                synthetic=names,
                tld=tld,
                name="upstream",
                extra=["--outside", "answer"] if any_name else [],
                queries_log=any_name,
            )
        try:
            target = make_target(
                name,
                workdir / "target",
                cpus=target_cpus,
                tls=tls,
                upstream=responder.endpoints["udp"] if responder else None,
                transports=transports,
                tld=tld,
                synthetic=names,
                any_name=any_name,
                host=net.info.target_address,
                exec_prefix=net.exec_prefix,
                processes=processes,
            )
        except BaseException:
            if responder is not None:
                responder.stop()
            raise
        return cls(target, responder, tls, net)

    def stop(self) -> None:
        """Stops the target and the upstream (by PID), then removes the network set-up. Safe
        to call twice."""
        try:
            self.target.stop()
            if self.responder is not None:
                self.responder.stop()
        finally:
            self.network.remove()


def check_target(name: str, transport: str) -> None:
    """Fails early, before anything starts, on a target or transport that cannot be run."""

    transports = served(name)
    if transport not in transports:
        raise UsageError(f"{name} does not serve {transport} (it serves {', '.join(transports)})")


def check_proxy_v2(name: str, transports: Sequence[str]) -> None:
    """Fails early, in one line, on PROXY v2 headers (the engine's ``proxy_v2``) sent to a
    target that cannot be told to take them over ``transports``."""
    if name == EXTERNAL:
        return  # the operator's server: configured by the operator, who says what it takes
    accepted = adapter(name).proxy_v2_transports
    refused = [t for t in transports if t not in accepted]
    if refused:
        raise UsageError(proxy_v2_refusal(name, accepted, refused))


def check_processes(name: str, processes: int, connections: int) -> None:
    """Fails early, in one line, on a target asked to hold more connections than its processes
    can (each at most :func:`connections_per_process`), or asked to split when it cannot."""
    cls = adapter(name)
    if processes < 1:
        raise UsageError(f"{name}: target processes must be at least 1, not {processes}")
    if processes > 1 and not cls.splits:
        raise UsageError(f"{name} runs as one process (dnscost cannot split it): target processes 1 only")
    each = connections_per_process()
    if connections > processes * each:
        need = -(-connections // each) if each else 0
        if cls.splits and need:
            raise UsageError(
                f"{name}: {connections} connections need {need} processes here (one holds at most {each}: "
                f"open-files limit {each + FD_HEADROOM}): set target_processes = {need} (--target-processes {need})"
            )
        raise UsageError(
            f"{name} runs as one process, which holds at most {each} connections here (open-files limit "
            f"{each + FD_HEADROOM}): {connections} cannot be measured on it"
        )


def check_doh_method(name: str, transport: str, doh_method: str | None) -> None:
    """Fails early on a load the target is known to drop (dnsdist's DoH/3 and the engine's POST)."""

    lost = adapter(name).doh3_post_lost
    if transport == "doh3" and (doh_method or "post") == "post" and lost:
        raise UsageError(f"{name} over doh3: {lost}; load it with --doh-method get")


FILL_SLACK_MS = 1_000
"""How much longer than 20 000 names a second would need a cache fill asks (:func:`fill_cache`)."""

FILL_ATTEMPTS = 3
"""How many times a cache fill that did not have every name answered runs, each time for twice
as long."""

FILL_LOST = 0.01
"""The share of a cache fill's queries that may be lost (timed out or failed): the 1 % of names
that :func:`warm_cache` allows cold at most, fewer when the fill asked each name more than once."""

FILL_STREAMS = 16
"""Connections a cache fill opens over a stream transport."""


def fill_cache(
    target: Target,
    workdir: Path,
    cpus: Sequence[int],
    names: int,
    transports: Sequence[str],
    exec_prefix: Sequence[str] = (),
) -> None:
    """Queries every name once on every transport (the study's cache pre-fill), from behind
    ``exec_prefix`` (a lab's namespace): one engine per transport, all at once (a fill of
    2 000 names takes a second whatever the number of transports). A target whose processes
    each keep a cache of their own is filled through each one's own listeners
    (:meth:`Target.fill_endpoints`), over those of ``transports`` they serve.

    The engine asks the names in order, in a closed loop (each answer lets the next query go),
    for a second more than 20 000 a second would need: a resolver that asks its upstream is
    slower than any fixed rate we could pick (dnsdist 1.7 forwards a TCP connection's queries
    one at a time; unbound behind a 30 ms upstream link timed out 53 071 of 80 256 names sent
    at 20 000 a second), and a query the target dropped leaves its name cold. A fill is done
    when every name was sent and at most :data:`FILL_LOST` of the queries sent timed out or
    failed (a closed loop over cached names at 200 000 a second loses a few hundred in
    millions, names already answered in an earlier pass); otherwise it runs again from the
    first name (those answered are hits now), for twice as long, up to :data:`FILL_ATTEMPTS`
    times, then is one line. A target that dies or is stopped meanwhile is said so, as in a
    trial (:meth:`Target.check_alive`). The target's own counters say afterwards whether the
    cache is warm (:func:`warm_cache`, the trial's ``cold-cache`` flag)."""
    sets = target.fill_endpoints()
    # A process's own set may hold fewer transports (unbound's: plain DNS, its cache is one).
    jobs = [(i, t) for i, own in enumerate(sets) for t in transports if t in own]
    in_flight = 256

    def fill(job: tuple[int, str]) -> None:
        i, transport = job
        ep = sets[i][transport]
        streams = 1 if transport == "udp" else FILL_STREAMS
        config: EngineConfig = {
            "transport": transport,
            "target": ep.address,
            "synthetic": names,
            "tld": target.tld,
            "rate": "max",
            # A stream's queries may be forwarded one at a time (dnsdist 1.7 over TCP): several
            # streams, as many in flight in all.
            "connections": streams,
            "in_flight": in_flight // streams,
            "timeout_ms": 2000,
            **_tls_options(transport, target, ep),
        }
        if target.proxy_v2 is not None:  # the target takes no query without its header
            config["proxy_v2"] = target.proxy_v2
        if target.session_limits is not None and ep.host.startswith("127."):
            # A target that bans a client for its new TLS sessions: each stream from a loopback
            # address of its own (one session each), not all from the load's address.
            config["sources"] = [f"127.0.9.{k + 1}" for k in range(streams)]
        if transport == "doh3" and target.doh3_post_lost:
            config["doh_method"] = "get"
        name = f"fill-{transport}" + (f"-{i}" if len(sets) > 1 else "")
        duration_ms = max(1, names // 20) + FILL_SLACK_MS
        for attempt in range(FILL_ATTEMPTS):  # each from the first name: those answered are hits now
            config["duration_ms"] = duration_ms << attempt
            try:
                records = generate(
                    config,
                    workdir,
                    cpus=cpus,
                    name=f"{name}-{attempt}" if attempt else name,
                    exec_prefix=exec_prefix,
                    watchdog=target.check_alive,  # a target that dies is said dead, as in a trial
                )
            except EngineError as e:  # nothing answered at all: the target is gone or deaf
                target.check_alive()  # gone: how it ended, not the engine's refused queries
                raise TargetError(f"{target.name}: the cache fill over {transport} failed: {e}") from e
            q = summary_of(records)["total"]["queries"]
            # In order and at most `in_flight` at once: once `names + in_flight` were sent, every
            # name was sent before the last ones still in flight.
            lost = int(q["timed_out"]) + int(q["failed_total"])
            if int(q["sent"]) >= names + in_flight and lost <= FILL_LOST * int(q["sent"]):
                return
        target.check_alive()
        raise TargetError(
            f"{target.name}: the cache fill over {transport} sent {q['sent']} queries for {names} names "
            f"and lost {lost} (timed out or failed) in {FILL_ATTEMPTS} tries ({workdir / name}.jsonl)"
        )

    with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), 8))) as pool:
        for _ in pool.map(fill, jobs):  # the first failure, once every fill has ended
            pass


def cache_hit_ratio(target: Target, workdir: Path, cpus: Sequence[int], names: int) -> float | None:
    """Share of a second pass over every name answered from the cache, from the target's own
    counters (None when the target keeps none)."""
    before = target.counters()
    if before.cache_hits is None or before.queries is None:
        return None
    # Its own directory: the fill's records beside it are kept.
    fill_cache(
        target, workdir / "check", cpus, names, ["udp"] if "udp" in target.endpoints else list(target.endpoints)[:1]
    )
    after = target.counters()
    assert after.cache_hits is not None and after.queries is not None
    queries = after.queries - before.queries
    return (after.cache_hits - before.cache_hits) / queries if queries > 0 else None


def warm_cache(target: Target, workdir: Path, cpus: Sequence[int], names: int, attempts: int = 3) -> float | None:
    """Fills the cache, then checks with the target's own counters that a second pass over every
    name is answered from it (at least 99 %); refills up to ``attempts`` times. Returns the last
    ratio (None when the target keeps no counters); raises TargetError when it stays cold."""
    ratio = None
    for _ in range(attempts):
        fill_cache(target, workdir, cpus, names, list(target.endpoints))
        ratio = cache_hit_ratio(target, workdir, cpus, names)
        if ratio is None or ratio >= 0.99:
            return ratio
    raise TargetError(f"{target.name}: cache still cold after {attempts} fills ({100 * (ratio or 0):.1f} % hits)")


def cluster_network(target_address: str) -> Network:
    """The set-up of a bed loaded by a cluster (:mod:`dnscost.cluster`): the target in the root
    namespace on ``target_address``, an address the workers reach; the upstream on loopback.
    Nothing is made (or removed)."""
    return Network(NetworkInfo("cluster", target_address, "127.0.0.1", ()))


def start_bed(
    s: LoadSettings,
    workdir: Path,
    *,
    fill: bool | None = None,
    network: Network | None = None,
    transports: Sequence[str] | None = None,
) -> tuple[Testbed, TrialRecord]:
    """Creates and starts the target of ``s`` (with its upstream) in ``workdir`` and, unless
    ``fill`` is false, fills its cache. Returns the bed and what is known of it (version, PID,
    endpoints, cache-hit ratio after the fill). ``network``: a set-up made elsewhere (a
    cluster's, :func:`cluster_network`), instead of the one ``s`` names; ``transports``: the
    ones the target serves, when not all it can (``dnscost target start --transports``)."""
    if network is None:
        network = Network.create(s.network, target_cpus=s.target_cpus, generator_cpus=s.generator_cpus)
    proxy_v2 = s.engine.get("proxy_v2")
    if proxy_v2 is not None and s.target != EXTERNAL:
        # It takes no query without a header then: it listens only where the load goes.
        transports = transports or s.transports()
    try:
        bed = Testbed.create(
            s.target,
            workdir,
            target_cpus=s.target_cpus,
            upstream_cpus=s.generator_cpus,
            names=s.names,
            tld=s.tld,
            cert_key=s.cert_key,
            network=network,
            external=s.external if s.target == EXTERNAL else None,
            transports=transports,
            any_name=s.any_name(),
            processes=s.target_processes,
        )
    except BaseException:
        network.remove()
        raise
    try:
        target = bed.target
        if proxy_v2 is not None and s.target != EXTERNAL:
            target.accept_proxy_v2(proxy_v2, [network.info.generator_address, *network.info.sources])
        target.client_subnet = s.engine.get("client_subnet") is not None and target.acts_on_client_subnet
        if s.ticket_keys is not None:
            target.rotate_ticket_keys(s.ticket_keys)
        if s.session_limits is not None:
            target.limit_sessions(s.session_limits)
        target.start()
        info: TrialRecord = {
            "target_pid": target.child.pid if target.child else None,
            "target_processes": target.processes,
            "target_version": target.version(),
            "target_place": target.place.describe(),
            "endpoints": {t: e.url() for t, e in target.endpoints.items()},
            "network": network.info.to_dict(),
            "listen_backlog": listen_backlog(target, network),
        }
        if s.engine.get("client_subnet") is not None:
            info["client_subnet"] = "acted on" if target.client_subnet else "passed on or ignored"
        if target.ticket_keys is not None:
            info["ticket_keys"] = {"rotation_s": target.ticket_keys.rotation_s, "kept": target.ticket_keys.kept}
        if target.session_limits is not None:
            limits = target.session_limits
            info["session_limits"] = {"new_per_s": limits.new_per_s, "ban_s": limits.ban_s}
        if isinstance(target, ExternalTarget):
            info["external"] = target.settings.to_dict()
            if target.settings.pid is not None:
                info["target_pid"] = target.settings.pid
                info["external"]["affinity"] = pid_affinity(target.settings.pid)
        if (s.fill if fill is None else fill) and isinstance(target, ExternalTarget):
            # No counters to check the hits with: every name twice on every endpoint instead.
            for k in (1, 2):
                fill_cache(target, workdir / f"fill-{k}", s.generator_cpus, s.names, list(target.endpoints))
            info["cache_hit_ratio"] = None
            info["cache_fill"] = "twice, hits not checked (the target keeps no counters dnscost reads)"
        elif (s.fill if fill is None else fill) and s.target != "builtin" and not s.any_name():
            # (Not for a capture's own names: they start cold, as at the capture's start; the
            # synthetic fill would only take cache room. Their hits are read from the counters.)
            info["cache_hit_ratio"] = warm_cache(target, workdir / "fill", s.generator_cpus, s.names)
    except BaseException:
        bed.stop()
        raise
    return bed, info


def listen_backlog(target: Target, network: Network) -> dict[str, int]:
    """Per connection-oriented transport, the accept-queue length of the target's listener as
    the kernel holds it, or for a QUIC listener as the target's code fixes it
    (:attr:`Target.accept_queues`); transports with neither are left out."""

    declared = {t: n for t, n in target.accept_queues.items() if t in target.endpoints}
    eps = {t: e for t, e in target.endpoints.items() if t not in ("udp", "doq", "doh3")}
    if not eps:
        return declared
    backlogs = listen_backlogs([e.port for e in eps.values()], command_prefix=network.exec_prefix)
    return {**declared, **{t: backlogs[e.port] for t, e in eps.items() if e.port in backlogs}}


def one_query_slots(config: EngineConfig, backlog: int | None) -> int:
    """The connection slots a trial runs with: those asked for, except in a closed loop of
    one-query connections, where every slot reconnects as soon as it is answered, so up to
    that many connection attempts wait on the target's listener at once: there, no more than
    its accept queue (``backlog``). Beyond it the kernel drops attempts (``ListenOverflows``)
    and a dropped SYN waits a second for its retransmission: the trial would measure the
    listen queue, not the target. A QUIC stack's queue of handshaken connections works
    alike, except that it refuses a connection after its handshake (quic-go's 32 in
    CoreDNS). Still enough to saturate one core: a queue of 32 QUIC handshakes is 16 ms of
    work at 500 µs each."""
    asked = int(config["connections"])
    life = config.get("lifetime") or {}
    if config.get("rate") == "max" and life.get("queries") == 1 and backlog:
        return min(asked, backlog)
    return asked


def engine_config(
    s: LoadSettings,
    target: Target,
    trial_dir: Path,
    backlog: dict[str, int] | None = None,
    sources: Sequence[str] = (),
) -> EngineConfig:
    """The engine configuration of one trial of ``s`` against ``target`` whose listeners'
    accept queues are ``backlog`` (per transport; see :func:`one_query_slots`), its
    connections spread over the source addresses ``sources`` (the network's; see
    :mod:`dnscost.network`) unless the settings' engine configuration names its own (``sources``)."""
    if s.population is not None:
        return _population_config(s, s.population, target, trial_dir, sources)
    ep = target.endpoints[s.transport]
    config: EngineConfig = {
        **(EngineConfig(sources=list(sources)) if sources else EngineConfig()),
        **s.engine,
        "transport": s.transport,
        "target": ep.address,
        "synthetic": s.names,
        "tld": s.tld,
        **_tls_options(s.transport, target, ep),
    }
    config.setdefault("connections_log", str(trial_dir / "engine-connections.jsonl"))
    if "connections" in config:
        config["connections"] = one_query_slots(config, (backlog or {}).get(s.transport))
    return config


def _population_config(
    s: LoadSettings, replay: Replay, target: Target, trial_dir: Path, sources: Sequence[str]
) -> EngineConfig:
    """The engine configuration of a population's trial: the run's fields (phases, names,
    CPUs' threads) and one class per class of the population, each sent to the target's
    endpoint of its transport with its TLS options."""
    first = target.endpoints[replay.transports()[0]]
    config: EngineConfig = {
        **(EngineConfig(sources=list(sources)) if sources else EngineConfig()),
        **{k: v for k, v in s.engine.items() if k in RUN_FIELDS},  # type: ignore[typeddict-item]
        "transport": "udp",
        "target": first.address,
        **(
            EngineConfig(queries_file=replay.names)
            if replay.names is not None
            else EngineConfig(synthetic=s.names, tld=s.tld)
        ),
        "classes": [],
    }
    for k in replay.classes:
        transport = str(k["config"]["transport"])
        ep = target.endpoints[transport]
        fields = {**k["config"], "target": ep.address, **_tls_options(transport, target, ep)}
        config["classes"].append({"name": k["name"], "config": fields})
    config.setdefault("connections_log", str(trial_dir / "engine-connections.jsonl"))
    return config


RUN_FIELDS = ("duration_ms", "warmup_ms", "timeout_ms", "threads", "seed", "edns_udp_size", "tls_version", "tls_group")
"""The engine fields a population's trial takes from its settings; the rest (transport,
connections, rate, lifetime) are each class's own."""


def measure(
    bed: Testbed,
    s: LoadSettings,
    trial_dir: Path,
    *,
    cache_hit_ratio: float | None,
    backlog: dict[str, int] | None = None,
    cluster: Cluster | None = None,
) -> TrialRecord:
    """One measured engine run against the started ``bed``: idle baseline, load, summary.
    Raw data goes to ``trial_dir`` as it is produced; returns the engine configuration, the
    summary and the target's counters. With ``cluster``, the load is split over its workers
    (:meth:`dnscost.cluster.Cluster.generate`) and the record says how (``cluster``).

    A trial that opens its connections first whose open phase outlasted its warm-up (the
    engine's ``opened_ms`` after its measured period began: handshakes in the window) is run
    once more with a warm-up half as long again as that open phase; so is a persistent trial
    over TCP whose target's kernel was still accepting its connections in the window (the
    engine's connect returns when the SYN-ACK comes, the target may accept it seconds later,
    after a full accept queue), with a warm-up half as long again as warm-up and window
    together. The first attempt's files are kept in ``open-phase-1/`` and the record says so
    (``warmup_extended``, with ``by``: ``engine`` or ``kernel``). A trial without a cache
    fill (an idle trial: its baseline must be a target that never held a connection) gets a
    fresh target for its second attempt (``target_restarted``); the first attempt's
    connections would otherwise stay in the target's memory and in its baseline."""
    result, summary = _measure_once(
        bed, s, trial_dir, cache_hit_ratio=cache_hit_ratio, backlog=backlog, cluster=cluster
    )
    warmup_ms = int(s.engine.get("warmup_ms", 0))
    by: Literal["engine", "kernel"] = "engine"
    longer = warmup_for_open_phase(summary, warmup_ms)
    if longer is None:
        by, longer = "kernel", warmup_for_late_accepts(result["engine_config"], result.get("summary") or {}, warmup_ms)
    if longer is None:
        return result
    aside = trial_dir / "open-phase-1"
    aside.mkdir(exist_ok=True)
    for f in trial_dir.iterdir():
        if f.is_file() and f.name != "trial.json":
            f.rename(aside / f.name)
    first: FirstAttempt = {
        "warmup_ms": warmup_ms,
        "opened_ms": summary.get("opened_ms"),
        "kernel_passive_opens": _passive_opens(result.get("summary") or {}),
    }
    restarted = not s.fill and not isinstance(bed.target, ExternalTarget)
    if restarted:
        bed.target.stop()
        bed.target.start()
    s = replace(s, engine={**s.engine, "warmup_ms": longer})
    result, _ = _measure_once(bed, s, trial_dir, cache_hit_ratio=cache_hit_ratio, backlog=backlog, cluster=cluster)
    result["warmup_extended"] = {
        "by": by, "first": first, "warmup_ms": longer, "kept": aside.name, "target_restarted": restarted
    }  # fmt: skip
    return result


def warmup_for_open_phase(summary: SummaryRecord, warmup_ms: int) -> int | None:
    """The warm-up (ms) a run needs whose connections were not all open when its measured
    period began (the engine summary's ``opened_ms`` later than ``measure_start_ms``): the
    open phase and half as much again, rounded up to 100 ms; None when it needs none."""
    opened = summary.get("opened_ms")
    if opened is None or opened <= summary["measure_start_ms"]:
        return None
    return max(warmup_ms, -(-int(opened * 1.5) // 100) * 100)


def warmup_for_late_accepts(config: EngineConfig, summary: Mapping[str, Any], warmup_ms: int) -> int | None:
    """The warm-up (ms) a persistent trial over TCP (lifetime forever, no idle timeout) needs
    whose target's network namespace accepted more of its connections in the window than
    ``validity.flag_not_persistent`` lets pass (``Tcp: PassiveOpens``; the engine counted them
    open before the target took them): warm-up and window together and half as much again,
    rounded up to 100 ms, as the accepts went on until the window's end at least; None when
    it needs none."""
    life = config.get("lifetime") or {}
    persistent = not any(life.values()) and not config.get("idle_timeout_ms") and "profile" not in config
    accepted, asked = _passive_opens(summary), config.get("connections")
    if config.get("transport") not in STREAM_TRANSPORTS or not persistent or accepted is None or not asked:
        return None
    if accepted - KERNEL_ACCEPT_NOISE <= MAX_NEW_CONNECTIONS * int(asked):
        return None
    open_phase = warmup_ms + int(config.get("duration_ms", 0))
    return -(-int(open_phase * 1.5) // 100) * 100


def _passive_opens(summary: Mapping[str, Any]) -> int | None:
    """The connections the target's namespace accepted in the window, as the meter counted them."""
    value = ((summary.get("meter") or {}).get("counters") or {}).get("tcp_passive_opens")
    return int(value) if isinstance(value, int | float) else None


def _measure_once(
    bed: Testbed,
    s: LoadSettings,
    trial_dir: Path,
    *,
    cache_hit_ratio: float | None,
    backlog: dict[str, int] | None,
    cluster: Cluster | None,
) -> tuple[TrialRecord, SummaryRecord]:
    """:func:`measure`'s one engine run; also returns the engine's summary record."""

    target = bed.target
    trial_dir.mkdir(parents=True, exist_ok=True)
    ports = [e.port for e in target.endpoints.values()]
    engine_pids: list[int] = []
    start_mono, start_unix_ms = time.monotonic(), time.time() * 1000
    sampler = meter.Sampler(
        trial_dir / "meter.jsonl",
        start_monotonic=start_mono,
        target_cgroup=target.meter_cgroup(),
        target_pids=target.meter_pids,
        target_ports=ports,
        target_cpus=s.target_cpus,
        generator_pids=lambda: list(engine_pids),
        net=bed.network.proc_net(target.child.pid if target.child else None),
        ss_prefix=bed.network.exec_prefix,
    )

    def engine_started(pid: int) -> None:
        engine_pids.append(pid)
        sampler.refresh_pids()

    sampler.start()
    try:
        time.sleep(s.baseline_s)  # idle baseline of the target, before any load
        counters_before = target.counters()
        since = time.time()
        config = engine_config(s, target, trial_dir, backlog, bed.network.info.sources)
        softnet_before = read_softnet()
        if cluster is not None:
            records, cluster_record = cluster.generate(config, trial_dir, watchdog=target.check_alive)
        else:
            records = generate(
                config,
                trial_dir,
                cpus=s.generator_cpus,
                name="engine",
                watchdog=target.check_alive,
                started=engine_started,
            )
        softnet = softnet_delta(softnet_before, read_softnet())
        target.check_alive()
        counters_after = target.counters()
        until = time.time()
    finally:
        sampler.stop()
    samples = read_records(trial_dir / "meter.jsonl")
    context = SummaryContext(
        sampler_start_unix_ms=start_unix_ms,
        baseline_s=s.baseline_s,
        cache_hit_ratio=cache_hit_ratio,
        target_cpus=tuple(s.target_cpus),
        generator_cpus=tuple(s.generator_cpus),
        target_keeps_counters=target.keeps_counters,
        meter_interval_s=sampler.interval_s,
        cache_filled=s.fill and not s.any_name(),
        unchecked=_unchecked(target, s),
        generator_cores=cluster.generator_cores if cluster is not None else None,
        transport_counters=target.transport_counters,
    )
    counters: TargetCounters = {"before": counters_before.to_record(), "after": counters_after.to_record()}
    result: TrialRecord = {
        "engine_config": config,
        "summary": summarize_trial(
            records, samples, CounterDelta.from_counters(counters["before"], counters["after"]), context
        ),
        "summary_context": context.to_dict(),
        "counters": counters,
        "softnet": softnet,
    }
    if cluster is not None:
        result = {"cluster": cluster_record, **result}
    if s.population is not None:
        result["population"] = s.population.record()
    if s.population is not None and s.population.names is not None:
        if bed.responder is not None:
            time.sleep(1.2)  # the upstream's log is written at least once a second
            result["upstream_queries"] = bed.responder.asked(since, until, s.tld)
        sent = summary_of(records)["total"]["queries"]["sent"]
        lines = Path(s.population.names).read_text(encoding="utf-8").splitlines()
        asked = replayed_names(lines, sent)
        result["names_replayed"] = {
            "queries": asked.queries,
            "distinct": asked.distinct,
            "repeat_share": asked.repeat_share,
        }
    return result, summary_of(records)


def _unchecked(target: Target, s: LoadSettings) -> tuple[str, ...]:
    """The validity checks this trial cannot run (``dnscost.validity.UNCHECKED``)."""
    out = [c for c in target.unchecked if c != "cache-hits" or s.fill]
    if isinstance(target, ExternalTarget) and not s.fill:
        out.append("fresh-target")  # a trial without a fill wants a fresh target (idle trials)
    return tuple(out)


def run_trial(settings: LoadSettings, trial_dir: Path, cluster: Cluster | None = None) -> TrialRecord:
    """Runs one trial on a target of its own into ``trial_dir`` and returns its record (also
    written to ``trial.json``), its load from ``cluster``'s workers when given. Every process
    started is stopped, whatever happens."""
    s = settings
    s.validate()
    trial_dir.mkdir(parents=True, exist_ok=True)
    record: TrialRecord = {"settings": asdict(s), "status": "running", "dir": trial_dir.name}

    def write() -> None:
        write_json(trial_dir / "trial.json", record)

    write()
    bed: Testbed | None = None
    try:
        network = cluster_network(cluster.target_address) if cluster is not None else None
        bed, info = start_bed(s, trial_dir, network=network)
        record.update(info)
        write()
        record.update(
            measure(
                bed,
                s,
                trial_dir,
                cache_hit_ratio=record.get("cache_hit_ratio"),
                backlog=record.get("listen_backlog"),
                cluster=cluster,
            )
        )
        record["status"] = "done"
        return record
    except BaseException as e:
        record["status"] = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
        record["error"] = describe_failure(e, bed)
        raise
    finally:
        if bed is not None:
            bed.stop()
        write()


def describe_failure(e: BaseException, bed: Testbed | None) -> str:
    """One line for a trial that did not finish, with the target's last words if it died."""
    text = str(e) or type(e).__name__
    target = bed.target if bed is not None else None
    if target is not None and target.child is not None and not target.child.alive() and " died: " not in text:
        text = f"{text} ({target.name} died: {target.child.last_words()})"
    return text
