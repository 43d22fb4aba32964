//! Queries as pre-encoded templates, responses as views, and the responder's answers.

use crate::name::{encode_name, skip_name};
use crate::WireError;

/// Length of the fixed DNS header.
pub const HEADER_LEN: usize = 12;
/// The Internet class.
pub const CLASS_IN: u16 = 1;
const TYPE_OPT: u16 = 41;
const OPT_CLIENT_SUBNET: u16 = 8;
const OPT_COOKIE: u16 = 10;
const OPT_PADDING: u16 = 12;
/// RFC 8467 §4.1: clients pad queries to a multiple of 128 octets.
const QUERY_PAD_BLOCK: usize = 128;
/// RFC 8467 §4.1: servers pad responses to a multiple of 468 octets.
const RESPONSE_PAD_BLOCK: usize = 468;

/// How queries are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryOptions {
    /// Set the RD bit (on by default: the targets are resolvers).
    pub recursion_desired: bool,
    /// Add an EDNS(0) OPT record advertising this UDP payload size.
    pub edns_udp_size: Option<u16>,
    /// Set the DO bit (needs EDNS).
    pub dnssec_ok: bool,
    /// Pad the query to a multiple of 128 octets (RFC 7830, RFC 8467; needs EDNS).
    pub padding: bool,
    /// An EDNS Client Subnet option (RFC 7871; needs EDNS).
    pub client_subnet: Option<ClientSubnet>,
    /// A DNS cookie option (RFC 7873; needs EDNS).
    pub cookie: Option<Cookie>,
}

impl Default for QueryOptions {
    fn default() -> Self {
        Self {
            recursion_desired: true,
            edns_udp_size: Some(1232),
            dnssec_ok: false,
            padding: false,
            client_subnet: None,
            cookie: None,
        }
    }
}

impl QueryOptions {
    /// Whether the query carries an OPT record.
    pub fn uses_edns(&self) -> bool {
        self.edns_udp_size.is_some()
            || self.dnssec_ok
            || self.padding
            || self.client_subnet.is_some()
            || self.cookie.is_some()
    }
}

/// EDNS Client Subnet (RFC 7871 §6): the network of the client a query is asked for, as a
/// forwarder passes it on; SCOPE PREFIX-LENGTH 0, as in every query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSubnet {
    /// The network's address; only its first `source_prefix` bits are sent.
    pub address: std::net::IpAddr,
    /// SOURCE PREFIX-LENGTH: 0 to 32 for IPv4, 0 to 128 for IPv6.
    pub source_prefix: u8,
}

impl ClientSubnet {
    /// The option's data: FAMILY, SOURCE PREFIX-LENGTH, SCOPE PREFIX-LENGTH 0, then the
    /// address in as few octets as the prefix needs, its bits past the prefix zero (§6).
    fn encode(&self, out: &mut Vec<u8>) {
        let (family, octets): (u16, Vec<u8>) = match self.address {
            std::net::IpAddr::V4(a) => (1, a.octets().to_vec()),
            std::net::IpAddr::V6(a) => (2, a.octets().to_vec()),
        };
        let prefix = usize::from(self.source_prefix).min(octets.len() * 8);
        let used = prefix.div_ceil(8);
        out.extend_from_slice(&family.to_be_bytes());
        out.extend_from_slice(&[prefix as u8, 0]);
        let at = out.len();
        out.extend_from_slice(&octets[..used]);
        if !prefix.is_multiple_of(8) {
            out[at + used - 1] &= 0xFF << (8 - prefix % 8);
        }
    }
}

/// A DNS cookie (RFC 7873 §4): the client cookie's 8 octets, then the server cookie's 8 to 32
/// when the client has learnt one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cookie {
    octets: [u8; 40],
    len: u8,
}

impl Cookie {
    /// A client cookie alone (8 octets), or with a server cookie (16 to 40 octets in all).
    pub fn new(octets: &[u8]) -> Result<Self, String> {
        if octets.len() != 8 && !(16..=40).contains(&octets.len()) {
            return Err(format!(
                "a cookie is 8 octets (a client cookie) or 16 to 40 (client and server cookies), not {}",
                octets.len()
            ));
        }
        let mut c = Cookie { octets: [0; 40], len: octets.len() as u8 };
        c.octets[..octets.len()].copy_from_slice(octets);
        Ok(c)
    }

    /// The option's data.
    pub fn octets(&self) -> &[u8] {
        &self.octets[..usize::from(self.len)]
    }
}

/// A query encoded once, sent many times with only its ID changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryTemplate {
    bytes: Vec<u8>,
    question_end: usize,
}

impl QueryTemplate {
    /// Encodes a query for `name` and `qtype` in class IN.
    pub fn new(name: &str, qtype: u16, opts: &QueryOptions) -> Result<Self, WireError> {
        let mut b = Vec::with_capacity(64);
        let flags: u16 = if opts.recursion_desired { 0x0100 } else { 0 };
        let edns = opts.uses_edns();
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&flags.to_be_bytes());
        b.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, u8::from(edns)]);
        encode_name(name, &mut b)?;
        b.extend_from_slice(&qtype.to_be_bytes());
        b.extend_from_slice(&CLASS_IN.to_be_bytes());
        let question_end = b.len();
        if edns {
            let size = opts.edns_udp_size.unwrap_or(1232);
            let do_bit: u32 = if opts.dnssec_ok { 0x8000 } else { 0 };
            // OPT: root name, type, class = payload size, ttl = ext-rcode/version/flags, rdlen.
            b.push(0);
            b.extend_from_slice(&TYPE_OPT.to_be_bytes());
            b.extend_from_slice(&size.to_be_bytes());
            b.extend_from_slice(&do_bit.to_be_bytes());
            let rdlen_at = b.len();
            b.extend_from_slice(&[0, 0]);
            fn option(b: &mut Vec<u8>, code: u16, data: &dyn Fn(&mut Vec<u8>)) {
                b.extend_from_slice(&code.to_be_bytes());
                let len_at = b.len();
                b.extend_from_slice(&[0, 0]);
                data(b);
                let len = (b.len() - len_at - 2) as u16;
                b[len_at..len_at + 2].copy_from_slice(&len.to_be_bytes());
            }
            if let Some(subnet) = &opts.client_subnet {
                option(&mut b, OPT_CLIENT_SUBNET, &|b| subnet.encode(b));
            }
            if let Some(cookie) = &opts.cookie {
                option(&mut b, OPT_COOKIE, &|b| b.extend_from_slice(cookie.octets()));
            }
            // Padding comes last, so that it covers every other option (RFC 7830 §4).
            if opts.padding {
                let unpadded = b.len() + 4;
                let pad = (QUERY_PAD_BLOCK - unpadded % QUERY_PAD_BLOCK) % QUERY_PAD_BLOCK;
                option(&mut b, OPT_PADDING, &|b| b.resize(b.len() + pad, 0));
            }
            let rdlen = (b.len() - rdlen_at - 2) as u16;
            b[rdlen_at..rdlen_at + 2].copy_from_slice(&rdlen.to_be_bytes());
        }
        Ok(Self { bytes: b, question_end })
    }

    /// The message with ID 0 (the form RFC 8484 recommends for DoH).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Encoded length in octets.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Always false: a query has at least a header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Appends the message with `id` to `out`.
    #[inline]
    pub fn write(&self, id: u16, out: &mut Vec<u8>) {
        let at = out.len();
        out.extend_from_slice(&self.bytes);
        out[at..at + 2].copy_from_slice(&id.to_be_bytes());
    }

    /// Appends the message with `id`, preceded by its two-octet length (RFC 1035 §4.2.2).
    #[inline]
    pub fn write_framed(&self, id: u16, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.bytes.len() as u16).to_be_bytes());
        self.write(id, out);
    }

    /// The question section, as it must come back in the response.
    pub fn question(&self) -> &[u8] {
        &self.bytes[HEADER_LEN..self.question_end]
    }
}

/// Response codes as counted by the engine.
pub struct Rcode;

impl Rcode {
    /// Lower-case name of a 4-bit RCODE, used as a key in output records.
    pub fn name(code: u8) -> &'static str {
        const NAMES: [&str; 16] = [
            "noerror",
            "formerr",
            "servfail",
            "nxdomain",
            "notimp",
            "refused",
            "yxdomain",
            "yxrrset",
            "nxrrset",
            "notauth",
            "notzone",
            "dsotypeni",
            "rcode12",
            "rcode13",
            "rcode14",
            "rcode15",
        ];
        NAMES[(code & 0x0F) as usize]
    }
}

/// What the generator needs from a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseView {
    pub id: u16,
    pub rcode: u8,
    pub truncated: bool,
}

/// Checks the header of a response; `question` (from the template) must match.
#[inline]
pub fn parse_response(msg: &[u8], question: Option<&[u8]>) -> Result<ResponseView, WireError> {
    if msg.len() < HEADER_LEN {
        return Err(WireError::Truncated);
    }
    if msg[2] & 0x80 == 0 {
        return Err(WireError::WrongDirection);
    }
    if let Some(q) = question {
        let echoed = msg.get(HEADER_LEN..HEADER_LEN + q.len()).ok_or(WireError::Truncated)?;
        // Resolvers echo the question as sent, but a 0x20-randomising one may change the case
        // of the name: only the name (not QTYPE and QCLASS, its last four octets) is compared
        // without regard to case.
        if echoed != q {
            let name = q.len().saturating_sub(4);
            if echoed[name..] != q[name..] || !echoed[..name].eq_ignore_ascii_case(&q[..name]) {
                return Err(WireError::BadName("question does not match the query"));
            }
        }
    }
    Ok(ResponseView { id: u16::from_be_bytes([msg[0], msg[1]]), rcode: msg[3] & 0x0F, truncated: msg[2] & 0x02 != 0 })
}

/// EDNS(0) as found in a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edns {
    pub udp_size: u16,
    pub dnssec_ok: bool,
    pub padding: bool,
}

/// What the responder needs from a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryView {
    pub id: u16,
    pub opcode: u8,
    pub recursion_desired: bool,
    /// Offsets of the question (name, type, class) in the message.
    pub question: std::ops::Range<usize>,
    /// Offsets of the question name.
    pub qname: std::ops::Range<usize>,
    pub qtype: u16,
    pub qclass: u16,
    pub edns: Option<Edns>,
}

/// Parses a query with one question, and its OPT record if any.
pub fn parse_query(msg: &[u8]) -> Result<QueryView, WireError> {
    if msg.len() < HEADER_LEN {
        return Err(WireError::Truncated);
    }
    if msg[2] & 0x80 != 0 {
        return Err(WireError::WrongDirection);
    }
    let count = |i: usize| u16::from_be_bytes([msg[i], msg[i + 1]]);
    let qdcount = count(4);
    if qdcount != 1 {
        return Err(WireError::QuestionCount(qdcount));
    }
    let name = skip_name(msg, HEADER_LEN)?;
    if name.pointer {
        return Err(WireError::BadName("compression in the question"));
    }
    let name_end = name.end;
    let fixed = msg.get(name_end..name_end + 4).ok_or(WireError::Truncated)?;
    let qtype = u16::from_be_bytes([fixed[0], fixed[1]]);
    let qclass = u16::from_be_bytes([fixed[2], fixed[3]]);
    let question_end = name_end + 4;
    // Skip answer and authority records (normally none in a query), then look for OPT.
    let mut pos = question_end;
    let mut edns = None;
    let records = count(6) as usize + count(8) as usize + count(10) as usize;
    for i in 0..records {
        let rname_end = skip_name(msg, pos)?.end;
        let rr = msg.get(rname_end..rname_end + 10).ok_or(WireError::Truncated)?;
        let rtype = u16::from_be_bytes([rr[0], rr[1]]);
        let rdlen = u16::from_be_bytes([rr[8], rr[9]]) as usize;
        let rdata = msg.get(rname_end + 10..rname_end + 10 + rdlen).ok_or(WireError::Truncated)?;
        if rtype == TYPE_OPT && i >= count(6) as usize + count(8) as usize {
            let mut padding = false;
            let mut o = 0;
            while o + 4 <= rdata.len() {
                let code = u16::from_be_bytes([rdata[o], rdata[o + 1]]);
                let len = u16::from_be_bytes([rdata[o + 2], rdata[o + 3]]) as usize;
                padding |= code == OPT_PADDING;
                o += 4 + len;
            }
            edns = Some(Edns {
                udp_size: u16::from_be_bytes([rr[2], rr[3]]).max(512),
                dnssec_ok: rr[6] & 0x80 != 0,
                padding,
            });
        }
        pos = rname_end + 10 + rdlen;
    }
    Ok(QueryView {
        id: u16::from_be_bytes([msg[0], msg[1]]),
        opcode: (msg[2] >> 3) & 0x0F,
        recursion_desired: msg[2] & 0x01 != 0,
        question: HEADER_LEN..question_end,
        qname: HEADER_LEN..name_end,
        qtype,
        qclass,
        edns,
    })
}

/// How a response is framed (datagram or stream), which decides whether it may be truncated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// UDP: the response must fit the size the query advertised in EDNS(0), or 512 octets
    /// without EDNS (RFC 1035 §4.2.1, RFC 6891 §7); a larger one is truncated (TC set, no
    /// answers).
    Datagram,
    /// TCP, TLS or HTTP/2: never truncated (the framing bounds it to 65 535 octets).
    Stream,
}

/// Builds the responder's answer to a parsed query.
pub struct ResponseBuilder<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    question_len: usize,
    answers: u16,
    authorities: u16,
    edns: Option<Edns>,
}

impl<'a> ResponseBuilder<'a> {
    /// Starts a response to `query` (whose bytes are `msg`) in `out`, with `rcode`, copying the
    /// question. The answer is authoritative.
    pub fn new(msg: &[u8], query: &QueryView, rcode: u8, out: &'a mut Vec<u8>) -> Self {
        let start = out.len();
        let rd = u8::from(query.recursion_desired);
        out.extend_from_slice(&query.id.to_be_bytes());
        out.push(0x80 | (query.opcode << 3) | 0x04 | rd);
        out.push((rd << 7) | (rcode & 0x0F));
        out.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
        out.extend_from_slice(&msg[query.question.clone()]);
        Self { out, start, question_len: query.question.len(), answers: 0, authorities: 0, edns: query.edns }
    }

    /// Adds an answer record for the question name.
    pub fn answer(&mut self, rtype: u16, ttl: u32, rdata: &[u8]) {
        debug_assert_eq!(self.authorities, 0, "answers come before the authority section");
        self.record(rtype, ttl, rdata);
        self.answers += 1;
    }

    /// Adds a record for the question name to the authority section (after every answer): the
    /// SOA of a negative answer, which lets resolvers cache it (RFC 2308).
    pub fn authority(&mut self, rtype: u16, ttl: u32, rdata: &[u8]) {
        self.record(rtype, ttl, rdata);
        self.authorities += 1;
    }

    fn record(&mut self, rtype: u16, ttl: u32, rdata: &[u8]) {
        self.out.extend_from_slice(&[0xC0, HEADER_LEN as u8]);
        self.out.extend_from_slice(&rtype.to_be_bytes());
        self.out.extend_from_slice(&CLASS_IN.to_be_bytes());
        self.out.extend_from_slice(&ttl.to_be_bytes());
        self.out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        self.out.extend_from_slice(rdata);
    }

    /// Adds the OPT record if the query had one (padding the response if the query was
    /// padded), truncates the response if the framing demands it, and returns the message
    /// length.
    pub fn finish(self, framing: Framing) -> usize {
        let out = self.out;
        let header = self.start;
        // The question was copied verbatim right after the header.
        let question_end = header + HEADER_LEN + self.question_len;
        let opt_len = |pad: usize| 11 + if pad > 0 || self.edns.is_some_and(|e| e.padding) { 4 + pad } else { 0 };
        let (mut answers, mut authorities) = (self.answers, self.authorities);
        let limit = match (framing, self.edns) {
            (Framing::Stream, _) => crate::MAX_FRAME,
            (Framing::Datagram, Some(e)) => (e.udp_size as usize).max(512),
            (Framing::Datagram, None) => 512,
        };
        if out.len() - header + self.edns.map_or(0, |_| opt_len(0)) > limit {
            out.truncate(question_end);
            out[header + 2] |= 0x02;
            (answers, authorities) = (0, 0);
        }
        out[header + 6..header + 8].copy_from_slice(&answers.to_be_bytes());
        out[header + 8..header + 10].copy_from_slice(&authorities.to_be_bytes());
        if let Some(e) = self.edns {
            let mut pad = 0;
            if e.padding {
                let len = out.len() - header + opt_len(0);
                pad = (RESPONSE_PAD_BLOCK - len % RESPONSE_PAD_BLOCK) % RESPONSE_PAD_BLOCK;
                if out.len() - header + opt_len(pad) > limit {
                    pad = limit.saturating_sub(out.len() - header + opt_len(0));
                }
            }
            out.push(0);
            out.extend_from_slice(&TYPE_OPT.to_be_bytes());
            out.extend_from_slice(&1232u16.to_be_bytes());
            out.extend_from_slice(&(if e.dnssec_ok { 0x8000u32 } else { 0 }).to_be_bytes());
            if e.padding {
                out.extend_from_slice(&((4 + pad) as u16).to_be_bytes());
                out.extend_from_slice(&OPT_PADDING.to_be_bytes());
                out.extend_from_slice(&(pad as u16).to_be_bytes());
                out.resize(out.len() + pad, 0);
            } else {
                out.extend_from_slice(&[0, 0]);
            }
            out[header + 10..header + 12].copy_from_slice(&1u16.to_be_bytes());
        }
        out.len() - header
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The OPT record's options, as (code, data), of a query encoded with `opts`.
    fn options(opts: &QueryOptions) -> Vec<(u16, Vec<u8>)> {
        let t = QueryTemplate::new("q1.test", 1, opts).unwrap();
        let b = t.bytes();
        let opt = t.question_end + 1 + 8;
        let rdlen = u16::from_be_bytes([b[opt], b[opt + 1]]) as usize;
        assert_eq!(opt + 2 + rdlen, b.len(), "OPT is the last record and its RDLENGTH covers its options");
        let (mut o, mut found) = (opt + 2, Vec::new());
        while o < b.len() {
            let code = u16::from_be_bytes([b[o], b[o + 1]]);
            let len = u16::from_be_bytes([b[o + 2], b[o + 3]]) as usize;
            found.push((code, b[o + 4..o + 4 + len].to_vec()));
            o += 4 + len;
        }
        found
    }

    #[test]
    fn a_client_subnet_is_sent_in_as_few_octets_as_its_prefix_needs_with_the_rest_cleared() {
        let subnet = |a: &str, p| ClientSubnet { address: a.parse().unwrap(), source_prefix: p };
        let opts = QueryOptions { client_subnet: Some(subnet("198.51.100.77", 20)), ..Default::default() };
        // RFC 7871 §6: FAMILY 1, SOURCE 20, SCOPE 0, then ceil(20/8) = 3 octets, 100 = 0x64 cut to 0x60.
        assert_eq!(options(&opts), [(8, vec![0, 1, 20, 0, 198, 51, 0x60])]);
        let opts = QueryOptions { client_subnet: Some(subnet("2001:db8:ff::1", 48)), ..Default::default() };
        assert_eq!(options(&opts), [(8, vec![0, 2, 48, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0xff])]);
        let opts = QueryOptions { client_subnet: Some(subnet("10.1.2.3", 0)), ..Default::default() };
        assert_eq!(options(&opts), [(8, vec![0, 1, 0, 0])]);
    }

    #[test]
    fn a_cookie_is_a_client_cookie_or_a_client_and_a_server_cookie() {
        let client = [1, 2, 3, 4, 5, 6, 7, 8];
        let opts = QueryOptions { cookie: Some(Cookie::new(&client).unwrap()), ..Default::default() };
        assert_eq!(options(&opts), [(10, client.to_vec())]);
        let both: Vec<u8> = (0..24).collect();
        let opts = QueryOptions { cookie: Some(Cookie::new(&both).unwrap()), ..Default::default() };
        assert_eq!(options(&opts), [(10, both)]);
        for bad in [0, 7, 9, 15, 41] {
            assert!(Cookie::new(&vec![0; bad]).is_err(), "{bad} octets");
        }
    }

    #[test]
    fn padding_comes_last_and_covers_the_other_options() {
        let opts = QueryOptions {
            padding: true,
            client_subnet: Some(ClientSubnet { address: "10.0.0.0".parse().unwrap(), source_prefix: 8 }),
            cookie: Some(Cookie::new(&[9; 8]).unwrap()),
            ..Default::default()
        };
        let codes: Vec<u16> = options(&opts).iter().map(|(c, _)| *c).collect();
        assert_eq!(codes, [8, 10, 12]);
        assert_eq!(QueryTemplate::new("q1.test", 1, &opts).unwrap().len() % QUERY_PAD_BLOCK, 0);
        // A query with options alone still carries EDNS, even with no payload size asked for.
        let bare =
            QueryOptions { edns_udp_size: None, cookie: Some(Cookie::new(&[9; 8]).unwrap()), ..Default::default() };
        assert_eq!(
            parse_query(QueryTemplate::new("q1.test", 1, &bare).unwrap().bytes()).unwrap().edns.unwrap().udp_size,
            1232
        );
    }

    #[test]
    fn template_encodes_header_question_and_opt() {
        let t = QueryTemplate::new("q1.test.", 1, &QueryOptions::default()).unwrap();
        let mut m = Vec::new();
        t.write(0xBEEF, &mut m);
        assert_eq!(&m[..4], &[0xBE, 0xEF, 0x01, 0x00]);
        let q = parse_query(&m).unwrap();
        assert_eq!(q.id, 0xBEEF);
        assert_eq!(q.qtype, 1);
        assert_eq!(q.qclass, CLASS_IN);
        assert!(q.recursion_desired);
        assert_eq!(q.edns, Some(Edns { udp_size: 1232, dnssec_ok: false, padding: false }));
        assert_eq!(&m[q.question.clone()], t.question());
        let mut f = Vec::new();
        t.write_framed(7, &mut f);
        assert_eq!(u16::from_be_bytes([f[0], f[1]]) as usize, t.len());
    }

    #[test]
    fn padded_queries_are_multiples_of_128() {
        let opts = QueryOptions { padding: true, dnssec_ok: true, ..Default::default() };
        for name in ["a.test", "q0000001.test", &format!("{}.test", "x".repeat(60))] {
            let t = QueryTemplate::new(name, 28, &opts).unwrap();
            assert_eq!(t.len() % 128, 0, "{name}");
            let e = parse_query(t.bytes()).unwrap().edns.unwrap();
            assert!(e.padding && e.dnssec_ok);
        }
    }

    #[test]
    fn no_edns_when_disabled() {
        let opts = QueryOptions { edns_udp_size: None, recursion_desired: false, ..Default::default() };
        let t = QueryTemplate::new("x.test", 1, &opts).unwrap();
        let q = parse_query(t.bytes()).unwrap();
        assert_eq!(q.edns, None);
        assert!(!q.recursion_desired);
    }

    #[test]
    fn responder_answers_and_generator_accepts() {
        let t = QueryTemplate::new("q1.test", 1, &QueryOptions { padding: true, ..Default::default() }).unwrap();
        let mut m = Vec::new();
        t.write(42, &mut m);
        let q = parse_query(&m).unwrap();
        let mut out = Vec::new();
        let mut b = ResponseBuilder::new(&m, &q, 0, &mut out);
        b.answer(1, 3600, &[192, 0, 2, 1]);
        let n = b.finish(Framing::Stream);
        assert_eq!(n, out.len());
        assert_eq!(n % 468, 0);
        let r = parse_response(&out, Some(t.question())).unwrap();
        assert_eq!(r, ResponseView { id: 42, rcode: 0, truncated: false });
        assert_eq!(u16::from_be_bytes([out[6], out[7]]), 1);
        // A query is not a response, and a response for another name does not match.
        assert_eq!(parse_response(&m, None), Err(WireError::WrongDirection));
        let other = QueryTemplate::new("q2.test", 1, &QueryOptions::default()).unwrap();
        assert!(parse_response(&out, Some(other.question())).is_err());
    }

    #[test]
    fn oversized_udp_answers_are_truncated() {
        let t =
            QueryTemplate::new("big.test", 16, &QueryOptions { edns_udp_size: None, ..Default::default() }).unwrap();
        let q = parse_query(t.bytes()).unwrap();
        let mut out = Vec::new();
        let mut b = ResponseBuilder::new(t.bytes(), &q, 0, &mut out);
        for _ in 0..10 {
            b.answer(16, 60, &[100; 101]);
        }
        b.finish(Framing::Datagram);
        let r = parse_response(&out, Some(t.question())).unwrap();
        assert!(r.truncated);
        assert_eq!(u16::from_be_bytes([out[6], out[7]]), 0);
    }

    #[test]
    fn stream_answers_are_never_truncated() {
        let t =
            QueryTemplate::new("big.test", 16, &QueryOptions { edns_udp_size: None, ..Default::default() }).unwrap();
        let q = parse_query(t.bytes()).unwrap();
        let mut out = Vec::new();
        let mut b = ResponseBuilder::new(t.bytes(), &q, 0, &mut out);
        for _ in 0..10 {
            b.answer(16, 60, &[100; 101]);
        }
        assert!(b.finish(Framing::Stream) > 1000);
        assert!(!parse_response(&out, None).unwrap().truncated);
    }

    #[test]
    fn only_the_name_of_the_question_ignores_case() {
        let https = QueryTemplate::new("q1.test", 65, &QueryOptions::default()).unwrap();
        let mut answer = Vec::new();
        https.write(7, &mut answer);
        answer[2] |= 0x80;
        assert!(parse_response(&answer, Some(https.question())).is_ok());
        // 0x20 on the name matches.
        answer[HEADER_LEN + 1] = b'Q';
        assert!(parse_response(&answer, Some(https.question())).is_ok());
        // QTYPE 0x0061 is not QTYPE 0x0041 (HTTPS), although they differ only in "case".
        let qtype = HEADER_LEN + https.question().len() - 4;
        assert_eq!(answer[qtype + 1], 0x41);
        answer[qtype + 1] = 0x61;
        assert!(parse_response(&answer, Some(https.question())).is_err());
    }

    #[test]
    fn a_label_ending_in_a_high_octet_is_not_a_pointer() {
        // The name "a\xC1" in the question: its last label octet has the top bits set.
        let mut m = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, b'a', 0xC1, 0, 0, 1, 0, 1];
        let q = parse_query(&m).unwrap();
        assert_eq!(q.qname, HEADER_LEN..HEADER_LEN + 4);
        assert_eq!(q.qtype, 1);
        // A real pointer in the question is refused.
        m.truncate(HEADER_LEN);
        m.extend_from_slice(&[0xC0, 0x0C, 0, 1, 0, 1]);
        assert_eq!(parse_query(&m), Err(WireError::BadName("compression in the question")));
    }

    #[test]
    fn malformed_queries_are_errors() {
        assert_eq!(parse_query(&[0; 5]), Err(WireError::Truncated));
        let mut two = QueryTemplate::new("a.test", 1, &QueryOptions::default()).unwrap().bytes().to_vec();
        two[5] = 2;
        assert_eq!(parse_query(&two), Err(WireError::QuestionCount(2)));
        let whole = QueryTemplate::new("a.test", 1, &QueryOptions::default()).unwrap();
        assert!(parse_query(&whole.bytes()[..15]).is_err());
        assert_eq!(Rcode::name(3), "nxdomain");
    }
}
