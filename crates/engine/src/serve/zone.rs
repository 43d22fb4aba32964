//! What the responder answers: a synthetic set of names under a TLD and, optionally, a zone
//! read from a master file. No I/O besides reading that file; answers are built into a
//! caller's buffer without allocating.

use dnscost_wire::{encode_name, parse_query, type_from_str, Framing, ResponseBuilder, CLASS_IN, HEADER_LEN};
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

const NOERROR: u8 = 0;
const FORMERR: u8 = 1;
pub(crate) const NXDOMAIN: u8 = 3;
const NOTIMP: u8 = 4;
pub(crate) const REFUSED: u8 = 5;

const TYPE_A: u16 = 1;
const TYPE_NS: u16 = 2;
const TYPE_CNAME: u16 = 5;
const TYPE_SOA: u16 = 6;
const TYPE_PTR: u16 = 12;
const TYPE_MX: u16 = 15;
const TYPE_TXT: u16 = 16;
const TYPE_AAAA: u16 = 28;
const TYPE_ANY: u16 = 255;
const CLASS_ANY: u16 = 255;

/// Longest name in wire form.
const MAX_NAME: usize = 255;

/// What was answered, for the transports that need more than the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// Octets appended to the output buffer.
    pub len: usize,
    pub rcode: u8,
    /// Smallest TTL of the answers, or the negative-caching TTL (DoH's `max-age`).
    pub ttl: u32,
}

/// The synthetic set: `q<digits>.<tld>.` as the generator names them.
#[derive(Debug, Clone)]
pub struct Synthetic {
    count: u64,
    /// Digits in the first label (the set's names all have the same length).
    width: usize,
    /// The TLD in lower-case wire form.
    tld: Vec<u8>,
    ttl: u32,
    soa: Vec<u8>,
}

impl Synthetic {
    /// The set of `count` names under `tld` (one or more labels), answered with `ttl`.
    pub fn new(count: u64, tld: &str, ttl: u32) -> Result<Self, String> {
        let tld = tld.trim_matches('.').to_ascii_lowercase();
        if tld.is_empty() {
            return Err("the synthetic TLD is empty".into());
        }
        let mut wire = Vec::new();
        encode_name(&tld, &mut wire).map_err(|e| format!("TLD {tld:?}: {e}"))?;
        let mut soa = Vec::new();
        encode_name(&format!("ns.{tld}."), &mut soa).map_err(|e| format!("TLD {tld:?}: {e}"))?;
        encode_name(&format!("hostmaster.{tld}."), &mut soa).map_err(|e| format!("TLD {tld:?}: {e}"))?;
        for v in [1u32, 3600, 600, 86400, ttl] {
            soa.extend_from_slice(&v.to_be_bytes());
        }
        Ok(Self { count, width: digits(count.saturating_sub(1)), tld: wire, ttl, soa })
    }

    /// The index of the wire name `qname` in the set, if it is one of its names.
    fn index(&self, qname: &[u8]) -> Option<u64> {
        let len = *qname.first()? as usize;
        if len != 1 + self.width || !qname.get(1)?.eq_ignore_ascii_case(&b'q') {
            return None;
        }
        let digits = qname.get(2..1 + len)?;
        if !qname[1 + len..].eq_ignore_ascii_case(&self.tld) {
            return None;
        }
        let mut index = 0u64;
        for &d in digits {
            if !d.is_ascii_digit() {
                return None;
            }
            index = index.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        (index < self.count).then_some(index)
    }
}

/// A record stored for an owner name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rr {
    rtype: u16,
    ttl: u32,
    rdata: Vec<u8>,
}

/// An authoritative zone read from a master file.
#[derive(Debug, Clone, Default)]
pub struct Zone {
    /// Apexes (SOA owners, or the first `$ORIGIN`) in lower-case wire form.
    apexes: Vec<Vec<u8>>,
    /// Owner (lower-case wire form) → records; empty non-terminals have no records.
    names: HashMap<Box<[u8]>, Vec<Rr>>,
    /// TTL of negative answers (the SOA minimum, or the default TTL).
    negative_ttl: u32,
}

/// A bad line in a zone file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ZoneError {
    pub line: usize,
    pub reason: String,
}

impl Zone {
    /// Parses a master file (RFC 1035 §5: `$ORIGIN`, `$TTL`, `@`, relative and absolute names,
    /// an owner left blank for the previous one, comments, parentheses) with records of types
    /// A, AAAA, CNAME, NS, PTR, MX, TXT and SOA in class IN. `default_ttl` applies when
    /// neither the record nor `$TTL` gives one.
    pub fn parse(text: &str, default_ttl: u32) -> Result<Self, ZoneError> {
        let mut zone = Zone::default();
        let mut origin: Option<String> = None;
        let mut first_origin: Option<String> = None;
        let mut ttl = default_ttl;
        let mut last_owner: Option<String> = None;
        let mut soa_minimum: Option<u32> = None;
        let mut pending: Option<(usize, Vec<Token>, bool)> = None; // (first line, words, blank owner)
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let err = |reason: String| ZoneError { line: line_no, reason };
            let tokens = tokenize(raw).map_err(|r| err(r.to_string()))?;
            // Parentheses join lines into one logical record.
            let (start, tokens, blank_owner) = match pending.take() {
                Some((start, mut acc, blank)) => {
                    acc.extend(tokens);
                    (start, acc, blank)
                }
                None => (line_no, tokens, raw.starts_with([' ', '\t'])),
            };
            match count_parens(&tokens) {
                0 => {}
                open if open > 0 => {
                    pending = Some((start, tokens, blank_owner));
                    continue;
                }
                _ => return Err(err("unbalanced parenthesis".into())),
            }
            let err = |reason: String| ZoneError { line: start, reason };
            let words: Vec<&Token> = tokens.iter().filter(|t| !t.paren).collect();
            let Some(first) = words.first() else { continue };
            if !first.quoted && first.text.starts_with('$') {
                let arg = words.get(1).map(|t| t.text.as_str());
                match (first.text.to_ascii_uppercase().as_str(), arg) {
                    ("$ORIGIN", Some(name)) => {
                        let o = absolute(name, origin.as_deref()).map_err(err)?;
                        first_origin.get_or_insert_with(|| o.clone());
                        origin = Some(o);
                    }
                    ("$TTL", Some(v)) => ttl = parse_ttl(v).map_err(err)?,
                    ("$INCLUDE", _) => return Err(err("$INCLUDE is not supported".into())),
                    (d, None) => return Err(err(format!("{d} needs an argument"))),
                    (d, _) => return Err(err(format!("unknown directive {d}"))),
                }
                continue;
            }
            let mut w = words.into_iter();
            let owner = if blank_owner {
                last_owner.clone().ok_or_else(|| err("a record without an owner comes first".into()))?
            } else {
                let t = w.next().expect("not empty");
                absolute(&t.text, origin.as_deref()).map_err(err)?
            };
            let mut rr_ttl = None;
            let mut rtype = None;
            for t in w.by_ref() {
                let upper = t.text.to_ascii_uppercase();
                if upper == "IN" {
                    continue;
                }
                if matches!(upper.as_str(), "CH" | "CS" | "HS") {
                    return Err(err(format!("class {upper} is not supported (only IN)")));
                }
                if rr_ttl.is_none() && t.text.starts_with(|c: char| c.is_ascii_digit()) {
                    rr_ttl = Some(parse_ttl(&t.text).map_err(err)?);
                    continue;
                }
                rtype = Some(type_from_str(&t.text).map_err(|e| err(e.to_string()))?);
                break;
            }
            let rtype = rtype.ok_or_else(|| err("no record type".into()))?;
            let args: Vec<&Token> = w.collect();
            let rdata = rdata(rtype, &args, origin.as_deref()).map_err(err)?;
            if rtype == TYPE_SOA {
                let min = u32::from_be_bytes(rdata[rdata.len() - 4..].try_into().expect("4 octets"));
                soa_minimum = Some(soa_minimum.map_or(min, |m: u32| m.min(min)));
            }
            let mut key = Vec::with_capacity(owner.len() + 1);
            encode_name(&owner, &mut key).map_err(|e| err(format!("owner {owner:?}: {e}")))?;
            key.make_ascii_lowercase();
            if rtype == TYPE_SOA && !zone.apexes.contains(&key) {
                zone.apexes.push(key.clone());
            }
            let rr = Rr { rtype, ttl: rr_ttl.unwrap_or(ttl), rdata };
            let records = zone.names.entry(key.into_boxed_slice()).or_default();
            if !records.contains(&rr) {
                records.push(rr);
            }
            last_owner = Some(owner);
        }
        if let Some((start, _, _)) = pending {
            return Err(ZoneError { line: start, reason: "parenthesis not closed".into() });
        }
        if zone.apexes.is_empty() {
            let origin = first_origin.ok_or(ZoneError {
                line: text.lines().count().max(1),
                reason: "no SOA record and no $ORIGIN: the zone's apex is unknown".into(),
            })?;
            let mut key = Vec::new();
            encode_name(&origin, &mut key).expect("checked when read");
            key.make_ascii_lowercase();
            zone.apexes.push(key);
        }
        // Names between an apex and an owner exist (empty non-terminals): NODATA, not NXDOMAIN.
        let owners: Vec<Box<[u8]>> = zone.names.keys().cloned().collect();
        for owner in owners {
            let Some(apex) = zone.apexes.iter().find(|a| is_subdomain(&owner, a)).cloned() else {
                continue;
            };
            let mut pos = 0;
            while owner.len() - pos > apex.len() {
                pos += 1 + owner[pos] as usize;
                zone.names.entry(owner[pos..].into()).or_default();
            }
        }
        zone.negative_ttl = soa_minimum.unwrap_or(ttl);
        Ok(zone)
    }

    /// Number of owner names (empty non-terminals included).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.names.len()
    }
}

/// Whether the wire name `name` equals `apex` or lies under it (both lower-case).
fn is_subdomain(name: &[u8], apex: &[u8]) -> bool {
    let mut pos = 0;
    loop {
        if name[pos..] == *apex {
            return true;
        }
        match name.get(pos) {
            Some(&len) if len > 0 => pos += 1 + len as usize,
            _ => return false,
        }
        if pos >= name.len() {
            return false;
        }
    }
}

/// One word of a zone file line.
#[derive(Debug, Clone)]
struct Token {
    text: String,
    quoted: bool,
    /// `(` or `)` (text holds which).
    paren: bool,
}

fn count_parens(tokens: &[Token]) -> i32 {
    tokens.iter().filter(|t| t.paren).map(|t| if t.text == "(" { 1 } else { -1 }).sum()
}

/// Splits a line into words, honouring quotes, parentheses and `;` comments.
fn tokenize(line: &str) -> Result<Vec<Token>, &'static str> {
    let mut tokens = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            ';' => break,
            c if c.is_whitespace() => {
                chars.next();
            }
            '(' | ')' => {
                chars.next();
                tokens.push(Token { text: c.to_string(), quoted: false, paren: true });
            }
            '"' => {
                chars.next();
                let mut text = String::new();
                loop {
                    match chars.next() {
                        None => return Err("unterminated quoted string"),
                        Some('"') => break,
                        Some('\\') => {
                            text.push('\\');
                            text.push(chars.next().ok_or("unterminated quoted string")?);
                        }
                        Some(c) => text.push(c),
                    }
                }
                tokens.push(Token { text, quoted: true, paren: false });
            }
            _ => {
                let mut text = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || matches!(c, ';' | '(' | ')' | '"') {
                        break;
                    }
                    text.push(c);
                    chars.next();
                    if c == '\\' {
                        if let Some(n) = chars.next() {
                            text.push(n);
                        }
                    }
                }
                tokens.push(Token { text, quoted: false, paren: false });
            }
        }
    }
    Ok(tokens)
}

/// The absolute, dotted form of `name` (relative names get the origin appended).
fn absolute(name: &str, origin: Option<&str>) -> Result<String, String> {
    if name.contains('\\') {
        return Err(format!("escapes in names are not supported: {name:?}"));
    }
    let abs = if name == "@" {
        origin.ok_or("@ used before $ORIGIN")?.to_string()
    } else if name.ends_with('.') {
        name.to_string()
    } else {
        let origin = origin.ok_or_else(|| format!("relative name {name:?} before $ORIGIN"))?;
        if origin == "." {
            format!("{name}.")
        } else {
            format!("{name}.{origin}")
        }
    };
    encode_name(&abs, &mut Vec::new()).map_err(|e| format!("name {abs:?}: {e}"))?;
    Ok(abs)
}

/// A TTL in seconds, or with BIND units (`1h30m`, `2d`, `1w`).
fn parse_ttl(s: &str) -> Result<u32, String> {
    let bad = || format!("{s:?} is not a TTL");
    if let Ok(v) = s.parse::<u32>() {
        return Ok(v);
    }
    let mut total: u64 = 0;
    let mut num: Option<u64> = None;
    for c in s.chars() {
        if let Some(d) = c.to_digit(10) {
            num = Some(num.unwrap_or(0).checked_mul(10).and_then(|n| n.checked_add(d as u64)).ok_or_else(bad)?);
            continue;
        }
        let unit = match c.to_ascii_lowercase() {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            'w' => 604800,
            _ => return Err(bad()),
        };
        total = total.checked_add(num.take().ok_or_else(bad)?.checked_mul(unit).ok_or_else(bad)?).ok_or_else(bad)?;
    }
    if num.is_some() {
        return Err(bad());
    }
    u32::try_from(total).map_err(|_| bad())
}

/// The wire form of a record's data.
fn rdata(rtype: u16, args: &[&Token], origin: Option<&str>) -> Result<Vec<u8>, String> {
    let name = |s: &str, out: &mut Vec<u8>| -> Result<(), String> {
        let abs = absolute(s, origin)?;
        encode_name(&abs, out).map_err(|e| format!("name {abs:?}: {e}"))
    };
    let want = |n: usize, what: &str| -> Result<(), String> {
        if args.len() == n {
            Ok(())
        } else {
            Err(format!("{what} expects {n} field(s), found {}", args.len()))
        }
    };
    let mut out = Vec::new();
    match rtype {
        TYPE_A => {
            want(1, "A")?;
            let ip: Ipv4Addr =
                args[0].text.parse().map_err(|_| format!("{:?} is not an IPv4 address", args[0].text))?;
            out.extend_from_slice(&ip.octets());
        }
        TYPE_AAAA => {
            want(1, "AAAA")?;
            let ip: Ipv6Addr =
                args[0].text.parse().map_err(|_| format!("{:?} is not an IPv6 address", args[0].text))?;
            out.extend_from_slice(&ip.octets());
        }
        TYPE_CNAME | TYPE_NS | TYPE_PTR => {
            want(1, "this type")?;
            name(&args[0].text, &mut out)?;
        }
        TYPE_MX => {
            want(2, "MX")?;
            let pref: u16 = args[0].text.parse().map_err(|_| format!("{:?} is not an MX preference", args[0].text))?;
            out.extend_from_slice(&pref.to_be_bytes());
            name(&args[1].text, &mut out)?;
        }
        TYPE_TXT => {
            if args.is_empty() {
                return Err("TXT needs at least one string".into());
            }
            for a in args {
                let s = unescape(&a.text)?;
                if s.len() > 255 {
                    return Err("TXT string longer than 255 octets".into());
                }
                out.push(s.len() as u8);
                out.extend_from_slice(&s);
            }
        }
        TYPE_SOA => {
            want(7, "SOA")?;
            name(&args[0].text, &mut out)?;
            name(&args[1].text, &mut out)?;
            for a in &args[2..] {
                out.extend_from_slice(&parse_ttl(&a.text)?.to_be_bytes());
            }
        }
        t => return Err(format!("record type {} is not supported", dnscost_wire::type_to_str(t))),
    }
    if out.len() > u16::MAX as usize {
        return Err("record data too long".into());
    }
    Ok(out)
}

/// A character-string with `\X` and `\DDD` escapes resolved.
fn unescape(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        match b.get(i + 1..i + 4) {
            Some(d) if d.iter().all(u8::is_ascii_digit) => {
                let v = d.iter().fold(0u32, |a, &x| a * 10 + u32::from(x - b'0'));
                out.push(u8::try_from(v).map_err(|_| format!("bad escape in {s:?}"))?);
                i += 4;
            }
            _ => {
                out.push(*b.get(i + 1).ok_or_else(|| format!("dangling backslash in {s:?}"))?);
                i += 2;
            }
        }
    }
    Ok(out)
}

fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Everything that decides answers: the synthetic set and the file zone, both optional.
#[derive(Debug, Clone)]
pub struct Responder {
    pub synthetic: Option<Synthetic>,
    pub zone: Option<Zone>,
    /// What names outside both get.
    pub outside: OutsideAnswer,
}

/// What the responder answers for names outside the synthetic set and the zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutsideAnswer {
    /// This RCODE: REFUSED (an authoritative server's) or NXDOMAIN.
    Rcode(u8),
    /// Any name exists: an address of its own for A and AAAA (from a hash of the name), no
    /// data for other types (with an SOA, so that it is cached), with this TTL; a capture's
    /// names replayed through a resolver resolve as the operator's did.
    Any(u32),
}

impl Responder {
    /// Appends the response to the query `msg` to `out`, truncated if `framing` demands it
    /// (UDP). Returns `None` when nothing must be sent (a response, or fewer octets than a
    /// header).
    pub fn respond(&self, msg: &[u8], out: &mut Vec<u8>, framing: Framing) -> Option<Reply> {
        if msg.len() < HEADER_LEN || msg[2] & 0x80 != 0 {
            return None;
        }
        let opcode = (msg[2] >> 3) & 0x0F;
        if opcode != 0 {
            return Some(header_only(msg, NOTIMP, out));
        }
        let Ok(q) = parse_query(msg) else {
            return Some(header_only(msg, FORMERR, out));
        };
        let qname = &msg[q.qname.clone()];
        let mut lower = [0u8; MAX_NAME];
        let Some(lower) = lower.get_mut(..qname.len()) else {
            return Some(header_only(msg, FORMERR, out));
        };
        lower.copy_from_slice(qname);
        lower.make_ascii_lowercase();
        let lower = &*lower;
        let start = out.len();
        // Any name's negative answer carries an SOA (see `OutsideAnswer::Any`).
        let negative_soa = std::cell::Cell::new(false);
        let mut finish = |rcode: u8, ttl: u32, answers: &mut dyn Iterator<Item = (u16, u32, &[u8])>| {
            let mut b = ResponseBuilder::new(msg, &q, rcode, out);
            let mut min_ttl = None;
            for (rtype, ttl, rdata) in answers {
                b.answer(rtype, ttl, rdata);
                min_ttl = Some(min_ttl.map_or(ttl, |m: u32| m.min(ttl)));
            }
            if negative_soa.get() && min_ttl.is_none() {
                b.authority(TYPE_SOA, ttl, &any_soa(ttl));
            }
            b.finish(framing);
            Some(Reply { len: out.len() - start, rcode, ttl: min_ttl.unwrap_or(ttl) })
        };
        if q.qclass != CLASS_IN && q.qclass != CLASS_ANY {
            return finish(REFUSED, 0, &mut std::iter::empty());
        }
        let qtype = q.qtype;
        if let Some(zone) = &self.zone {
            if let Some(records) = zone.names.get(lower) {
                let matching = |r: &&Rr| r.rtype == qtype || qtype == TYPE_ANY;
                let mut answers: &mut dyn Iterator<Item = (u16, u32, &[u8])> =
                    &mut records.iter().filter(matching).map(|r| (r.rtype, r.ttl, r.rdata.as_slice()));
                let mut cname;
                if !records.iter().any(|r| matching(&r)) {
                    // No record of the type: the CNAME (the resolver follows it), or NODATA.
                    cname =
                        records.iter().filter(|r| r.rtype == TYPE_CNAME).map(|r| (r.rtype, r.ttl, r.rdata.as_slice()));
                    answers = &mut cname;
                }
                return finish(NOERROR, zone.negative_ttl, answers);
            }
        }
        if let Some(syn) = &self.synthetic {
            if let Some(index) = syn.index(lower) {
                let v4 = [198, 18 + ((index >> 16) & 1) as u8, (index >> 8) as u8, index as u8];
                let mut v6 = [0u8; 16];
                v6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
                v6[8..].copy_from_slice(&index.to_be_bytes());
                let a = (qtype == TYPE_A || qtype == TYPE_ANY).then_some((TYPE_A, syn.ttl, &v4[..]));
                let aaaa = (qtype == TYPE_AAAA || qtype == TYPE_ANY).then_some((TYPE_AAAA, syn.ttl, &v6[..]));
                return finish(NOERROR, syn.ttl, &mut a.into_iter().chain(aaaa));
            }
        }
        if let Some(zone) = &self.zone {
            if zone.apexes.iter().any(|apex| is_subdomain(lower, apex)) {
                return finish(NXDOMAIN, zone.negative_ttl, &mut std::iter::empty());
            }
        }
        if let Some(syn) = &self.synthetic {
            if *lower == *syn.tld {
                let soa = (qtype == TYPE_SOA || qtype == TYPE_ANY).then_some((TYPE_SOA, syn.ttl, &syn.soa[..]));
                return finish(NOERROR, syn.ttl, &mut soa.into_iter());
            }
            // Under the synthetic TLD, a name outside the set does not exist, unless any does.
            if is_subdomain(lower, &syn.tld) && !matches!(self.outside, OutsideAnswer::Any(_)) {
                return finish(NXDOMAIN, syn.ttl, &mut std::iter::empty());
            }
        }
        match self.outside {
            OutsideAnswer::Rcode(rcode) => finish(rcode, 0, &mut std::iter::empty()),
            OutsideAnswer::Any(ttl) => {
                // FNV-1a of the lower-case name: the same name, the same addresses.
                let hash = lower
                    .iter()
                    .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
                let v4 = [198, 18 + (hash >> 63) as u8, (hash >> 8) as u8, hash as u8];
                let mut v6 = [0u8; 16];
                v6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
                v6[8..].copy_from_slice(&hash.to_be_bytes());
                let a = (qtype == TYPE_A || qtype == TYPE_ANY).then_some((TYPE_A, ttl, &v4[..]));
                let aaaa = (qtype == TYPE_AAAA || qtype == TYPE_ANY).then_some((TYPE_AAAA, ttl, &v6[..]));
                negative_soa.set(true);
                finish(NOERROR, ttl, &mut a.into_iter().chain(aaaa))
            }
        }
    }
}

/// The SOA of any name's negative answer under `--outside answer`: every name the apex of a
/// zone of its own, whose negative answers live the TTL (RFC 2308), so that resolvers cache
/// "no such type here" (a capture's HTTPS or MX queries) as a real server's answers let them:
/// a NODATA without an SOA is not cached.
fn any_soa(ttl: u32) -> Vec<u8> {
    let mut soa = Vec::with_capacity(64);
    for name in ["ns.dnscost.invalid.", "hostmaster.dnscost.invalid."] {
        encode_name(name, &mut soa).expect("a valid name");
    }
    for v in [1u32, 3600, 600, 86400, ttl] {
        soa.extend_from_slice(&v.to_be_bytes());
    }
    soa
}

/// A response without question or records (FORMERR, NOTIMP).
fn header_only(msg: &[u8], rcode: u8, out: &mut Vec<u8>) -> Reply {
    out.extend_from_slice(&msg[..2]);
    out.push(0x80 | (msg[2] & 0x79)); // QR, the opcode and RD echoed
    out.push(rcode);
    out.extend_from_slice(&[0; 8]);
    Reply { len: HEADER_LEN, rcode, ttl: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnscost_wire::{synthetic_name, QueryOptions, QueryTemplate};

    fn responder(zone: Option<&str>) -> Responder {
        Responder {
            synthetic: Some(Synthetic::new(10_000, "test", 86400).unwrap()),
            zone: zone.map(|z| Zone::parse(z, 3600).unwrap()),
            outside: OutsideAnswer::Rcode(REFUSED),
        }
    }

    fn ask(r: &Responder, name: &str, qtype: u16, opts: &QueryOptions) -> (Reply, Vec<u8>) {
        let t = QueryTemplate::new(name, qtype, opts).unwrap();
        let mut msg = Vec::new();
        t.write(0x1234, &mut msg);
        let mut out = vec![0xAA]; // answers are appended
        let reply = r.respond(&msg, &mut out, Framing::Stream).unwrap();
        assert_eq!(reply.len, out.len() - 1);
        let out = out.split_off(1);
        let view = dnscost_wire::parse_response(&out, Some(t.question())).unwrap();
        assert_eq!((view.id, view.rcode), (0x1234, reply.rcode));
        (reply, out)
    }

    fn ancount(m: &[u8]) -> u16 {
        u16::from_be_bytes([m[6], m[7]])
    }

    /// The rdata of the first answer (names in our answers are compressed to the question).
    fn first_rdata(m: &[u8]) -> &[u8] {
        let mut p = HEADER_LEN;
        while m[p] != 0 {
            p += 1 + m[p] as usize;
        }
        p += 5 + 2 + 8; // root, type/class, pointer, type/class/ttl
        let len = u16::from_be_bytes([m[p], m[p + 1]]) as usize;
        &m[p + 2..p + 2 + len]
    }

    #[test]
    fn synthetic_names_get_addresses() {
        let r = responder(None);
        let name = synthetic_name(258, 10_000, "test");
        let (reply, out) = ask(&r, &name, TYPE_A, &QueryOptions::default());
        assert_eq!((reply.rcode, reply.ttl, ancount(&out)), (0, 86400, 1));
        assert_eq!(first_rdata(&out), &[198, 18, 1, 2]);
        let (_, out) = ask(&r, &name.to_uppercase(), TYPE_AAAA, &QueryOptions::default());
        assert_eq!(first_rdata(&out), &"2001:db8::102".parse::<Ipv6Addr>().unwrap().octets());
        // Other types: NODATA.
        let (reply, out) = ask(&r, &name, TYPE_MX, &QueryOptions::default());
        assert_eq!((reply.rcode, ancount(&out)), (0, 0));
        // The index wraps inside 198.18.0.0/15.
        let big = Responder {
            synthetic: Some(Synthetic::new(200_000, "test", 60).unwrap()),
            zone: None,
            outside: OutsideAnswer::Rcode(REFUSED),
        };
        let (_, out) = ask(&big, &synthetic_name(131_073, 200_000, "test"), TYPE_A, &QueryOptions::default());
        assert_eq!(first_rdata(&out), &[198, 18, 0, 1]);
        let (_, out) = ask(&big, &synthetic_name(65_536, 200_000, "test"), TYPE_A, &QueryOptions::default());
        assert_eq!(first_rdata(&out), &[198, 19, 0, 0]);
    }

    #[test]
    fn other_names_are_nxdomain_or_refused() {
        let r = responder(None);
        let opts = QueryOptions::default();
        assert_eq!(ask(&r, "q10000.test", TYPE_A, &opts).0.rcode, NXDOMAIN);
        assert_eq!(ask(&r, "q001.test", TYPE_A, &opts).0.rcode, NXDOMAIN);
        assert_eq!(ask(&r, "www.q0001.test", TYPE_A, &opts).0.rcode, NXDOMAIN);
        assert_eq!(ask(&r, "q0001.example", TYPE_A, &opts).0.rcode, REFUSED);
        assert_eq!(ask(&r, "test.example", TYPE_A, &opts).0.rcode, REFUSED);
        assert_eq!(ask(&r, ".", TYPE_NS, &opts).0.rcode, REFUSED);
        let (reply, out) = ask(&r, "test", TYPE_SOA, &opts);
        assert_eq!((reply.rcode, ancount(&out)), (NOERROR, 1));
        let (reply, out) = ask(&r, "TEST.", TYPE_A, &opts);
        assert_eq!((reply.rcode, ancount(&out)), (NOERROR, 0));
        let off = Responder { synthetic: None, zone: None, outside: OutsideAnswer::Rcode(REFUSED) };
        assert_eq!(ask(&off, "q0001.test", TYPE_A, &opts).0.rcode, REFUSED);
        // A resolver's answer outside, asked for: the lab's names keep theirs.
        let lab = Responder { outside: OutsideAnswer::Rcode(NXDOMAIN), ..responder(None) };
        assert_eq!(ask(&lab, "accounts.google.com", TYPE_A, &opts).0.rcode, NXDOMAIN);
        assert_eq!(ask(&lab, ".", TYPE_NS, &opts).0.rcode, NXDOMAIN);
        // --outside answer: any name exists, each with addresses of its own, the same each time.
        let any = Responder { outside: OutsideAnswer::Any(300), ..responder(None) };
        let (reply, first) = ask(&any, "accounts.google.com", TYPE_A, &opts);
        assert_eq!((reply.rcode, reply.ttl), (NOERROR, 300));
        let address = |out: &[u8]| {
            // The A record's data: after its type, class, TTL (300) and length (4).
            let head = [0, 1, 0, 1, 0, 0, 1, 0x2c, 0, 4];
            let at = out.windows(head.len()).rposition(|w| w == head).expect("an A record") + head.len();
            out[at..at + 4].to_vec()
        };
        assert_eq!(address(&ask(&any, "ACCOUNTS.google.com", TYPE_A, &opts).1), address(&first));
        assert_ne!(address(&ask(&any, "mail.google.com", TYPE_A, &opts).1), address(&first));
        // No data, with an SOA in the authority section (its minimum the TTL), so that it is
        // cached; the answers have none.
        let (reply, out) = ask(&any, "accounts.google.com", TYPE_MX, &opts);
        assert_eq!(reply.rcode, NOERROR);
        assert_eq!((&out[6..8], &out[8..10]), (&[0, 0][..], &[0, 1][..]), "no answer, one authority record");
        let soa = [0u8, 6, 0, 1, 0, 0, 1, 0x2c];
        let at = out.windows(soa.len()).position(|w| w == soa).expect("an SOA of TTL 300") + soa.len();
        let end = at + 2 + usize::from(u16::from_be_bytes([out[at], out[at + 1]]));
        assert_eq!(&out[end - 4..end], &300u32.to_be_bytes(), "its minimum, the negative TTL");
        assert_eq!(&ask(&any, "accounts.google.com", TYPE_A, &opts).1[8..10], &[0, 0]);
        assert_eq!(ask(&lab, "q0001.test", TYPE_A, &opts).0.rcode, NOERROR);
    }

    #[test]
    fn malformed_queries_get_formerr_and_other_opcodes_notimp() {
        let r = responder(None);
        let t = QueryTemplate::new("q0001.test", 1, &QueryOptions::default()).unwrap();
        let mut out = Vec::new();
        // Too short or a response: silence.
        assert_eq!(r.respond(&t.bytes()[..11], &mut out, Framing::Datagram), None);
        let mut resp = t.bytes().to_vec();
        resp[2] |= 0x80;
        assert_eq!(r.respond(&resp, &mut out, Framing::Datagram), None);
        assert!(out.is_empty());
        // Truncated question: FORMERR, echoing the ID.
        let mut bad = t.bytes().to_vec();
        bad[0] = 7;
        bad.truncate(16);
        let reply = r.respond(&bad, &mut out, Framing::Datagram).unwrap();
        assert_eq!((reply.rcode, reply.len, out[0], out[2] & 0x80, out[3] & 0x0F), (FORMERR, 12, 7, 0x80, FORMERR));
        // Two questions: FORMERR.
        let mut two = t.bytes().to_vec();
        two[5] = 2;
        out.clear();
        assert_eq!(r.respond(&two, &mut out, Framing::Datagram).unwrap().rcode, FORMERR);
        // NOTIFY (opcode 4): NOTIMP with the opcode echoed.
        let mut notify = t.bytes().to_vec();
        notify[2] = (notify[2] & 0x87) | (4 << 3);
        out.clear();
        assert_eq!(r.respond(&notify, &mut out, Framing::Datagram).unwrap().rcode, NOTIMP);
        assert_eq!((out[2] >> 3) & 0x0F, 4);
    }

    #[test]
    fn padding_and_edns_are_kept() {
        let r = responder(None);
        let opts = QueryOptions { padding: true, ..Default::default() };
        let (reply, out) = ask(&r, "q0042.test", TYPE_A, &opts);
        assert_eq!(reply.rcode, NOERROR);
        assert_eq!(out.len() % 468, 0);
        assert_eq!(u16::from_be_bytes([out[10], out[11]]), 1); // OPT in additional
        let (_, out) = ask(&r, "nope.test", TYPE_A, &opts);
        assert_eq!(out.len() % 468, 0);
        let (_, out) = ask(&r, "q0042.test", TYPE_A, &QueryOptions { edns_udp_size: None, ..Default::default() });
        assert_eq!(u16::from_be_bytes([out[10], out[11]]), 0);
    }

    const ZONE: &str = r#"
$ORIGIN example.test.   ; the zone
$TTL 1h
@       IN SOA ns1 hostmaster (
                2024010101 ; serial
                3600 600 1w 300 )
        IN NS  ns1
        IN NS  ns2.example.test.
ns1     IN A   192.0.2.53
ns2  60 IN A   192.0.2.54
www        A   192.0.2.1
www     IN AAAA 2001:db8::1
alias   CNAME www
@       MX 10 mail
mail.example.test. 120 IN A 192.0.2.25
txt     TXT "hello world" "semi;colon" plain \"q\"
a.b.deep A 192.0.2.99
"#;

    #[test]
    fn zone_file_parses() {
        let z = Zone::parse(ZONE, 86400).unwrap();
        assert_eq!(z.apexes.len(), 1);
        assert_eq!(z.negative_ttl, 300);
        // apex, ns1, ns2, www, alias, mail, txt, a.b.deep + the empty non-terminal b.deep and deep
        assert_eq!(z.len(), 10);
        let r = Responder { synthetic: None, zone: Some(z), outside: OutsideAnswer::Rcode(REFUSED) };
        let opts = QueryOptions::default();
        let (reply, out) = ask(&r, "www.example.test", TYPE_A, &opts);
        assert_eq!((reply.rcode, reply.ttl, ancount(&out)), (NOERROR, 3600, 1));
        assert_eq!(first_rdata(&out), &[192, 0, 2, 1]);
        let (reply, out) = ask(&r, "ns2.example.test", TYPE_A, &opts);
        assert_eq!((reply.ttl, ancount(&out)), (60, 1));
        assert_eq!(ancount(&ask(&r, "example.test", TYPE_NS, &opts).1), 2);
        let (_, out) = ask(&r, "example.test", TYPE_MX, &opts);
        assert_eq!(first_rdata(&out), b"\x00\x0a\x04mail\x07example\x04test\x00");
        let (_, out) = ask(&r, "Example.Test", TYPE_SOA, &opts);
        assert_eq!(&first_rdata(&out)[..4], b"\x03ns1");
        let (_, out) = ask(&r, "alias.example.test", TYPE_A, &opts);
        assert_eq!((ancount(&out), first_rdata(&out)), (1, &b"\x03www\x07example\x04test\x00"[..]));
        let (_, out) = ask(&r, "txt.example.test", TYPE_TXT, &opts);
        assert_eq!(first_rdata(&out), b"\x0bhello world\x0asemi;colon\x05plain\x03\"q\"");
        // Empty non-terminal: NODATA; missing name: NXDOMAIN with the SOA minimum; outside: REFUSED.
        let (reply, out) = ask(&r, "b.deep.example.test", TYPE_A, &opts);
        assert_eq!((reply.rcode, ancount(&out)), (NOERROR, 0));
        let (reply, _) = ask(&r, "nope.example.test", TYPE_A, &opts);
        assert_eq!((reply.rcode, reply.ttl), (NXDOMAIN, 300));
        assert_eq!(ask(&r, "www.example.org", TYPE_A, &opts).0.rcode, REFUSED);
        let (reply, out) = ask(&r, "www.example.test", TYPE_TXT, &opts);
        assert_eq!((reply.rcode, ancount(&out)), (NOERROR, 0));
    }

    #[test]
    fn zone_and_synthetic_set_together() {
        let r = responder(Some("$ORIGIN test.\nwww 300 A 192.0.2.7\n"));
        let opts = QueryOptions::default();
        assert_eq!(first_rdata(&ask(&r, "www.test", TYPE_A, &opts).1), &[192, 0, 2, 7]);
        assert_eq!(first_rdata(&ask(&r, "q0007.test", TYPE_A, &opts).1), &[198, 18, 0, 7]);
        assert_eq!(ask(&r, "other.test", TYPE_A, &opts).0.rcode, NXDOMAIN);
    }

    #[test]
    fn zone_errors_name_the_line() {
        let cases = [
            ("$ORIGIN t.\nwww A 300.1.1.1\n", 2, "not an IPv4"),
            ("www.t. A 1.2.3.4\nwww2 A 1.2.3.5\n", 2, "before $ORIGIN"),
            ("$ORIGIN t.\n\n\nx IN SRV 1 2 3 y\n", 4, "not supported"),
            ("$ORIGIN t.\nx IN BOGUS 1\n", 2, "unknown record type"),
            ("$ORIGIN t.\n@ SOA a b ( 1 2 3\n 4\n", 2, "not closed"),
            ("$ORIGIN t.\nx TXT \"open\n", 2, "unterminated"),
            ("$ORIGIN t.\nx CH A 1.2.3.4\n", 2, "class CH"),
            ("$ORIGIN t.\n$TTL soon\n", 2, "not a TTL"),
            ("x.t. A 1.2.3.4\n", 1, "apex is unknown"),
            ("$ORIGIN t.\n  A 1.2.3.4\n", 2, "without an owner"),
            ("$ORIGIN t.\nx MX ten y\n", 2, "MX preference"),
        ];
        for (text, line, what) in cases {
            let e = Zone::parse(text, 60).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(what), "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("line {line}: ")));
        }
        assert_eq!(parse_ttl("1h30m"), Ok(5400));
        assert_eq!(parse_ttl("2D"), Ok(172_800));
        assert!(parse_ttl("5x").is_err());
    }

    #[test]
    fn never_panics_on_garbage() {
        let r = responder(Some(ZONE));
        let t =
            QueryTemplate::new("www.example.test", 1, &QueryOptions { padding: true, ..Default::default() }).unwrap();
        let base = t.bytes().to_vec();
        let mut out = Vec::new();
        let mut x: u32 = 1;
        for i in 0..20_000 {
            let mut m = base.clone();
            m.truncate(HEADER_LEN + (i % (base.len() - HEADER_LEN + 1)));
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let at = x as usize % m.len();
                m[at] = (x >> 8) as u8;
            }
            out.clear();
            let _ = r.respond(&m, &mut out, Framing::Datagram);
        }
    }
}
