//! Two-octet length framing of DNS messages on streams (RFC 1035 §4.2.2, RFC 7766).

use crate::WireError;

/// Largest DNS message a stream frame can carry.
pub const MAX_FRAME: usize = u16::MAX as usize;

/// Splits a byte stream into DNS messages. Reads go straight into its buffer
/// ([`FrameDecoder::spare`], then [`FrameDecoder::advance`]) and frames come out as slices of
/// it, so no message is copied. The buffer is the thread's ([`crate::spare`]), held from the
/// first [`FrameDecoder::spare`] until [`FrameDecoder::release`] finds nothing buffered.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    read_size: usize,
    start: usize,
    end: usize,
}

impl FrameDecoder {
    /// A decoder whose reads ask for up to `read_size` octets at a time.
    pub fn new(read_size: usize) -> Self {
        Self { buf: Vec::new(), read_size: read_size.max(512), start: 0, end: 0 }
    }

    /// Gives the buffer back to the thread if it holds nothing (an incomplete frame stays).
    pub fn release(&mut self) {
        if self.start == self.end && !self.buf.is_empty() {
            crate::spare::give(std::mem::take(&mut self.buf));
            (self.start, self.end) = (0, 0);
        }
    }

    /// Free space to read into, never empty: compacts or grows so that the rest of the pending
    /// frame fits (it may be less than the read size when most of a frame is buffered).
    pub fn spare(&mut self) -> &mut [u8] {
        if self.buf.is_empty() {
            self.buf = crate::spare::take(self.read_size);
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buf.len() - self.end < 2 + MAX_FRAME.min(self.buf.len() / 2) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            let needed = self.pending_frame_len().map_or(0, |n| n + 2);
            if needed > self.buf.len() {
                self.buf.resize(needed.next_power_of_two(), 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// Marks `n` octets of [`FrameDecoder::spare`] as filled.
    pub fn advance(&mut self, n: usize) {
        self.end += n;
        debug_assert!(self.end <= self.buf.len());
    }

    /// Forgets what is buffered (for a new stream), and gives the buffer back.
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
        self.release();
    }

    /// Octets received and not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// The length the next frame's prefix announces, once its two octets are buffered.
    pub fn pending_frame_len(&self) -> Option<usize> {
        (self.end - self.start >= 2)
            .then(|| u16::from_be_bytes([self.buf[self.start], self.buf[self.start + 1]]) as usize)
    }

    /// The next complete message, if one is buffered.
    #[inline]
    pub fn next_frame(&mut self) -> Option<Result<&[u8], WireError>> {
        let len = self.pending_frame_len()?;
        if len == 0 {
            return Some(Err(WireError::EmptyFrame));
        }
        if self.end - self.start < 2 + len {
            return None;
        }
        let from = self.start + 2;
        self.start = from + len;
        Some(Ok(&self.buf[from..from + len]))
    }
}

/// The one message a DNS-over-QUIC stream carries (RFC 9250 §4.2): the stream's octets, read to
/// its end, are a two-octet length and exactly that many octets, at least a message ID's two.
/// None otherwise: a stream with less, more or several messages is a DOQ_PROTOCOL_ERROR.
pub fn doq_message(stream: &[u8]) -> Option<&[u8]> {
    let (len, message) = stream.split_first_chunk::<2>()?;
    (usize::from(u16::from_be_bytes(*len)) == message.len() && message.len() >= 2).then_some(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_doq_stream_carries_exactly_one_framed_message() {
        assert_eq!(doq_message(&[0, 3, 1, 2, 3]), Some(&[1u8, 2, 3][..]));
        assert_eq!(doq_message(&[0, 2, 0, 0]), Some(&[0u8, 0][..]));
        // too short for an ID, shorter or longer than its length, two messages, nothing
        for bad in [&[0u8, 1, 7][..], &[0, 4, 1, 2, 3], &[0, 2, 1, 2, 3], &[0, 2, 1, 2, 0, 2, 1, 2], &[0], &[]] {
            assert_eq!(doq_message(bad), None, "{bad:?}");
        }
    }

    fn feed(d: &mut FrameDecoder, mut data: &[u8], chunk: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while !data.is_empty() {
            let spare = d.spare();
            let n = chunk.min(spare.len()).min(data.len());
            spare[..n].copy_from_slice(&data[..n]);
            d.advance(n);
            data = &data[n..];
            while let Some(f) = d.next_frame() {
                out.push(f.unwrap().to_vec());
            }
        }
        out
    }

    #[test]
    fn frames_survive_any_split() {
        let msgs: Vec<Vec<u8>> = (1..200u16).map(|i| vec![i as u8; (i as usize * 37) % 700 + 1]).collect();
        let mut stream = Vec::new();
        for m in &msgs {
            stream.extend_from_slice(&(m.len() as u16).to_be_bytes());
            stream.extend_from_slice(m);
        }
        for chunk in [1, 2, 3, 100, 4096, 1 << 20] {
            let mut d = FrameDecoder::new(1024);
            assert_eq!(feed(&mut d, &stream, chunk), msgs, "chunk {chunk}");
            assert_eq!(d.buffered(), 0);
        }
    }

    #[test]
    fn the_buffer_is_held_only_while_a_frame_is_incomplete() {
        let mut d = FrameDecoder::new(1024);
        assert_eq!(d.buf.capacity(), 0, "none before the first read");
        let spare = d.spare();
        spare[..5].copy_from_slice(&[0, 4, 1, 2, 3]);
        d.advance(5);
        assert!(d.next_frame().is_none());
        d.release();
        assert!(!d.buf.is_empty(), "an incomplete frame keeps it");
        d.spare()[0] = 4;
        d.advance(1);
        assert_eq!(d.next_frame().unwrap().unwrap(), [1, 2, 3, 4]);
        d.release();
        assert_eq!((d.buf.capacity(), d.buffered()), (0, 0), "given back");
    }

    #[test]
    fn large_frames_grow_the_buffer() {
        let big = vec![7u8; MAX_FRAME];
        let mut stream = (big.len() as u16).to_be_bytes().to_vec();
        stream.extend_from_slice(&big);
        let mut d = FrameDecoder::new(512);
        assert_eq!(feed(&mut d, &stream, 1500), vec![big]);
    }

    #[test]
    fn spare_is_never_empty_and_fits_the_pending_frame() {
        // A 510-octet frame, 500 octets of it buffered in a 512-octet decoder.
        let mut d = FrameDecoder::new(512);
        let mut frame = 510u16.to_be_bytes().to_vec();
        frame.extend(std::iter::repeat_n(9u8, 510));
        let spare = d.spare();
        spare[..500].copy_from_slice(&frame[..500]);
        d.advance(500);
        assert_eq!(d.next_frame(), None);
        let spare = d.spare();
        assert!(spare.len() >= 12, "{}", spare.len());
        spare[..12].copy_from_slice(&frame[500..]);
        d.advance(12);
        assert_eq!(d.next_frame().unwrap().unwrap().len(), 510);
    }

    #[test]
    fn zero_length_frame_is_an_error() {
        let mut d = FrameDecoder::new(512);
        d.spare()[..2].copy_from_slice(&[0, 0]);
        d.advance(2);
        assert_eq!(d.next_frame(), Some(Err(WireError::EmptyFrame)));
    }
}
