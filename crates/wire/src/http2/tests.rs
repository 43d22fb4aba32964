use super::*;

/// An event with its body copied, so that tests can collect them.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Got {
    Response(u32, u16, Vec<u8>),
    Reset(u32, ErrorCode),
    GoAway(u32, ErrorCode),
    Error(Http2Error),
}

fn got(e: Event<'_>) -> Got {
    match e {
        Event::Response { stream, status, body } => Got::Response(stream.0, status, body.to_vec()),
        Event::Reset { stream, code } => Got::Reset(stream.0, code),
        Event::GoAway { last_stream, code } => Got::GoAway(last_stream.0, code),
        Event::ConnectionError(e) => Got::Error(e),
    }
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    put_frame_header(&mut f, payload.len(), kind, flags, stream);
    f.extend_from_slice(payload);
    f
}

fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let payload: Vec<u8> =
        pairs.iter().flat_map(|(id, v)| id.to_be_bytes().into_iter().chain(v.to_be_bytes())).collect();
    frame(SETTINGS, 0, 0, &payload)
}

/// `:status` as a raw literal (no Huffman, no indexing), so that any status can be sent.
fn status_block(status: &str) -> Vec<u8> {
    let mut b = Vec::new();
    hpack::put_literal(&mut b, 8, status.as_bytes(), hpack::Strings::Raw);
    b
}

/// What the h2 crate's server sends for a DoH answer the first time: `:status 200` indexed,
/// then Huffman literals with incremental indexing.
fn h2_like_block(len: usize) -> Vec<u8> {
    let mut b = vec![0x88];
    for (name, value) in
        [(31usize, "application/dns-message".to_string()), (28, len.to_string()), (24, "max-age=300".into())]
    {
        hpack::put_integer(&mut b, 0x40, 6, name);
        let h = huffman(value.as_bytes());
        hpack::put_integer(&mut b, 0x80, 7, h.len());
        b.extend_from_slice(&h);
    }
    b
}

fn huffman(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    hpack::huffman_encode(s, &mut out);
    out
}

fn response(stream: u32, body: &[u8]) -> Vec<u8> {
    let mut f = frame(HEADERS, END_HEADERS, stream, &h2_like_block(body.len()));
    f.extend(frame(DATA, END_STREAM, stream, body));
    f
}

/// Frames of a client's output: (type, flags, stream, payload); the preface magic is skipped.
fn parse(mut out: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    if out.starts_with(PREFACE) {
        out = &out[PREFACE.len()..];
    }
    let mut frames = Vec::new();
    while !out.is_empty() {
        let len = (usize::from(out[0]) << 16) | (usize::from(out[1]) << 8) | usize::from(out[2]);
        let stream = read_u32(&out[5..9]);
        frames.push((out[3], out[4], stream, out[9..9 + len].to_vec()));
        out = &out[9 + len..];
    }
    frames
}

/// A client past the preface exchange: server SETTINGS (with `pairs`) received and acked, our
/// SETTINGS acknowledged; the output so far is discarded.
fn connected(pairs: &[(u16, u32)]) -> Client {
    let mut c = Client::new(Settings::default());
    let mut out = Vec::new();
    c.preface(&mut out);
    let mut input = settings(pairs);
    input.extend(frame(SETTINGS, ACK, 0, &[]));
    let events = feed(&mut c, &input, &mut out);
    assert!(events.is_empty(), "{events:?}");
    c
}

fn feed(c: &mut Client, input: &[u8], out: &mut Vec<u8>) -> Vec<Got> {
    let mut events = Vec::new();
    c.receive(input, out, |e| events.push(got(e)));
    events
}

fn post() -> RequestTemplate {
    RequestTemplate::post(Headers::Minimal, "localhost:443", "/dns-query")
}

fn decode_block(block: &[u8]) -> Vec<(String, String)> {
    decode_with(&mut hpack::Decoder::new(4096), block)
}

/// Decodes as the server does, with its dynamic table.
fn decode_with(d: &mut hpack::Decoder, block: &[u8]) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    d.decode(block, &mut |n, v| {
        fields.push((String::from_utf8(n.to_vec()).unwrap(), String::from_utf8(v.to_vec()).unwrap()))
    })
    .unwrap();
    fields
}

fn fields(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
}

#[test]
fn preface_carries_our_settings_and_window() {
    let mut c = Client::new(Settings::default());
    let mut out = Vec::new();
    c.preface(&mut out);
    c.preface(&mut out);
    assert!(out.starts_with(PREFACE));
    let frames = parse(&out);
    assert_eq!(frames.len(), 2, "written once");
    let (kind, flags, stream, payload) = &frames[0];
    assert_eq!((*kind, *flags, *stream), (SETTINGS, 0, 0));
    let pairs: Vec<(u16, u32)> =
        payload.chunks(6).map(|p| (u16::from_be_bytes([p[0], p[1]]), read_u32(&p[2..]))).collect();
    assert_eq!(pairs, [(1, 4096), (2, 0), (4, 1 << 24), (5, 16_384)]);
    assert_eq!(frames[1], (WINDOW_UPDATE, 0, 0, ((1u32 << 30) - 65_535).to_be_bytes().to_vec()));
}

#[test]
fn post_and_get_requests_round_trip() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    let body = [0xab; 33];
    assert_eq!(c.send(&post(), &body, &mut out), Ok(StreamId(1)));
    let get = RequestTemplate::get(Headers::Minimal, "localhost:443", "/dns-query?dns=AAABAAAB");
    assert_eq!(c.send(&get, &[], &mut out), Ok(StreamId(3)));
    assert_eq!(c.send(&get, b"x", &mut out), Err(Http2Error::BodyNotAllowed));
    let frames = parse(&out);
    assert_eq!(frames.len(), 3);
    let (kind, flags, stream, block) = &frames[0];
    assert_eq!((*kind, *flags, *stream), (HEADERS, END_HEADERS, 1));
    assert_eq!(
        decode_block(block),
        fields(&[
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "localhost:443"),
            (":path", "/dns-query"),
            ("accept", "application/dns-message"),
            ("content-type", "application/dns-message"),
            ("content-length", "33"),
        ])
    );
    assert_eq!(frames[1], (DATA, END_STREAM, 1, body.to_vec()));
    let (kind, flags, stream, block) = &frames[2];
    assert_eq!((*kind, *flags, *stream), (HEADERS, END_HEADERS | END_STREAM, 3));
    assert_eq!(
        decode_block(block),
        fields(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "localhost:443"),
            (":path", "/dns-query?dns=AAABAAAB"),
            ("accept", "application/dns-message"),
        ])
    );
    assert_eq!(c.open_streams(), 2);
}

#[test]
fn requests_index_their_shared_fields() {
    let mut c = connected(&[]);
    let mut server = hpack::Decoder::new(4096);
    let get = |q: &str| RequestTemplate::get(Headers::Minimal, "localhost:443", &format!("/dns-query?dns={q}"));
    let post_fields = |len: &str| {
        fields(&[
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "localhost:443"),
            (":path", "/dns-query"),
            ("accept", "application/dns-message"),
            ("content-type", "application/dns-message"),
            ("content-length", len),
        ])
    };
    let get_fields = |q: &str| {
        fields(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "localhost:443"),
            (":path", &format!("/dns-query?dns={q}")),
            ("accept", "application/dns-message"),
        ])
    };
    fn send(
        c: &mut Client,
        server: &mut hpack::Decoder,
        req: &RequestTemplate,
        body: &[u8],
    ) -> (usize, Vec<(String, String)>) {
        let mut out = Vec::new();
        c.send(req, body, &mut out).unwrap();
        let block = parse(&out).into_iter().find(|f| f.0 == HEADERS).unwrap().3;
        (block.len(), decode_with(server, &block))
    }
    // The first request enters the shared fields; the next ones refer to them.
    let (first, list) = send(&mut c, &mut server, &post(), b"q1");
    assert_eq!(list, post_fields("2"));
    let (second, list) = send(&mut c, &mut server, &post(), b"query");
    assert_eq!(list, post_fields("5"));
    assert_eq!(second, 6 + 4, "four references and content-length (first: {first})");
    // Templates of another kind take turns at the newest entries.
    for q in ["AAAB", "AAAC", "AAAD"] {
        assert_eq!(send(&mut c, &mut server, &get(q), b"").1, get_fields(q));
    }
    assert_eq!(send(&mut c, &mut server, &post(), b"q").1, post_fields("1"));
    assert_eq!(send(&mut c, &mut server, &get("AAAE"), b"").1, get_fields("AAAE"));
    // A server table too small for a POST's shared fields (230 octets) but not for a GET's
    // (116): a size update, then plain literals for POST, entries for GET.
    let mut out = Vec::new();
    feed(&mut c, &settings(&[(SETTINGS_HEADER_TABLE_SIZE, 200)]), &mut out);
    let (plain, list) = send(&mut c, &mut server, &post(), b"q");
    assert_eq!(list, post_fields("1"));
    assert!(plain > first - 4, "{plain} {first}");
    assert!(server.table_size() <= 200);
    assert_eq!(send(&mut c, &mut server, &get("AAAF"), b"").1, get_fields("AAAF"));
    let (short, list) = send(&mut c, &mut server, &get("AAAG"), b"");
    assert_eq!(list, get_fields("AAAG"));
    assert_eq!(short, 4 + 2 + "/dns-query?dns=AAAG".len(), "four indices and the path");
    feed(&mut c, &settings(&[(SETTINGS_HEADER_TABLE_SIZE, 0)]), &mut out);
    assert_eq!(send(&mut c, &mut server, &get("AAAH"), b"").1, get_fields("AAAH"));
    assert_eq!(server.table_size(), 0);
}

#[test]
fn browser_requests_are_chromium_s_fields_huffman_coded_and_indexed() {
    let mut c = connected(&[]);
    let mut server = hpack::Decoder::new(4096);
    let post = RequestTemplate::post(Headers::Browser, "dns.example:443", "/dns-query");
    let get = RequestTemplate::get(Headers::Browser, "dns.example:443", "/dns-query?dns=AAABAAAB");
    let browser_fields = |method: &str, path: &str, body: Option<&str>| {
        let mut list = fields(&[
            (":method", method),
            (":authority", "dns.example:443"),
            (":scheme", "https"),
            (":path", path),
            ("accept", "application/dns-message"),
            ("accept-language", "*"),
            ("user-agent", "Chrome"),
            ("accept-encoding", "identity"),
        ]);
        if let Some(len) = body {
            list.extend(fields(&[("content-type", "application/dns-message"), ("content-length", len)]));
        }
        list
    };
    let mut send = |req: &RequestTemplate, body: &[u8]| {
        let mut out = Vec::new();
        c.send(req, body, &mut out).unwrap();
        let block = parse(&out).into_iter().find(|f| f.0 == HEADERS).unwrap().3;
        (block.clone(), decode_with(&mut server, &block))
    };
    let (first, list) = send(&post, &[0; 40]);
    assert_eq!(list, browser_fields("POST", "/dns-query", Some("40")));
    // The authority is a Huffman-coded literal entering the table (0x41, then H and a length).
    assert_eq!(first[1], 0x41);
    assert!(first[2] & 0x80 != 0 && usize::from(first[2] & 0x7f) < "dns.example:443".len());
    let (second, list) = send(&post, &[0; 40]);
    assert_eq!(list, browser_fields("POST", "/dns-query", Some("40")));
    // :method, :scheme and six references; the path and content-length (raw: Huffman is not
    // shorter for "40") are literals.
    let path = 2 + hpack::huffman_len(b"/dns-query");
    assert_eq!(second.len(), 8 + path + 5, "{second:02x?}");
    let (_, list) = send(&get, &[]);
    assert_eq!(list, browser_fields("GET", "/dns-query?dns=AAABAAAB", None));
    let (again, list) = send(&get, &[]);
    assert_eq!(list, browser_fields("GET", "/dns-query?dns=AAABAAAB", None));
    assert_eq!(again.len(), 7 + 2 + hpack::huffman_len(b"/dns-query?dns=AAABAAAB"));
}

#[test]
fn a_request_sent_first_carries_the_preface() {
    let mut c = Client::new(Settings::default());
    let mut out = Vec::new();
    c.send(&post(), b"q", &mut out).unwrap();
    assert!(out.starts_with(PREFACE));
    let kinds: Vec<u8> = parse(&out).iter().map(|f| f.0).collect();
    assert_eq!(kinds, [SETTINGS, WINDOW_UPDATE, HEADERS, DATA]);
}

#[test]
fn long_header_blocks_and_bodies_are_split() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    let path = format!("/dns-query?dns={}", "A".repeat(20_000));
    c.send(&RequestTemplate::get(Headers::Minimal, "h", &path), &[], &mut out).unwrap();
    let frames = parse(&out);
    assert_eq!(
        frames.iter().map(|f| (f.0, f.1)).collect::<Vec<_>>(),
        [(HEADERS, END_STREAM), (CONTINUATION, END_HEADERS)]
    );
    let block: Vec<u8> = frames.iter().flat_map(|f| f.3.clone()).collect();
    assert_eq!(decode_block(&block)[3].1, path);
    out.clear();
    let body = vec![7u8; 40_000];
    c.send(&post(), &body, &mut out).unwrap();
    let frames = parse(&out);
    let data: Vec<_> = frames.iter().filter(|f| f.0 == DATA).collect();
    assert_eq!(
        data.iter().map(|f| (f.3.len(), f.1)).collect::<Vec<_>>(),
        [(16_384, 0), (16_384, 0), (7_232, END_STREAM)]
    );
}

#[test]
fn a_response_comes_whole_and_without_a_copy() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    c.send(&post(), b"query", &mut out).unwrap();
    out.clear();
    let input = response(1, b"answer");
    let spare = c.spare();
    spare[..input.len()].copy_from_slice(&input);
    c.advance(input.len());
    let buf_range = c.buf.as_ptr_range();
    match c.next_event(&mut out) {
        Some(Event::Response { stream, status, body }) => {
            assert_eq!((stream, status, body), (StreamId(1), 200, &b"answer"[..]));
            assert!(buf_range.contains(&body.as_ptr()), "the body is a slice of the read buffer");
        }
        other => panic!("{other:?}"),
    }
    assert!(c.next_event(&mut out).is_none());
    assert!(out.is_empty());
    assert_eq!(c.open_streams(), 0);
    // content-type, content-length and cache-control entered our table.
    assert_eq!(c.hpack.table_size(), (12 + 23 + 32) + (14 + 1 + 32) + (13 + 11 + 32));
}

#[test]
fn settings_and_pings_are_acknowledged() {
    let mut c = Client::new(Settings::default());
    let mut out = Vec::new();
    c.preface(&mut out);
    out.clear();
    let mut input = settings(&[(SETTINGS_MAX_CONCURRENT_STREAMS, 7), (SETTINGS_HEADER_TABLE_SIZE, 100), (0xff, 1)]);
    input.extend(frame(PING, 0, 0, b"12345678"));
    input.extend(frame(PING, ACK, 0, b"87654321"));
    input.extend(frame(SETTINGS, ACK, 0, &[]));
    assert!(feed(&mut c, &input, &mut out).is_empty());
    assert_eq!(parse(&out), [(SETTINGS, ACK, 0, vec![]), (PING, ACK, 0, b"12345678".to_vec())]);
    assert_eq!(c.max_concurrent_streams(), 7);
    assert_eq!((c.encoder.size, c.encoder.update), (100, Some(100)));
    assert!(c.acked);
}

#[test]
fn the_server_preface_must_be_settings() {
    for first in [frame(PING, 0, 0, b"12345678"), frame(SETTINGS, ACK, 0, &[])] {
        let mut c = Client::new(Settings::default());
        let mut out = Vec::new();
        let events = feed(&mut c, &first, &mut out);
        assert!(matches!(events[..], [Got::Error(Http2Error::Preface(_))]), "{events:?}");
        assert_eq!(parse(&out).last().unwrap().0, GOAWAY);
    }
}

#[test]
fn stream_ids_run_out_and_say_so() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    assert!(!c.ids_exhausted());
    c.next_id = MAX_STREAM_ID - 2;
    assert_eq!(c.send(&post(), b"q", &mut out), Ok(StreamId(MAX_STREAM_ID - 2)));
    assert!(c.can_send() && !c.ids_exhausted());
    assert_eq!(c.send(&post(), b"q", &mut out), Ok(StreamId(MAX_STREAM_ID)));
    assert!(!c.can_send(), "no identifier is left");
    assert!(c.ids_exhausted(), "the caller can tell exhaustion from a full stream limit");
    assert_eq!(c.send(&post(), b"q", &mut out), Err(Http2Error::StreamIdsExhausted));
    // Answers still come on the open streams.
    let events = feed(&mut c, &response(MAX_STREAM_ID, b"a"), &mut out);
    assert_eq!(events, [Got::Response(MAX_STREAM_ID, 200, b"a".to_vec())]);
    assert!(c.ids_exhausted());
}

#[test]
fn concurrent_streams_follow_the_server_limit() {
    let mut c = Client::new(Settings { initial_max_streams: 3, ..Settings::default() });
    let mut out = Vec::new();
    for _ in 0..3 {
        c.send(&post(), b"q", &mut out).unwrap();
    }
    assert!(!c.can_send(), "the assumed limit holds until the server's SETTINGS");
    assert_eq!(c.send(&post(), b"q", &mut out), Err(Http2Error::StreamLimit));
    feed(&mut c, &settings(&[(SETTINGS_MAX_CONCURRENT_STREAMS, 4)]), &mut out);
    assert!(c.can_send());
    c.send(&post(), b"q", &mut out).unwrap();
    assert!(!c.can_send());
    let events = feed(&mut c, &response(3, b"a"), &mut out);
    assert_eq!(events, [Got::Response(3, 200, b"a".to_vec())]);
    assert!(c.can_send());
    // A lower limit applies to new streams; open ones go on.
    feed(&mut c, &settings(&[(SETTINGS_MAX_CONCURRENT_STREAMS, 1)]), &mut out);
    assert!(!c.can_send());
    assert_eq!(c.open_streams(), 3);
}

#[test]
fn bodies_respect_the_send_windows() {
    let mut c = connected(&[(SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
    let mut out = Vec::new();
    assert_eq!(c.send_window(), 10);
    assert_eq!(c.send(&post(), &[0; 11], &mut out), Err(Http2Error::FlowControlBlocked { needed: 11, available: 10 }));
    assert!(out.is_empty(), "a refused request writes nothing");
    assert_eq!(c.send(&post(), &[0; 10], &mut out), Ok(StreamId(1)));
    // The connection window (65 535) runs out too.
    feed(
        &mut c,
        &settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20), (SETTINGS_MAX_CONCURRENT_STREAMS, 1000)]),
        &mut out,
    );
    let mut sent = 10;
    while c.send(&post(), &[0; 1000], &mut out).is_ok() {
        sent += 1000;
    }
    assert_eq!(sent, 65_010);
    assert_eq!(c.send_window(), 525);
    feed(&mut c, &frame(WINDOW_UPDATE, 0, 0, &1000u32.to_be_bytes()), &mut out);
    assert_eq!(c.send_window(), 1525);
    c.send(&post(), &[0; 1000], &mut out).unwrap();
    // Overflowing the connection window is a connection error.
    let events = feed(&mut c, &frame(WINDOW_UPDATE, 0, 0, &0x7fff_ffffu32.to_be_bytes()), &mut out);
    assert_eq!(events, [Got::Error(Http2Error::FlowControl)]);
    assert_eq!(parse(&out).last().unwrap().3[4..], ErrorCode::FLOW_CONTROL_ERROR.0.to_be_bytes());
}

#[test]
fn stream_window_updates_and_initial_window_changes() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    c.send(&post(), b"q", &mut out).unwrap();
    out.clear();
    feed(&mut c, &frame(WINDOW_UPDATE, 0, 1, &100u32.to_be_bytes()), &mut out);
    assert_eq!(c.streams[0].send_window, 65_535 - 1 + 100);
    feed(&mut c, &settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 65_545)]), &mut out);
    assert_eq!(c.streams[0].send_window, 65_535 + 9 + 100);
    // A zero increment on a stream is a stream error; on the connection a connection error.
    let events = feed(&mut c, &frame(WINDOW_UPDATE, 0, 1, &0u32.to_be_bytes()), &mut out);
    assert_eq!(events, [Got::Reset(1, ErrorCode::PROTOCOL_ERROR)]);
    assert_eq!(parse(&out).last().unwrap(), &(RST_STREAM, 0, 1, ErrorCode::PROTOCOL_ERROR.0.to_be_bytes().to_vec()));
    let events = feed(&mut c, &frame(WINDOW_UPDATE, 0, 0, &0u32.to_be_bytes()), &mut out);
    assert_eq!(events, [Got::Error(Http2Error::ZeroIncrement)]);
}

#[test]
fn the_receive_window_is_refilled_and_enforced() {
    let small = Settings { connection_window_size: 100_000, initial_window_size: 70_000, ..Settings::default() };
    let mut c = Client::new(small);
    let mut out = Vec::new();
    c.send(&post(), b"q", &mut out).unwrap();
    c.send(&post(), b"q", &mut out).unwrap();
    let mut input = settings(&[]);
    input.extend(frame(HEADERS, END_HEADERS, 1, &h2_like_block(60_000)));
    for _ in 0..3 {
        input.extend(frame(DATA, 0, 1, &[1; 16_000]));
    }
    out.clear();
    assert!(feed(&mut c, &input, &mut out).is_empty());
    // 48 000 octets: the connection window (half of 100 000 not yet used) is untouched, the
    // stream's (half of 70 000 used) is refilled.
    assert_eq!(parse(&out), [(SETTINGS, ACK, 0, vec![]), (WINDOW_UPDATE, 0, 1, 48_000u32.to_be_bytes().to_vec())]);
    out.clear();
    let mut input = frame(DATA, 0, 1, &[1; 2_000]);
    input.extend(frame(DATA, END_STREAM, 1, &[2; 10_000]));
    let events = feed(&mut c, &input, &mut out);
    assert!(matches!(&events[..], [Got::Response(1, 200, b)] if b.len() == 60_000 && b[59_999] == 2));
    assert_eq!(parse(&out), [(WINDOW_UPDATE, 0, 0, 50_000u32.to_be_bytes().to_vec())]);
    // 50 000 more would leave 100 000 - 10 000 - 50 000 ≥ 0; another 50 001 would not.
    // A server that ignores the windows: a stream error, then a connection error.
    let tight = Settings {
        initial_window_size: 1_000,
        connection_window_size: 65_535,
        max_frame_size: 100_000,
        ..Settings::default()
    };
    let mut c = Client::new(tight);
    c.send(&post(), b"q", &mut out).unwrap();
    let mut input = settings(&[]);
    input.extend(frame(HEADERS, END_HEADERS, 1, &status_block("200")));
    input.extend(frame(DATA, 0, 1, &[0; 1_001]));
    let events = feed(&mut c, &input, &mut out);
    assert_eq!(events, [Got::Reset(1, ErrorCode::FLOW_CONTROL_ERROR)]);
    let events = feed(&mut c, &frame(DATA, 0, 1, &[0; 30_000]), &mut out);
    assert!(events.is_empty(), "DATA on a reset stream is ignored but counted: {events:?}");
    let events = feed(&mut c, &frame(DATA, 0, 1, &[0; 34_535]), &mut out);
    assert_eq!(events, [Got::Error(Http2Error::FlowControl)]);
}

#[test]
fn frames_split_anywhere_give_the_same_events() {
    let mut input = settings(&[(SETTINGS_MAX_CONCURRENT_STREAMS, 100)]);
    input.extend(frame(SETTINGS, ACK, 0, &[]));
    let mut expected = Vec::new();
    for i in 0..20u32 {
        let body: Vec<u8> = (0..(i * 37 % 300 + 1)).map(|b| b as u8).collect();
        input.extend(response(2 * i + 1, &body));
        input.extend(frame(PING, 0, 0, &u64::from(i).to_be_bytes()));
        expected.push(Got::Response(2 * i + 1, 200, body));
    }
    for chunk in [1, 2, 3, 7, 9, 10, 100, 1 << 20] {
        let mut c = Client::new(Settings::default());
        let mut out = Vec::new();
        for _ in 0..20 {
            c.send(&post(), b"q", &mut out).unwrap();
        }
        out.clear();
        let mut events = Vec::new();
        for piece in input.chunks(chunk) {
            events.extend(feed(&mut c, piece, &mut out));
        }
        assert_eq!(events, expected, "chunk {chunk}");
        assert_eq!(c.buffered(), 0);
        assert_eq!(parse(&out).iter().filter(|f| f.0 == PING && f.1 == ACK).count(), 20);
    }
}

#[test]
fn interleaved_data_of_several_streams() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    for _ in 0..3 {
        c.send(&post(), b"q", &mut out).unwrap();
    }
    let mut input = Vec::new();
    for s in [5, 1, 3] {
        input.extend(frame(HEADERS, END_HEADERS, s, &status_block("200")));
    }
    for (s, part, end) in [(1, "a1", 0), (3, "b1", 0), (5, "c1", 0), (3, "b2", END_STREAM), (1, "a2", 0)] {
        input.extend(frame(DATA, end, s, part.as_bytes()));
    }
    input.extend(frame(DATA, END_STREAM, 5, b""));
    input.extend(frame(DATA, END_STREAM, 1, b"a3"));
    let events = feed(&mut c, &input, &mut out);
    assert_eq!(
        events,
        [
            Got::Response(3, 200, b"b1b2".to_vec()),
            Got::Response(5, 200, b"c1".to_vec()),
            Got::Response(1, 200, b"a1a2a3".to_vec()),
        ]
    );
}

#[test]
fn statuses_informational_responses_and_trailers() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    for _ in 0..4 {
        c.send(&post(), b"q", &mut out).unwrap();
    }
    // 404 without a body; 100 Continue, then 200; trailers after the body; padding.
    let mut input = frame(HEADERS, END_HEADERS | END_STREAM, 1, &status_block("404"));
    input.extend(frame(HEADERS, END_HEADERS, 3, &status_block("100")));
    input.extend(frame(HEADERS, END_HEADERS, 3, &status_block("200")));
    input.extend(frame(DATA, END_STREAM, 3, b"ok"));
    input.extend(frame(HEADERS, END_HEADERS, 5, &status_block("200")));
    input.extend(frame(DATA, 0, 5, b"body"));
    // A trailer "x: y" (literal with a literal name).
    input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 5, &[0x00, 0x01, b'x', 0x01, b'y']));
    let mut padded = vec![3];
    padded.extend_from_slice(&[0, 0, 0, 0, 0]);
    padded.extend_from_slice(&status_block("503"));
    padded.extend_from_slice(&[0; 3]);
    input.extend(frame(HEADERS, END_HEADERS | PADDED | PRIORITY_FLAG, 7, &padded));
    input.extend(frame(DATA, END_STREAM | PADDED, 7, &[2, b'n', b'o', 0, 0]));
    let events = feed(&mut c, &input, &mut out);
    assert_eq!(
        events,
        [
            Got::Response(1, 404, vec![]),
            Got::Response(3, 200, b"ok".to_vec()),
            Got::Response(5, 200, b"body".to_vec()),
            Got::Response(7, 503, b"no".to_vec()),
        ]
    );
}

#[test]
fn malformed_responses_reset_their_stream() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    for _ in 0..5 {
        c.send(&post(), b"q", &mut out).unwrap();
    }
    out.clear();
    // No :status; a bad :status; DATA before HEADERS; content-length that lies; trailers
    // without END_STREAM.
    let mut no_status = Vec::new();
    hpack::put_literal(&mut no_status, 31, b"application/dns-message", hpack::Strings::Raw);
    let mut input = frame(HEADERS, END_HEADERS, 1, &no_status);
    input.extend(frame(HEADERS, END_HEADERS, 3, &status_block("2x0")));
    input.extend(frame(DATA, END_STREAM, 5, b"early"));
    input.extend(frame(HEADERS, END_HEADERS, 7, &h2_like_block(10)));
    input.extend(frame(DATA, END_STREAM, 7, b"short"));
    input.extend(frame(HEADERS, END_HEADERS, 9, &status_block("200")));
    input.extend(frame(HEADERS, END_HEADERS, 9, &[0x00, 0x01, b'x', 0x01, b'y']));
    let events = feed(&mut c, &input, &mut out);
    let p = ErrorCode::PROTOCOL_ERROR;
    assert_eq!(events, [1, 3, 5, 7, 9].map(|s| Got::Reset(s, p)));
    let resets: Vec<u32> = parse(&out).iter().filter(|f| f.0 == RST_STREAM).map(|f| f.2).collect();
    assert_eq!(resets, [1, 3, 5, 7, 9]);
    assert_eq!(c.open_streams(), 0);
}

#[test]
fn rst_stream_ends_a_stream_and_later_frames_are_ignored() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    c.send(&post(), b"q", &mut out).unwrap();
    c.send(&post(), b"q", &mut out).unwrap();
    out.clear();
    let mut input = frame(RST_STREAM, 0, 1, &ErrorCode::REFUSED_STREAM.0.to_be_bytes());
    input.extend(response(1, b"late"));
    input.extend(response(3, b"fine"));
    let events = feed(&mut c, &input, &mut out);
    assert_eq!(events, [Got::Reset(1, ErrorCode::REFUSED_STREAM), Got::Response(3, 200, b"fine".to_vec())]);
    assert!(out.is_empty());
}

#[test]
fn our_resets_cancel_streams() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    let s = c.send(&post(), b"q", &mut out).unwrap();
    out.clear();
    assert!(c.reset(s, ErrorCode::CANCEL, &mut out));
    assert!(!c.reset(s, ErrorCode::CANCEL, &mut out), "once");
    assert_eq!(parse(&out), [(RST_STREAM, 0, 1, ErrorCode::CANCEL.0.to_be_bytes().to_vec())]);
    assert_eq!(c.open_streams(), 0);
    let events = feed(&mut c, &response(1, b"late"), &mut out);
    assert!(events.is_empty());
}

#[test]
fn goaway_forgets_unprocessed_streams() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    for _ in 0..3 {
        c.send(&post(), b"q", &mut out).unwrap();
    }
    let mut goaway = 3u32.to_be_bytes().to_vec();
    goaway.extend_from_slice(&0u32.to_be_bytes());
    goaway.extend_from_slice(b"debug");
    let mut input = frame(GOAWAY, 0, 0, &goaway);
    input.extend(response(3, b"done"));
    input.extend(response(5, b"ignored"));
    let events = feed(&mut c, &input, &mut out);
    assert_eq!(events, [Got::GoAway(3, ErrorCode::NO_ERROR), Got::Response(3, 200, b"done".to_vec())]);
    assert!(!c.can_send());
    assert_eq!(c.send(&post(), b"q", &mut out), Err(Http2Error::GoingAway));
    assert_eq!(c.open_streams(), 1, "stream 1 may still be answered");
    assert_eq!(c.goaway_received(), Some(StreamId(3)));
}

#[test]
fn our_goaway_closes_gracefully() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    c.send(&post(), b"q", &mut out).unwrap();
    out.clear();
    c.goaway(&mut out);
    c.goaway(&mut out);
    assert_eq!(parse(&out), [(GOAWAY, 0, 0, vec![0; 8])]);
    assert!(!c.can_send());
    assert_eq!(feed(&mut c, &response(1, b"a"), &mut out), [Got::Response(1, 200, b"a".to_vec())]);
}

#[test]
fn continuation_completes_a_header_block() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    c.send(&post(), b"q", &mut out).unwrap();
    c.send(&post(), b"q", &mut out).unwrap();
    let block = h2_like_block(3);
    let mut input = frame(HEADERS, 0, 1, &block[..4]);
    input.extend(frame(CONTINUATION, 0, 1, &block[4..10]));
    input.extend(frame(CONTINUATION, END_HEADERS, 1, &block[10..]));
    input.extend(frame(DATA, END_STREAM, 1, b"abc"));
    assert_eq!(feed(&mut c, &input, &mut out), [Got::Response(1, 200, b"abc".to_vec())]);
    // Another frame inside a header block is a connection error.
    let mut input = frame(HEADERS, 0, 3, &block[..4]);
    input.extend(frame(DATA, 0, 3, b"x"));
    let events = feed(&mut c, &input, &mut out);
    assert_eq!(events, [Got::Error(Http2Error::Continuation { kind: DATA, stream: 3 })]);
}

#[test]
fn connection_errors_send_goaway_and_stop() {
    let cases: Vec<(Vec<u8>, Http2Error)> = vec![
        (frame(DATA, 0, 0, b"x"), Http2Error::UnexpectedStream { kind: DATA, stream: 0 }),
        (frame(DATA, 0, 9, b"x"), Http2Error::UnexpectedStream { kind: DATA, stream: 9 }),
        (frame(HEADERS, END_HEADERS, 2, &[0x88]), Http2Error::UnexpectedStream { kind: HEADERS, stream: 2 }),
        (frame(PUSH_PROMISE, 0, 1, &[0, 0, 0, 2]), Http2Error::PushPromise),
        (frame(CONTINUATION, END_HEADERS, 1, &[0x88]), Http2Error::Continuation { kind: CONTINUATION, stream: 1 }),
        (frame(PING, 0, 0, b"short"), Http2Error::FrameSize { kind: PING, len: 5 }),
        (frame(PING, 0, 1, b"12345678"), Http2Error::UnexpectedStream { kind: PING, stream: 1 }),
        (frame(SETTINGS, 0, 0, &[0; 5]), Http2Error::FrameSize { kind: SETTINGS, len: 5 }),
        (settings(&[(SETTINGS_ENABLE_PUSH, 1)]), Http2Error::Setting { id: 2, value: 1 }),
        (settings(&[(SETTINGS_MAX_FRAME_SIZE, 100)]), Http2Error::Setting { id: 5, value: 100 }),
        (settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 1 << 31)]), Http2Error::Setting { id: 4, value: 1 << 31 }),
        (frame(RST_STREAM, 0, 1, &[0; 3]), Http2Error::FrameSize { kind: RST_STREAM, len: 3 }),
        (frame(GOAWAY, 0, 0, &[0; 7]), Http2Error::FrameSize { kind: GOAWAY, len: 7 }),
        (frame(DATA, PADDED, 1, &[5, 1, 2]), Http2Error::Padding { kind: DATA }),
        (frame(HEADERS, END_HEADERS, 1, &[0xbe]), Http2Error::HpackIndex(62)),
        (frame(DATA, 0, 1, &vec![0; 16_385]), Http2Error::FrameSize { kind: DATA, len: 16_385 }),
    ];
    for (input, error) in cases {
        let mut c = connected(&[]);
        let mut out = Vec::new();
        c.send(&post(), b"q", &mut out).unwrap();
        out.clear();
        let mut twice = input.clone();
        twice.extend(response(1, b"a"));
        let events = feed(&mut c, &twice, &mut out);
        assert_eq!(events, [Got::Error(error.clone())], "{error}");
        let last = parse(&out).pop().unwrap();
        assert_eq!((last.0, &last.3[4..]), (GOAWAY, &error.code().0.to_be_bytes()[..]), "{error}");
        assert!(c.is_failed() && !c.can_send());
        assert_eq!(c.send(&post(), b"q", &mut out), Err(Http2Error::Closed));
    }
}

#[test]
fn unknown_frames_and_priority_are_ignored() {
    let mut c = connected(&[]);
    let mut out = Vec::new();
    c.send(&post(), b"q", &mut out).unwrap();
    out.clear();
    let mut input = frame(0xfa, 0xff, 1, b"whatever");
    input.extend(frame(PRIORITY, 0, 1, &[0, 0, 0, 3, 16]));
    input.extend(frame(PRIORITY, 0, 11, &[0, 0, 0, 3, 16]));
    input.extend(response(1, b"a"));
    assert_eq!(feed(&mut c, &input, &mut out), [Got::Response(1, 200, b"a".to_vec())]);
    assert!(out.is_empty());
}

#[test]
fn stream_ids_grow_and_skip_slots_still_in_use() {
    let mut c = connected(&[(SETTINGS_MAX_CONCURRENT_STREAMS, 1000)]);
    let mut out = Vec::new();
    // Stream 1 stays open while thousands of others come and go.
    assert_eq!(c.send(&post(), b"q", &mut out), Ok(StreamId(1)));
    let mut last = 1;
    for _ in 0..5_000 {
        let s = c.send(&post(), b"q", &mut out).unwrap().0;
        assert!(s > last && s % 2 == 1);
        last = s;
        out.clear();
        assert_eq!(feed(&mut c, &response(s, b"a"), &mut out), [Got::Response(s, 200, b"a".to_vec())]);
    }
    // One identifier in four is skipped (the table starts at four slots and one in use does not
    // grow it), its slot being held by stream 1.
    assert!(last < 2 * (5_000 + 5_000 / 3 + 2), "{last}");
    assert_eq!(feed(&mut c, &response(1, b"first"), &mut out), [Got::Response(1, 200, b"first".to_vec())]);
    // Many open at once: the table grows.
    let ids: Vec<u32> = (0..500).map(|_| c.send(&post(), b"q", &mut out).unwrap().0).collect();
    for &s in ids.iter().rev() {
        assert_eq!(feed(&mut c, &response(s, b"x"), &mut out), [Got::Response(s, 200, b"x".to_vec())]);
    }
    assert_eq!(c.open_streams(), 0);
}

#[test]
fn a_server_that_indexes_despite_our_settings() {
    // Before our SETTINGS are acknowledged the server may index into 4 096 octets. A conforming
    // encoder then signals the new size (0) in its next block; h2o never does and keeps
    // indexing, which the decoder follows.
    for conforming in [true, false] {
        let mut c = Client::new(Settings { header_table_size: 0, ..Settings::default() });
        let mut out = Vec::new();
        for _ in 0..3 {
            c.send(&post(), b"q", &mut out).unwrap();
        }
        let mut input = settings(&[]);
        let mut block = vec![0x88];
        hpack::put_integer(&mut block, 0x40, 6, 24);
        hpack::put_integer(&mut block, 0, 7, 11);
        block.extend_from_slice(b"max-age=300");
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &block));
        input.extend(frame(SETTINGS, ACK, 0, &[]));
        assert_eq!(feed(&mut c, &input, &mut out), [Got::Response(1, 200, vec![])]);
        assert_eq!(c.hpack.table_size(), 11 + 13 + 32);
        let next: &[u8] = if conforming { &[0x20, 0x88] } else { &[0x88, 0xbe] };
        assert_eq!(
            feed(&mut c, &frame(HEADERS, END_HEADERS | END_STREAM, 3, next), &mut out),
            [Got::Response(3, 200, vec![])]
        );
        assert_eq!(c.hpack.table_size(), if conforming { 0 } else { 56 });
        // Growing the table again past our setting is refused.
        let events = feed(&mut c, &frame(HEADERS, END_HEADERS | END_STREAM, 5, &[0x3f, 0x01, 0x88]), &mut out);
        assert_eq!(events, [Got::Error(Http2Error::HpackSizeUpdate { size: 32, max: 0 })]);
    }
}
