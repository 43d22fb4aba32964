//! Any byte stream from a server, split anywhere, while requests keep opening streams: the
//! HTTP/2 client returns events or one connection error, never panics, never returns more body
//! octets than it was given, and writes only whole frames.
#![no_main]
use dnscost_wire::http2::{Client, Event, Headers, RequestTemplate, Settings, PREFACE};
use libfuzzer_sys::fuzz_target;

/// Checks that `out` is a sequence of whole frames, each within the default frame size.
fn whole_frames(mut out: &[u8]) {
    while !out.is_empty() {
        assert!(out.len() >= 9);
        let len = (usize::from(out[0]) << 16) | (usize::from(out[1]) << 8) | usize::from(out[2]);
        assert!(len <= 16_384 && out.len() >= 9 + len);
        out = &out[9 + len..];
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, stream)) = data.split_first() else { return };
    let chunk = usize::from(head >> 3) * 9 + 1;
    let settings = Settings {
        header_table_size: if head & 4 != 0 { 0 } else { 4096 },
        initial_window_size: if head & 2 != 0 { 100 } else { 1 << 24 },
        ..Settings::default()
    };
    let mut client = Client::new(settings);
    let post = RequestTemplate::post(Headers::Minimal, "fuzz.test:443", "/dns-query");
    let get = RequestTemplate::get(Headers::Minimal, "fuzz.test:443", "/dns-query?dns=AAABAAAB");
    let mut out = Vec::new();
    client.preface(&mut out);
    assert!(out.starts_with(PREFACE));
    out.drain(..PREFACE.len());
    let mut body_octets = 0usize;
    for (i, piece) in stream.chunks(chunk).enumerate() {
        // Keep streams opening (and timing out) as the input goes.
        if client.can_send() {
            let sent = if i % 2 == 0 { client.send(&post, b"query", &mut out) } else { client.send(&get, b"", &mut out) };
            if let (Ok(stream), true) = (sent, head & 1 != 0 && i % 5 == 4) {
                client.reset(stream, dnscost_wire::http2::ErrorCode::CANCEL, &mut out);
            }
        }
        client.receive(piece, &mut out, |event| {
            if let Event::Response { body, .. } = event {
                body_octets += body.len();
            }
        });
        whole_frames(&out);
        out.clear();
    }
    assert!(body_octets <= stream.len());
});
