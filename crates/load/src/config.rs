//! The engine's input contract: one JSON document, unknown fields rejected, every value bounded.

use crate::profile::ClientProfile;
use crate::vocabulary::{
    Arrival, CloseMode, DohHeaders, DohMethod, Lifetime, Rate, TlsGroup, TlsVersion, Transport, UdpRetry,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

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
    /// udp, tcp, dot and doh: a PROXY protocol v2 header (HAProxy's `proxy-protocol.txt`)
    /// ahead of every datagram, or at the start of every connection before TLS, claiming that
    /// the queries come from a client of this network (ADDRESS/PREFIX, the target's address
    /// family): slot `n` (a UDP socket or a connection slot) is its first address plus `n`, so
    /// that one load host stands for as many clients as it has slots. The target must accept
    /// PROXY v2 from the engine's address.
    pub proxy_v2: Option<String>,
    /// An EDNS Client Subnet option (RFC 7871) in every query, as a forwarder adds for its
    /// client: this network (ADDRESS/PREFIX; SOURCE PREFIX-LENGTH is its prefix). Needs EDNS.
    pub client_subnet: Option<String>,
    /// A DNS cookie option (RFC 7873) in every query, in hexadecimal: 16 digits, a client
    /// cookie alone (a client's first query); 32 to 80, a client cookie and the server cookie
    /// the target gave it (every later query). Needs EDNS.
    pub cookie: Option<String>,
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
    /// A population: classes of clients run at once, each with its own transport and shape,
    /// counted apart ([`EngineConfig::resolve_classes`]). Absent or empty: one class, this
    /// configuration.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClientClass>,
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
            proxy_v2: None,
            client_subnet: None,
            cookie: None,
            seed: 1,
            output: None,
            connections_log: None,
            profile: None,
            clients: None,
            classes: Vec::new(),
        }
    }
}

/// One class of a population: its name and the fields of [`EngineConfig`] it sets over the
/// run's own (typically `transport`, `target`, its TLS fields, `profile` and `clients`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientClass {
    /// The class's name in the records (unique in the run).
    pub name: String,
    /// Fields of the engine configuration, over the run's; not the run's phases and files
    /// (`SHARED`), which every class shares.
    #[serde(default)]
    pub config: serde_json::Map<String, serde_json::Value>,
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
            Some(p) => replay(&p, self, self.clients.unwrap_or(1)),
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
        // A population's classes have connections of their own (and threads to match).
        if self.connections < self.threads && self.classes.is_empty() {
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
        if (self.dnssec_ok || self.padding || self.client_subnet.is_some() || self.cookie.is_some())
            && self.edns_udp_size == 0
        {
            return Err(ConfigError::Invalid {
                field: "edns_udp_size",
                reason: "dnssec_ok, padding, client_subnet and cookie need EDNS".into(),
            });
        }
        if let Some(network) = &self.client_subnet {
            crate::ClientNetwork::parse(network)
                .map_err(|reason| ConfigError::Invalid { field: "client_subnet", reason })?;
        }
        if let Some(hex) = &self.cookie {
            crate::parse_cookie(hex).map_err(|reason| ConfigError::Invalid { field: "cookie", reason })?;
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
        if let Some(network) = &self.proxy_v2 {
            if t.uses_quic() {
                return na("proxy_v2");
            }
            let net = crate::ClientNetwork::parse(network)
                .map_err(|reason| ConfigError::Invalid { field: "proxy_v2", reason })?;
            if let Ok(target) = self.target.parse::<std::net::SocketAddr>() {
                if target.is_ipv4() != net.is_ipv4() {
                    return Err(ConfigError::Invalid {
                        field: "proxy_v2",
                        reason: format!("{network} is not of the target's address family ({target})"),
                    });
                }
            }
        }
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

/// Sets `config` to replay `clients` clients of profile `p`: their connections, their aggregate
/// query rate (open loop), and each connection's idle timeout, lifetime and close.
fn replay(p: &ClientProfile, config: &mut EngineConfig, clients: u32) -> Result<(), ConfigError> {
    let invalid = |field: &'static str, reason: String| ConfigError::Invalid { field, reason };
    if clients == 0 {
        return Err(invalid("clients", "must be at least 1".into()));
    }
    if p.query_interval_ms == 0 || p.connections == 0 || p.queries_per_resolution == 0 {
        return Err(invalid(
            "profile",
            format!("{}: query_interval_ms, connections and queries_per_resolution must be positive", p.name),
        ));
    }
    config.transport = p.transport;
    config.connections = clients.checked_mul(p.connections).ok_or_else(|| {
        invalid("clients", format!("{clients} clients of {} connections are too many", p.connections))
    })?;
    let per_client = f64::from(p.queries_per_resolution) * 1000.0 / p.query_interval_ms as f64;
    config.rate = Rate::Qps(per_client * f64::from(clients));
    config.idle_timeout_ms = p.idle_timeout_ms;
    if let Some(l) = p.lifetime {
        config.lifetime = l;
    }
    if p.close.is_some() {
        config.close = p.close;
    }
    if p.doh_method.is_some() {
        config.doh_method = p.doh_method;
    }
    if let Some(r) = p.resumption {
        if !(0.0..=1.0).contains(&r) {
            return Err(invalid("profile", format!("{}: resumption {r} is not a share in 0..=1", p.name)));
        }
        config.resumption = Some(r);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::*;

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
    fn a_proxy_v2_network_is_a_network_of_the_targets_family_over_udp_or_tcp() {
        for t in ["udp", "tcp", "dot", "doh"] {
            let ok = cfg(&format!(r#"{{"transport":"{t}","target":"127.0.0.1:53","proxy_v2":"10.0.0.0/16"}}"#));
            assert_eq!(ok.unwrap().proxy_v2.as_deref(), Some("10.0.0.0/16"));
        }
        let e = cfg(r#"{"transport":"doq","target":"127.0.0.1:853","proxy_v2":"10.0.0.0/16"}"#).unwrap_err();
        assert_eq!(e.to_string(), "proxy_v2 does not apply to doq");
        let e = cfg(r#"{"transport":"udp","target":"127.0.0.1:53","proxy_v2":"fd00::/64"}"#).unwrap_err();
        assert_eq!(e.to_string(), "proxy_v2: fd00::/64 is not of the target's address family (127.0.0.1:53)");
        let e = cfg(r#"{"transport":"udp","target":"127.0.0.1:53","proxy_v2":"10.0.0.0"}"#).unwrap_err();
        assert!(e.to_string().starts_with("proxy_v2: \"10.0.0.0\" is not a network"), "{e}");
    }

    #[test]
    fn a_client_subnet_and_a_cookie_are_checked_and_need_edns() {
        let ok = cfg(r#"{"transport":"doq","target":"a:1","client_subnet":"fd00::/56","cookie":"0102030405060708"}"#);
        assert_eq!(ok.unwrap().client_subnet.as_deref(), Some("fd00::/56"));
        let e = cfg(r#"{"transport":"udp","target":"a:1","client_subnet":"10.0.0.0/33"}"#).unwrap_err();
        assert!(e.to_string().starts_with("client_subnet: "), "{e}");
        let e = cfg(r#"{"transport":"udp","target":"a:1","cookie":"0102"}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cookie: a cookie is 8 octets (a client cookie) or 16 to 40 (client and server cookies), not 2"
        );
        let e = cfg(r#"{"transport":"udp","target":"a:1","cookie":"0102030405060708","edns_udp_size":0}"#).unwrap_err();
        assert_eq!(e.to_string(), "edns_udp_size: dnssec_ok, padding, client_subnet and cookie need EDNS");
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

    #[test]
    fn a_profile_scales_to_many_clients() {
        let p: ClientProfile = serde_json::from_str(
            r#"{"name":"dnss-60s","transport":"doh","query_interval_ms":60000,"idle_timeout_ms":30000,
                "close":"graceful","queries_per_resolution":2}"#,
        )
        .unwrap();
        let mut c = EngineConfig::default();
        replay(&p, &mut c, 1000).unwrap();
        assert_eq!((c.transport, c.connections, c.idle_timeout_ms), (Transport::Doh, 1000, Some(30000)));
        match c.rate {
            Rate::Qps(q) => assert!((q - 2000.0 * 1000.0 / 60000.0).abs() < 1e-9, "{q}"),
            r => panic!("{r:?}"),
        }
        assert!(replay(&p, &mut c, 0).is_err());
        // In the configuration itself, applied once or twice alike.
        let mut d = EngineConfig { profile: Some(p.clone()), clients: Some(1000), ..EngineConfig::default() };
        d.apply_profile().unwrap();
        let once = d.clone();
        d.apply_profile().unwrap();
        assert_eq!((d.connections, d.idle_timeout_ms), (1000, Some(30000)));
        assert_eq!(d, once);
        let orphan = EngineConfig { clients: Some(3), target: "127.0.0.1:53".into(), ..EngineConfig::default() };
        assert!(orphan.validate().is_err(), "clients without a profile");
        assert!(serde_json::from_str::<ClientProfile>(
            r#"{"name":"x","transport":"doh","query_interval_ms":1,"nope":1}"#
        )
        .is_err());
    }
}
