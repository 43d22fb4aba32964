//! One direction of a TCP connection put back in order, and the messages it carries: DNS
//! messages behind their two-octet lengths (Do53 over TCP) or TLS records (DoT, DoH).

use std::collections::BTreeMap;

/// Segments held out of order before the octets missing before them are given up as lost
/// (a packet the capture dropped): reading goes on after the hole.
const HOLE_AFTER: usize = 16;

/// One direction's octets in order, from its SYN or, for a connection the capture joined late,
/// from its first segment seen. Octets the capture lost (a segment cut short by the snap
/// length, or never captured) leave a hole: what follows it is handed on marked `resync`, for
/// the framer to start again at a segment's start (where messages mostly start).
#[derive(Debug, Default)]
pub struct Reassembly {
    next: Option<u32>,
    pending: BTreeMap<u32, (u64, Vec<u8>)>,
    resync: bool,
    /// Holes: runs of octets the capture did not hold.
    pub gaps: u32,
    /// The stream was seen from its SYN.
    pub from_start: bool,
}

impl Reassembly {
    pub fn syn(&mut self, seq: u32) {
        if self.next.is_none() {
            self.next = Some(seq.wrapping_add(1));
            self.from_start = true;
        }
    }

    /// Takes a segment's payload (`whole`: the capture kept all of it; `len`: its length by
    /// the headers) and hands every run of octets now in order to `out`, with the time of the
    /// segment that brought it and whether octets before it were lost.
    pub fn segment(
        &mut self,
        ts: u64,
        seq: u32,
        payload: &[u8],
        len: usize,
        whole: bool,
        out: &mut impl FnMut(u64, &[u8], bool),
    ) {
        if len == 0 {
            return;
        }
        let next = *self.next.get_or_insert(seq);
        let ahead = seq.wrapping_sub(next) as i32;
        if !whole {
            // Its octets are lost: what follows starts afresh after them.
            if ahead <= 0 && (seq.wrapping_add(len as u32).wrapping_sub(next) as i32) > 0 {
                self.next = Some(seq.wrapping_add(len as u32));
                self.gaps += 1;
                self.resync = true;
                self.drain(out);
            }
            return;
        }
        if ahead > 0 {
            self.pending.entry(seq).or_insert_with(|| (ts, payload.to_vec()));
            if self.pending.len() > HOLE_AFTER {
                self.skip_hole(out);
            }
            return;
        }
        self.take(ts, seq, payload, out);
        self.drain(out);
    }

    /// Gives up the octets missing before the segments held (at a connection's end, or when
    /// too many wait), and hands those on.
    pub fn skip_hole(&mut self, out: &mut impl FnMut(u64, &[u8], bool)) {
        let next = self.next.unwrap_or(0);
        if let Some(&first) = self.pending.keys().min_by_key(|s| s.wrapping_sub(next)) {
            self.next = Some(first);
            self.gaps += 1;
            self.resync = true;
            self.drain(out);
        }
    }

    fn drain(&mut self, out: &mut impl FnMut(u64, &[u8], bool)) {
        while let Some((&seq, _)) =
            self.pending.iter().find(|(s, _)| s.wrapping_sub(self.next.unwrap_or(0)) as i32 <= 0)
        {
            let (ts, data) = self.pending.remove(&seq).unwrap_or_default();
            self.take(ts, seq, &data, out);
        }
    }

    fn take(&mut self, ts: u64, seq: u32, payload: &[u8], out: &mut impl FnMut(u64, &[u8], bool)) {
        let next = self.next.unwrap_or(seq);
        let seen = next.wrapping_sub(seq) as usize; // octets of it already taken (a retransmission)
        if seen < payload.len() {
            out(ts, &payload[seen..], std::mem::take(&mut self.resync));
            self.next = Some(next.wrapping_add((payload.len() - seen) as u32));
        }
    }
}

/// How messages are delimited in a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// A two-octet length, then a DNS message.
    Dns,
    /// A TLS record: type, version, two-octet length, then the record.
    Tls,
}

/// One message or record: when its first octet came, its length, and its first octets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub ts: u64,
    /// The TLS record's content type (22 handshake, 23 application data, 21 alert); 0 for DNS.
    pub kind: u8,
    pub len: usize,
    /// The first octets of its body (as many as the framer keeps of its kind).
    pub head: Vec<u8>,
}

/// Cuts a stream's octets into [`Frame`]s.
#[derive(Debug)]
pub struct Framer {
    framing: Framing,
    header: Vec<u8>,
    /// When the header being read began.
    header_ts: u64,
    frame: Option<Frame>,
    left: usize,
    keep: usize,
    /// Octets kept of an application-data record (0, or all of it when records are opened).
    keep_application: usize,
}

/// Octets kept of a DNS message (its question) and of a TLS handshake record (a hello).
const KEEP_DNS: usize = 512;
const KEEP_HANDSHAKE: usize = 16 * 1024;
/// The largest TLS record (2^14 octets of plaintext and 256 of expansion).
const KEEP_RECORD: usize = (1 << 14) + 256;

impl Framer {
    pub fn new(framing: Framing) -> Self {
        Framer {
            framing,
            header: Vec::with_capacity(5),
            header_ts: 0,
            frame: None,
            left: 0,
            keep: 0,
            keep_application: 0,
        }
    }

    /// Keeps application-data records whole (to open them with a key log).
    pub fn keeping_records(mut self) -> Self {
        self.keep_application = KEEP_RECORD;
        self
    }

    /// Forgets a message begun: octets before what comes next were lost.
    pub fn reset(&mut self) {
        self.header.clear();
        self.frame = None;
        self.left = 0;
    }

    /// Takes octets in order; every frame completed goes to `out`.
    pub fn push(&mut self, ts: u64, mut data: &[u8], out: &mut impl FnMut(Frame)) {
        while !data.is_empty() {
            if let Some(frame) = self.frame.as_mut() {
                let n = self.left.min(data.len());
                let room = self.keep.saturating_sub(frame.head.len()).min(n);
                frame.head.extend_from_slice(&data[..room]);
                self.left -= n;
                data = &data[n..];
                if self.left == 0 {
                    out(self.frame.take().unwrap_or_else(|| unreachable!()));
                }
                continue;
            }
            let need = if self.framing == Framing::Dns { 2 } else { 5 };
            if self.header.is_empty() {
                self.header_ts = ts;
            }
            let n = (need - self.header.len()).min(data.len());
            self.header.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.header.len() < need {
                break;
            }
            let (kind, len) = match self.framing {
                Framing::Dns => (0, u16::from_be_bytes([self.header[0], self.header[1]]) as usize),
                Framing::Tls => (self.header[0], u16::from_be_bytes([self.header[3], self.header[4]]) as usize),
            };
            self.header.clear();
            self.keep = match (self.framing, kind) {
                (Framing::Dns, _) => KEEP_DNS,
                (Framing::Tls, 22) => KEEP_HANDSHAKE,
                (Framing::Tls, 23) => self.keep_application,
                _ => 0,
            };
            let frame = Frame { ts: self.header_ts, kind, len, head: Vec::new() };
            if len == 0 {
                out(frame);
            } else {
                self.frame = Some(frame);
                self.left = len;
            }
        }
    }
}

/// A query's type, from its question (None when the message does not parse).
pub fn qtype(msg: &[u8]) -> Option<u16> {
    if u16::from_be_bytes([*msg.get(4)?, *msg.get(5)?]) == 0 {
        return None;
    }
    let mut at = 12;
    loop {
        let len = *msg.get(at)? as usize;
        if len == 0 {
            at += 1;
            break;
        }
        if len & 0xc0 != 0 {
            at += 2;
            break;
        }
        at += 1 + len;
    }
    Some(u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(framing: Framing, chunks: &[(u64, &[u8])]) -> Vec<Frame> {
        let mut f = Framer::new(framing);
        let mut out = Vec::new();
        for (ts, c) in chunks {
            f.push(*ts, c, &mut |fr| out.push(fr));
        }
        out
    }

    #[test]
    fn dns_messages_split_and_joined_across_segments() {
        let out = frames(Framing::Dns, &[(1, &[0, 3, 1, 2]), (2, &[3, 0]), (3, &[2, 9, 9, 0, 1, 7])]);
        let got: Vec<_> = out.iter().map(|f| (f.ts, f.len, f.head.clone())).collect();
        assert_eq!(got, [(1, 3, vec![1, 2, 3]), (2, 2, vec![9, 9]), (3, 1, vec![7])]);
    }

    #[test]
    fn tls_records_keep_handshakes_only() {
        let out = frames(Framing::Tls, &[(5, &[22, 3, 3, 0, 2, 1, 2, 23, 3, 3, 0, 1, 9])]);
        assert_eq!(out[0], Frame { ts: 5, kind: 22, len: 2, head: vec![1, 2] });
        assert_eq!(out[1], Frame { ts: 5, kind: 23, len: 1, head: vec![] });
    }

    #[test]
    fn segments_out_of_order_and_retransmitted_come_out_once_in_order() {
        let mut r = Reassembly::default();
        r.syn(99);
        let mut got = Vec::new();
        let mut out = |ts: u64, d: &[u8], resync: bool| got.push((ts, d.to_vec(), resync));
        r.segment(2, 103, b"de", 2, true, &mut out); // ahead: held
        r.segment(1, 100, b"abc", 3, true, &mut out); // then the held one follows
        r.segment(3, 100, b"abcdef", 6, true, &mut out); // partly seen: only "f"
        r.segment(4, 101, b"bc", 2, true, &mut out); // all seen
        let want = [(1, b"abc".to_vec(), false), (2, b"de".to_vec(), false), (3, b"f".to_vec(), false)];
        assert_eq!(got, want);
        assert!(r.gaps == 0 && r.from_start);
    }

    #[test]
    fn octets_lost_leave_a_hole_and_reading_goes_on_after_it() {
        // A segment cut short: what follows comes marked resync.
        let mut r = Reassembly::default();
        r.syn(0);
        let mut got = Vec::new();
        r.segment(1, 1, b"ab", 4, false, &mut |t, d, s| got.push((t, d.to_vec(), s)));
        r.segment(2, 5, b"cd", 2, true, &mut |t, d, s| got.push((t, d.to_vec(), s)));
        assert_eq!(got, [(2, b"cd".to_vec(), true)]);
        // A segment never captured: once enough wait behind it, they are read.
        let mut r = Reassembly::default();
        r.syn(0);
        let mut got = Vec::new();
        for k in 0..=HOLE_AFTER as u32 {
            r.segment(u64::from(k), 11 + 10 * k, &[k as u8; 10], 10, true, &mut |_, d, s| got.push((d[0], s)));
        }
        assert_eq!(r.gaps, 1);
        assert_eq!(got.len(), HOLE_AFTER + 1);
        assert!(got[0] == (0, true) && got[1..].iter().all(|g| !g.1));
    }
}
