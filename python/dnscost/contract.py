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
them (parsed once, at the file's edge); ``python/tests/test_contract.py`` holds every field to
the schema.
"""

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "Accounting",
    "ConnectionCounts",
    "ConnectionRecord",
    "EngineConfig",
    "EngineRecord",
    "EngineUsage",
    "HandshakeCounts",
    "HistogramSummary",
    "IntervalRecord",
    "Lifetime",
    "QueryCounts",
    "QueryRecord",
    "Row",
    "StartRecord",
    "SummaryRecord",
    "Totals",
    "TrafficCounts",
    "UdpRetry",
]

Row = dict[str, Any]
"""One row of a derived table: column name to value (None for an empty cell)."""


class Lifetime(TypedDict, total=False):
    """How long a connection lives: a duration, a number of queries, both (whichever comes
    first) or neither (forever)."""

    duration_ms: int | None
    queries: int | None


class UdpRetry(TypedDict):
    """A UDP query unanswered after ``timeout_ms`` is sent again, ``attempts`` sends in all."""

    timeout_ms: int
    attempts: int


class EngineConfig(TypedDict, total=False):
    """``dnscost-engine generate``'s configuration (docs/engine.md has each field's meaning)."""

    arrival: Literal["constant", "poisson"]
    ca_file: str | None
    clients: int | None
    close: Literal["graceful", "fin", "rst", "silent"] | None
    connections: int
    connections_log: str | None
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
    profile: dict[str, Any] | None
    """A client profile (``schemas/client-profile.schema.json``), as ``dnscost observe`` writes it."""
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


class StartRecord(TypedDict):
    """The engine's first line: what runs, resolved."""

    type: Literal["start"]
    config: EngineConfig
    engine_version: str
    started_unix_ms: int
    target_address: str
    tls_group: NotRequired[str | None]
    tls_version: NotRequired[str | None]


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


EngineRecord = StartRecord | IntervalRecord | SummaryRecord
"""One line of ``dnscost-engine generate``'s output."""

Side = Literal["client", "server"]
Close = Literal[
    "lifetime", "idle", "end", "error", "exhausted", "fin", "rst", "close_notify", "tls_alert", "goaway",
    "max_queries", "max_age", "connection_close", "idle_expired",
]  # fmt: skip
Handshake = Literal["none", "full", "resumed", "zero_rtt_accepted", "zero_rtt_rejected"]


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
