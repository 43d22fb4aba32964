//! HTTP/2 framing (RFC 9113 §4 and §6): the frame types, flags and setting identifiers the
//! client reads and writes, the protocol's limits, and the writers of the control frames it
//! sends on its own (RST_STREAM, GOAWAY, WINDOW_UPDATE).

use super::ErrorCode;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub(super) const FRAME_HEADER: usize = 9;
pub(super) const DATA: u8 = 0x0;
pub(super) const HEADERS: u8 = 0x1;
pub(super) const PRIORITY: u8 = 0x2;
pub(super) const RST_STREAM: u8 = 0x3;
pub(super) const SETTINGS: u8 = 0x4;
pub(super) const PUSH_PROMISE: u8 = 0x5;
pub(super) const PING: u8 = 0x6;
pub(super) const GOAWAY: u8 = 0x7;
pub(super) const WINDOW_UPDATE: u8 = 0x8;
pub(super) const CONTINUATION: u8 = 0x9;

pub(super) const END_STREAM: u8 = 0x1;
pub(super) const ACK: u8 = 0x1;
pub(super) const END_HEADERS: u8 = 0x4;
pub(super) const PADDED: u8 = 0x8;
pub(super) const PRIORITY_FLAG: u8 = 0x20;

pub(super) const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub(super) const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub(super) const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub(super) const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub(super) const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;

/// Flow-control windows start at this size (RFC 9113 §6.9.2).
pub(super) const DEFAULT_WINDOW: u32 = 65_535;
pub(super) const MAX_WINDOW: i64 = (1 << 31) - 1;
pub(super) const MIN_FRAME_SIZE: u32 = 16_384;
pub(super) const MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
pub(super) const MAX_STREAM_ID: u32 = (1 << 31) - 1;

#[inline]
pub(super) fn read_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[inline]
pub(super) fn put_frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let s = stream.to_be_bytes();
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags, s[0], s[1], s[2], s[3]]);
}

pub(super) fn put_rst_stream(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    put_frame_header(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&code.0.to_be_bytes());
}

pub(super) fn put_goaway(out: &mut Vec<u8>, last_stream: u32, code: ErrorCode) {
    put_frame_header(out, 8, GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&code.0.to_be_bytes());
}

pub(super) fn put_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    put_frame_header(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}
