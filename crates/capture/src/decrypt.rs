//! TLS 1.3 application data opened with an NSS key log (`SSLKEYLOGFILE`, what browsers, Go,
//! rustls and `dnscost-engine serve --keylog` write), so that a DoT or DoH connection's queries
//! are counted exactly: each client's `CLIENT_TRAFFIC_SECRET_0` gives the key and IV of its
//! records (RFC 8446 §7.1, §7.3), found by the ClientHello's random. TLS 1.2, a key update and
//! 0-RTT data are not opened (the flow keeps its estimate).

use std::collections::HashMap;

use aws_lc_rs::{aead, hkdf};

/// Per ClientHello random, the client's first application traffic secret.
#[derive(Debug, Default)]
pub struct KeyLog {
    client: HashMap<[u8; 32], Vec<u8>>,
}

impl KeyLog {
    /// Reads a key log's lines; lines of other labels, comments and lines that do not read
    /// are skipped (a key log is appended to by many connections).
    pub fn parse(text: &str) -> Self {
        let mut client = HashMap::new();
        for line in text.lines() {
            let mut parts = line.split_ascii_whitespace();
            if let (Some("CLIENT_TRAFFIC_SECRET_0"), Some(random), Some(secret)) =
                (parts.next(), parts.next(), parts.next())
            {
                if let (Some(random), Some(secret)) = (hex(random), hex(secret)) {
                    if let Ok(random) = <[u8; 32]>::try_from(random) {
                        client.insert(random, secret);
                    }
                }
            }
        }
        KeyLog { client }
    }

    /// Connections the log holds a client secret for.
    pub fn len(&self) -> usize {
        self.client.len()
    }

    pub fn is_empty(&self) -> bool {
        self.client.is_empty()
    }

    /// The opener of the client's records of the connection whose ClientHello had `random`,
    /// with the server's chosen `suite`; None without its secret or for a suite not known.
    pub fn client_opener(&self, random: &[u8; 32], suite: u16) -> Option<Opener> {
        Opener::new(self.client.get(random)?, suite)
    }
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// Opens one direction's TLS 1.3 records, in order.
pub struct Opener {
    key: aead::LessSafeKey,
    iv: [u8; 12],
    seq: u64,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener").field("seq", &self.seq).finish_non_exhaustive()
    }
}

struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand-Label (RFC 8446 §7.1) with an empty context.
fn expand_label(prk: &hkdf::Prk, label: &str, out: &mut [u8]) -> Option<()> {
    let full = [b"tls13 ", label.as_bytes()].concat();
    let length = (out.len() as u16).to_be_bytes();
    let info = [&length[..], &[full.len() as u8], &full, &[0u8]];
    prk.expand(&info, Len(out.len())).ok()?.fill(out).ok()
}

impl Opener {
    /// The opener of records protected with the traffic `secret` under cipher `suite`
    /// (`TLS_AES_128_GCM_SHA256`, `TLS_AES_256_GCM_SHA384`, `TLS_CHACHA20_POLY1305_SHA256`).
    pub fn new(secret: &[u8], suite: u16) -> Option<Self> {
        let (algorithm, hash) = match suite {
            0x1301 => (&aead::AES_128_GCM, hkdf::HKDF_SHA256),
            0x1302 => (&aead::AES_256_GCM, hkdf::HKDF_SHA384),
            0x1303 => (&aead::CHACHA20_POLY1305, hkdf::HKDF_SHA256),
            _ => return None,
        };
        let prk = hkdf::Prk::new_less_safe(hash, secret);
        let mut key = vec![0u8; algorithm.key_len()];
        let mut iv = [0u8; 12];
        expand_label(&prk, "key", &mut key)?;
        expand_label(&prk, "iv", &mut iv)?;
        let key = aead::LessSafeKey::new(aead::UnboundKey::new(algorithm, &key).ok()?);
        Some(Opener { key, iv, seq: 0 })
    }

    /// The next record's content type and plaintext, from its 5-octet header and its body;
    /// None when it does not open (a wrong key, a record missed).
    pub fn open(&mut self, header: [u8; 5], body: &[u8]) -> Option<(u8, Vec<u8>)> {
        let mut nonce = self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq += 1;
        let mut buf = body.to_vec();
        let plain = self
            .key
            .open_in_place(aead::Nonce::assume_unique_for_key(nonce), aead::Aad::from(header), &mut buf)
            .ok()?;
        // TLSInnerPlaintext: the content, its type, zeros.
        let end = plain.iter().rposition(|&b| b != 0)?;
        Some((plain[end], plain[..end].to_vec()))
    }
}

/// Counts the queries in a client's decrypted application data, octets in order: DNS
/// messages behind two-octet lengths (DoT), or HTTP/2 HEADERS frames on client streams after
/// the connection preface (DoH: one per request).
#[derive(Debug)]
pub struct QueryCounter {
    doh: bool,
    buf: Vec<u8>,
    preface_left: usize,
    /// DoT: each query's type, in order.
    pub qtypes: Vec<u16>,
    pub queries: u64,
}

const PREFACE: usize = 24;

impl QueryCounter {
    pub fn new(doh: bool) -> Self {
        QueryCounter {
            doh,
            buf: Vec::new(),
            preface_left: if doh { PREFACE } else { 0 },
            qtypes: Vec::new(),
            queries: 0,
        }
    }

    /// Takes the next plaintext; returns the queries it completed.
    pub fn push(&mut self, data: &[u8]) -> u64 {
        self.buf.extend_from_slice(data);
        if self.preface_left > 0 {
            let n = self.preface_left.min(self.buf.len());
            self.buf.drain(..n);
            self.preface_left -= n;
        }
        let before = self.queries;
        loop {
            let (need, header) = if self.doh { (9, 9) } else { (2, 2) };
            if self.buf.len() < need {
                break;
            }
            let len = if self.doh {
                (usize::from(self.buf[0]) << 16) | (usize::from(self.buf[1]) << 8) | usize::from(self.buf[2])
            } else {
                usize::from(u16::from_be_bytes([self.buf[0], self.buf[1]]))
            };
            if self.buf.len() < header + len {
                break;
            }
            if self.doh {
                let stream = u32::from_be_bytes([self.buf[5], self.buf[6], self.buf[7], self.buf[8]]) & 0x7fff_ffff;
                // HEADERS on a client-initiated (odd) stream opens a request (trailers are not
                // sent by DoH clients).
                if self.buf[3] == 1 && stream % 2 == 1 {
                    self.queries += 1;
                }
            } else {
                let msg = &self.buf[2..2 + len];
                if msg.len() >= 12 && msg[2] & 0x80 == 0 {
                    self.queries += 1;
                    if let Some(t) = crate::stream::qtype(msg) {
                        self.qtypes.push(t);
                    }
                }
            }
            self.buf.drain(..header + len);
        }
        self.queries - before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_log_lines_are_read_by_label() {
        let r = "ab".repeat(32);
        let log = KeyLog::parse(&format!(
            "# comment\nCLIENT_HANDSHAKE_TRAFFIC_SECRET {r} 00\nCLIENT_TRAFFIC_SECRET_0 {r} {}\nCLIENT_TRAFFIC_SECRET_0 zz 00\n",
            "11".repeat(32)
        ));
        assert_eq!(log.len(), 1);
        assert!(log.client_opener(&[0xab; 32], 0x1301).is_some());
        assert!(log.client_opener(&[0xab; 32], 0xc02f).is_none(), "a TLS 1.2 suite");
        assert!(log.client_opener(&[0xcd; 32], 0x1301).is_none());
    }

    #[test]
    fn a_record_sealed_with_the_derived_key_opens() {
        // Seal as a TLS 1.3 peer would, with the key and IV derived the same way.
        let secret = [7u8; 32];
        let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &secret);
        let (mut key, mut iv) = ([0u8; 16], [0u8; 12]);
        expand_label(&prk, "key", &mut key).unwrap();
        expand_label(&prk, "iv", &mut iv).unwrap();
        let sealer = aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_128_GCM, &key).unwrap());
        let mut opener = Opener::new(&secret, 0x1301).unwrap();
        for (seq, text) in [(0u64, &b"\x00\x02ab"[..]), (1, b"second")] {
            let mut nonce = iv;
            for (n, s) in nonce[4..].iter_mut().zip(seq.to_be_bytes()) {
                *n ^= s;
            }
            let mut body = [text, &[23u8, 0, 0]].concat();
            let len = (body.len() + 16) as u16;
            let header = [23, 3, 3, len.to_be_bytes()[0], len.to_be_bytes()[1]];
            sealer
                .seal_in_place_append_tag(aead::Nonce::assume_unique_for_key(nonce), aead::Aad::from(header), &mut body)
                .unwrap();
            assert_eq!(opener.open(header, &body), Some((23, text.to_vec())));
        }
        // RFC 8446's derivation, checked by a known answer: RFC 8448's client application
        // traffic secret and its key and IV (simple 1-RTT handshake).
        let secret = hex("9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5").unwrap();
        let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &secret);
        expand_label(&prk, "key", &mut key).unwrap();
        expand_label(&prk, "iv", &mut iv).unwrap();
        assert_eq!(key.to_vec(), hex("17422dda596ed5d9acd890e3c63f5051").unwrap());
        assert_eq!(iv.to_vec(), hex("5b78923dee08579033e523d9").unwrap());
    }

    #[test]
    fn queries_are_counted_across_records() {
        let mut dot = QueryCounter::new(false);
        let q = [0u8, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, b'a', 0, 0, 28, 0, 1];
        let framed = [&(q.len() as u16).to_be_bytes()[..], &q].concat();
        assert_eq!(dot.push(&framed[..5]), 0);
        assert_eq!(dot.push(&[&framed[5..], &framed[..]].concat()), 2);
        assert_eq!(dot.qtypes, [28, 28]);
        let mut doh = QueryCounter::new(true);
        let frame = |kind: u8, stream: u32, len: usize| {
            [&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, 4][..], &stream.to_be_bytes(), &vec![0; len]]
                .concat()
        };
        let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        let data =
            [preface, frame(4, 0, 6), frame(1, 1, 20), frame(0, 1, 30), frame(1, 3, 20), frame(8, 0, 4)].concat();
        assert_eq!(doh.push(&data[..40]) + doh.push(&data[40..]), 2);
    }
}
