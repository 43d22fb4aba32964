//! The words of the engine's configuration: transports, TLS versions and groups, close modes,
//! arrivals, rates, lifetimes and UDP retries, each with its one token (the same in every spec,
//! flag, record and file name) and its JSON schema.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

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

/// The client addresses a PROXY protocol v2 header claims (`proxy_v2`), ADDRESS/PREFIX: slot
/// `n` (a UDP socket or a connection slot) is the network's first address plus `n`, modulo
/// the network's size, so that one load host stands for as many clients as it has slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientNetwork {
    first: std::net::IpAddr,
    /// The addresses in the network, less one (saturated at 2^64 - 1).
    last_offset: u64,
    prefix: u8,
}

impl ClientNetwork {
    /// Parses `10.0.0.0/8` or `fd00::/64` (the address's host bits are ignored).
    pub fn parse(s: &str) -> Result<Self, String> {
        use std::net::IpAddr;
        let bad = || format!("{s:?} is not a network (examples: 10.0.0.0/16, fd00::/64)");
        let (addr, prefix) = s.trim().split_once('/').ok_or_else(bad)?;
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let prefix: u32 = prefix.parse().map_err(|_| bad())?;
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > bits {
            return Err(format!("{s:?}: a prefix of {prefix} bits is longer than the address's {bits}"));
        }
        let host = bits - prefix;
        let (first, last_offset) = match addr {
            IpAddr::V4(a) => {
                let mask = if host == 32 { 0 } else { u32::MAX << host };
                (IpAddr::V4((u32::from(a) & mask).into()), (!mask) as u64)
            }
            IpAddr::V6(a) => {
                let mask = if host == 128 { 0 } else { u128::MAX << host };
                let offset = u64::try_from(!mask).unwrap_or(u64::MAX);
                (IpAddr::V6((u128::from(a) & mask).into()), offset)
            }
        };
        Ok(ClientNetwork { first, last_offset, prefix: prefix as u8 })
    }

    /// Slot `n`'s address.
    pub fn address(&self, n: u64) -> std::net::IpAddr {
        use std::net::IpAddr;
        let offset = if self.last_offset == u64::MAX { n } else { n % (self.last_offset + 1) };
        match self.first {
            IpAddr::V4(a) => IpAddr::V4((u32::from(a) + offset as u32).into()),
            IpAddr::V6(a) => IpAddr::V6((u128::from(a) + u128::from(offset)).into()),
        }
    }

    /// Whether its addresses are IPv4.
    pub fn is_ipv4(&self) -> bool {
        self.first.is_ipv4()
    }

    /// The network as an EDNS Client Subnet option states it: its first address and its prefix.
    pub fn client_subnet(&self) -> dnscost_wire::ClientSubnet {
        dnscost_wire::ClientSubnet { address: self.first, source_prefix: self.prefix }
    }
}

/// A DNS cookie given in hexadecimal (16 digits: a client cookie; 32 to 80: client and server).
pub fn parse_cookie(hex: &str) -> Result<dnscost_wire::Cookie, String> {
    let hex = hex.trim();
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    if !hex.len().is_multiple_of(2) || !hex.bytes().all(|c| digit(c).is_some()) {
        return Err(format!("{hex:?} is not hexadecimal octets"));
    }
    let octets: Vec<u8> =
        hex.as_bytes().chunks(2).map(|p| digit(p[0]).unwrap_or(0) << 4 | digit(p[1]).unwrap_or(0)).collect();
    dnscost_wire::Cookie::new(&octets)
}

#[cfg(test)]
mod client_network_tests {
    use super::ClientNetwork;

    #[test]
    fn slots_take_the_networks_addresses_in_turn_and_wrap() {
        let n = ClientNetwork::parse("10.9.8.7/30").unwrap();
        let got: Vec<String> = (0..6).map(|i| n.address(i).to_string()).collect();
        assert_eq!(got, ["10.9.8.4", "10.9.8.5", "10.9.8.6", "10.9.8.7", "10.9.8.4", "10.9.8.5"]);
        assert_eq!(ClientNetwork::parse("192.0.2.1/32").unwrap().address(5).to_string(), "192.0.2.1");
        assert_eq!(ClientNetwork::parse("fd00::/64").unwrap().address(65_537).to_string(), "fd00::1:1");
        assert_eq!(ClientNetwork::parse("0.0.0.0/0").unwrap().address(1 << 32).to_string(), "0.0.0.0");
    }

    #[test]
    fn a_network_states_itself_as_a_client_subnet() {
        let s = ClientNetwork::parse("198.51.100.77/20").unwrap().client_subnet();
        assert_eq!((s.address.to_string().as_str(), s.source_prefix), ("198.51.96.0", 20));
    }

    #[test]
    fn a_cookie_is_8_or_16_to_40_octets_in_hexadecimal() {
        assert_eq!(super::parse_cookie("0102030405060708").unwrap().octets(), [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(super::parse_cookie(&"ab".repeat(24)).unwrap().octets(), [0xab; 24]);
        for bad in ["", "010203", "0g02030405060708", "0102030405060708a", &"00".repeat(41)] {
            assert!(super::parse_cookie(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_network_is_an_address_and_a_prefix_within_its_bits() {
        for bad in ["10.0.0.0", "10.0.0.0/33", "fd00::/129", "ten/8", "10.0.0.0/x"] {
            assert!(ClientNetwork::parse(bad).is_err(), "{bad}");
        }
    }
}
