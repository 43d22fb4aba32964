//! HPACK (RFC 7541) for the client: a decoder for the server's header blocks (static and
//! dynamic tables, Huffman strings, table size updates) and the few encoder pieces request
//! templates need (integers, and literals raw or Huffman-coded; the dynamic table is modelled
//! by the templates).

use super::Http2Error;
use std::collections::VecDeque;

/// The static table (RFC 7541 Appendix A); index 1 is the first entry.
const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// Static-table indices the request templates use.
pub const METHOD_GET: usize = 2;
pub const METHOD_POST: usize = 3;
pub const SCHEME_HTTPS: usize = 7;
pub const AUTHORITY: usize = 1;
pub const PATH: usize = 4;
pub const ACCEPT_ENCODING: usize = 16;
pub const ACCEPT_LANGUAGE: usize = 17;
pub const ACCEPT: usize = 19;
pub const CONTENT_LENGTH: usize = 28;
pub const CONTENT_TYPE: usize = 31;
pub const USER_AGENT: usize = 58;

/// The name of static entry `index` (1 to 61).
pub fn static_name(index: usize) -> &'static [u8] {
    STATIC[index - 1].0
}

/// Octets an entry costs in the dynamic table besides its name and value (RFC 7541 §4.1).
const ENTRY_OVERHEAD: usize = 32;

/// The index of the newest dynamic-table entry.
pub const DYNAMIC_BASE: usize = 62;

/// Octets an entry takes in the dynamic table.
pub fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + ENTRY_OVERHEAD
}

/// The dynamic table size before SETTINGS_HEADER_TABLE_SIZE says otherwise.
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// Decodes the header blocks of one connection, keeping the dynamic table in step with the
/// server's encoder.
#[derive(Debug)]
pub struct Decoder {
    /// Newest entry first: dynamic index 62 is `table[0]`. Each entry is name then value.
    table: VecDeque<(Box<[u8]>, usize)>,
    /// Sum of the entries' sizes.
    size: usize,
    /// The current maximum, as the encoder last set it.
    max_size: usize,
    /// The most the encoder may set: our SETTINGS_HEADER_TABLE_SIZE once acknowledged.
    limit: usize,
    /// Huffman-decoded name and value of the current field.
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Decoder {
    /// A decoder whose table may grow to `limit` octets (and starts at that size).
    pub fn new(limit: usize) -> Self {
        Decoder { table: VecDeque::new(), size: 0, max_size: limit, limit, name: Vec::new(), value: Vec::new() }
    }

    /// Sets the most the encoder may use (our acknowledged SETTINGS_HEADER_TABLE_SIZE). It
    /// bounds the encoder's later size updates; the table itself changes only through those
    /// (RFC 7541 §4.2: the encoder signals the change). An encoder that never signals keeps its
    /// table at the size it had: h2o (dnsdist's DoH) ignores SETTINGS_HEADER_TABLE_SIZE and
    /// goes on indexing into 4 096 octets, and the decoder follows it rather than fail.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// Octets in use in the dynamic table.
    #[cfg(test)]
    pub fn table_size(&self) -> usize {
        self.size
    }

    /// Entries in the dynamic table, newest first.
    #[cfg(test)]
    pub fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.table.iter().map(|(e, n)| (e[..*n].to_vec(), e[*n..].to_vec())).collect()
    }

    /// Decodes one complete header block, handing every field to `sink` in order. Any error is
    /// a connection error (COMPRESSION_ERROR): the table may be out of step with the encoder.
    pub fn decode(&mut self, block: &[u8], sink: &mut impl FnMut(&[u8], &[u8])) -> Result<(), Http2Error> {
        let mut pos = 0;
        let mut fields = false;
        while let Some(&b) = block.get(pos) {
            if b & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = integer(block, &mut pos, 7)?;
                let (name, value) = lookup(&self.table, index)?;
                sink(name, value);
            } else if b & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3), only at the start of a block (§4.2).
                let size = integer(block, &mut pos, 5)?;
                if fields || size > self.limit as u64 {
                    return Err(Http2Error::HpackSizeUpdate { size, max: self.limit });
                }
                self.max_size = size as usize;
                self.evict(0);
                continue;
            } else {
                // Literal with incremental indexing (§6.2.1), without indexing (§6.2.2) or
                // never indexed (§6.2.3).
                let indexing = b & 0x40 != 0;
                let index = integer(block, &mut pos, if indexing { 6 } else { 4 })?;
                let name =
                    if index == 0 { string(block, &mut pos, &mut self.name)? } else { lookup(&self.table, index)?.0 };
                let value = string(block, &mut pos, &mut self.value)?;
                sink(name, value);
                if indexing {
                    let size = name.len() + value.len() + ENTRY_OVERHEAD;
                    let entry = (size <= self.max_size).then(|| {
                        let mut e = Vec::with_capacity(name.len() + value.len());
                        e.extend_from_slice(name);
                        e.extend_from_slice(value);
                        (e.into_boxed_slice(), name.len())
                    });
                    self.insert(entry, size);
                }
            }
            fields = true;
        }
        Ok(())
    }

    /// Adds an entry of `size` octets, evicting the oldest ones; an entry larger than the whole
    /// table empties it and is not added (§4.4).
    fn insert(&mut self, entry: Option<(Box<[u8]>, usize)>, size: usize) {
        match entry {
            Some(e) => {
                self.evict(size);
                self.table.push_front(e);
                self.size += size;
            }
            None => {
                self.table.clear();
                self.size = 0;
            }
        }
    }

    /// Evicts the oldest entries until `room` more octets fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max_size {
            let Some((e, _)) = self.table.pop_back() else { break };
            self.size -= e.len() + ENTRY_OVERHEAD;
        }
    }
}

fn lookup(table: &VecDeque<(Box<[u8]>, usize)>, index: u64) -> Result<(&[u8], &[u8]), Http2Error> {
    match index {
        1..=61 => Ok(STATIC[index as usize - 1]),
        _ if index > 61 && ((index - 62) as usize) < table.len() => {
            let (e, n) = &table[(index - 62) as usize];
            Ok(e.split_at(*n))
        }
        _ => Err(Http2Error::HpackIndex(index)),
    }
}

/// An integer with an N-bit prefix (§5.1), at most 2^32 - 1.
fn integer(block: &[u8], pos: &mut usize, prefix: u8) -> Result<u64, Http2Error> {
    let mask = ((1u16 << prefix) - 1) as u8;
    let mut value = u64::from(block[*pos] & mask);
    *pos += 1;
    if value < u64::from(mask) {
        return Ok(value);
    }
    let mut shift = 0;
    loop {
        let b = *block.get(*pos).ok_or(Http2Error::HpackTruncated)?;
        *pos += 1;
        value += u64::from(b & 0x7f) << shift;
        if value > u64::from(u32::MAX) {
            return Err(Http2Error::HpackInteger);
        }
        if b & 0x80 == 0 {
            return Ok(value);
        }
        shift += 7;
        if shift > 28 {
            return Err(Http2Error::HpackInteger);
        }
    }
}

/// A string literal (§5.2): a slice of the block, or Huffman-decoded into `scratch`.
fn string<'a>(block: &'a [u8], pos: &mut usize, scratch: &'a mut Vec<u8>) -> Result<&'a [u8], Http2Error> {
    let huffman = block.get(*pos).ok_or(Http2Error::HpackTruncated)? & 0x80 != 0;
    let len = integer(block, pos, 7)? as usize;
    let raw = block.get(*pos..*pos + len).ok_or(Http2Error::HpackTruncated)?;
    *pos += len;
    if !huffman {
        return Ok(raw);
    }
    scratch.clear();
    huffman_decode(raw, scratch)?;
    Ok(scratch)
}

/// Appends an integer with an N-bit prefix; `flags` fills the bits above the prefix.
pub fn put_integer(out: &mut Vec<u8>, flags: u8, prefix: u8, value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends an indexed field (§6.1).
pub fn put_indexed(out: &mut Vec<u8>, index: usize) {
    put_integer(out, 0x80, 7, index);
}

/// How an encoder sends string literals (§5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strings {
    /// As they are.
    Raw,
    /// Huffman-coded when that is shorter, as the encoders of browsers and nghttp2 do.
    Huffman,
}

/// Appends a string literal (§5.2).
pub fn put_string(out: &mut Vec<u8>, s: &[u8], strings: Strings) {
    if strings == Strings::Huffman {
        let len = huffman_len(s);
        if len < s.len() {
            put_integer(out, 0x80, 7, len);
            huffman_encode(s, out);
            return;
        }
    }
    put_integer(out, 0x00, 7, s.len());
    out.extend_from_slice(s);
}

/// Appends a literal field with incremental indexing whose name is static entry `name`
/// (§6.2.1).
pub fn put_literal_indexing(out: &mut Vec<u8>, name: usize, value: &[u8], strings: Strings) {
    put_integer(out, 0x40, 6, name);
    put_string(out, value, strings);
}

/// Appends a literal field without indexing whose name is static entry `name` (§6.2.2).
pub fn put_literal(out: &mut Vec<u8>, name: usize, value: &[u8], strings: Strings) {
    put_integer(out, 0x00, 4, name);
    put_string(out, value, strings);
}

/// Octets `s` takes Huffman-coded.
pub fn huffman_len(s: &[u8]) -> usize {
    let bits: usize = s.iter().map(|&b| usize::from(HUFFMAN_CODES[usize::from(b)].1)).sum();
    bits.div_ceil(8)
}

/// Appends `s` Huffman-coded, padded with the most significant bits of EOS (§5.2).
pub(super) fn huffman_encode(s: &[u8], out: &mut Vec<u8>) {
    let (mut acc, mut bits) = (0u64, 0u32);
    for &b in s {
        let (code, len) = HUFFMAN_CODES[usize::from(b)];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        out.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
    }
}

/// The Huffman code (RFC 7541 Appendix B): (code, length in bits) of every octet; EOS is
/// 0x3fffffff in 30 bits.
pub(super) const HUFFMAN_CODES: [(u32, u8); 256] = [
    (0x1ff8, 13),
    (0x7fffd8, 23),
    (0xfffffe2, 28),
    (0xfffffe3, 28),
    (0xfffffe4, 28),
    (0xfffffe5, 28),
    (0xfffffe6, 28),
    (0xfffffe7, 28),
    (0xfffffe8, 28),
    (0xffffea, 24),
    (0x3ffffffc, 30),
    (0xfffffe9, 28),
    (0xfffffea, 28),
    (0x3ffffffd, 30),
    (0xfffffeb, 28),
    (0xfffffec, 28),
    (0xfffffed, 28),
    (0xfffffee, 28),
    (0xfffffef, 28),
    (0xffffff0, 28),
    (0xffffff1, 28),
    (0xffffff2, 28),
    (0x3ffffffe, 30),
    (0xffffff3, 28),
    (0xffffff4, 28),
    (0xffffff5, 28),
    (0xffffff6, 28),
    (0xffffff7, 28),
    (0xffffff8, 28),
    (0xffffff9, 28),
    (0xffffffa, 28),
    (0xffffffb, 28),
    (0x14, 6),
    (0x3f8, 10),
    (0x3f9, 10),
    (0xffa, 12),
    (0x1ff9, 13),
    (0x15, 6),
    (0xf8, 8),
    (0x7fa, 11),
    (0x3fa, 10),
    (0x3fb, 10),
    (0xf9, 8),
    (0x7fb, 11),
    (0xfa, 8),
    (0x16, 6),
    (0x17, 6),
    (0x18, 6),
    (0x0, 5),
    (0x1, 5),
    (0x2, 5),
    (0x19, 6),
    (0x1a, 6),
    (0x1b, 6),
    (0x1c, 6),
    (0x1d, 6),
    (0x1e, 6),
    (0x1f, 6),
    (0x5c, 7),
    (0xfb, 8),
    (0x7ffc, 15),
    (0x20, 6),
    (0xffb, 12),
    (0x3fc, 10),
    (0x1ffa, 13),
    (0x21, 6),
    (0x5d, 7),
    (0x5e, 7),
    (0x5f, 7),
    (0x60, 7),
    (0x61, 7),
    (0x62, 7),
    (0x63, 7),
    (0x64, 7),
    (0x65, 7),
    (0x66, 7),
    (0x67, 7),
    (0x68, 7),
    (0x69, 7),
    (0x6a, 7),
    (0x6b, 7),
    (0x6c, 7),
    (0x6d, 7),
    (0x6e, 7),
    (0x6f, 7),
    (0x70, 7),
    (0x71, 7),
    (0x72, 7),
    (0xfc, 8),
    (0x73, 7),
    (0xfd, 8),
    (0x1ffb, 13),
    (0x7fff0, 19),
    (0x1ffc, 13),
    (0x3ffc, 14),
    (0x22, 6),
    (0x7ffd, 15),
    (0x3, 5),
    (0x23, 6),
    (0x4, 5),
    (0x24, 6),
    (0x5, 5),
    (0x25, 6),
    (0x26, 6),
    (0x27, 6),
    (0x6, 5),
    (0x74, 7),
    (0x75, 7),
    (0x28, 6),
    (0x29, 6),
    (0x2a, 6),
    (0x7, 5),
    (0x2b, 6),
    (0x76, 7),
    (0x2c, 6),
    (0x8, 5),
    (0x9, 5),
    (0x2d, 6),
    (0x77, 7),
    (0x78, 7),
    (0x79, 7),
    (0x7a, 7),
    (0x7b, 7),
    (0x7ffe, 15),
    (0x7fc, 11),
    (0x3ffd, 14),
    (0x1ffd, 13),
    (0xffffffc, 28),
    (0xfffe6, 20),
    (0x3fffd2, 22),
    (0xfffe7, 20),
    (0xfffe8, 20),
    (0x3fffd3, 22),
    (0x3fffd4, 22),
    (0x3fffd5, 22),
    (0x7fffd9, 23),
    (0x3fffd6, 22),
    (0x7fffda, 23),
    (0x7fffdb, 23),
    (0x7fffdc, 23),
    (0x7fffdd, 23),
    (0x7fffde, 23),
    (0xffffeb, 24),
    (0x7fffdf, 23),
    (0xffffec, 24),
    (0xffffed, 24),
    (0x3fffd7, 22),
    (0x7fffe0, 23),
    (0xffffee, 24),
    (0x7fffe1, 23),
    (0x7fffe2, 23),
    (0x7fffe3, 23),
    (0x7fffe4, 23),
    (0x1fffdc, 21),
    (0x3fffd8, 22),
    (0x7fffe5, 23),
    (0x3fffd9, 22),
    (0x7fffe6, 23),
    (0x7fffe7, 23),
    (0xffffef, 24),
    (0x3fffda, 22),
    (0x1fffdd, 21),
    (0xfffe9, 20),
    (0x3fffdb, 22),
    (0x3fffdc, 22),
    (0x7fffe8, 23),
    (0x7fffe9, 23),
    (0x1fffde, 21),
    (0x7fffea, 23),
    (0x3fffdd, 22),
    (0x3fffde, 22),
    (0xfffff0, 24),
    (0x1fffdf, 21),
    (0x3fffdf, 22),
    (0x7fffeb, 23),
    (0x7fffec, 23),
    (0x1fffe0, 21),
    (0x1fffe1, 21),
    (0x3fffe0, 22),
    (0x1fffe2, 21),
    (0x7fffed, 23),
    (0x3fffe1, 22),
    (0x7fffee, 23),
    (0x7fffef, 23),
    (0xfffea, 20),
    (0x3fffe2, 22),
    (0x3fffe3, 22),
    (0x3fffe4, 22),
    (0x7ffff0, 23),
    (0x3fffe5, 22),
    (0x3fffe6, 22),
    (0x7ffff1, 23),
    (0x3ffffe0, 26),
    (0x3ffffe1, 26),
    (0xfffeb, 20),
    (0x7fff1, 19),
    (0x3fffe7, 22),
    (0x7ffff2, 23),
    (0x3fffe8, 22),
    (0x1ffffec, 25),
    (0x3ffffe2, 26),
    (0x3ffffe3, 26),
    (0x3ffffe4, 26),
    (0x7ffffde, 27),
    (0x7ffffdf, 27),
    (0x3ffffe5, 26),
    (0xfffff1, 24),
    (0x1ffffed, 25),
    (0x7fff2, 19),
    (0x1fffe3, 21),
    (0x3ffffe6, 26),
    (0x7ffffe0, 27),
    (0x7ffffe1, 27),
    (0x3ffffe7, 26),
    (0x7ffffe2, 27),
    (0xfffff2, 24),
    (0x1fffe4, 21),
    (0x1fffe5, 21),
    (0x3ffffe8, 26),
    (0x3ffffe9, 26),
    (0xffffffd, 28),
    (0x7ffffe3, 27),
    (0x7ffffe4, 27),
    (0x7ffffe5, 27),
    (0xfffec, 20),
    (0xfffff3, 24),
    (0xfffed, 20),
    (0x1fffe6, 21),
    (0x3fffe9, 22),
    (0x1fffe7, 21),
    (0x1fffe8, 21),
    (0x7ffff3, 23),
    (0x3fffea, 22),
    (0x3fffeb, 22),
    (0x1ffffee, 25),
    (0x1ffffef, 25),
    (0xfffff4, 24),
    (0xfffff5, 24),
    (0x3ffffea, 26),
    (0x7ffff4, 23),
    (0x3ffffeb, 26),
    (0x7ffffe6, 27),
    (0x3ffffec, 26),
    (0x3ffffed, 26),
    (0x7ffffe7, 27),
    (0x7ffffe8, 27),
    (0x7ffffe9, 27),
    (0x7ffffea, 27),
    (0x7ffffeb, 27),
    (0xffffffe, 28),
    (0x7ffffec, 27),
    (0x7ffffed, 27),
    (0x7ffffee, 27),
    (0x7ffffef, 27),
    (0x7fffff0, 27),
    (0x3ffffee, 26),
];

const EOS: u16 = 256;

/// One step of the Huffman decoder: from a state (an inner node of the code tree, 0 being the
/// root), four input bits lead to another state and emit at most one octet (no code is shorter
/// than five bits).
const STEP_EMIT: u32 = 1 << 8;
const STEP_FAIL: u32 = 1 << 9;

struct HuffmanMachine {
    /// `steps[state][nibble]`: next state in bits 0..8, STEP_EMIT / STEP_FAIL, octet in 16..24.
    steps: [[u32; 16]; 256],
    /// States where the input may end: the root, or up to seven 1 bits of padding after it.
    accept: [bool; 256],
}

const fn huffman_machine() -> HuffmanMachine {
    // The code tree: children[node][bit] is an inner node (1..256), or a leaf 256 + symbol.
    let mut children = [[0u16; 2]; 256];
    let mut depth = [0u8; 256];
    let mut ones = [false; 256];
    ones[0] = true;
    let mut nodes = 1;
    let mut sym = 0;
    while sym <= 256 {
        let (code, len) = if sym == 256 { (0x3fff_ffffu32, 30u8) } else { HUFFMAN_CODES[sym] };
        let mut node = 0;
        let mut i = len;
        while i > 1 {
            i -= 1;
            let bit = ((code >> i) & 1) as usize;
            if children[node][bit] == 0 {
                children[node][bit] = nodes as u16;
                depth[nodes] = depth[node] + 1;
                ones[nodes] = ones[node] && bit == 1;
                nodes += 1;
            }
            node = children[node][bit] as usize;
        }
        children[node][(code & 1) as usize] = 256 + sym as u16;
        sym += 1;
    }
    let mut steps = [[0u32; 16]; 256];
    let mut accept = [false; 256];
    let mut state = 0;
    while state < 256 {
        accept[state] = state == 0 || (ones[state] && depth[state] <= 7);
        let mut nibble = 0;
        while nibble < 16 {
            let mut node = state;
            let mut step = 0u32;
            let mut k = 4;
            while k > 0 {
                k -= 1;
                let child = children[node][(nibble >> k) & 1];
                if child == 256 + EOS || child == 0 {
                    step = STEP_FAIL;
                    break;
                } else if child >= 256 {
                    step = STEP_EMIT | ((child as u32 - 256) << 16);
                    node = 0;
                } else {
                    node = child as usize;
                }
            }
            steps[state][nibble] = step | node as u32;
            nibble += 1;
        }
        state += 1;
    }
    HuffmanMachine { steps, accept }
}

static HUFFMAN: HuffmanMachine = huffman_machine();

/// Decodes a Huffman string (§5.2) onto `out`. EOS in the string, or padding that is longer
/// than seven bits or not all ones, is an error.
pub fn huffman_decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), Http2Error> {
    out.reserve(src.len() * 8 / 5 + 1);
    let mut state = 0usize;
    for &b in src {
        for nibble in [b >> 4, b & 0x0f] {
            let step = HUFFMAN.steps[state][nibble as usize];
            if step & STEP_FAIL != 0 {
                return Err(Http2Error::HpackHuffman);
            }
            if step & STEP_EMIT != 0 {
                out.push((step >> 16) as u8);
            }
            state = (step & 0xff) as usize;
        }
    }
    if HUFFMAN.accept[state] {
        Ok(())
    } else {
        Err(Http2Error::HpackHuffman)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(char::is_ascii_hexdigit).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn decode(d: &mut Decoder, block: &str) -> Result<Vec<(String, String)>, Http2Error> {
        let mut fields = Vec::new();
        d.decode(&hex(block), &mut |n, v| {
            fields.push((String::from_utf8(n.to_vec()).unwrap(), String::from_utf8(v.to_vec()).unwrap()))
        })?;
        Ok(fields)
    }

    fn list(fields: &[(&str, &str)]) -> Vec<(String, String)> {
        fields.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    fn table(d: &Decoder) -> Vec<(String, String)> {
        d.entries().into_iter().map(|(n, v)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap())).collect()
    }

    /// Encodes with the Huffman code, as a server's encoder would.
    fn huffman(s: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        huffman_encode(s, &mut out);
        assert_eq!(out.len(), huffman_len(s));
        out
    }

    #[test]
    fn rfc7541_c2_single_fields() {
        let mut d = Decoder::new(4096);
        let c21 = "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572";
        assert_eq!(decode(&mut d, c21).unwrap(), list(&[("custom-key", "custom-header")]));
        assert_eq!(d.table_size(), 55);
        let mut d = Decoder::new(4096);
        assert_eq!(decode(&mut d, "040c 2f73 616d 706c 652f 7061 7468").unwrap(), list(&[(":path", "/sample/path")]));
        assert_eq!(d.table_size(), 0);
        let c23 = "1008 7061 7373 776f 7264 0673 6563 7265 74";
        assert_eq!(decode(&mut d, c23).unwrap(), list(&[("password", "secret")]));
        assert_eq!(d.table_size(), 0);
        assert_eq!(decode(&mut d, "82").unwrap(), list(&[(":method", "GET")]));
    }

    fn requests(blocks: [&str; 3]) {
        let mut d = Decoder::new(4096);
        let first = [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")];
        assert_eq!(decode(&mut d, blocks[0]).unwrap(), list(&first));
        assert_eq!(table(&d), list(&[(":authority", "www.example.com")]));
        assert_eq!(d.table_size(), 57);
        let mut second = first.to_vec();
        second.push(("cache-control", "no-cache"));
        assert_eq!(decode(&mut d, blocks[1]).unwrap(), list(&second));
        assert_eq!(table(&d), list(&[("cache-control", "no-cache"), (":authority", "www.example.com")]));
        assert_eq!(d.table_size(), 110);
        let third = [
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ];
        assert_eq!(decode(&mut d, blocks[2]).unwrap(), list(&third));
        assert_eq!(
            table(&d),
            list(&[("custom-key", "custom-value"), ("cache-control", "no-cache"), (":authority", "www.example.com")])
        );
        assert_eq!(d.table_size(), 164);
    }

    #[test]
    fn rfc7541_c3_requests() {
        requests([
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "8286 84be 5808 6e6f 2d63 6163 6865",
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        ]);
    }

    #[test]
    fn rfc7541_c4_huffman_requests() {
        requests([
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ]);
    }

    /// C.5 and C.6: a 256-octet table, with evictions.
    fn responses(blocks: [&str; 3]) {
        let mut d = Decoder::new(256);
        let date1 = "Mon, 21 Oct 2013 20:13:21 GMT";
        let location = ("location", "https://www.example.com");
        let first = [(":status", "302"), ("cache-control", "private"), ("date", date1), location];
        assert_eq!(decode(&mut d, blocks[0]).unwrap(), list(&first));
        assert_eq!(table(&d), list(&[location, ("date", date1), ("cache-control", "private"), (":status", "302")]));
        assert_eq!(d.table_size(), 222);
        let second = [(":status", "307"), ("cache-control", "private"), ("date", date1), location];
        assert_eq!(decode(&mut d, blocks[1]).unwrap(), list(&second));
        assert_eq!(table(&d), list(&[(":status", "307"), location, ("date", date1), ("cache-control", "private")]));
        assert_eq!(d.table_size(), 222);
        let date2 = "Mon, 21 Oct 2013 20:13:22 GMT";
        let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
        let third = [
            (":status", "200"),
            ("cache-control", "private"),
            ("date", date2),
            location,
            ("content-encoding", "gzip"),
            ("set-cookie", cookie),
        ];
        assert_eq!(decode(&mut d, blocks[2]).unwrap(), list(&third));
        assert_eq!(table(&d), list(&[("set-cookie", cookie), ("content-encoding", "gzip"), ("date", date2)]));
        assert_eq!(d.table_size(), 215);
    }

    #[test]
    fn rfc7541_c5_responses() {
        responses([
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32
             3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970
             7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61
             6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
        ]);
    }

    #[test]
    fn rfc7541_c6_huffman_responses() {
        responses([
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad
             1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2
             e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ]);
    }

    #[test]
    fn a_zero_size_table_evicts_at_once() {
        // C.6.1's literals with incremental indexing, decoded under a table size of 0.
        let mut d = Decoder::new(0);
        let c61 = "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad
                   1718 63c7 8f0b 97c8 e9ae 82ae 43d3";
        assert_eq!(decode(&mut d, c61).unwrap().len(), 4);
        assert_eq!(d.table_size(), 0);
        assert!(table(&d).is_empty());
        // C.6.2 refers to entries that were never kept.
        assert_eq!(decode(&mut d, "4883 640e ffc1 c0bf"), Err(Http2Error::HpackIndex(65)));
    }

    #[test]
    fn size_updates_are_bounded_and_first() {
        let mut d = Decoder::new(256);
        decode(&mut d, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572").unwrap();
        assert_eq!(d.table_size(), 55);
        // 0x3f 0xe1 0x01 = 256 (§5.1: 31 + 225): allowed; 0x3f 0xe2 0x01 = 257: not.
        assert_eq!(decode(&mut d, "3fe101 be").unwrap(), list(&[("custom-key", "custom-header")]));
        assert_eq!(decode(&mut d, "3fe201"), Err(Http2Error::HpackSizeUpdate { size: 257, max: 256 }));
        // Down to 0 empties the table; two updates in a row are fine at the start.
        assert_eq!(decode(&mut d, "20 3f11").unwrap(), list(&[]));
        assert_eq!(d.table_size(), 0);
        assert!(matches!(decode(&mut d, "82 20"), Err(Http2Error::HpackSizeUpdate { .. })));
        // A lower limit bounds the encoder's next size update, which empties the table; until
        // the update comes, the table stays as the encoder left it.
        let mut d = Decoder::new(4096);
        decode(&mut d, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572").unwrap();
        d.set_limit(0);
        assert_eq!(decode(&mut d, "be").unwrap(), list(&[("custom-key", "custom-header")]));
        assert_eq!(d.table_size(), 55);
        assert!(matches!(decode(&mut d, "3f01"), Err(Http2Error::HpackSizeUpdate { size: 32, max: 0 })));
        assert_eq!(decode(&mut d, "20 82").unwrap(), list(&[(":method", "GET")]));
        assert_eq!(d.table_size(), 0);
        assert_eq!(decode(&mut d, "be"), Err(Http2Error::HpackIndex(62)));
    }

    #[test]
    fn an_entry_larger_than_the_table_empties_it() {
        let mut d = Decoder::new(60);
        decode(&mut d, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572").unwrap();
        assert_eq!(d.table_size(), 55);
        // 42 + 32 > 60: the table is emptied and nothing added.
        let long = format!("40 0a {} 20 {}", "61".repeat(10), "62".repeat(32));
        assert_eq!(decode(&mut d, &long).unwrap().len(), 1);
        assert_eq!(d.table_size(), 0);
    }

    #[test]
    fn malformed_blocks_are_errors() {
        let mut d = Decoder::new(4096);
        assert_eq!(decode(&mut d, "80"), Err(Http2Error::HpackIndex(0)));
        assert_eq!(decode(&mut d, "be"), Err(Http2Error::HpackIndex(62)));
        assert_eq!(decode(&mut d, "ff"), Err(Http2Error::HpackTruncated));
        assert_eq!(decode(&mut d, "ff ff ff ff ff ff 01"), Err(Http2Error::HpackInteger));
        assert_eq!(decode(&mut d, "04 05 2f 61"), Err(Http2Error::HpackTruncated));
        assert_eq!(decode(&mut d, "40"), Err(Http2Error::HpackTruncated));
        // Huffman: EOS (30 ones) inside the string.
        assert_eq!(decode(&mut d, "04 84 ff ff ff ff"), Err(Http2Error::HpackHuffman));
        // Padding not all ones ('0' is 00000, then 000 padding).
        assert_eq!(decode(&mut d, "04 81 00"), Err(Http2Error::HpackHuffman));
        // Padding of eight ones.
        assert_eq!(decode(&mut d, "04 82 07 ff"), Err(Http2Error::HpackHuffman));
        // '0' then three ones: fine.
        assert_eq!(decode(&mut d, "04 81 07").unwrap(), list(&[(":path", "0")]));
    }

    #[test]
    fn literals_are_huffman_coded_when_shorter() {
        // RFC 7541 C.4.1 and C.4.2: the same fields as a Huffman encoder sends them.
        let mut out = Vec::new();
        put_literal_indexing(&mut out, AUTHORITY, b"www.example.com", Strings::Huffman);
        put_literal_indexing(&mut out, 24, b"no-cache", Strings::Huffman);
        assert_eq!(out, hex("418c f1e3 c2e5 f23a 6ba0 ab90 f4ff 5886 a8eb 1064 9cbf"));
        // Raw when Huffman is not shorter ('3' and '9' take six bits each).
        out.clear();
        put_literal(&mut out, CONTENT_LENGTH, b"39", Strings::Huffman);
        assert_eq!(out, hex("0f0d 02 3339"));
    }

    #[test]
    fn huffman_decodes_every_octet() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        let mut out = Vec::new();
        huffman_decode(&huffman(&all), &mut out).unwrap();
        assert_eq!(out, all);
        for s in [&b""[..], b"a", b"application/dns-message", b"max-age=300", b"\x00\xff"] {
            out.clear();
            huffman_decode(&huffman(s), &mut out).unwrap();
            assert_eq!(out, s);
        }
    }

    #[test]
    fn integers_round_trip() {
        for prefix in 1..=8u8 {
            for value in [0usize, 1, 30, 31, 127, 128, 254, 255, 256, 1337, 65_535, 1 << 24, u32::MAX as usize] {
                let mut out = Vec::new();
                put_integer(&mut out, 0, prefix, value);
                let mut pos = 0;
                assert_eq!(integer(&out, &mut pos, prefix).unwrap(), value as u64, "prefix {prefix}");
                assert_eq!(pos, out.len());
            }
        }
        // RFC 7541 C.1.2: 1337 with a 5-bit prefix.
        let mut out = Vec::new();
        put_integer(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
    }
}
