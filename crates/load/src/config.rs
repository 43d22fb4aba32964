//! The engine's input contract: one JSON document, unknown fields rejected, every value bounded.

use crate::profile::ClientProfile;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// How DNS travels. One token per carrier, the same in every spec, flag, record and file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Udp,
    Tcp,
    Dot,
    Doh,
    /// DNS over QUIC (RFC 9250): one query per bidirectional stream.
    Doq,
    /// DoH over HTTP/3 (RFC 8484, RFC 9114): one request per stream.
    Doh3,
}

impl Transport {
    pub const ALL: [Transport; 6] =
        [Transport::Udp, Transport::Tcp, Transport::Dot, Transport::Doh, Transport::Doq, Transport::Doh3];

    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
            Transport::Dot => "dot",
            Transport::Doh => "doh",
            Transport::Doq => "doq",
            Transport::Doh3 => "doh3",
        }
    }

    /// Whether queries ride on connections that open and close.
    pub fn has_connections(self) -> bool {
        self != Transport::Udp
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, Transport::Dot | Transport::Doh | Transport::Doq | Transport::Doh3)
    }

    /// Whether connections are QUIC's (UDP datagrams, TLS inside).
    pub fn uses_quic(self) -> bool {
        matches!(self, Transport::Doq | Transport::Doh3)
    }

    /// Whether queries are DoH requests (over HTTP/2 or HTTP/3).
    pub fn is_doh(self) -> bool {
        matches!(self, Transport::Doh | Transport::Doh3)
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DohMethod {
    #[default]
    Post,
    Get,
}

/// The header fields of DoH requests and how they are encoded (docs/engine.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DohHeaders {
    /// What DoH needs, string literals raw.
    #[default]
    Minimal,
    /// What Chromium sends for DoH, Huffman-coded as its encoder does.
    Browser,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TlsVersion {
    #[serde(rename = "1.2")]
    Tls12,
    #[default]
    #[serde(rename = "1.3")]
    Tls13,
}

/// The key-exchange group, pinned so that library defaults cannot change a comparison.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TlsGroup {
    #[default]
    X25519,
    Secp256r1,
    Secp384r1,
    X25519mlkem768,
}

impl TlsVersion {
    /// The token of configurations and records ("1.2", "1.3").
    pub fn as_str(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "1.2",
            TlsVersion::Tls13 => "1.3",
        }
    }
}

impl TlsGroup {
    /// The token of configurations and records.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsGroup::X25519 => "x25519",
            TlsGroup::Secp256r1 => "secp256r1",
            TlsGroup::Secp384r1 => "secp384r1",
            TlsGroup::X25519mlkem768 => "x25519mlkem768",
        }
    }
}

/// How the client ends a connection it decides to close.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CloseMode {
    /// TLS close_notify (HTTP/2 GOAWAY first for doh), then FIN.
    #[default]
    Graceful,
    /// FIN without any TLS or HTTP/2 goodbye.
    Fin,
    /// RST (SO_LINGER 0).
    Rst,
    /// QUIC: send nothing more and let the idle timeout end the connection (no
    /// CONNECTION_CLOSE; graceful is CONNECTION_CLOSE with DOQ_NO_ERROR).
    Silent,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    #[default]
    Constant,
    Poisson,
}

/// Open-loop queries per second, closed loop bounded by `in_flight`, or one query per
/// connection.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum Rate {
    #[default]
    Max,
    Qps(f64),
    /// Every connection sends one query as soon as it is established (after the `open_first`
    /// gate), then stays open and silent until the end.
    Once,
}

impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Rate::Max => s.serialize_str("max"),
            Rate::Once => s.serialize_str("once"),
            Rate::Qps(q) => s.serialize_f64(*q),
        }
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(f64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Num(q) => Ok(Rate::Qps(q)),
            Raw::Str(s) if s == "max" => Ok(Rate::Max),
            Raw::Str(s) if s == "once" => Ok(Rate::Once),
            Raw::Str(s) => s.parse().map(Rate::Qps).map_err(|_| {
                serde::de::Error::custom(format!(
                    "rate must be \"max\", \"once\" or a number of queries per second, not {s:?}"
                ))
            }),
        }
    }
}

impl JsonSchema for Rate {
    fn schema_name() -> String {
        "Rate".into()
    }
    fn json_schema(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        serde_json::from_value(serde_json::json!({
            "description": "Open-loop queries per second, \"max\" for a closed loop bounded by in_flight, or \"once\": every connection sends one query when established, then stays open and silent.",
            "oneOf": [{"type": "number", "exclusiveMinimum": 0}, {"const": "max"}, {"const": "once"}]
        }))
        .expect("static schema")
    }
}

/// How long a connection lives: a duration from its establishment, a number of queries, both
/// (whichever comes first), or neither (forever).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Lifetime {
    pub duration_ms: Option<u64>,
    pub queries: Option<u64>,
}

impl Lifetime {
    pub fn is_forever(&self) -> bool {
        self.duration_ms.is_none() && self.queries.is_none()
    }

    /// The lifetime of a slot's first connection: the share `u` (in (0, 1]) of each budget,
    /// at least 1 ms and 1 query. Connections that open together at the start of a run would
    /// otherwise all renew together after one lifetime, and a trial shorter than a lifetime
    /// would renew none; in steady state a connection's age is uniform over its lifetime, so
    /// a uniform `u` per slot gives the steady-state renewal rate (connections ÷ lifetime)
    /// from the start.
    pub fn first(&self, u: f64) -> Lifetime {
        let share = |budget: u64| ((budget as f64 * u.clamp(0.0, 1.0)).ceil() as u64).clamp(1, budget.max(1));
        Lifetime { duration_ms: self.duration_ms.map(share), queries: self.queries.map(share) }
    }
}

/// How a UDP query unanswered is sent again, as a stub resolver does: a query without an answer
/// `timeout_ms` after its last send is sent again, with the same DNS ID and the same octets,
/// until it has been sent `attempts` times in all; then it times out `timeout_ms` after its last
/// send at the latest (the whole query's timeout is `attempts` × `timeout_ms` from its intended
/// time). An answer to any of the sends answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UdpRetry {
    /// How long each try waits for an answer, in ms (1 to 60 000): resolv.conf's `timeout`.
    pub timeout_ms: u64,
    /// Sends of a query in all, the first included (1 to 10; 1 sends no retransmission):
    /// resolv.conf's `attempts`.
    pub attempts: u32,
}

impl UdpRetry {
    /// glibc's stub resolver with one nameserver and no resolv.conf options: `RES_TIMEOUT` (5 s
    /// a try) and `RES_DFLRETRY` (2 tries in all), from `resolv.h`. `res_send.c`'s `send_dg`
    /// waits `retrans << ns` seconds (divided by the number of nameservers for `ns` > 0), so
    /// with one nameserver (`ns` = 0) every try waits the same 5 s, and `__res_context_send`
    /// sends a query `retry` times (resolv.conf's `attempts`) with the same ID: 10 s in all.
    pub const GLIBC: UdpRetry = UdpRetry { timeout_ms: 5_000, attempts: 2 };

    /// The whole query's timeout: every try's.
    pub fn total_ms(&self) -> u64 {
        self.timeout_ms * u64::from(self.attempts)
    }
}

/// Everything `dnscost-engine generate` needs. Serialised back, resolved, into its output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// udp, tcp, dot or doh.
    pub transport: Transport,
    /// Where to send, as address:port.
    pub target: String,
    /// DoH and DoH/3: POST (default) or GET with the dns parameter in base64url.
    pub doh_method: Option<DohMethod>,
    /// DoH only: the request path (default /dns-query).
    pub doh_path: Option<String>,
    /// DoH only: minimal (default) or browser request header fields.
    pub doh_headers: Option<DohHeaders>,
    /// TLS only: PEM file of the CA to trust.
    pub ca_file: Option<PathBuf>,
    /// TLS only: accept any certificate.
    pub insecure: bool,
    /// TLS only: the server name to send and verify (default: the target's address).
    pub sni: Option<String>,
    pub tls_version: TlsVersion,
    pub tls_group: TlsGroup,
    /// TLS only: write secrets in NSS key-log format to this file.
    pub keylog_file: Option<PathBuf>,
    /// Concurrent connection slots (UDP: sockets).
    pub connections: u32,
    pub lifetime: Lifetime,
    /// The client closes a connection left without outstanding queries this long.
    pub idle_timeout_ms: Option<u64>,
    /// Ceiling on new connections per second, over all threads.
    pub open_rate: Option<f64>,
    /// Open every slot's first connection before any query is sent: queries wait until all
    /// first connections are established or have failed, or until the warm-up ends, and an
    /// open loop's schedule starts then (nothing is due while connections open). For
    /// measurements over N open connections, whose set-up would otherwise compete with load.
    pub open_first: bool,
    /// Share of reconnections that try to resume the TLS session (0 to 1).
    pub resumption: Option<f64>,
    /// QUIC: share of resumed connections that send their first query as 0-RTT early data
    /// (0 to 1).
    pub early_data: Option<f64>,
    /// Outstanding queries per connection (UDP: per socket).
    pub in_flight: u32,
    pub close: Option<CloseMode>,
    pub rate: Rate,
    pub arrival: Arrival,
    /// How late a send may be, in µs: the generator's timer wakes on a grid this fine. Finer
    /// costs generator CPU at high rates (one wake per grid slot); latency, measured from the
    /// intended send time, includes up to this much pacing delay. Absent: 50 µs while each
    /// thread sends at most 2 000 queries/s, else 1 000 µs (the start record shows the value used).
    pub pacing_resolution_us: Option<u32>,
    pub duration_ms: u64,
    /// Load sent before the measured period, reported in records marked warmup.
    pub warmup_ms: u64,
    /// A query without an answer this long after its intended send time has timed out. With
    /// `udp_retry` the value given is replaced by `udp_retry.attempts` × `udp_retry.timeout_ms`
    /// (the start record shows the value used).
    pub timeout_ms: u64,
    /// udp only: send an unanswered query again as a stub resolver does (absent: never; a load
    /// generator adds no load it was not asked for). The query's timeout (`timeout_ms`) becomes
    /// `attempts` × `timeout_ms` of this.
    pub udp_retry: Option<UdpRetry>,
    /// dnsperf-format query file; when absent, `synthetic` names are used.
    pub queries_file: Option<PathBuf>,
    /// Number of synthetic names of equal length under `tld` (default 10 000).
    pub synthetic: Option<u64>,
    pub tld: String,
    /// Record type of synthetic queries.
    pub qtype: String,
    /// EDNS(0) UDP payload size to advertise; 0 sends no OPT record.
    pub edns_udp_size: u16,
    pub dnssec_ok: bool,
    /// Pad queries to 128-octet blocks (RFC 8467).
    pub padding: bool,
    pub recursion_desired: bool,
    /// Generator threads, each with its own runtime, connections and share of the rate.
    pub threads: u32,
    /// CPUs to pin the threads to, in turn.
    pub cpus: Vec<u32>,
    /// Local addresses to spread connections over.
    pub sources: Vec<String>,
    pub seed: u64,
    /// JSON-lines output; standard output when absent.
    pub output: Option<PathBuf>,
    /// One JSON line per closed connection.
    pub connections_log: Option<PathBuf>,
    /// A real client's profile (`dnscost observe` extracts them), replayed by `clients` such
    /// clients: [`EngineConfig::apply_profile`] sets transport, connections, rate, idle
    /// timeout, lifetime, close, DoH method and resumption from it.
    pub profile: Option<ClientProfile>,
    /// With `profile`: how many such clients (default 1).
    pub clients: Option<u32>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            transport: Transport::Udp,
            target: String::new(),
            doh_method: None,
            doh_path: None,
            doh_headers: None,
            ca_file: None,
            insecure: false,
            sni: None,
            tls_version: TlsVersion::default(),
            tls_group: TlsGroup::default(),
            keylog_file: None,
            connections: 1,
            lifetime: Lifetime::default(),
            idle_timeout_ms: None,
            open_rate: None,
            open_first: false,
            resumption: None,
            early_data: None,
            in_flight: 16,
            close: None,
            rate: Rate::Max,
            arrival: Arrival::Constant,
            pacing_resolution_us: None,
            duration_ms: 10_000,
            warmup_ms: 0,
            timeout_ms: 2_000,
            udp_retry: None,
            queries_file: None,
            synthetic: None,
            tld: "test".into(),
            qtype: "A".into(),
            edns_udp_size: 1232,
            dnssec_ok: false,
            padding: false,
            recursion_desired: true,
            threads: 1,
            cpus: Vec::new(),
            sources: Vec::new(),
            seed: 1,
            output: None,
            connections_log: None,
            profile: None,
            clients: None,
        }
    }
}

/// A configuration that cannot be run, naming the field at fault.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("{field}: {value} is out of range {range}")]
    OutOfRange { field: &'static str, value: String, range: &'static str },
    #[error("{field} does not apply to {transport}")]
    NotApplicable { field: &'static str, transport: Transport },
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("{0}")]
    Json(String),
}

/// Seven days, the longest duration any field accepts.
const WEEK_MS: u64 = 7 * 24 * 3600 * 1000;

/// CPUs a thread can be pinned to are numbered below the kernel's `CPU_SETSIZE` (glibc's
/// `cpu_set_t` holds 1 024).
pub const CPU_SETSIZE: u32 = 1024;

fn check<T: PartialOrd + fmt::Display>(
    field: &'static str,
    v: T,
    lo: T,
    hi: T,
    range: &'static str,
) -> Result<(), ConfigError> {
    if v >= lo && v <= hi {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange { field, value: v.to_string(), range })
    }
}

impl EngineConfig {
    /// Parses and validates a JSON document.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let c: EngineConfig = serde_json::from_str(text).map_err(|e| ConfigError::Json(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    /// Replays `profile` (if any) as `clients` clients: the fields it sets take its values
    /// over any given beside it; the profile and the count stay, so the resolved configuration
    /// says what it replays. Applying twice gives the same configuration.
    pub fn apply_profile(&mut self) -> Result<(), ConfigError> {
        match self.profile.clone() {
            Some(p) => p.apply(self, self.clients.unwrap_or(1)),
            None => Ok(()),
        }
    }

    /// Checks every bound and every field's relevance to the transport.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let t = self.transport;
        if self.clients.is_some() && self.profile.is_none() {
            return Err(ConfigError::Invalid { field: "clients", reason: "needs a profile to replay".into() });
        }
        if self.target.is_empty() {
            return Err(ConfigError::Invalid { field: "target", reason: "required (address:port)".into() });
        }
        check("connections", self.connections, 1, 1_000_000, "1..=1000000")?;
        check("in_flight", self.in_flight, 1, 65_535, "1..=65535")?;
        check("threads", self.threads, 1, 256, "1..=256")?;
        check("duration_ms", self.duration_ms, 1, WEEK_MS, "1..=604800000")?;
        check("warmup_ms", self.warmup_ms, 0, WEEK_MS, "0..=604800000")?;
        check("timeout_ms", self.timeout_ms, 1, 600_000, "1..=600000")?;
        if let Rate::Qps(q) = self.rate {
            check("rate", q, 1e-3, 1e8, "0.001..=100000000")?;
        }
        if self.connections < self.threads {
            return Err(ConfigError::Invalid {
                field: "threads",
                reason: format!("{} threads need at least as many connections, not {}", self.threads, self.connections),
            });
        }
        if let Some(us) = self.pacing_resolution_us {
            check("pacing_resolution_us", us, 10, 10_000, "10..=10000")?;
        }
        if let Some(n) = self.synthetic {
            check("synthetic", n, 1, 100_000_000, "1..=100000000")?;
        }
        if self.synthetic.is_some() && self.queries_file.is_some() {
            return Err(ConfigError::Invalid {
                field: "synthetic",
                reason: "give either synthetic or queries_file".into(),
            });
        }
        if self.edns_udp_size != 0 {
            check("edns_udp_size", self.edns_udp_size, 512, 65_535, "0 or 512..=65535")?;
        }
        if (self.dnssec_ok || self.padding) && self.edns_udp_size == 0 {
            return Err(ConfigError::Invalid {
                field: "edns_udp_size",
                reason: "dnssec_ok and padding need EDNS".into(),
            });
        }
        dnscost_wire::type_from_str(&self.qtype)
            .map_err(|e| ConfigError::Invalid { field: "qtype", reason: e.to_string() })?;
        dnscost_wire::encode_name(&format!("q0.{}", self.tld), &mut Vec::new())
            .map_err(|e| ConfigError::Invalid { field: "tld", reason: e.to_string() })?;
        for s in &self.sources {
            s.parse::<std::net::IpAddr>().map_err(|_| ConfigError::Invalid {
                field: "sources",
                reason: format!("{s:?} is not an IP address"),
            })?;
        }
        let na = |field| Err(ConfigError::NotApplicable { field, transport: t });
        if !t.has_connections() {
            if !self.lifetime.is_forever() {
                return na("lifetime");
            }
            if self.idle_timeout_ms.is_some() {
                return na("idle_timeout_ms");
            }
            if self.open_rate.is_some() {
                return na("open_rate");
            }
            if self.open_first {
                return na("open_first");
            }
            if self.close.is_some() {
                return na("close");
            }
        }
        if t != Transport::Udp && self.udp_retry.is_some() {
            return na("udp_retry");
        }
        if let Some(r) = self.udp_retry {
            check("udp_retry.timeout_ms", r.timeout_ms, 1, 60_000, "1..=60000")?;
            check("udp_retry.attempts", r.attempts, 1, 10, "1..=10")?;
        }
        if !t.uses_tls() {
            if self.resumption.is_some() {
                return na("resumption");
            }
            if self.ca_file.is_some() {
                return na("ca_file");
            }
            if self.insecure {
                return na("insecure");
            }
            if self.sni.is_some() {
                return na("sni");
            }
            if self.keylog_file.is_some() {
                return na("keylog_file");
            }
        }
        if !t.uses_quic() {
            if self.early_data.is_some() {
                return na("early_data");
            }
            if self.close == Some(CloseMode::Silent) {
                return na("close silent");
            }
        } else if matches!(self.close, Some(CloseMode::Fin | CloseMode::Rst)) {
            return Err(ConfigError::Invalid {
                field: "close",
                reason: format!("{t} closes graceful (CONNECTION_CLOSE) or silent (idle timeout), not fin or rst"),
            });
        }
        if t.uses_quic() && self.tls_version != TlsVersion::Tls13 {
            return Err(ConfigError::Invalid {
                field: "tls_version",
                reason: format!("{t} runs on QUIC, which requires TLS 1.3 (RFC 9001 §4.2): give 1.3"),
            });
        }
        if let Some(e) = self.early_data {
            check("early_data", e, 0.0, 1.0, "0..=1")?;
            if e > 0.0 && self.resumption.unwrap_or(0.0) == 0.0 {
                return Err(ConfigError::Invalid {
                    field: "early_data",
                    reason: "0-RTT needs resumed connections: give resumption > 0".into(),
                });
            }
        }
        if t != Transport::Doh {
            if self.doh_method.is_some() && t != Transport::Doh3 {
                return na("doh_method");
            }
            if self.doh_path.is_some() && !t.is_doh() {
                return na("doh_path");
            }
            if self.doh_headers.is_some() {
                return na("doh_headers");
            }
        }
        if let Some(p) = &self.doh_path {
            if !p.starts_with('/') {
                return Err(ConfigError::Invalid { field: "doh_path", reason: "must start with /".into() });
            }
        }
        if self.ca_file.is_some() && self.insecure {
            return Err(ConfigError::Invalid { field: "insecure", reason: "give either ca_file or insecure".into() });
        }
        if let Some(r) = self.resumption {
            check("resumption", r, 0.0, 1.0, "0..=1")?;
        }
        if let Some(r) = self.open_rate {
            check("open_rate", r, 1e-3, 1e7, "0.001..=10000000")?;
        }
        if let Some(q) = self.lifetime.queries {
            check("lifetime.queries", q, 1, u64::MAX / 2, ">=1")?;
        }
        if let Some(d) = self.lifetime.duration_ms {
            check("lifetime.duration_ms", d, 1, WEEK_MS, "1..=604800000")?;
        }
        if let Some(d) = self.idle_timeout_ms {
            check("idle_timeout_ms", d, 1, WEEK_MS, "1..=604800000")?;
        }
        if self.rate == Rate::Once && (!self.lifetime.is_forever() || self.idle_timeout_ms.is_some()) {
            return Err(ConfigError::Invalid {
                field: "rate",
                reason: "once needs connections without a lifetime or idle timeout".into(),
            });
        }
        for &cpu in &self.cpus {
            check("cpus", cpu, 0, CPU_SETSIZE - 1, "0..=1023")?;
        }
        Ok(())
    }

    /// The DoH path, defaulted.
    pub fn doh_path(&self) -> &str {
        self.doh_path.as_deref().unwrap_or("/dns-query")
    }

    /// The pacing resolution in µs, defaulted from the rate per thread.
    pub fn pacing_resolution_us(&self) -> u32 {
        self.pacing_resolution_us.unwrap_or(match self.rate {
            Rate::Qps(q) if q / self.threads as f64 <= 2_000.0 => 50,
            _ => 1_000,
        })
    }

    /// A query's whole timeout in ms: `timeout_ms`, or with `udp_retry` every try's.
    pub fn query_timeout_ms(&self) -> u64 {
        self.udp_retry.map_or(self.timeout_ms, |r| r.total_ms())
    }

    /// The number of synthetic names, defaulted (when no query file is given).
    pub fn synthetic_count(&self) -> u64 {
        self.synthetic.unwrap_or(10_000)
    }
}

/// Parses `10s`, `1.5s`, `250ms`, `2m`, `1h` or a bare number of seconds into milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60e3)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600e3)
    } else {
        (s, 1e3)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok((v * mult).round() as u64),
        _ => Err(format!("{s:?} is not a duration (examples: 10s, 250ms, 2m)")),
    }
}

/// Parses `forever`, a duration (`30s`), a query count (`100q`), or both (`30s,100q`).
pub fn parse_lifetime(s: &str) -> Result<Lifetime, String> {
    let mut l = Lifetime::default();
    if s.trim() == "forever" {
        return Ok(l);
    }
    for part in s.split(',').map(str::trim) {
        if let Some(q) = part.strip_suffix('q') {
            l.queries = Some(q.parse().map_err(|_| format!("{part:?} is not a query count (example: 100q)"))?);
        } else {
            l.duration_ms = Some(parse_duration_ms(part)?);
        }
    }
    Ok(l)
}

/// Parses `--udp-retry`: `TIMEOUT,ATTEMPTS` (a per-try timeout as for the other durations, and
/// the sends in all, e.g. `5s,2` or `500ms,3`), or `glibc` for [`UdpRetry::GLIBC`].
pub fn parse_udp_retry(s: &str) -> Result<UdpRetry, String> {
    let s = s.trim();
    if s == "glibc" {
        return Ok(UdpRetry::GLIBC);
    }
    let bad = || format!("{s:?} is not TIMEOUT,ATTEMPTS (examples: 5s,2, 500ms,3) nor glibc");
    let (timeout, attempts) = s.split_once(',').ok_or_else(bad)?;
    Ok(UdpRetry {
        timeout_ms: parse_duration_ms(timeout).map_err(|_| bad())?,
        attempts: attempts.trim().parse().map_err(|_| bad())?,
    })
}

/// Parses a CPU list such as `1`, `0,2` or `2-5,8`.
pub fn parse_cpus(s: &str) -> Result<Vec<u32>, String> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("{part:?} is not a CPU or a range of CPUs");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b || b - a > 4096 {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_tokens_are_the_serialised_names() {
        for v in [TlsVersion::Tls12, TlsVersion::Tls13] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
        }
        for g in [TlsGroup::X25519, TlsGroup::Secp256r1, TlsGroup::Secp384r1, TlsGroup::X25519mlkem768] {
            assert_eq!(serde_json::to_value(g).unwrap(), g.as_str());
        }
    }

    #[test]
    fn a_first_lifetime_is_a_share_of_each_budget_never_zero() {
        let l = Lifetime { duration_ms: Some(30_000), queries: Some(100) };
        assert_eq!(l.first(1.0), l);
        assert_eq!(l.first(0.5), Lifetime { duration_ms: Some(15_000), queries: Some(50) });
        assert_eq!(l.first(0.0), Lifetime { duration_ms: Some(1), queries: Some(1) });
        let one = Lifetime { duration_ms: None, queries: Some(1) };
        assert_eq!(one.first(0.01), one);
        assert!(Lifetime::default().first(0.3).is_forever());
    }

    fn cfg(json: &str) -> Result<EngineConfig, ConfigError> {
        EngineConfig::from_json(json)
    }

    #[test]
    fn minimal_config_gets_defaults() {
        let c = cfg(r#"{"transport":"dot","target":"127.0.0.1:853"}"#).unwrap();
        assert_eq!(c.connections, 1);
        assert_eq!(c.rate, Rate::Max);
        assert_eq!(c.tls_group, TlsGroup::X25519);
        assert_eq!(c.synthetic_count(), 10_000);
        assert_eq!(c.pacing_resolution_us(), 1_000);
        let slow = cfg(r#"{"transport":"udp","target":"a:1","rate":4000,"threads":2,"connections":2}"#).unwrap();
        assert_eq!(slow.pacing_resolution_us(), 50);
        assert!(cfg(r#"{"transport":"udp","target":"a:1","pacing_resolution_us":5}"#).is_err());
        let round = serde_json::to_string(&c).unwrap();
        assert_eq!(EngineConfig::from_json(&round).unwrap(), c);
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let e = cfg(r#"{"transport":"udp","target":"127.0.0.1:53","conections":3}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `conections`"), "{e}");
        assert!(cfg(r#"{"transport":"udp","target":"x","lifetime":{"secs":1}}"#).is_err());
    }

    #[test]
    fn values_are_bounded() {
        let e = cfg(r#"{"transport":"tcp","target":"a:1","in_flight":0}"#).unwrap_err();
        assert_eq!(e.to_string(), "in_flight: 0 is out of range 1..=65535");
        assert!(cfg(r#"{"transport":"dot","target":"a:1","resumption":1.5}"#).is_err());
        assert!(cfg(r#"{"transport":"tcp","target":"a:1","rate":-3}"#).is_err());
        assert!(cfg(r#"{"transport":"tcp","target":"a:1","rate":"fast"}"#).is_err());
        assert_eq!(cfg(r#"{"transport":"tcp","target":"a:1","rate":500}"#).unwrap().rate, Rate::Qps(500.0));
        assert!(cfg(r#"{"transport":"tcp","target":""}"#).is_err());
        assert!(cfg(r#"{"transport":"tcp","target":"a:1","threads":4,"connections":2}"#).is_err());
        assert!(cfg(r#"{"transport":"tcp","target":"a:1","sources":["nope"]}"#).is_err());
    }

    #[test]
    fn knobs_must_apply_to_the_transport() {
        let e = cfg(r#"{"transport":"udp","target":"a:1","lifetime":{"queries":1}}"#).unwrap_err();
        assert_eq!(e.to_string(), "lifetime does not apply to udp");
        assert!(cfg(r#"{"transport":"tcp","target":"a:1","resumption":0.5}"#).is_err());
        assert!(cfg(r#"{"transport":"dot","target":"a:1","doh_method":"get"}"#).is_err());
        assert!(cfg(r#"{"transport":"doh","target":"a:1","doh_method":"get","resumption":1}"#).is_ok());
        // QUIC: 0-RTT needs resumption, closes are graceful or silent, doh3 is POST only.
        assert!(cfg(r#"{"transport":"doq","target":"a:1","resumption":1,"early_data":0.5}"#).is_ok());
        assert!(cfg(r#"{"transport":"doq","target":"a:1","early_data":0.5}"#).is_err());
        assert!(cfg(r#"{"transport":"dot","target":"a:1","resumption":1,"early_data":0.5}"#).is_err());
        assert!(cfg(r#"{"transport":"doq","target":"a:1","close":"silent"}"#).is_ok());
        assert!(cfg(r#"{"transport":"doq","target":"a:1","close":"rst"}"#).is_err());
        assert!(cfg(r#"{"transport":"tcp","target":"a:1","close":"silent"}"#).is_err());
        assert!(cfg(r#"{"transport":"doh3","target":"a:1","doh_path":"/q","doh_method":"post"}"#).is_ok());
        assert!(cfg(r#"{"transport":"doh3","target":"a:1","doh_method":"get"}"#).is_ok());
        assert!(cfg(r#"{"transport":"doq","target":"a:1","doh_path":"/q"}"#).is_err());
        // QUIC is TLS 1.3 only (RFC 9001 §4.2).
        for t in ["doq", "doh3"] {
            let e = cfg(&format!(r#"{{"transport":"{t}","target":"a:1","tls_version":"1.2"}}"#)).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("tls_version: {t} runs on QUIC, which requires TLS 1.3 (RFC 9001 §4.2): give 1.3")
            );
            assert!(cfg(&format!(r#"{{"transport":"{t}","target":"a:1","tls_version":"1.3"}}"#)).is_ok());
        }
        assert!(cfg(r#"{"transport":"dot","target":"a:1","tls_version":"1.2"}"#).is_ok());
        assert!(cfg(r#"{"transport":"doh","target":"a:1","doh_path":"dns"}"#).is_err());
        assert!(cfg(r#"{"transport":"tcp","target":"a:1","doh_headers":"browser"}"#).is_err());
        assert_eq!(
            cfg(r#"{"transport":"doh","target":"a:1","doh_headers":"browser"}"#).unwrap().doh_headers,
            Some(DohHeaders::Browser)
        );
        assert!(cfg(r#"{"transport":"doh","target":"a:1","doh_headers":"chrome"}"#).is_err());
    }

    #[test]
    fn human_forms_parse() {
        assert_eq!(parse_duration_ms("1.5s"), Ok(1500));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert_eq!(parse_duration_ms("2m"), Ok(120_000));
        assert_eq!(parse_duration_ms("3"), Ok(3000));
        assert!(parse_duration_ms("soon").is_err());
        assert_eq!(parse_lifetime("forever"), Ok(Lifetime::default()));
        assert_eq!(parse_lifetime("1q"), Ok(Lifetime { duration_ms: None, queries: Some(1) }));
        assert_eq!(parse_lifetime("30s,100q"), Ok(Lifetime { duration_ms: Some(30_000), queries: Some(100) }));
        assert!(parse_lifetime("xq").is_err());
        assert_eq!(parse_cpus("1,3-5"), Ok(vec![1, 3, 4, 5]));
        assert!(parse_cpus("5-3").is_err());
    }

    #[test]
    fn udp_retry_is_bounded_udp_only_and_sets_the_query_timeout() {
        let c = cfg(r#"{"transport":"udp","target":"a:1","udp_retry":{"timeout_ms":5000,"attempts":2}}"#).unwrap();
        assert_eq!(c.udp_retry, Some(UdpRetry::GLIBC));
        assert_eq!((c.timeout_ms, c.query_timeout_ms()), (2_000, 10_000), "every try's, whatever timeout_ms says");
        assert_eq!(cfg(r#"{"transport":"udp","target":"a:1"}"#).unwrap().query_timeout_ms(), 2_000);
        let e = cfg(r#"{"transport":"tcp","target":"a:1","udp_retry":{"timeout_ms":5000,"attempts":2}}"#).unwrap_err();
        assert_eq!(e.to_string(), "udp_retry does not apply to tcp");
        let e = cfg(r#"{"transport":"udp","target":"a:1","udp_retry":{"timeout_ms":0,"attempts":2}}"#).unwrap_err();
        assert_eq!(e.to_string(), "udp_retry.timeout_ms: 0 is out of range 1..=60000");
        let e = cfg(r#"{"transport":"udp","target":"a:1","udp_retry":{"timeout_ms":500,"attempts":11}}"#).unwrap_err();
        assert_eq!(e.to_string(), "udp_retry.attempts: 11 is out of range 1..=10");
        assert!(cfg(r#"{"transport":"udp","target":"a:1","udp_retry":{"timeout_ms":60000,"attempts":10}}"#).is_ok());
        assert!(cfg(r#"{"transport":"udp","target":"a:1","udp_retry":{"timeout_ms":500}}"#).is_err());
        let e = cfg(r#"{"transport":"udp","target":"a:1","udp_retry":{"timeout_ms":5,"attempts":2,"x":1}}"#);
        assert!(e.unwrap_err().to_string().contains("unknown field `x`"));
        assert_eq!(parse_udp_retry("glibc"), Ok(UdpRetry::GLIBC));
        assert_eq!(parse_udp_retry("5s,2"), Ok(UdpRetry::GLIBC));
        assert_eq!(parse_udp_retry("500ms, 3"), Ok(UdpRetry { timeout_ms: 500, attempts: 3 }));
        for bad in ["5s", "5s,", "soon,2", "5s,two", "5s,-1", ""] {
            assert!(parse_udp_retry(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn once_needs_connections_that_live_to_the_end() {
        let c = cfg(r#"{"transport":"tcp","target":"a:1","rate":"once"}"#).unwrap();
        assert_eq!(c.rate, Rate::Once);
        assert_eq!(serde_json::to_value(c.rate).unwrap(), "once");
        let e = cfg(r#"{"transport":"dot","target":"a:1","rate":"once","lifetime":{"queries":1}}"#).unwrap_err();
        assert_eq!(e.to_string(), "rate: once needs connections without a lifetime or idle timeout");
        assert!(cfg(r#"{"transport":"tcp","target":"a:1","rate":"once","idle_timeout_ms":5}"#).is_err());
        assert!(cfg(r#"{"transport":"udp","target":"a:1","rate":"once"}"#).is_ok());
    }

    #[test]
    fn cpus_fit_a_cpu_set() {
        assert!(cfg(r#"{"transport":"udp","target":"a:1","cpus":[1023]}"#).is_ok());
        let e = cfg(r#"{"transport":"udp","target":"a:1","cpus":[0,1024]}"#).unwrap_err();
        assert_eq!(e.to_string(), "cpus: 1024 is out of range 0..=1023");
    }
}
