//! The JSON-lines output: one `start`, an `interval` per second, one `summary`, and (in the
//! connections log) a `connection` per closed connection. Units are in the field names.

use crate::{Close, Counters, ErrorKind, Handshake, Histogram, Side};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every line the engine writes.
// Records are written about once a second, so the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Start(StartRecord),
    Interval(IntervalRecord),
    Summary(SummaryRecord),
    Connection(ConnectionRecord),
    Query(QueryRecord),
}

/// The first line: what runs, resolved.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRecord {
    pub engine_version: String,
    /// The engine configuration as resolved (every default filled in).
    pub config: serde_json::Value,
    /// TLS version and key-exchange group offered (pinned), when the transport uses TLS.
    pub tls_version: Option<String>,
    pub tls_group: Option<String>,
    /// The target address the name resolved to.
    pub target_address: String,
    pub started_unix_ms: u64,
    /// A population's classes (the configuration's `classes`), each as resolved; absent for a
    /// run of one class.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassStart>,
}

/// One class of a population, resolved: the configuration it runs.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassStart {
    pub name: String,
    /// The class's engine configuration as resolved (every default filled in).
    pub config: serde_json::Value,
    /// The address its target name resolved to.
    pub target_address: String,
}

/// One class's counts over an interval or a period: its queries, connections, handshakes,
/// latency, and the CPU time of its own generator threads.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassTotals {
    pub name: String,
    pub transport: String,
    #[serde(flatten)]
    pub totals: Totals,
}

/// One class's part of the summary.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassSummary {
    pub name: String,
    pub transport: String,
    /// Answers per second over the measured period.
    pub answered_qps: f64,
    /// Counts of the measured period.
    pub measured: Totals,
    /// Counts of the whole run.
    pub total: Totals,
    pub accounting: Accounting,
}

/// Part of the run an interval belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Load is sent but not measured.
    Warmup,
    /// The measured period.
    Measure,
    /// After the last send: outstanding queries are waited for (at most the query timeout).
    Drain,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryCounts {
    /// Queries whose intended send time came.
    pub offered: u64,
    /// Queries written to the target (counted when the write completed; once per query).
    pub sent: u64,
    /// Sends of a query after its first: udp with `udp_retry` sends a query unanswered after a
    /// try's timeout again (a query sent three times counts 2). Not a query outcome; over udp
    /// `traffic.packets_sent` is `sent` + `retransmitted`.
    #[serde(default)]
    pub retransmitted: u64,
    pub answered: u64,
    /// Answers by RCODE (lower-case names; only those seen).
    pub rcodes: BTreeMap<String, u64>,
    pub timed_out: u64,
    /// Failures by kind (only those seen).
    pub failed: BTreeMap<String, u64>,
    pub failed_total: u64,
    pub aborted: u64,
    /// Outstanding at the end of the period.
    pub in_flight: u64,
    /// Replies that matched no outstanding query (unknown DNS ID or stream, too short, late);
    /// written only when not zero. Not part of the accounting: the queries they failed to
    /// match end as timed out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unmatched: u64,
    /// Queries that were due when the server allowed no more streams on their connection
    /// (QUIC MAX_STREAMS, HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS) and waited for one: over
    /// HTTP/2 counted when they go; over QUIC when written, as they then wait in the
    /// connection (and time out there if no stream comes in time). Written only when not zero.
    /// Not part of the accounting: each still ends as answered, timed out, failed or aborted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stream_waits: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectionCounts {
    /// Open at the end of the period.
    pub active: u64,
    /// Connection attempts.
    pub opened: u64,
    /// Attempts that completed TCP (and TLS) set-up.
    pub established: u64,
    /// Failed attempts by kind.
    pub failed: BTreeMap<String, u64>,
    /// Connections the client closed, by reason (lifetime, idle, end, error, exhausted).
    pub closed_by_client: BTreeMap<String, u64>,
    /// Connections the server closed, by how (fin, rst, close_notify, tls_alert, goaway).
    pub closed_by_server: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandshakeCounts {
    pub full: u64,
    /// Resumed handshakes, with or without 0-RTT.
    pub resumed: u64,
    /// Of `resumed`: the client sent 0-RTT data and the server accepted it, or refused it.
    pub zero_rtt_accepted: u64,
    pub zero_rtt_rejected: u64,
}

/// Bytes and packets as the kernel counted them (UDP datagrams; TCP segments and bytes from
/// TCP_INFO, so TLS and HTTP/2 overhead are included).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrafficCounts {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
}

/// A latency distribution in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistogramSummary {
    pub count: u64,
    pub min_us: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// The whole HDR histogram: V2 compressed (deflate) encoding, base64.
    pub hdr: String,
}

impl HistogramSummary {
    pub fn of(h: &Histogram) -> Self {
        use base64::Engine as _;
        let mut bytes = Vec::new();
        hdrhistogram::serialization::Serializer::serialize(
            &mut hdrhistogram::serialization::V2DeflateSerializer::new(),
            h,
            &mut bytes,
        )
        .expect("serialising to memory");
        let hdr = base64::engine::general_purpose::STANDARD.encode(bytes);
        if h.is_empty() {
            return HistogramSummary { hdr, ..Default::default() };
        }
        HistogramSummary {
            count: h.len(),
            min_us: h.min(),
            mean_us: (h.mean() * 10.0).round() / 10.0,
            p50_us: h.value_at_quantile(0.5),
            p90_us: h.value_at_quantile(0.9),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            hdr,
        }
    }
}

/// What the generator itself cost and whether it kept its schedule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EngineUsage {
    pub cpu_user_us: u64,
    pub cpu_system_us: u64,
    /// Queries per second the schedule asked for (open loop) over the period.
    pub offered_qps: f64,
    /// Queries per second written.
    pub sent_qps: f64,
}

/// The counts of one period.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Totals {
    pub queries: QueryCounts,
    pub connections: ConnectionCounts,
    pub handshakes: HandshakeCounts,
    pub traffic: TrafficCounts,
    /// Query latency from the intended send time (so a late generator cannot hide latency).
    pub latency: HistogramSummary,
    /// Connection set-up time.
    pub setup_latency: HistogramSummary,
    pub engine: EngineUsage,
}

fn nonzero<K: Copy>(keys: &[K], values: &[u64], name: impl Fn(K) -> String) -> BTreeMap<String, u64> {
    keys.iter().zip(values).filter(|(_, v)| **v > 0).map(|(k, v)| (name(*k), *v)).collect()
}

impl Totals {
    /// Builds the record part from merged counters, the gauges and the engine's CPU over
    /// `seconds` of wall time.
    pub fn new(c: &Counters, in_flight: u64, active: u64, cpu_user_us: u64, cpu_system_us: u64, seconds: f64) -> Self {
        let closed = |side: Side| {
            let (keys, vals): (Vec<Close>, Vec<u64>) =
                Close::ALL.iter().zip(&c.conn_closed).filter(|(k, _)| k.side() == side).map(|(k, v)| (*k, *v)).unzip();
            nonzero(&keys, &vals, |k| k.as_str().to_string())
        };
        let codes: Vec<u8> = (0..16).collect();
        let per_s = |n: u64| if seconds > 0.0 { (n as f64 / seconds * 10.0).round() / 10.0 } else { 0.0 };
        Totals {
            queries: QueryCounts {
                offered: c.offered,
                sent: c.sent,
                retransmitted: c.retransmitted,
                answered: c.answered,
                rcodes: nonzero(&codes, &c.rcodes, |k| dnscost_wire::Rcode::name(k).to_string()),
                timed_out: c.timed_out,
                failed: nonzero(&ErrorKind::ALL, &c.failed, |k| k.as_str().to_string()),
                failed_total: c.failed_total(),
                aborted: c.aborted,
                in_flight,
                unmatched: c.unmatched,
                stream_waits: c.stream_waits,
            },
            connections: ConnectionCounts {
                active,
                opened: c.conn_opened,
                established: c.conn_established,
                failed: nonzero(&ErrorKind::ALL, &c.conn_failed, |k| k.as_str().to_string()),
                closed_by_client: closed(Side::Client),
                closed_by_server: closed(Side::Server),
            },
            handshakes: HandshakeCounts {
                full: c.handshakes_full,
                resumed: c.handshakes_resumed,
                zero_rtt_accepted: c.handshakes_zero_rtt_accepted,
                zero_rtt_rejected: c.handshakes_zero_rtt_rejected,
            },
            traffic: TrafficCounts {
                bytes_sent: c.bytes_sent,
                bytes_received: c.bytes_received,
                packets_sent: c.packets_sent,
                packets_received: c.packets_received,
            },
            latency: HistogramSummary::of(&c.latency),
            setup_latency: HistogramSummary::of(&c.setup),
            engine: EngineUsage { cpu_user_us, cpu_system_us, offered_qps: per_s(c.offered), sent_qps: per_s(c.sent) },
        }
    }
}

/// One second (or less, at the end) of the run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntervalRecord {
    pub index: u32,
    pub phase: Phase,
    /// Milliseconds since the start of the run.
    pub start_ms: u64,
    pub end_ms: u64,
    #[serde(flatten)]
    pub totals: Totals,
    /// A population's classes, each counted apart (their sum is the totals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassTotals>,
}

/// Every query offered ended as exactly one of these; `balanced` says the sum holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Accounting {
    pub offered: u64,
    pub answered: u64,
    pub timed_out: u64,
    pub failed: u64,
    pub aborted: u64,
    pub balanced: bool,
}

/// The last line of the output.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummaryRecord {
    /// The measured period (after warm-up, before drain), in milliseconds since the start.
    pub measure_start_ms: u64,
    pub measure_end_ms: u64,
    /// With `open_first`: when every connection slot's first connection had settled
    /// (established or failed), in milliseconds since the start; after `measure_start_ms`, the
    /// open phase spilled into the measured period (its handshakes are measured). Absent
    /// without `open_first`, or when the run ended first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened_ms: Option<u64>,
    /// Stopped early by SIGINT or SIGTERM.
    pub interrupted: bool,
    /// Stopped a second time: outstanding queries were not waited for.
    pub aborted: bool,
    /// Answers per second over the measured period.
    pub answered_qps: f64,
    /// Whether the generator kept its schedule: it sent at least 99 % of what it offered and
    /// its threads were not saturated. A run where it did not measures the generator.
    pub generator_kept_up: bool,
    /// Counts of the measured period.
    pub measured: Totals,
    /// Counts of the whole run, warm-up and drain included.
    pub total: Totals,
    pub accounting: Accounting,
    /// A population's classes, each counted apart (their sum is the totals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassSummary>,
    /// The generator's own memory.
    #[serde(default)]
    pub memory: EngineMemory,
}

/// The generator's own memory: its resident set (`/proc/self/statm`), before any connection
/// opened and at every interval. What the load side needs per connection is the slope of
/// `rss_bytes` over `connections` across runs (`bench/engine-memory`); `rss_per_connection_bytes`
/// is one run's estimate of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EngineMemory {
    /// Resident octets once the threads' configurations were made, before any connection.
    pub rss_start_bytes: u64,
    /// The last interval with the most connections open: its resident octets and connections.
    pub rss_bytes: u64,
    pub connections: u64,
    /// `(rss_bytes - rss_start_bytes) / connections`, rounded (absent without connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_per_connection_bytes: Option<u64>,
    /// The most resident octets at any interval.
    pub rss_peak_bytes: u64,
}

impl EngineMemory {
    /// Memory before any connection: `rss` resident octets.
    pub fn starting(rss: u64) -> Self {
        EngineMemory { rss_start_bytes: rss, rss_bytes: rss, rss_peak_bytes: rss, ..Self::default() }
    }

    /// An interval's sample: `rss` resident octets with `connections` open.
    pub fn sample(&mut self, rss: u64, connections: u64) {
        self.rss_peak_bytes = self.rss_peak_bytes.max(rss);
        if connections >= self.connections {
            (self.rss_bytes, self.connections) = (rss, connections);
            self.rss_per_connection_bytes = (connections > 0)
                .then(|| (rss.saturating_sub(self.rss_start_bytes) as f64 / connections as f64).round() as u64);
        }
    }
}

/// One connection's life, from the side that wrote the log.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectionRecord {
    /// `client` (generate) or `server` (serve).
    pub role: Side,
    pub transport: String,
    /// Sequence number, unique in the run.
    pub id: u64,
    pub local_address: String,
    pub peer_address: String,
    /// Microseconds since the start of the run.
    pub opened_us: u64,
    pub established_us: Option<u64>,
    pub closed_us: u64,
    /// `none` (plain TCP), `full` or `resumed`.
    pub handshake: Handshake,
    pub tls_version: Option<String>,
    /// Queries sent (client) or received (server).
    pub queries: u64,
    /// Answers received (client) or sent (server).
    pub answers: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// `client` or `server`: who ended the connection.
    pub closed_by: Side,
    /// How: the client's reason (lifetime, idle, end, error, exhausted) or what the peer did (fin, rst,
    /// close_notify, tls_alert, goaway); the server's policy (idle, max_queries, max_age, end).
    pub close: Close,
    /// The error, when the connection failed.
    pub error: Option<String>,
}

/// One query a server received, from `serve --queries-log`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryRecord {
    /// Microseconds since the start of the run, when the query was read.
    pub t_us: u64,
    pub transport: String,
    /// The connection's id in the connections log; none over udp.
    pub connection: Option<u64>,
    pub peer_address: String,
    /// The question's name, lower-case and dotted (with the final dot); none if the query has
    /// no readable question.
    pub qname: Option<String>,
    /// The question's type mnemonic (`A`, `HTTPS`) or `TYPEnnn`.
    pub qtype: Option<String>,
    /// The answer's RCODE name (`noerror`, `nxdomain`, `refused`, ...); none if nothing was sent.
    pub rcode: Option<String>,
    /// doh and doh3: the request's method, `get` or `post`.
    pub method: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_carry_a_type() {
        let mut c = Counters { offered: 10, sent: 10, ..Default::default() };
        for i in 0..10 {
            c.answer(if i < 9 { 0 } else { 3 }, 100 + i);
        }
        c.closed(Close::Idle);
        c.closed(Close::Fin);
        let t = Totals::new(&c, 0, 1, 5, 6, 2.0);
        assert_eq!(t.queries.rcodes.get("nxdomain"), Some(&1));
        assert_eq!(t.connections.closed_by_client.get("idle"), Some(&1));
        assert_eq!(t.connections.closed_by_server.get("fin"), Some(&1));
        assert_eq!(t.engine.sent_qps, 5.0);
        assert_eq!(t.latency.count, 10);
        assert!(t.latency.p50_us >= 100 && t.latency.max_us >= 109);
        let r = Record::Interval(IntervalRecord {
            index: 0,
            phase: Phase::Measure,
            start_ms: 0,
            end_ms: 1000,
            totals: t,
            classes: Vec::new(),
        });
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.starts_with(r#"{"type":"interval","index":0,"phase":"measure""#), "{line}");
        let back: Record = serde_json::from_str(&line).unwrap();
        assert!(matches!(back, Record::Interval(i) if i.totals.queries.answered == 10));
    }

    #[test]
    fn histogram_encoding_decodes() {
        use base64::Engine as _;
        let mut c = Counters::default();
        c.answer(0, 1234);
        let s = HistogramSummary::of(&c.latency);
        let bytes = base64::engine::general_purpose::STANDARD.decode(&s.hdr).unwrap();
        let h: Histogram = hdrhistogram::serialization::Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
        assert_eq!(h.len(), 1);
        assert!(h.equivalent(h.max(), 1234));
        assert_eq!(HistogramSummary::of(&Counters::default().latency).count, 0);
    }
}
