"""The shapes the package's modules pass each other, named once.

``Row`` is one row of a derived table (``RUN_DIR/tables/*.csv``, ``*.parquet``; docs/results.md
lists their columns): column name to value, a number, a string, a boolean or None for an empty
cell. The analysis builds them, the report, the docs pages, the planner and ``compare`` read them.

``EngineConfig`` is the engine's JSON configuration (``dnscost-engine generate --config``), as
the trial, the client experiments and the cluster build it: every field optional (the engine's
default applies), each with the type the engine's schema gives it
(``schemas/engine-config.schema.json``, written by ``dnscost-engine schema``;
``python/tests/test_contract.py`` holds the two together). It is a dictionary at run time, so
what is written to ``engine-config.json`` is what it was before it had a type.

``EngineRecord`` is one line of the engine's output (``schemas/engine-record.schema.json``): a
``StartRecord`` first, an ``IntervalRecord`` per second, a ``SummaryRecord`` last;
``ConnectionRecord`` and ``QueryRecord`` are the lines of ``serve``'s and ``generate``'s
connections and queries logs. :func:`dnscost.engine.engine_records` reads a run's output into
them (parsed once, at the file's edge; :func:`dnscost.engine.generate` hands them to the trial
and the client experiments); the analysis reads a stored trial's records as checked
dictionaries (:mod:`dnscost.analysis.load`).
``python/tests/test_contract.py`` holds every field to the schema.
"""

from types import UnionType
from typing import (
    Any,
    Literal,
    NotRequired,
    Required,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from dnscost.jsonl import json_kind

__all__ = [
    "Accounting",
    "CaptureRecord",
    "ClassResult",
    "ClassStart",
    "ClassSummary",
    "ClassTotals",
    "ClientClass",
    "ClientProfile",
    "CloseMode",
    "ClusterRecord",
    "ConnectionCounts",
    "ConnectionRecord",
    "CoreSample",
    "CounterReading",
    "DerivedRate",
    "EngineConfig",
    "EngineRecord",
    "EngineUsage",
    "FastSample",
    "FastTarget",
    "FirstAttempt",
    "FlowRecord",
    "GeneratorCpu",
    "GroupSettings",
    "HandshakeCounts",
    "HistogramSummary",
    "IntervalRecord",
    "Lifetime",
    "MeterCgroup",
    "MeterEnd",
    "MeterHeader",
    "MeterRecord",
    "MeterSummary",
    "NetworkRecord",
    "ObservationCapture",
    "ObservationRecord",
    "ObservationSummary",
    "PopulationRecord",
    "QueryCounts",
    "QueryRecord",
    "ReplayRecord",
    "Row",
    "RunRecord",
    "RunSpecRecord",
    "RunStatus",
    "SearchResult",
    "SearchStep",
    "SessionLimitsRecord",
    "SlowSample",
    "SlowTarget",
    "SocketMemoryRecord",
    "SoftnetCounts",
    "SourceCommit",
    "SpecGroupRecord",
    "StartRecord",
    "SummaryContextRecord",
    "SummaryRecord",
    "TargetCounters",
    "TargetPlace",
    "TicketKeysRecord",
    "Totals",
    "TrafficCounts",
    "TransportAgreement",
    "TrialKind",
    "TrialParams",
    "TrialRecord",
    "TrialState",
    "TrialStatus",
    "TrialSummary",
    "UdpRetry",
    "Validity",
    "WarmupExtended",
    "Wire",
    "WorkerShare",
    "WorkerSummary",
    "document_problem",
    "shape_problem",
]

Row = dict[str, Any]
"""One row of a derived table: column name to value (None for an empty cell)."""


CloseMode = Literal["graceful", "fin", "rst", "silent"]
"""How a client ends a connection it closes (the engine's ``CloseMode``)."""


class Lifetime(TypedDict, total=False):
    """How long a connection lives: a duration, a number of queries, both (whichever comes
    first) or neither (forever)."""

    duration_ms: int | None
    queries: int | None


class UdpRetry(TypedDict):
    """A UDP query unanswered after ``timeout_ms`` is sent again, ``attempts`` sends in all."""

    timeout_ms: int
    attempts: int


class ObservationSummary(TypedDict):
    """What one observation showed (``dnscost observe``; observation.json's ``summary``)."""

    connections: int
    """Connections that carried at least one query (lab or background)."""
    idle_connections: int
    """Connections that carried no query at all (a browser's redundant opens)."""
    duration_s: dict[str, float]
    """min, median, max of the connections that carried queries."""
    lab_queries_per_connection: dict[str, float]
    lab_queries: int
    lab_names: int
    """Distinct names of the driver asked about (a browser asks several types per name)."""
    background_queries: int
    closes: dict[str, int]
    """``<side> <how>`` → connections (e.g. ``server idle``, ``client close_notify``)."""
    resolutions: int | None
    """The resolution loop's resolutions; None when the cell has no ``resolutions.jsonl`` (a
    browser's lookups are its page's, not timed by dnscost)."""
    resolutions_failed: int | None
    resolution_ms: dict[str, float]
    """median and 99th percentile of the driver's resolution times."""


class ObservationCapture(TypedDict):
    """With ``--capture``: the capture's connections, those matched to the server's log, and
    those whose closer the two agree on."""

    connections: int
    matched: int
    closer_agrees: int


class ObservationRecord(TypedDict):
    """observation.json: one observed client at one delay under one policy (what a reader
    needs is required; ``dnscost observe`` writes every field)."""

    dnscost: NotRequired[str]
    client: str
    client_version: NotRequired[str | None]
    command: NotRequired[str | None]
    transport: NotRequired[str]
    delay_s: float
    policy: str
    policy_settings: NotRequired[dict[str, object]]
    serve_flags: NotRequired[list[str]]
    duration_s: float
    origin_unix_us: NotRequired[int | None]
    """The responder's start, which its logs' times count from."""
    client_started_unix_us: NotRequired[int]
    client_stopped_unix_us: NotRequired[int]
    interrupted: NotRequired[bool]
    summary: NotRequired[ObservationSummary]
    capture: NotRequired[ObservationCapture]


class ClientProfile(TypedDict, total=False):
    """One client's connection behaviour in the engine's terms
    (``schemas/client-profile.schema.json``): what ``dnscost observe`` derived from a real
    client, the rest absent (the engine's default applies). ``python/tests/test_contract.py``
    holds it to the schema."""

    name: Required[str]
    source: str
    transport: Required[str]
    """One of ``dnscost.transports.TRANSPORTS``."""
    connections: int
    query_interval_ms: Required[int]
    queries_per_resolution: int
    idle_timeout_ms: int | None
    lifetime: Lifetime | None
    resumption: float | None
    close: CloseMode | None
    doh_method: Literal["post", "get"] | None


class ClientClass(TypedDict):
    """One class of a population run (``EngineConfig.classes``): its name and the engine
    configuration's fields it sets over the run's (not its phases, CPUs or files)."""

    name: str
    config: NotRequired[dict[str, Any]]


class EngineConfig(TypedDict, total=False):
    """``dnscost-engine generate``'s configuration (docs/engine.md has each field's meaning)."""

    arrival: Literal["constant", "poisson"]
    ca_file: str | None
    client_subnet: str | None
    clients: int | None
    close: CloseMode | None
    connections: int
    connections_log: str | None
    classes: list[ClientClass]
    """A population: classes of clients run at once, each counted apart."""
    cookie: str | None
    cpus: list[int]
    dnssec_ok: bool
    doh_headers: Literal["minimal", "browser"] | None
    doh_method: Literal["post", "get"] | None
    doh_path: str | None
    duration_ms: int
    early_data: float | None
    edns_udp_size: int
    idle_timeout_ms: int | None
    in_flight: int
    insecure: bool
    keylog_file: str | None
    lifetime: Lifetime
    open_first: bool
    open_rate: float | None
    output: str | None
    pacing_resolution_us: int | None
    padding: bool
    profile: ClientProfile | None
    proxy_v2: str | None
    qtype: str
    queries_file: str | None
    rate: float | Literal["max", "once"]
    recursion_desired: bool
    resumption: float | None
    seed: int
    sni: str | None
    sources: list[str]
    synthetic: int | None
    target: str
    threads: int
    timeout_ms: int
    tld: str
    tls_group: Literal["x25519", "secp256r1", "secp384r1", "x25519mlkem768"]
    tls_version: Literal["1.2", "1.3"]
    transport: str
    """One of ``dnscost.transports.TRANSPORTS`` (the test holds them to the engine's)."""
    udp_retry: UdpRetry | None
    warmup_ms: int


class HistogramSummary(TypedDict):
    """A latency histogram: its quantiles in microseconds and the whole of it (``hdr``, base64
    HdrHistogram V2, decoded by :mod:`dnscost.analysis.hdr`)."""

    count: int
    hdr: str
    max_us: int
    mean_us: float
    min_us: int
    p50_us: int
    p90_us: int
    p999_us: int
    p99_us: int


class QueryCounts(TypedDict):
    """Queries of a period, by what became of them (``failed`` and ``rcodes`` by name)."""

    aborted: int
    answered: int
    failed: dict[str, int]
    failed_total: int
    in_flight: int
    offered: int
    rcodes: dict[str, int]
    retransmitted: NotRequired[int]
    sent: int
    stream_waits: NotRequired[int]
    timed_out: int
    unmatched: NotRequired[int]


class ConnectionCounts(TypedDict):
    """Connections of a period: opened, established, failed and closed (by whom and how)."""

    active: int
    closed_by_client: dict[str, int]
    closed_by_server: dict[str, int]
    established: int
    failed: dict[str, int]
    opened: int


class HandshakeCounts(TypedDict):
    """TLS and QUIC handshakes of a period, by kind."""

    full: int
    resumed: int
    zero_rtt_accepted: int
    zero_rtt_rejected: int


class TrafficCounts(TypedDict):
    """Octets and packets the generator sent and received in a period."""

    bytes_received: int
    bytes_sent: int
    packets_received: int
    packets_sent: int


class EngineUsage(TypedDict):
    """The generator's own CPU time and rates in a period."""

    cpu_system_us: int
    cpu_user_us: int
    offered_qps: float
    sent_qps: float


class Totals(TypedDict):
    """The counts of one period (the measured one, or the whole run)."""

    connections: ConnectionCounts
    engine: EngineUsage
    handshakes: HandshakeCounts
    latency: HistogramSummary
    queries: QueryCounts
    setup_latency: HistogramSummary
    traffic: TrafficCounts


class Accounting(TypedDict):
    """Whether every offered query is accounted for (answered, failed, timed out, aborted)."""

    aborted: int
    answered: int
    balanced: bool
    failed: int
    offered: int
    timed_out: int


class ClassStart(TypedDict):
    """One class of a population run, as the start record resolves it."""

    name: str
    config: EngineConfig
    target_address: str


class ClassTotals(Totals):
    """One class's counts in an interval record (its own generator threads' CPU time)."""

    name: str
    transport: str


class ClassSummary(TypedDict):
    """One class's part of the summary record."""

    name: str
    transport: str
    accounting: Accounting
    answered_qps: float
    measured: Totals
    total: Totals


class StartRecord(TypedDict):
    """The engine's first line: what runs, resolved."""

    type: Literal["start"]
    config: EngineConfig
    engine_version: str
    started_unix_ms: int
    target_address: str
    tls_group: NotRequired[str | None]
    tls_version: NotRequired[str | None]
    classes: NotRequired[list[ClassStart]]


class IntervalRecord(TypedDict):
    """One second of the run (or less, at the end)."""

    type: Literal["interval"]
    connections: ConnectionCounts
    end_ms: int
    engine: EngineUsage
    handshakes: HandshakeCounts
    index: int
    latency: HistogramSummary
    phase: Literal["warmup", "measure", "drain"]
    queries: QueryCounts
    setup_latency: HistogramSummary
    start_ms: int
    traffic: TrafficCounts
    classes: NotRequired[list[ClassTotals]]


class EngineMemory(TypedDict):
    """The generator's own resident memory: before any connection, and at the last interval
    with the most connections open (``bench/engine-memory`` takes the slope over runs)."""

    rss_start_bytes: int
    rss_bytes: int
    connections: int
    rss_per_connection_bytes: NotRequired[int | None]
    rss_peak_bytes: int


class SummaryRecord(TypedDict):
    """The engine's last line: the measured period's and the whole run's counts."""

    type: Literal["summary"]
    aborted: bool
    accounting: Accounting
    answered_qps: float
    generator_kept_up: bool
    interrupted: bool
    measure_end_ms: int
    measure_start_ms: int
    measured: Totals
    opened_ms: NotRequired[int | None]
    total: Totals
    classes: NotRequired[list[ClassSummary]]
    memory: NotRequired[EngineMemory]


EngineRecord = StartRecord | IntervalRecord | SummaryRecord
"""One line of ``dnscost-engine generate``'s output."""

Side = Literal["client", "server"]
Close = Literal[
    "lifetime", "idle", "end", "error", "exhausted", "fin", "rst", "close_notify", "tls_alert", "goaway",
    "max_queries", "max_age", "connection_close", "idle_expired",
]  # fmt: skip
Handshake = Literal["none", "full", "resumed", "zero_rtt_accepted", "zero_rtt_rejected"]


class FlowRecord(TypedDict):
    """One flow of a packet capture (``dnscost-engine capture``; schemas/capture-flow.schema.json):
    a TCP or QUIC connection, or one client address's Do53 over UDP."""

    transport: str
    client: str
    client_port: int
    server: str
    server_port: int
    opened_us: int
    closed_us: int
    closer: Literal["client", "server", "none"]
    how: str
    seen_open: bool
    queries: int
    responses: int
    queries_exact: bool
    query_us: list[int]
    qtypes: dict[str, int]
    sni: NotRequired[str | None]
    alpn: list[str]
    tls_version: NotRequired[str | None]
    resumption_offered: NotRequired[bool | None]
    resumed: NotRequired[bool | None]
    early_data: bool
    octets_from_client: int
    octets_from_server: int
    packets_from_client: int
    packets_from_server: int
    gap: bool


class CaptureRecord(TypedDict):
    """The last line of ``dnscost-engine capture``: what it read."""

    record: Literal["capture"]
    packets: int
    dns_packets: int
    flows: int
    names: int
    names_left_out: int
    """With ``--names``: Do53 queries whose question reads as no name, not written."""
    unsupported_link: int
    read_s: float


class ConnectionRecord(TypedDict):
    """One connection's life, from the side that wrote the connections log."""

    type: Literal["connection"]
    answers: int
    bytes_received: int
    bytes_sent: int
    close: Close
    closed_by: Side
    closed_us: int
    error: NotRequired[str | None]
    established_us: NotRequired[int | None]
    handshake: Handshake
    id: int
    local_address: str
    opened_us: int
    peer_address: str
    queries: int
    role: Side
    tls_version: NotRequired[str | None]
    transport: str
    """One of ``dnscost.transports.TRANSPORTS``."""


class QueryRecord(TypedDict):
    """One query a server received (``serve --queries-log``)."""

    type: Literal["query"]
    connection: NotRequired[int | None]
    method: NotRequired[str | None]
    peer_address: str
    qname: NotRequired[str | None]
    qtype: NotRequired[str | None]
    rcode: NotRequired[str | None]
    t_us: int
    transport: str


class Validity(TypedDict):
    """The conditions a trial was judged on, and its verdict (``docs/results.md``, Validity)."""

    generator_kept_up: bool
    offered_of_scheduled: float | None
    target_saturated: bool
    generator_saturated: bool
    both_saturated: bool
    target_busy_share: float
    target_foreign_share: float | None
    target_stolen_share: NotRequired[float]
    generator_busy_share: float
    loss: float | None
    accounting_balanced: bool
    cache_hit_ratio: float | None
    engine_answered: int
    target_answered: int | None
    answer_count_agreement: float | None
    listen_overflows: int | None
    listen_overflow_share: float | None
    core_time_source: str
    meter_samples: int
    flags: list[str]
    unchecked: list[str]
    valid: bool


class Wire(TypedDict):
    """What the generator put on the wire over the engine's whole run (warm-up and drain
    included, so that every connection is counted from its SYN), and the queries answered and
    connections established over the same run: the engine's ``total`` record. UDP: datagrams
    and their payload octets. tcp, dot, doh: segments (SYN, pure ACKs, retransmissions and the
    close included) and sequence numbers acknowledged (``bytes_sent``: payload, plus one for the
    SYN and one for the FIN) or received (``bytes_received``: payload, plus one for the server's
    FIN), from the kernel's TCP_INFO, read last once the server has ended a connection the
    client closed (``docs/results.md``, wire; engine runs before 2026-11-24 stopped reading just
    before the client's close and counted none of it)."""

    queries_answered: int
    connections_established: int
    packets_sent: int
    packets_received: int
    bytes_sent: int
    bytes_received: int


# --- meter.jsonl: the sampler's records (dnscost.meter.sampler; docs/metering.md) -------------


class MeterCgroup(TypedDict):
    """The target's cgroup: its version and its directory per controller."""

    version: int
    dirs: dict[str, str]


class MeterHeader(TypedDict):
    """The first line of ``meter.jsonl``: the format, the intervals, the kernel's units, the
    CPUs online and the target's, its ports and cgroup, and how energy is read (RAPL's domains
    or the model's coefficients) with the model's coefficients always."""

    type: Literal["header"]
    format: int
    interval_ms: int
    socket_interval_ms: int
    clk_tck: int
    page_size: int
    cpus_online: list[int]
    target_cpus: list[int]
    target_ports: list[int]
    cgroup: MeterCgroup | None
    energy_source: str
    energy: dict[str, object]
    energy_model: dict[str, object]


class FastTarget(TypedDict, total=False):
    """The target in a fast sample: its cgroup's CPU and memory (when it has a cgroup; a
    counter the kernel does not give is null), its processes' CPU, processes and threads, and
    its threads' context switches and schedstat counts, summed over every thread of every
    process (:class:`dnscost.meter.procfs.TaskSched`; absent from files sampled before them,
    the schedstat ones from a kernel without ``/proc/PID/schedstat``)."""

    cgroup_cpu_total_us: int | None
    cgroup_cpu_user_us: int
    cgroup_cpu_system_us: int
    cgroup_usage_bytes: int | None
    cgroup_anon_bytes: int | None
    cgroup_kernel_bytes: int | None
    cgroup_tcp_bytes: int | None
    cgroup_slab_bytes: int | None
    cgroup_page_faults: int | None
    proc_cpu_user_us: Required[int]
    proc_cpu_system_us: Required[int]
    processes: Required[int]
    threads: Required[int]
    voluntary_ctxt_switches: int
    nonvoluntary_ctxt_switches: int
    sched_runs: int
    sched_run_delay_us: int


class GeneratorCpu(TypedDict):
    """The generator's processes' CPU (each one's last reading kept once it exits)."""

    cpu_user_us: int
    cpu_system_us: int
    processes: int


class CoreSample(TypedDict):
    """One core's times since boot (``/proc/stat``), its tasks' exact run time where the
    v1 ``cpuacct`` hierarchy gives it, and how many NET_RX and NET_TX softirqs ran on it
    (``/proc/softirqs``; absent from files sampled before them)."""

    cpu: int
    user_us: int
    nice_us: int
    system_us: int
    idle_us: int
    iowait_us: int
    irq_us: int
    softirq_us: int
    steal_us: int
    tasks_us: NotRequired[int]
    net_rx_softirqs: NotRequired[int]
    net_tx_softirqs: NotRequired[int]


class FastSample(TypedDict, total=False):
    """A fast sample (every ``interval_ms``): the target's and the generator's CPU, every
    core, the kernel's UDP, TCP and TcpExt counters, system slab, ``/proc/net/sockstat``,
    energy (the model's always, RAPL's when read, with its domains) and the sampler's CPU."""

    type: Required[Literal["fast"]]
    t_ms: Required[int]
    late_us: int
    target: Required[FastTarget]
    generator: GeneratorCpu
    cores: list[CoreSample]
    udp: dict[str, int]
    tcp: dict[str, int]
    tcpext: dict[str, int]
    meminfo: dict[str, int]
    sockstat: dict[str, int]
    energy_model_j: float
    energy_j: float
    energy_domains_j: dict[str, float]
    energy_source: str
    sampler_cpu_us: int


class SlowTarget(TypedDict):
    """The target's memory summed over its processes (``smaps_rollup``)."""

    rss_bytes: int
    pss_bytes: int
    uss_bytes: int
    swap_bytes: int
    processes: int


class SocketMemoryRecord(TypedDict):
    """The target's sockets and their memory (``ss -m``, :class:`dnscost.meter.sockets.SocketMemory`)."""

    sockets: int
    sockets_with_skmem: int
    buffer_bytes: int
    r_bytes: int
    t_bytes: int
    f_bytes: int
    w_bytes: int
    o_bytes: int
    bl_bytes: int
    drops: int
    states: dict[str, int]
    protocols: dict[str, int]


class SlowSample(TypedDict, total=False):
    """A slow sample (every ``socket_interval_ms``): the target's memory, its sockets' (when
    it has ports; ``ss``'s own wall and CPU time beside them) and the sampler's CPU."""

    type: Required[Literal["slow"]]
    t_ms: Required[int]
    target: Required[SlowTarget]
    sockets: SocketMemoryRecord
    ss_wall_us: int
    ss_cpu_us: int
    sampler_cpu_us: int


class MeterEnd(TypedDict):
    """The last line: samples taken and missed, errors (the first one's message), the
    sampler's CPU time per thread and ``ss``'s."""

    type: Literal["end"]
    t_ms: int
    fast: int
    slow: int
    missed_fast: int
    missed_slow: int
    errors: int
    first_error: str | None
    sampler_cpu_us: dict[str, int]
    ss_cpu_us: int


MeterRecord = MeterHeader | FastSample | SlowSample | MeterEnd
"""One line of ``meter.jsonl``."""


class MeterSummary(TypedDict):
    """The meter over one window (:func:`dnscost.meter.summary.summarize`), as trial.json
    stores it (``meter``, ``baseline_meter``). ``None`` where nothing was sampled.

    ``cpu_user_us``/``cpu_system_us`` are the target's, from its cgroup when it has one
    (``cpu_source`` = ``"cgroup"``) else summed over its processes (``"proc"``); both sources
    are also given. ``cgroup_cpu_total_us`` is the cgroup's exact total (the user/system split
    is sampled at the scheduler tick); ``cpu_us`` is it when present, else user + system: the
    figure to divide by queries. ``generator_cpu_*`` are the generator's processes'.
    ``page_faults`` is the page faults the target's processes took (its cgroup's ``pgfault``;
    absent from summaries made before it was sampled). ``voluntary_ctxt_switches``,
    ``nonvoluntary_ctxt_switches``, ``sched_runs`` and ``sched_run_delay_us`` are the target's
    threads' (``docs/metering.md``, "Wake-ups"; absent from summaries made before they were
    sampled, null where the samples lack them). ``energy_j`` is RAPL's package energy
    (``energy_source`` = ``"rapl"``) or the model's estimate for the target (``"model"``);
    ``energy_model_j`` is always the model's. ``cores`` holds per-core deltas by CPU number
    (``busy_us``, ``tasks_us`` where the scheduler gives it, ``net_rx_softirqs`` and
    ``net_tx_softirqs`` where sampled), ``counters`` the deltas of the
    kernel's UDP/TCP/TcpExt counters (``udp_rcvbuf_errors``, ``tcpext_listen_overflows``, ...), and ``<level>_mean`` and
    ``<level>_max`` the time-weighted mean and the peak of every level of
    :data:`dnscost.meter.summary.LEVELS` (a test holds the two). Readers of stored ones take
    them with ``.get``: the synthetic fixture run holds only those its tests need."""

    t0_ms: float
    t1_ms: float
    duration_s: float
    samples_fast: int
    samples_slow: int
    extrapolated: bool
    cpu_source: str | None
    cpu_user_us: float | None
    cpu_system_us: float | None
    cgroup_cpu_total_us: float | None
    cgroup_cpu_user_us: float | None
    cgroup_cpu_system_us: float | None
    proc_cpu_user_us: float | None
    proc_cpu_system_us: float | None
    generator_cpu_user_us: float | None
    generator_cpu_system_us: float | None
    page_faults: NotRequired[float | None]
    voluntary_ctxt_switches: NotRequired[float | None]
    nonvoluntary_ctxt_switches: NotRequired[float | None]
    sched_runs: NotRequired[float | None]
    sched_run_delay_us: NotRequired[float | None]
    energy_j: float | None
    energy_source: str | None
    energy_model_j: float | None
    cores: dict[str, dict[str, float]]
    counters: dict[str, float]
    cpu_us: float | None
    rss_bytes_mean: float | None
    rss_bytes_max: float | None
    pss_bytes_mean: float | None
    pss_bytes_max: float | None
    uss_bytes_mean: float | None
    uss_bytes_max: float | None
    cgroup_usage_bytes_mean: float | None
    cgroup_usage_bytes_max: float | None
    cgroup_anon_bytes_mean: float | None
    cgroup_anon_bytes_max: float | None
    cgroup_kernel_bytes_mean: float | None
    cgroup_kernel_bytes_max: float | None
    tcp_bytes_mean: float | None
    tcp_bytes_max: float | None
    cgroup_slab_bytes_mean: float | None
    cgroup_slab_bytes_max: float | None
    threads_mean: float | None
    threads_max: float | None
    socket_buffer_bytes_mean: float | None
    socket_buffer_bytes_max: float | None
    socket_optmem_bytes_mean: float | None
    socket_optmem_bytes_max: float | None
    sockets_mean: float | None
    sockets_max: float | None
    system_slab_bytes_mean: float | None
    system_slab_bytes_max: float | None
    system_sunreclaim_bytes_mean: float | None
    system_sunreclaim_bytes_max: float | None
    sockstat_tcp_mem_bytes_mean: float | None
    sockstat_tcp_mem_bytes_max: float | None
    sockstat_udp_mem_bytes_mean: float | None
    sockstat_udp_mem_bytes_max: float | None
    sockstat_tcp_inuse_mean: float | None
    sockstat_tcp_inuse_max: float | None
    sockstat_tcp_tw_mean: float | None
    sockstat_tcp_tw_max: float | None
    tcp_curr_estab_mean: float | None
    tcp_curr_estab_max: float | None


class ClassResult(TypedDict):
    """One class of a population's trial: what the engine counted of it over the measured
    period (its answers over the whole run too, to set beside the target's counters)."""

    name: str
    transport: str
    clients: int | None
    connections: int
    rate_qps: float | None
    answered_qps: float
    queries_offered: int
    queries_answered: int
    queries_answered_total: int
    latency_p50_us: int
    latency_p99_us: int
    connections_opened: int
    connections_established: int
    connection_seconds: float
    handshakes_full: int
    handshakes_resumed: int
    engine_cpu_us: int


class TransportAgreement(TypedDict):
    """A population's trial, one transport: the engine's answers over the whole run (of every
    class on it) and the target's own count of the queries it received on it."""

    engine_answered: int
    target_queries: int | None
    agreement: float | None


class TrialSummary(TypedDict):
    """One trial's costs over the engine's measured window (``docs/results.md``, trial.json)."""

    summary_version: int
    measured_s: float
    offered_qps: float
    answered_qps: float
    queries_offered: int
    queries_answered: int
    connections_established: int
    handshakes_full: int
    handshakes_resumed: int
    handshakes_zero_rtt_accepted: int
    handshakes_zero_rtt_rejected: int
    connection_seconds: float
    mean_active_connections: float
    connections_held: float | None
    target_cpu_us: float | None
    target_cpu_us_per_query: float | None
    target_page_faults_per_query: NotRequired[float | None]
    """Page faults the target took per answered query, from its cgroup (the kernel's count):
    what tells memory churn apart (absent from trials summarized before it was sampled)."""
    target_cpu_us_per_new_connection: float | None
    target_cpu_share: float | None
    wakeups_per_query: NotRequired[float | None]
    """The target's voluntary context switches (each a wake-up to come: it blocked) over the
    window, summed over its threads, per answered query (``docs/metering.md``, "Wake-ups").
    This and the five below are absent from trials summarized before they were sampled, and
    null where the meter's samples lack them or nothing was answered."""
    runs_per_query: NotRequired[float | None]
    """The times its threads were put on a CPU (schedstat), per answered query."""
    softirq_us_per_query: NotRequired[float | None]
    """Softirq time of the target's cores (``/proc/stat``, tick-sampled: on any task there,
    and charged to no task while the core idled), per answered query."""
    wakeups_per_s: NotRequired[float | None]
    runs_per_s: NotRequired[float | None]
    softirq_us_per_s: NotRequired[float | None]
    engine_cpu_us: int
    generator_cpu_us: float | None
    generator_cpu_us_per_query: float | None
    generator_cpu_share: float | None
    user_bytes_per_connection: float | None
    kernel_bytes_per_connection: float | None
    tcp_kernel_bytes_per_connection: float | None
    socket_buffer_bytes_per_connection: float | None
    energy_j: float | None
    energy_source: str | None
    energy_marginal_j: float | None
    energy_j_per_1000_queries: float | None
    latency_us: dict[str, int]
    setup_latency_us: dict[str, int]
    meter: MeterSummary
    baseline_meter: MeterSummary
    validity: Validity
    wire: Wire | None
    classes: NotRequired[list[ClassResult]]
    """A population's trial: each class apart."""
    transports: NotRequired[dict[str, TransportAgreement]]
    """A population's trial: each transport's answers, the engine's beside the target's."""


class WorkerSummary(TypedDict):
    """A worker's own engine summary, as ``trial.json`` records it beside its share."""

    offered: int
    answered: int
    answered_qps: float
    generator_kept_up: bool
    engine_cpu_us: int
    latency_p50_us: int
    latency_p99_us: int


class WorkerShare(TypedDict):
    """One worker's part of a trial, as ``trial.json`` records it (``cluster.workers``)."""

    address: str
    name: str
    host: str
    dir: str
    """Its records and configuration, under the trial's directory."""
    connections: int
    rate: float | str
    cpus: list[int]
    sources: list[str]
    late_ms: float
    started_unix_ms: int
    summary: WorkerSummary


class ClusterRecord(TypedDict):
    """How a trial was split and merged (``trial.json`` ``cluster``): enough to merge again."""

    address: str
    tls_ca: str
    start_at_unix_ms: int
    start_skew_ms: int
    max_skew_ms: float
    generator_cores: int
    workers: list[WorkerShare]


TrialStatus = Literal["pending", "running", "done", "failed", "interrupted", "not-run", "missing", "unreadable"]
"""Where a trial is: ``pending`` to ``running`` to ``done``, ``failed``, ``interrupted`` or
``not-run`` (a share whose reference cannot give it a rate); ``missing`` and ``unreadable`` are
the reader's, for a trial.json that is gone or malformed."""


TrialKind = Literal["load", "idle", "search", "capacity"]
"""What a trial does: the engine at a rate (``load``), connections held idle (``idle``), a
search for the highest UDP rate answered (``search``), or for the highest rate of any
transport or replayed profile that meets a service level (``capacity``: loss and p99 latency)."""


class TrialParams(TypedDict, total=False):
    """A trial's knobs as the plan resolved them from its group (trial.json ``params``,
    :func:`dnscost.plan.expand`): every sweepable knob of the spec at this trial's value (None
    where it means nothing for the transport: ``dnscost.plan.IRRELEVANT``), a replay's client
    profile and count, the timing, and a capacity search's bounds. ``python/tests/
    test_contract.py`` holds every stored trial.json's to it."""

    connections: int
    lifetime: str | None
    resumption: float
    rate: float | str | None
    """Queries per second (open loop), ``"max"`` (closed loop), a share of capacity such as
    ``"50%"``; None for an idle trial or a search."""
    in_flight: int
    open_rate: float | None
    doh_method: Literal["post", "get"] | None
    doh_headers: Literal["minimal", "browser"] | None
    cert_key: Literal["ecdsa-p256", "rsa-2048", "ed25519"] | None
    tls_group: Literal["x25519", "secp256r1", "secp384r1", "x25519mlkem768"] | None
    early_data: float
    profile: ClientProfile
    """The client profile a replay runs (``experiments/profiles/<name>.json``, as the engine
    reads it)."""
    clients: int
    population: str
    """A population trial's population (its group's ``population``, the TOML's path)."""
    duration_s: float
    warmup_s: float
    timeout_s: float
    baseline_s: float
    max_loss: float
    start_qps: float
    max_qps: float
    precision: float
    max_steps: int
    max_p99_ms: float
    """A capacity search's latency objective: p99 at or below this."""
    max_connections: int
    """A capacity search over a replayed profile: the connections its clients may hold."""
    arrival: Literal["constant", "poisson"]
    """How an open loop spaces its queries (the group's; absent: the engine's default,
    constant)."""
    pacing_resolution_us: int
    """The grid the engine's sender threads wake on (the group's; absent: the engine's default
    for the rate, which the trial's engine start record holds)."""


class SummaryContextRecord(TypedDict, total=False):
    """``trial.json``'s ``summary_context``: what a summary needs besides the raw records
    (:class:`dnscost.trial_summary.SummaryContext` has each field's meaning)."""

    sampler_start_unix_ms: Required[float]
    baseline_s: Required[float]
    cache_hit_ratio: float | None
    target_cpus: list[int]
    generator_cpus: list[int]
    target_keeps_counters: bool
    meter_interval_s: float
    cache_filled: bool
    unchecked: list[str]
    generator_cores: int | None
    transport_counters: dict[str, str]


class CounterReading(TypedDict):
    """A resolver's own counters at one moment (:class:`dnscost.targets.base.Counters`): those
    it has, normalised, None where it has none; ``raw`` everything it reported."""

    queries: int | None
    answers: int | None
    cache_hits: int | None
    cache_misses: int | None
    raw: dict[str, int]


class TargetCounters(TypedDict):
    """``trial.json``'s ``counters``: the target's own, before and after the load."""

    before: CounterReading
    after: CounterReading


class SoftnetCounts(TypedDict):
    """One core's receive softirq over a trial (``/proc/net/softnet_stat``): packets processed,
    and inter-processor interrupts that brought it packets steered by RPS."""

    processed: int
    received_rps: int


class FirstAttempt(TypedDict):
    """A trial's first attempt, run again with a longer warm-up: its warm-up, when its engine
    had every connection open, and the connections the target's kernel accepted in its window."""

    warmup_ms: int
    opened_ms: int | None
    kernel_passive_opens: int | None


class WarmupExtended(TypedDict):
    """``trial.json``'s ``warmup_extended``: the trial was run again with ``warmup_ms``, as its
    first attempt's open phase (``by`` ``engine``) or its target's accepts (``kernel``) reached
    into the window; that attempt's files are in ``kept``."""

    by: Literal["engine", "kernel"]
    first: FirstAttempt
    warmup_ms: int
    kept: str
    target_restarted: bool


class SearchStep(TypedDict, total=False):
    """One step of a capacity search (``trial.json``'s ``steps``): the rate offered, whether it
    passed (loss below the bound, accounting balanced, the generator kept up) and its summary."""

    offered_qps: Required[float]
    ok: bool
    loss: float | None
    generator_behind: bool
    summary: Required["TrialSummary | None"]
    p99_us: float | None
    """A capacity search's step: its p99 latency."""
    clients: int | None
    """A capacity search over a replayed profile: the clients the step replayed."""
    stolen_share: float
    """A capacity search's step: the largest share of its window stolen from a core."""
    failed: str | None
    """A capacity search's failed step: which objective it broke first (``loss``, ``p99``,
    ``generator`` behind, ``capped`` at the clients' connections), or ``invalid: FLAGS``."""


class SearchResult(TypedDict, total=False):
    """``trial.json``'s ``search``: the highest rate answered within ``max_loss``
    (``max_qps``, None when no step passed), the lowest that failed, whether it was bracketed
    and whether the failing step's generator fell behind (``generator-bound-search``)."""

    max_qps: Required[float | None]
    max_loss: Required[float]
    offered_qps: Required[float | None]
    failed_qps: float | None
    generator_bound: bool
    bracketed: bool
    max_p99_ms: float
    """A capacity search's latency objective."""
    clients: int | None
    """A capacity search over a replayed profile: the clients at ``max_qps``."""
    failed: str | None
    """Why the lowest failed step failed (:class:`SearchStep`'s ``failed``)."""


class DerivedRate(TypedDict):
    """``trial.json``'s ``derived_rate`` (:func:`dnscost.plan.share_rate`): a share of
    capacity made a rate from its reference's answered rate."""

    reference: str
    share: float
    reference_answered_qps: float
    rate_qps: float
    capacity_lower_bound: bool


class TargetPlace(TypedDict, total=False):
    """Where a target's binaries came from (``trial.json``'s ``target_place``,
    :meth:`dnscost.targets.place.Place.describe`): the host's packages, a release root
    (its release, directory, mirror and package versions) or the user's build (its path, the
    server's binary measured and its SHA-256, and where each helper program came from)."""

    place: Required[Literal["host", "root", "build"]]
    release: str
    root: str
    mirror: str | None
    packages: dict[str, str]
    path: str
    binary: str
    sha256: str
    helpers: dict[str, str]


class NetworkRecord(TypedDict, total=False):
    """How the trial's bed was connected (``trial.json``'s ``network``,
    :class:`dnscost.network.NetworkInfo`)."""

    kind: Required[str]
    target_address: Required[str]
    generator_address: str
    sources: list[str]
    netns: str | None
    target_device: str | None
    generator_device: str | None
    rps_cpus: dict[str, str]


class NamesReplayed(TypedDict):
    """The names a replay asked (``dnscost.population.replayed_names``): the queries the engine
    sent over the whole run, the distinct names and types among them, and the share asked
    before in the run (what a cache keeping every answer would have answered)."""

    queries: int
    distinct: int
    repeat_share: float


class TicketKeysRecord(TypedDict):
    """A trial's ``ticket_keys`` (:class:`dnscost.targets.base.TicketKeys`): every how many
    seconds the target made a new session-ticket key, and how many it kept (None: its own
    number)."""

    rotation_s: float
    kept: int | None


class SessionLimitsRecord(TypedDict):
    """A trial's ``session_limits`` (:class:`dnscost.targets.base.SessionLimits`): the new TLS
    sessions a second a client may open, and how many seconds one over it is refused."""

    new_per_s: int
    ban_s: int


class ReplayRecord(TypedDict):
    """A population trial's replay (trial.json ``population``): the population's source, the
    scale it ran at, the queries per second of its classes together, the classes left out."""

    source: str
    scale: float
    rate_qps: float
    left_out: list[str]
    names: NotRequired[str | None]
    """The capture's own names the classes asked (a names file), or None for synthetic ones."""
    repeat_share: NotRequired[float | None]
    """Of the capture's Do53 queries, the share asked before in it (``NameStats``)."""
    names_queries: NotRequired[int | None]
    """The names file's queries (lines)."""


class PopulationRecord(TypedDict):
    """A population group's population, as the spec records it: the TOML it was read from
    (relative to the spec) and its classes' fields a replay needs (``dnscost.population``)."""

    source: str
    classes: list[dict[str, object]]
    names: NotRequired[dict[str, object]]
    """With ``capture_names``: the capture's names file (its path on the machine that read the
    spec), its ``repeat_share`` and ``queries``, as population.toml's ``names``."""
    only: NotRequired[list[str]]
    """With ``population_classes``: the classes replayed, each as it is in the whole population
    at the group's rate (the same clients, each at the same rate); the others are not sent."""


class GroupSettings(TypedDict, total=False):
    """A spec group's fields other than its sweep axes, with the spec's defaults applied
    (:class:`dnscost.spec.Group`; run.json's ``spec.groups[].settings``): durations in seconds
    (a search's steps run ``step_duration``), a search's bounds, a group of profiles' profiles
    (read once, by name) and the connections their clients may hold, and a group at a share of
    capacity's saturation group and in-flight ceiling."""

    duration: Required[float]
    warmup: Required[float]
    timeout: Required[float]
    baseline: Required[float]
    step_duration: Required[float]
    max_loss: Required[float]
    start_qps: Required[float]
    max_qps: Required[float]
    precision: Required[float]
    max_steps: Required[int]
    max_p99: float
    """A capacity group's latency objective, in seconds."""
    max_connections: int
    profiles: dict[str, ClientProfile]
    capacity_of: str
    in_flight: int
    population: PopulationRecord
    arrival: Literal["constant", "poisson"]
    pacing_resolution_us: int


class TrialRecord(TypedDict, total=False):
    """One trial's ``trial.json`` (``docs/results.md``, "trial.json"): what the plan says it is,
    where it ran, what it measured. Written by :mod:`dnscost.runner` (a run's trials) and
    :func:`dnscost.trial.run_trial` (a trial on its own, which records its ``settings``
    instead of a plan's fields); read, once, by :func:`dnscost.analysis.load.read_trial`, which
    refuses a document whose fields are not of these types (:func:`shape_problem`).
    ``python/tests/test_contract.py`` holds every stored trial.json of the repository to it."""

    # What the plan says (dnscost.plan.TrialPlan)
    id: str
    group: str
    kind: TrialKind
    target: str
    transport: str
    params: TrialParams
    rep: int
    round: int
    round_seed: int | None
    reference: str | None
    analysis: str
    # A trial run on its own (run_trial): its settings and directory
    settings: dict[str, object]
    dir: str
    # What happened
    status: TrialStatus
    error: str | None
    records_problem: str
    target_cpus: list[int]
    generator_cpus: list[int]
    derived_rate: DerivedRate
    # The bed it ran on (dnscost.trial.start_bed)
    target_pid: int | None
    target_processes: int
    """How many processes the target ran as (they share its ports: ``target_processes``)."""
    target_version: str
    target_place: TargetPlace
    endpoints: dict[str, str]
    network: NetworkRecord
    listen_backlog: dict[str, int]
    client_subnet: str
    """With the engine's ``client_subnet``: what the target was configured to do with the
    option, ``acted on`` or ``passed on or ignored`` (:attr:`Target.acts_on_client_subnet`)."""
    ticket_keys: TicketKeysRecord
    """The target's session-ticket keys as the trial had it rotate them (``ticket_keys``)."""
    session_limits: SessionLimitsRecord
    """The target's per-client limit on new TLS sessions as the trial set it."""
    external: dict[str, object]
    cache_hit_ratio: float | None
    cache_fill: str
    bed: str
    # What it measured (dnscost.trial.measure)
    cluster: ClusterRecord
    engine_config: EngineConfig
    population: ReplayRecord
    """A population trial: its replay (the classes themselves are in ``engine_config``)."""
    upstream_queries: int
    """A trial of a capture's own names: the queries for them the upstream logged between the
    target's two counter readings, its cache misses as an observer other than the target counts
    them (``serve --queries-log``)."""
    names_replayed: NamesReplayed
    """A trial of a capture's own names: what the engine asked of the names file."""
    summary: TrialSummary | None
    summary_context: SummaryContextRecord
    counters: TargetCounters
    softnet: dict[str, SoftnetCounts]
    warmup_extended: WarmupExtended
    steps: list[SearchStep]
    search: SearchResult


RunStatus = Literal["running", "done", "failed", "incomplete", "interrupted"]
"""Where a run is: ``running`` until it ends ``done`` (every trial done), ``incomplete`` (some
failed), ``failed`` (none done) or ``interrupted``."""


class TrialState(TypedDict):
    """One trial's entry in run.json's ``trials``: its status and, when it did not finish, why."""

    status: TrialStatus
    error: NotRequired[str | None]


class SourceCommit(TypedDict):
    """The git commit of the code that measured a run; ``dirty``: its tracked files differed."""

    commit: str
    dirty: bool


class SpecGroupRecord(TypedDict):
    """One group of a resolved spec, as run.json keeps it (:class:`dnscost.spec.Group`)."""

    name: str
    kind: TrialKind
    transports: list[str]
    targets: list[str] | None
    analysis: str
    repetitions: int
    axes: dict[str, list[int | float | str | None]]
    """Each sweep axis's values (``connections``, ``lifetime``, ``rate``, ``profile``, ...)."""
    settings: GroupSettings


class RunSpecRecord(TypedDict, total=False):
    """run.json's ``spec``. A spec's run (``dnscost run``, ``reproduce``): the spec resolved
    (:meth:`dnscost.spec.Spec.to_dict`) with what the command narrowed (``only_targets``,
    ``only_groups``), the CPUs and the network it ran with. ``dnscost load``: ``command`` and
    the trial's ``settings``. Either with the ``cluster`` it ran on."""

    name: str
    description: str
    targets: list[str]
    seed: int
    names: int
    tld: str
    target_cpus: list[int] | None
    generator_cpus: list[int] | None
    target_processes: int
    network: str | None
    analyses: list[str]
    groups: list[SpecGroupRecord]
    origin: str
    """The spec file's path, which ``--resume`` reads again."""
    only_targets: list[str] | None
    only_groups: list[str] | None
    cpus: dict[str, list[int]]
    cluster: dict[str, object]
    external: dict[str, object]
    command: str
    settings: dict[str, object]


class RunRecord(TypedDict, total=False):
    """A run's ``run.json`` (``docs/results.md``, "run.json"): what was asked (the spec, as
    resolved, and its TOML), on what (the machine's facts, every binary's version), the plan
    (one entry per trial, :meth:`dnscost.plan.TrialPlan.to_dict`) and each trial's state.
    Written by :class:`dnscost.results.Run`; :func:`dnscost.results.run_problem` refuses a
    document whose fields are not of these types."""

    format_version: int
    dnscost_version: str
    dnscost_source: SourceCommit | None
    experiment: str
    run_id: str
    created_unix_ms: int
    finished_unix_ms: int
    command: list[str]
    status: RunStatus
    spec: RunSpecRecord
    spec_toml: str
    machine: dict[str, object]
    versions: dict[str, str]
    plan: list[TrialRecord]
    trials: dict[str, TrialState]
    cluster: dict[str, object]


def document_problem(value: object, hint: object) -> str | None:
    """What keeps ``value`` (a parsed file) from being the ``TypedDict`` ``hint``: a key it
    requires missing (``"no rows"``), or :func:`shape_problem`'s answer. Keys marked
    ``NotRequired`` may be missing, also in a module that postpones its annotations (where
    ``__required_keys__`` counts them as required)."""
    if isinstance(value, dict) and is_typeddict(hint):
        hints = get_type_hints(hint, include_extras=True)
        required = [k for k in getattr(hint, "__required_keys__", ()) if get_origin(hints.get(k)) is not NotRequired]
        missing = sorted(k for k in required if k not in value)
        if missing:
            return f"no {missing[0]}"
    return shape_problem(value, hint)


def shape_problem(value: object, hint: object, where: str = "") -> str | None:
    """What keeps ``value`` (parsed JSON) from being of the type ``hint`` (a ``TypedDict``, a
    union, ``Literal``, ``list[...]``, ``dict[str, ...]``, ``int``, ``float``, ``str``,
    ``bool``, ``None`` or ``Any``), or None: ``"summary is an array, not an object"``. Keys a
    ``TypedDict`` does not name are let through (a run written by another version of the
    package), and ``int`` and ``float`` are both JSON's one number: what is checked is the
    kind of every value, which is what a reader would trip on."""
    origin, args = get_origin(hint), get_args(hint)
    name = where or "the document"
    if hint is Any:
        return None
    if origin in (Union, UnionType):
        problems = [shape_problem(value, h, where) for h in args]
        if not all(problems):
            return None
        # A value of one member's kind is judged by that member: its own problem, inside it.
        same = [p for h, p in zip(args, problems, strict=True) if _json_kind_of(h) == json_kind(value)]
        if len(same) == 1:
            return same[0]
        return f"{name} is {json_kind(value)}, not {' or '.join(_kind_of(h) for h in args)}"
    if origin is Literal:
        return None if value in args else f"{name} is {value!r}, not one of {', '.join(map(repr, args))}"
    if origin in (NotRequired, Required):
        return shape_problem(value, args[0], where)
    if is_typeddict(hint):
        if not isinstance(value, dict):
            return f"{name} is {json_kind(value)}, not an object"
        hints = get_type_hints(hint)
        for key, sub in hints.items():
            if key in value:
                problem = shape_problem(value[key], sub, f"{where}.{key}" if where else key)
                if problem is not None:
                    return problem
        return None
    if origin is list:
        if not isinstance(value, list):
            return f"{name} is {json_kind(value)}, not an array"
        return next((p for i, v in enumerate(value) if (p := shape_problem(v, args[0], f"{name}[{i}]"))), None)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            return f"{name} is {json_kind(value)}, not an object"
        if args:
            return next((p for k, v in value.items() if (p := shape_problem(v, args[1], f"{name}.{k}"))), None)
        return None
    if hint is None or hint is type(None):
        return None if value is None else f"{name} is {json_kind(value)}, not null"
    if hint in (int, float):  # JSON has one kind of number: 3.0 is read as an int would be
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(hint, type):
        ok = isinstance(value, hint)
    else:
        raise TypeError(f"shape_problem cannot check {hint!r}")
    return None if ok else f"{name} is {json_kind(value)}, not {_kind_of(hint)}"


def _json_kind_of(hint: object) -> str:
    """The JSON kind of the values of ``hint``: a choice's is its values' when they share one."""
    if get_origin(hint) is Literal:
        kinds = {json_kind(v) for v in get_args(hint)}
        if len(kinds) == 1:
            return kinds.pop()
    return _kind_of(hint)


def _kind_of(hint: object) -> str:
    """How JSON calls the type ``hint``, with its article."""
    origin = get_origin(hint)
    if hint is None or hint is type(None):
        return "null"
    if origin is list:
        return "an array"
    if origin is dict or hint is dict or is_typeddict(hint):
        return "an object"
    if origin is Literal:
        return "one of " + ", ".join(map(repr, get_args(hint)))
    names: dict[object, str] = {int: "a number", float: "a number", str: "a string", bool: "a boolean"}
    return names.get(hint, str(hint))
