//! A capture's DNS traffic as flows, one record each: a TCP connection (Do53 over TCP, DoT,
//! DoH), a QUIC connection (DoQ, DoH/3: one UDP 4-tuple), or one client address's Do53 over UDP.
//!
//! The server side is the one on a DNS port (53, 853, 443), optionally only at the addresses
//! asked. Per flow: when it opened and ended, who closed it and how, its octets and packets,
//! and the queries the client sent with their times: counted exactly for Do53 (each DNS
//! message, with its type), estimated for the encrypted transports from what is in clear
//! (`queries_exact` false) from the client's TLS application-data records for DoT and DoH:
//! the client's TLS 1.3 Finished and alerts left out; for DoH, records too small to carry a
//! request joined with the records next to them that the client sent before the server's next
//! (Go's HTTP/2 client writes a request's HEADERS and DATA in records of their own), and what is
//! still too small left out. Each such unit carries as many queries as its size is multiples of
//! the flow's typical (median) unit, rounded (DoH: rounded down; several go together when
//! queries wait for a handshake), but for DoH's first, which also carries the HTTP/2 preface
//! and counts as one (none when it is only the preface). QUIC
//! short-header packets large enough to carry a query count one each for DoQ and DoH/3. The TLS
//! hellos give the name asked, the protocols offered, whether a session was offered for
//! resumption and whether the server resumed it; a QUIC client's 0-RTT packets show it resumed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use crate::decrypt::{KeyLog, Opener, QueryCounter};

use serde::Serialize;

use crate::packet::{Packet, Segment, ACK, FIN, RST, SYN};
use crate::stream::{qtype, Frame, Framer, Framing, Reassembly};
use crate::tls;

/// The ports a DNS server answers on, and what a flow to each is.
pub fn transport_of(tcp: bool, port: u16) -> Option<&'static str> {
    match (tcp, port) {
        (false, 53) => Some("udp"),
        (true, 53) => Some("tcp"),
        (true, 853) => Some("dot"),
        (true, 443) => Some("doh"),
        (false, 853) => Some("doq"),
        (false, 443) => Some("doh3"),
        _ => None,
    }
}

/// A DoH turn carries a request when its plaintext is at least this long (a SETTINGS
/// acknowledgement, a WINDOW_UPDATE or a PING is shorter).
const DOH_REQUEST_MIN: usize = 40;
/// TLS 1.3 record overhead beyond the plaintext: its content type and an AEAD tag.
const TLS13_OVERHEAD: usize = 17;
/// A DoH client's first request-sized record is the HTTP/2 preface alone (its SETTINGS and a
/// WINDOW_UPDATE, no request) when its plaintext is at most this long.
const DOH_PREFACE_MAX: usize = 100;
/// An ended TCP connection's record waits this long (capture time) for its last packets.
const LINGER_US: u64 = 10_000_000;
/// A QUIC short-header packet carries a query when its datagram is at least this long (an
/// acknowledgement alone is shorter).
const QUIC_QUERY_MIN: usize = 60;

/// Who closed a connection first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Closer {
    Client,
    Server,
    /// Not closed in the capture (always for Do53 over UDP and QUIC).
    None,
}

/// One flow's record (a line of `dnscost-engine capture`'s output).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Flow {
    pub transport: &'static str,
    pub client: IpAddr,
    /// 0 for Do53 over UDP (one record per client address).
    pub client_port: u16,
    pub server: IpAddr,
    pub server_port: u16,
    pub opened_us: u64,
    pub closed_us: u64,
    pub closer: Closer,
    /// `fin`, `rst`, `fin+rst` or `none`.
    pub how: String,
    /// The capture saw the connection open (its SYN; for QUIC its Initial packet).
    pub seen_open: bool,
    pub queries: u64,
    /// Do53's DNS responses (not counted for the encrypted transports).
    pub responses: u64,
    pub queries_exact: bool,
    /// When each query was sent (µs since the Unix epoch).
    pub query_us: Vec<u64>,
    /// Do53: queries per query type.
    pub qtypes: BTreeMap<u16, u64>,
    pub sni: Option<String>,
    pub alpn: Vec<String>,
    /// `1.3`, `1.2`, ... from the ServerHello.
    pub tls_version: Option<String>,
    /// The client offered a session to resume (TLS) or sent 0-RTT packets (QUIC).
    pub resumption_offered: Option<bool>,
    /// The server resumed it (TLS 1.3's pre-shared key; QUIC: 0-RTT seen).
    pub resumed: Option<bool>,
    pub early_data: bool,
    pub octets_from_client: u64,
    pub octets_from_server: u64,
    pub packets_from_client: u64,
    pub packets_from_server: u64,
    /// Octets of a TCP connection were not captured (a packet dropped or cut short): reading
    /// went on at the next segment, and the counts are not exact.
    pub gap: bool,
}

#[derive(Debug)]
struct Live {
    flow: Flow,
    client_stream: Reassembly,
    server_stream: Reassembly,
    client_frames: Framer,
    server_frames: Framer,
    client_records: u64,
    /// The client's application-data records that may carry queries: (time, plaintext octets,
    /// turn: how many of the server's application-data records came before it).
    carriers: Vec<(u64, usize, u64)>,
    /// The server's application-data records so far.
    server_records: u64,
    /// With a key log: the client's records opened and their queries counted exactly.
    opened: Option<Opened>,
    fin: [bool; 2],
    rst: bool,
    /// When the connection ended (closed both ways or reset).
    ended_us: Option<u64>,
}

type Key = (bool, IpAddr, u16, IpAddr, u16);

/// A TLS flow's client records as a key log opens them (see `decrypt`).
#[derive(Debug)]
struct Opened {
    keylog: Arc<KeyLog>,
    random: Option<[u8; 32]>,
    opener: Option<Opener>,
    counter: QueryCounter,
    /// When each query counted was sent (its record's time).
    query_us: Vec<u64>,
    /// A record did not open, was not kept whole, or came under a key the log does not give
    /// (a key update, 0-RTT data): the estimate stands.
    failed: bool,
}

impl Opened {
    /// Whether every application-data record of the client was opened.
    fn complete(&self) -> bool {
        self.opener.is_some() && !self.failed
    }

    fn record(&mut self, fr: &Frame) {
        let Some(opener) = self.opener.as_mut().filter(|_| !self.failed) else { return };
        let len = fr.len as u16;
        if fr.head.len() != fr.len {
            self.failed = true;
            return;
        }
        match opener.open([23, 3, 3, (len >> 8) as u8, len as u8], &fr.head) {
            Some((23, plain)) => {
                let n = self.counter.push(&plain);
                self.query_us.extend(std::iter::repeat_n(fr.ts, n as usize));
            }
            Some((21, _)) => {}
            // A post-handshake message: a KeyUpdate (24) changes the key; tickets do not.
            Some((22, plain)) if plain.first() != Some(&24) => {}
            _ => self.failed = true,
        }
    }
}

/// The flows of a capture, fed packet by packet in capture order.
#[derive(Debug, Default)]
pub struct Flows {
    servers: HashSet<IpAddr>,
    live: HashMap<Key, Live>,
    done: Vec<Flow>,
    swept_us: u64,
    /// Do53 queries' names and types, in capture order, when asked for ([`Flows::keep_names`]).
    names: Option<Vec<(String, u16)>>,
    /// A key log, to open DoT and DoH clients' TLS 1.3 records ([`Flows::with_keylog`]).
    keylog: Option<Arc<KeyLog>>,
    /// Packets that were TCP or UDP on a DNS port.
    pub dns_packets: u64,
}

impl Flows {
    /// Flows with the servers at `servers` (empty: any address on a DNS port).
    pub fn new(servers: impl IntoIterator<Item = IpAddr>) -> Self {
        Flows { servers: servers.into_iter().collect(), ..Default::default() }
    }

    /// Opens the DoT and DoH connections' client records whose secrets `keylog` holds, so
    /// that their queries are counted exactly (`queries_exact`).
    pub fn with_keylog(mut self, keylog: KeyLog) -> Self {
        self.keylog = Some(Arc::new(keylog));
        self
    }

    /// Keeps every Do53 query's name and type, for [`Flows::take_names`].
    pub fn keep_names(mut self) -> Self {
        self.names = Some(Vec::new());
        self
    }

    /// The Do53 queries' names (lower case, absolute, in presentation format: octets that need
    /// it written `\DDD`) and types since the last call; a query without a question that reads
    /// as a name (none, cut short, a compression pointer, longer than 255 octets) is left out.
    pub fn take_names(&mut self) -> Vec<(String, u16)> {
        self.names.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The flows ended since the last call (a TCP connection closed both ways or reset, or
    /// its 4-tuple opened again), to write out as they come.
    pub fn take_ended(&mut self) -> Vec<Flow> {
        std::mem::take(&mut self.done)
    }

    /// Every flow still open, ended as the capture leaves it.
    pub fn finish(mut self) -> Vec<Flow> {
        let mut rest: Vec<Flow> = self.live.drain().map(|(_, l)| finished(l)).collect();
        rest.sort_by_key(|f| f.opened_us);
        self.done.extend(rest);
        self.done
    }

    pub fn push(&mut self, ts: u64, p: &Packet<'_>) {
        let tcp = matches!(p.segment, Segment::Tcp { .. });
        let to_server =
            transport_of(tcp, p.dport).is_some() && (self.servers.is_empty() || self.servers.contains(&p.dst));
        let from_server =
            transport_of(tcp, p.sport).is_some() && (self.servers.is_empty() || self.servers.contains(&p.src));
        let (from_client, client, cport, server, sport) = if to_server && !(from_server && p.sport < p.dport) {
            (true, p.src, p.sport, p.dst, p.dport)
        } else if from_server {
            (false, p.dst, p.dport, p.src, p.sport)
        } else {
            return;
        };
        self.dns_packets += 1;
        let transport = transport_of(tcp, sport).unwrap_or("udp");
        // Do53 over UDP: one flow per client address (a stub's source port changes per query).
        let cport = if transport == "udp" { 0 } else { cport };
        let key = (tcp, client, cport, server, sport);
        if ts >= self.swept_us + LINGER_US {
            self.sweep(ts);
        }
        if let Segment::Tcp { flags, .. } = p.segment {
            let opening = from_client && flags & SYN != 0 && flags & ACK == 0;
            if opening {
                if let Some(old) = self.live.remove(&key) {
                    self.done.push(finished(old));
                }
            } else if p.payload_len == 0 && !self.live.contains_key(&key) {
                return; // the last ACK or RST of a connection already written, or never seen
            }
        }
        let keylog = &self.keylog;
        let live = self.live.entry(key).or_insert_with(|| {
            let mut l = Live::new(transport, client, cport, server, sport, ts, p);
            if let (Some(log), "dot" | "doh") = (keylog, transport) {
                l.client_frames = Framer::new(Framing::Tls).keeping_records();
                l.opened = Some(Opened {
                    keylog: Arc::clone(log),
                    random: None,
                    opener: None,
                    counter: QueryCounter::new(transport == "doh"),
                    query_us: Vec::new(),
                    failed: false,
                });
            }
            l
        });
        // Packets a little out of time order (`read::REORDER_MAX_US`): a flow spans from its
        // earliest to its latest.
        live.flow.opened_us = live.flow.opened_us.min(ts);
        live.flow.closed_us = live.flow.closed_us.max(ts);
        if from_client {
            live.flow.octets_from_client += p.payload_len as u64;
            live.flow.packets_from_client += 1;
        } else {
            live.flow.octets_from_server += p.payload_len as u64;
            live.flow.packets_from_server += 1;
        }
        let names = self.names.as_mut();
        match p.segment {
            Segment::Udp => {
                live.datagram(ts, p, from_client);
                if let (Some(names), "udp", true) = (names, transport, from_client) {
                    names.extend(question(p.payload));
                }
            }
            Segment::Tcp { seq, flags } => {
                let asked = live.segment(ts, p, seq, flags, from_client);
                if let Some(names) = names {
                    names.extend(asked.iter().filter_map(|m| question(m)));
                }
                if live.ended_us.is_none() && (live.rst || live.fin == [true, true]) {
                    live.ended_us = Some(ts);
                }
            }
        }
    }

    /// Writes out the connections that ended more than [`LINGER_US`] ago.
    fn sweep(&mut self, now: u64) {
        self.swept_us = now;
        let old: Vec<Key> = self
            .live
            .iter()
            .filter(|(_, l)| l.ended_us.is_some_and(|t| t + LINGER_US <= now))
            .map(|(k, _)| *k)
            .collect();
        let mut ended: Vec<Flow> = old.iter().filter_map(|k| self.live.remove(k)).map(finished).collect();
        ended.sort_by_key(|f| f.opened_us);
        self.done.extend(ended);
    }
}

fn finished(mut l: Live) -> Flow {
    // Segments still held behind a hole at the end: read them.
    for from_client in [true, false] {
        let (stream, framer) = if from_client {
            (&mut l.client_stream, &mut l.client_frames)
        } else {
            (&mut l.server_stream, &mut l.server_frames)
        };
        let mut frames = Vec::new();
        stream.skip_hole(&mut |t, data, resync| {
            if resync {
                framer.reset();
            }
            framer.push(t, data, &mut |fr| frames.push(fr));
        });
        for fr in frames {
            l.frame(fr, from_client);
        }
    }
    let f = &mut l.flow;
    f.gap = l.client_stream.gaps + l.server_stream.gaps > 0;
    match l.opened.take() {
        Some(o) if o.complete() => {
            f.query_us = o.query_us;
            for t in o.counter.qtypes {
                *f.qtypes.entry(t).or_default() += 1;
            }
            f.queries_exact = true;
        }
        _ if matches!(f.transport, "dot" | "doh") => {
            f.query_us = estimate_queries(f.transport == "doh", &l.carriers);
        }
        _ => {}
    }
    f.queries = f.query_us.len() as u64;
    if matches!(f.transport, "tcp" | "dot" | "doh") && (!l.client_stream.from_start || f.gap) {
        f.queries_exact = false;
    }
    l.flow
}

/// The query times a DoT or DoH client's records carry (see the module): each unit counts as
/// many queries as its plaintext is multiples of the flow's typical (median) unit; for DoH, the
/// first is the preface and one request, or the preface alone.
fn estimate_queries(doh: bool, records: &[(u64, usize, u64)]) -> Vec<u64> {
    let carriers = if doh { doh_units(records) } else { records.iter().map(|&(t, len, _)| (t, len)).collect() };
    let (first, rest) = match carriers.split_first() {
        Some((first, rest)) if doh => (Some(*first), rest),
        _ => (None, &carriers[..]),
    };
    let mut sizes: Vec<usize> = rest.iter().map(|c| c.1).collect();
    sizes.sort_unstable();
    let typical = sizes.get(sizes.len() / 2).copied().unwrap_or(1).max(1);
    let mut out = Vec::new();
    if let Some((ts, len)) = first {
        if len > DOH_PREFACE_MAX {
            out.push(ts);
        }
    }
    for &(ts, len) in rest {
        // DoH rounds down: a connection's first request is larger than the rest (its header
        // fields enter HPACK's table), and is one request.
        let ratio = len as f64 / typical as f64;
        let k = (if doh { ratio.floor() } else { ratio.round() } as usize).max(1);
        out.extend(std::iter::repeat_n(ts, k));
    }
    out
}

/// A DoH client's records as units that may carry a request (see the module): small records
/// gathered until they are large enough, within one turn (records between two of the
/// server's); what is left too small joins the turn's last unit, or is dropped.
fn doh_units(records: &[(u64, usize, u64)]) -> Vec<(u64, usize)> {
    let mut units: Vec<(u64, usize)> = Vec::new();
    let mut pending: Option<(u64, usize)> = None;
    let mut unit_turn = None;
    for (k, &(ts, len, turn)) in records.iter().enumerate() {
        let (start, size) = pending.take().map_or((ts, len), |(t, n)| (t, n + len));
        if size >= DOH_REQUEST_MIN {
            units.push((start, size));
            unit_turn = Some(turn);
        } else {
            pending = Some((start, size));
        }
        let turn_ends = records.get(k + 1).is_none_or(|next| next.2 != turn);
        if turn_ends {
            if let (Some((_, n)), Some(last)) = (pending.take(), units.last_mut()) {
                if unit_turn == Some(turn) {
                    last.1 += n;
                }
            }
        }
    }
    units
}

impl Live {
    fn new(
        transport: &'static str,
        client: IpAddr,
        cport: u16,
        server: IpAddr,
        sport: u16,
        ts: u64,
        p: &Packet<'_>,
    ) -> Self {
        let tls = matches!(transport, "dot" | "doh");
        let framing = if tls { Framing::Tls } else { Framing::Dns };
        let seen_open = match p.segment {
            Segment::Tcp { flags, .. } => flags & SYN != 0,
            Segment::Udp => transport == "udp" || p.payload.first().is_some_and(|b| b & 0xf0 == 0xc0), // a QUIC Initial
        };
        let encrypted = transport != "udp" && transport != "tcp";
        Live {
            flow: Flow {
                transport,
                client,
                client_port: cport,
                server,
                server_port: sport,
                opened_us: ts,
                closed_us: ts,
                closer: Closer::None,
                how: "none".into(),
                seen_open,
                queries: 0,
                responses: 0,
                queries_exact: !encrypted,
                query_us: Vec::new(),
                qtypes: BTreeMap::new(),
                sni: None,
                alpn: Vec::new(),
                tls_version: None,
                resumption_offered: if tls {
                    None
                } else if encrypted {
                    Some(false)
                } else {
                    None
                },
                resumed: if encrypted && !tls { Some(false) } else { None },
                early_data: false,
                octets_from_client: 0,
                octets_from_server: 0,
                packets_from_client: 0,
                packets_from_server: 0,
                gap: false,
            },
            client_stream: Reassembly::default(),
            server_stream: Reassembly::default(),
            client_frames: Framer::new(framing),
            server_frames: Framer::new(framing),
            client_records: 0,
            carriers: Vec::new(),
            server_records: 0,
            opened: None,
            fin: [false; 2],
            rst: false,
            ended_us: None,
        }
    }

    fn datagram(&mut self, ts: u64, p: &Packet<'_>, from_client: bool) {
        let f = &mut self.flow;
        match f.transport {
            "udp" => {
                // A DNS header: QR is the top bit of the third octet.
                let Some(&flags) = p.payload.get(2) else { return };
                if p.payload.len() < 12 {
                    return;
                }
                if flags & 0x80 == 0 && from_client {
                    f.query_us.push(ts);
                    if let Some(t) = qtype(p.payload) {
                        *f.qtypes.entry(t).or_default() += 1;
                    }
                } else if flags & 0x80 != 0 && !from_client {
                    f.responses += 1;
                }
            }
            _ => {
                // QUIC: long headers (Initial, 0-RTT, Handshake) have the top bit set.
                let Some(&first) = p.payload.first() else { return };
                if !from_client {
                    return;
                }
                if first & 0x80 != 0 {
                    if first & 0x30 == 0x10 {
                        f.early_data = true;
                        f.resumption_offered = Some(true);
                        f.resumed = Some(true);
                    }
                } else if p.payload_len >= QUIC_QUERY_MIN {
                    f.query_us.push(ts);
                }
            }
        }
    }

    /// Takes a segment; returns the Do53 queries it completed (their first octets).
    fn segment(&mut self, ts: u64, p: &Packet<'_>, seq: u32, flags: u8, from_client: bool) -> Vec<Vec<u8>> {
        let side = usize::from(!from_client);
        if flags & RST != 0 {
            if !self.fin[0] && !self.fin[1] && !self.rst {
                self.flow.closer = if from_client { Closer::Client } else { Closer::Server };
            }
            self.rst = true;
        }
        if flags & FIN != 0 {
            if !self.fin[0] && !self.fin[1] && !self.rst {
                self.flow.closer = if from_client { Closer::Client } else { Closer::Server };
            }
            self.fin[side] = true;
        }
        if self.rst || self.fin.contains(&true) {
            let fin = self.fin.contains(&true);
            self.flow.how = match (fin, self.rst) {
                (true, true) => "fin+rst",
                (true, false) => "fin",
                _ => "rst",
            }
            .into();
        }
        let (stream, framer) = if from_client {
            (&mut self.client_stream, &mut self.client_frames)
        } else {
            (&mut self.server_stream, &mut self.server_frames)
        };
        if flags & SYN != 0 {
            stream.syn(seq);
        }
        let mut frames = Vec::new();
        stream.segment(ts, seq, p.payload, p.payload_len, p.whole(), &mut |t, data, resync| {
            if resync {
                framer.reset();
            }
            framer.push(t, data, &mut |fr| frames.push(fr));
        });
        let mut asked = Vec::new();
        for fr in frames {
            if self.flow.transport == "tcp" && from_client && fr.head.len() >= 12 && fr.head[2] & 0x80 == 0 {
                asked.push(fr.head.clone());
            }
            self.frame(fr, from_client);
        }
        asked
    }

    fn frame(&mut self, fr: Frame, from_client: bool) {
        let f = &mut self.flow;
        match (f.transport, fr.kind) {
            ("tcp", _) => {
                if fr.head.len() < 12 {
                    return;
                }
                let response = fr.head[2] & 0x80 != 0;
                if from_client && !response {
                    f.query_us.push(fr.ts);
                    if let Some(t) = qtype(&fr.head) {
                        *f.qtypes.entry(t).or_default() += 1;
                    }
                } else if !from_client && response {
                    f.responses += 1;
                }
            }
            (_, 22) if from_client && f.sni.is_none() && f.alpn.is_empty() && f.resumption_offered.is_none() => {
                if let Some(h) = tls::client_hello(&fr.head) {
                    f.sni = h.sni;
                    f.alpn = h.alpn;
                    f.resumption_offered = Some(h.resumption_offered);
                    f.early_data = h.early_data;
                    if let Some(o) = self.opened.as_mut() {
                        o.random = Some(h.random);
                    }
                }
            }
            (_, 22) if !from_client && f.tls_version.is_none() => {
                if let Some(h) = tls::server_hello(&fr.head) {
                    f.tls_version = Some(version_name(h.version));
                    f.resumed = Some(h.resumed);
                    if let Some(o) = self.opened.as_mut() {
                        // TLS 1.3 only, and not 0-RTT data, which a key log's first
                        // application secret does not open.
                        o.opener = o
                            .random
                            .filter(|_| h.version == 0x0304 && !f.early_data)
                            .and_then(|r| o.keylog.client_opener(&r, h.cipher_suite));
                    }
                }
            }
            (_, 23) if from_client => {
                self.client_records += 1;
                let tls13 = f.tls_version.as_deref() == Some("1.3");
                // TLS 1.3: the client's first encrypted record is its Finished; a 19-octet one
                // is an alert (close_notify).
                if tls13 && (self.client_records == 1 || fr.len == 2 + TLS13_OVERHEAD) {
                    return;
                }
                let plaintext = fr.len.saturating_sub(if tls13 { TLS13_OVERHEAD } else { 0 });
                self.carriers.push((fr.ts, plaintext, self.server_records));
                if let Some(o) = self.opened.as_mut() {
                    o.record(&fr);
                }
            }
            (_, 23) => self.server_records += 1,
            _ => {}
        }
    }
}

fn version_name(v: u16) -> String {
    match v {
        0x0304 => "1.3".into(),
        0x0303 => "1.2".into(),
        0x0302 => "1.1".into(),
        0x0301 => "1.0".into(),
        _ => format!("{v:#06x}"),
    }
}

/// A query's name (lower case, absolute, in presentation format) and type, when the question
/// reads as a name: no compression pointer, no reserved label type, at most 255 octets. Octets
/// other than printable ASCII, and those the query file or a master file reads apart (`.`, `\`,
/// `#`, `;`, `"`, `(`, `)`, `$`, `@`), are written `\DDD`, as `dnscost_wire::encode_name` reads.
fn question(msg: &[u8]) -> Option<(String, u16)> {
    if msg.len() < 12 || msg[2] & 0x80 != 0 || u16::from_be_bytes([msg[4], msg[5]]) == 0 {
        return None;
    }
    let mut name = String::new();
    let mut at = 12;
    loop {
        let len = *msg.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        let label = msg.get(at..at + len).filter(|_| len < 64 && at + len - 12 < 255)?;
        for &b in label {
            if b.is_ascii_graphic() && !br#".\#;"()$@"#.contains(&b) {
                name.push(b.to_ascii_lowercase() as char);
            } else {
                name.push_str(&format!("\\{b:03}"));
            }
        }
        name.push('.');
        at += len;
    }
    if name.is_empty() {
        name.push('.');
    }
    Some((name, u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_doh_records_of_one_turn_join_into_a_request() {
        // Go: a request's HEADERS (38) and DATA (17) in records of their own, one turn each.
        assert_eq!(doh_units(&[(1, 38, 0), (2, 17, 0), (5, 38, 1), (6, 17, 1)]), [(1, 55), (5, 55)]);
        // A WINDOW_UPDATE after a request joins it; one alone in its turn is no request.
        assert_eq!(doh_units(&[(1, 80, 0), (2, 13, 0), (3, 13, 1)]), [(1, 93)]);
        // Concurrent requests, each a record of its own (browsers): each a unit.
        assert_eq!(doh_units(&[(1, 80, 0), (1, 81, 0), (4, 80, 1)]), [(1, 80), (1, 81), (4, 80)]);
        // Two of Go's requests in one turn: two units.
        assert_eq!(doh_units(&[(1, 38, 0), (1, 17, 0), (2, 38, 0), (2, 17, 0)]), [(1, 55), (2, 55)]);
        assert_eq!(estimate_queries(true, &[(0, 200, 0), (1, 38, 1), (1, 17, 1), (2, 38, 2), (2, 17, 2)]), [0, 1, 2]);
    }
}
