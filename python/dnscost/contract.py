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
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = ["EngineConfig", "Lifetime", "Row", "UdpRetry"]

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
