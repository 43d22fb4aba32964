//! Domain names, record type mnemonics and the synthetic zone's naming scheme.

use crate::WireError;

/// Appends `name` (dotted, with or without the final dot; `\DDD` (a decimal octet) and `\X`
/// (X itself: a dot or a backslash, say) escapes read as in a master file, RFC 1035 §5.1) to
/// `out` in uncompressed wire form.
pub fn encode_name(name: &str, out: &mut Vec<u8>) -> Result<(), WireError> {
    let start = out.len();
    let text = if name == "." { &[][..] } else { name.as_bytes() };
    // Where the length octet of the label being read is.
    let mut label: Option<usize> = None;
    let mut i = 0;
    while i < text.len() {
        let at = *label.get_or_insert_with(|| {
            out.push(0);
            out.len() - 1
        });
        let octet = match text[i] {
            b'.' => {
                if out.len() == at + 1 {
                    return Err(WireError::BadName("empty label"));
                }
                label = None;
                i += 1;
                continue;
            }
            b'\\' => match text.get(i + 1..i + 4) {
                Some(d) if d[0].is_ascii_digit() => {
                    let value = d
                        .iter()
                        .try_fold(0u16, |v, &c| c.is_ascii_digit().then(|| v * 10 + u16::from(c - b'0')))
                        .and_then(|v| u8::try_from(v).ok())
                        .ok_or(WireError::BadName("bad escape (\\DDD is three digits, 000 to 255)"))?;
                    i += 4;
                    value
                }
                _ => {
                    let &c = text.get(i + 1).ok_or(WireError::BadName("bad escape (a backslash at the end)"))?;
                    if c.is_ascii_digit() {
                        return Err(WireError::BadName("bad escape (\\DDD is three digits, 000 to 255)"));
                    }
                    i += 2;
                    c
                }
            },
            c => {
                i += 1;
                c
            }
        };
        if out.len() - at > 63 {
            return Err(WireError::BadName("label longer than 63 octets"));
        }
        out.push(octet);
        out[at] += 1;
        if out.len() - start > 255 {
            return Err(WireError::BadName("name longer than 255 octets"));
        }
    }
    out.push(0);
    if out.len() - start > 255 {
        return Err(WireError::BadName("name longer than 255 octets"));
    }
    Ok(())
}

/// Where a name in a message ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NameEnd {
    /// Offset just past the name.
    pub end: usize,
    /// The name ends in a compression pointer (its last two octets).
    pub pointer: bool,
}

/// Reads a name starting at `pos` (up to a compression pointer, not following it); returns
/// where it ends. A name of more than 255 octets (RFC 1035 §3.1, root octet included) is an
/// error.
pub(crate) fn skip_name(msg: &[u8], mut pos: usize) -> Result<NameEnd, WireError> {
    let start = pos;
    loop {
        let len = *msg.get(pos).ok_or(WireError::Truncated)? as usize;
        if len == 0 {
            pos += 1;
            break;
        }
        if len & 0xC0 != 0 {
            // A compression pointer ends the name (two octets).
            if len & 0xC0 != 0xC0 {
                return Err(WireError::BadName("reserved label type"));
            }
            if pos + 2 > msg.len() {
                return Err(WireError::Truncated);
            }
            return Ok(NameEnd { end: pos + 2, pointer: true });
        }
        pos += 1 + len;
        if pos - start > 255 {
            return Err(WireError::BadName("name longer than 255 octets"));
        }
    }
    if pos - start > 255 {
        return Err(WireError::BadName("name longer than 255 octets"));
    }
    if pos > msg.len() {
        return Err(WireError::Truncated);
    }
    Ok(NameEnd { end: pos, pointer: false })
}

/// Lower-case dotted form (with the final dot) of the uncompressed wire name `wire`.
pub fn name_to_string(wire: &[u8]) -> String {
    let mut s = String::with_capacity(wire.len());
    let mut pos = 0;
    while let Some(&len) = wire.get(pos) {
        if len == 0 || len & 0xC0 != 0 {
            break;
        }
        let label = wire.get(pos + 1..pos + 1 + len as usize).unwrap_or(&[]);
        for &b in label {
            s.push(b.to_ascii_lowercase() as char);
        }
        s.push('.');
        pos += 1 + len as usize;
    }
    if s.is_empty() {
        s.push('.');
    }
    s
}

/// The `index`-th of `count` synthetic names under `tld`: `q` and zero-padded digits, so
/// that every name of a set has the same length (`q0042.test.` for count 10 000).
pub fn synthetic_name(index: u64, count: u64, tld: &str) -> String {
    let width = digits(count.saturating_sub(1));
    format!("q{index:0width$}.{}.", tld.trim_matches('.'))
}

/// Inverse of [`synthetic_name`]: the index of `name` (lower-case, dotted, final dot) if it
/// belongs to the set of `count` names under `tld`.
pub fn synthetic_index(name: &str, count: u64, tld: &str) -> Option<u64> {
    let rest = name.strip_prefix('q')?;
    let (label, zone) = rest.split_once('.')?;
    if zone.trim_end_matches('.') != tld.trim_matches('.') {
        return None;
    }
    if label.len() != digits(count.saturating_sub(1)) || !label.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index: u64 = label.parse().ok()?;
    (index < count).then_some(index)
}

fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

const TYPES: &[(&str, u16)] = &[
    ("A", 1),
    ("NS", 2),
    ("CNAME", 5),
    ("SOA", 6),
    ("PTR", 12),
    ("MX", 15),
    ("TXT", 16),
    ("AAAA", 28),
    ("SRV", 33),
    ("NAPTR", 35),
    ("DS", 43),
    ("RRSIG", 46),
    ("NSEC", 47),
    ("DNSKEY", 48),
    ("SVCB", 64),
    ("HTTPS", 65),
    ("CAA", 257),
    ("ANY", 255),
];

/// Parses a record type mnemonic (`AAAA`, `https`) or the generic `TYPE65` form.
pub fn type_from_str(s: &str) -> Result<u16, WireError> {
    let upper = s.to_ascii_uppercase();
    if let Some(&(_, v)) = TYPES.iter().find(|(n, _)| *n == upper) {
        return Ok(v);
    }
    upper.strip_prefix("TYPE").and_then(|n| n.parse().ok()).ok_or_else(|| WireError::UnknownType(s.to_string()))
}

/// The mnemonic of a record type, or `TYPEnnn`.
pub fn type_to_str(t: u16) -> String {
    TYPES.iter().find(|(_, v)| *v == t).map(|(n, _)| n.to_string()).unwrap_or_else(|| format!("TYPE{t}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_names_have_equal_length_and_round_trip() {
        let names: Vec<String> = (0..1000).map(|i| synthetic_name(i, 1000, "test")).collect();
        assert!(names.iter().all(|n| n.len() == names[0].len()));
        assert_eq!(names[7], "q007.test.");
        for (i, n) in names.iter().enumerate() {
            assert_eq!(synthetic_index(n, 1000, "test"), Some(i as u64));
        }
        assert_eq!(synthetic_index("q1000.test.", 1000, "test"), None);
        assert_eq!(synthetic_index("q07.test.", 1000, "test"), None);
        assert_eq!(synthetic_index("q007.example.", 1000, "test"), None);
        assert_eq!(synthetic_name(0, 1, "test."), "q0.test.");
    }

    #[test]
    fn names_encode_and_decode() {
        let mut w = Vec::new();
        encode_name("Www.Example.TEST.", &mut w).unwrap();
        assert_eq!(w, b"\x03Www\x07Example\x04TEST\x00");
        assert_eq!(name_to_string(&w), "www.example.test.");
        assert_eq!(skip_name(&w, 0), Ok(NameEnd { end: w.len(), pointer: false }));
        assert_eq!(skip_name(b"\x01a\xC0\x0C", 0), Ok(NameEnd { end: 4, pointer: true }));
        let mut root = Vec::new();
        encode_name(".", &mut root).unwrap();
        assert_eq!(root, b"\x00");
        assert!(encode_name("a..b", &mut Vec::new()).is_err());
        assert!(encode_name("a..", &mut Vec::new()).is_err());
        assert!(encode_name(".a", &mut Vec::new()).is_err());
        assert!(encode_name(&"a".repeat(64), &mut Vec::new()).is_err());
        let long = vec!["abcdefghi"; 30].join(".");
        assert!(encode_name(&long, &mut Vec::new()).is_err());
    }

    #[test]
    fn escapes_read_as_in_a_master_file() {
        let wire = |name: &str| {
            let mut w = Vec::new();
            encode_name(name, &mut w).map(|()| w)
        };
        assert_eq!(wire(r"a\032b\000\255.\#c.test.").unwrap(), b"\x05a b\x00\xff\x02#c\x04test\x00");
        assert_eq!(wire(r"a\.b.test").unwrap(), b"\x03a.b\x04test\x00");
        assert_eq!(wire(r"\\.").unwrap(), b"\x01\\\x00");
        assert_eq!(wire(r"\..").unwrap(), b"\x01.\x00");
        let bad = "bad escape (\\DDD is three digits, 000 to 255)";
        for name in [r"a\256.test", r"a\03.test", r"a\3"] {
            assert_eq!(wire(name), Err(WireError::BadName(bad)), "{name}");
        }
        assert_eq!(wire(r"a\"), Err(WireError::BadName("bad escape (a backslash at the end)")));
        // An escaped octet counts once toward a label's 63.
        assert!(wire(&"\\000".repeat(63)).is_ok());
        assert_eq!(wire(&"\\000".repeat(64)), Err(WireError::BadName("label longer than 63 octets")));
    }

    #[test]
    fn names_stop_at_255_octets_root_included() {
        // Labels of 63, 63, 63 and 62 octets (plus length octets) make 255 with the root; one
        // more octet makes 256.
        let wire = |last: usize| {
            let mut w = Vec::new();
            for len in [63, 63, 63, last] {
                w.push(len as u8);
                w.extend(std::iter::repeat_n(b'a', len));
            }
            w.push(0);
            w
        };
        assert_eq!(wire(61).len(), 255);
        assert_eq!(skip_name(&wire(61), 0), Ok(NameEnd { end: 255, pointer: false }));
        assert_eq!(wire(62).len(), 256);
        assert_eq!(skip_name(&wire(62), 0), Err(WireError::BadName("name longer than 255 octets")));
    }

    #[test]
    fn types_parse() {
        assert_eq!(type_from_str("aaaa"), Ok(28));
        assert_eq!(type_from_str("TYPE65"), Ok(65));
        assert_eq!(type_to_str(65), "HTTPS");
        assert_eq!(type_to_str(999), "TYPE999");
        assert!(type_from_str("BOGUS").is_err());
    }
}
