//! Any octets read to the end of a DoQ stream: the stream check takes exactly one framed message
//! of at least an ID (RFC 9250 §4.2) or nothing, never panics, and the responder's answer to what
//! it takes, framed as `serve` frames it, passes the same check.
#![no_main]
use dnscost_wire::{doq_message, parse_query, Framing, ResponseBuilder};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(message) = doq_message(data) else { return };
    assert!(message.len() >= 2 && message.len() + 2 == data.len());
    assert_eq!(usize::from(u16::from_be_bytes([data[0], data[1]])), message.len());
    if let Ok(q) = parse_query(message) {
        let mut out = vec![0, 0];
        let mut b = ResponseBuilder::new(message, &q, 2, &mut out);
        b.answer(1, 60, &[192, 0, 2, 1]);
        let n = b.finish(Framing::Stream);
        out[..2].copy_from_slice(&(n as u16).to_be_bytes());
        assert_eq!(doq_message(&out).map(<[u8]>::len), Some(n));
    }
});
