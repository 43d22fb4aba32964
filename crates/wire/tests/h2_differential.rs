//! Differential test of the HTTP/2 client against the `h2` crate's server: every request our
//! client encodes (POST and GET, minimal and browser header fields, several on one connection
//! so that the dynamic table is used) decodes in `h2` as intended, and our client decodes what
//! `h2` answers (its encoder Huffman-codes and indexes the response fields).

use bytes::Bytes;
use dnscost_wire::http2::{Client, Event, Headers, Method, RequestTemplate, Settings, StreamId};
use std::collections::BTreeMap;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

const AUTHORITY: &str = "dns.example:443";
const PATH: &str = "/dns-query";

/// A request as the `h2` server decoded it.
#[derive(Debug, PartialEq, Eq)]
struct Decoded {
    method: String,
    path_and_query: String,
    authority: String,
    scheme: String,
    /// Regular fields, sorted by name.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// A response as our client decoded it.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    status: u16,
    body: Vec<u8>,
}

/// One request to send: the template, the body, and the query it carries.
struct Request {
    template: RequestTemplate,
    body: Vec<u8>,
    query: String,
}

impl Request {
    fn new(method: Method, headers: Headers, query: &str) -> Self {
        let (template, body) = match method {
            Method::Post => (RequestTemplate::post(headers, AUTHORITY, PATH), query.as_bytes().to_vec()),
            Method::Get => (RequestTemplate::get(headers, AUTHORITY, &format!("{PATH}?dns={query}")), Vec::new()),
        };
        Request { template, body, query: query.to_string() }
    }

    /// What `h2` should decode.
    fn expected(&self, headers: Headers) -> Decoded {
        let post = self.template.method() == Method::Post;
        let mut fields = vec![("accept", "application/dns-message".to_string())];
        if headers == Headers::Browser {
            fields.push(("accept-language", "*".into()));
            fields.push(("user-agent", "Chrome".into()));
            fields.push(("accept-encoding", "identity".into()));
        }
        if post {
            fields.push(("content-type", "application/dns-message".into()));
            fields.push(("content-length", self.body.len().to_string()));
        }
        let mut headers: Vec<(String, String)> = fields.into_iter().map(|(n, v)| (n.to_string(), v)).collect();
        headers.sort();
        Decoded {
            method: if post { "POST" } else { "GET" }.into(),
            path_and_query: if post { PATH.into() } else { format!("{PATH}?dns={}", self.query) },
            authority: AUTHORITY.into(),
            scheme: "https".into(),
            headers,
            body: self.body.clone(),
        }
    }
}

/// The answer the server gives to the request carrying `query`, with response fields that
/// change between requests (so that `h2`'s encoder both indexes and adds entries).
fn answer_body(query: &str) -> Vec<u8> {
    format!("answer to {query}").into_bytes()
}

/// Serves one connection with `h2`: every request is reported with its stream identifier, and
/// answered.
async fn serve(io: DuplexStream, seen: mpsc::UnboundedSender<(u32, Decoded)>) {
    let mut conn = h2::server::handshake(io).await.expect("h2 handshake");
    while let Some(accepted) = conn.accept().await {
        let (request, respond) = accepted.expect("h2 accepts the request");
        tokio::spawn(respond_to(request, respond, seen.clone()));
    }
}

async fn respond_to(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    seen: mpsc::UnboundedSender<(u32, Decoded)>,
) {
    let stream = u32::from(respond.stream_id());
    let (parts, mut recv) = request.into_parts();
    let mut body = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.expect("request body");
        let _ = recv.flow_control().release_capacity(chunk.len());
        body.extend_from_slice(&chunk);
    }
    let mut headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), v.to_str().expect("ASCII field").to_string()))
        .collect();
    headers.sort();
    let decoded = Decoded {
        method: parts.method.as_str().into(),
        path_and_query: parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default(),
        authority: parts.uri.authority().map(|a| a.as_str().to_string()).unwrap_or_default(),
        scheme: parts.uri.scheme_str().unwrap_or_default().into(),
        headers,
        body,
    };
    let query = match decoded.path_and_query.split_once("?dns=") {
        Some((_, q)) => q.to_string(),
        None => String::from_utf8(decoded.body.clone()).expect("ASCII query"),
    };
    let answer = answer_body(&query);
    let response = http::Response::builder()
        .status(200)
        .header("content-type", "application/dns-message")
        .header("content-length", answer.len())
        .header("cache-control", format!("max-age={}", query.len()))
        .body(())
        .expect("response");
    let mut send = respond.send_response(response, false).expect("response headers");
    send.send_data(Bytes::from(answer), true).expect("response body");
    seen.send((stream, decoded)).expect("test listening");
}

/// Our client's side of the connection.
struct Peer {
    client: Client,
    io: DuplexStream,
    out: Vec<u8>,
}

impl Peer {
    /// Sends every request at once and reads until each is answered; the answers by stream.
    async fn exchange(&mut self, requests: &[Request]) -> Vec<(StreamId, Answer)> {
        let streams: Vec<StreamId> = requests
            .iter()
            .map(|r| self.client.send(&r.template, &r.body, &mut self.out).expect("the client sends"))
            .collect();
        let mut answers = BTreeMap::new();
        while answers.len() < streams.len() {
            self.flush().await;
            let n = self.io.read(self.client.spare()).await.expect("read");
            assert!(n > 0, "the server closed the connection");
            self.client.advance(n);
            while let Some(event) = self.client.next_event(&mut self.out) {
                match event {
                    Event::Response { stream, status, body } => {
                        answers.insert(stream, Answer { status, body: body.to_vec() });
                    }
                    other => panic!("unexpected event {other:?}"),
                }
            }
        }
        self.flush().await;
        streams.into_iter().map(|s| (s, answers.remove(&s).expect("answered"))).collect()
    }

    async fn flush(&mut self) {
        self.io.write_all(&self.out).await.expect("write");
        self.out.clear();
    }
}

/// One connection: requests in turns (each turn sent at once), every one checked on both sides.
async fn round_trip(headers: Headers, turns: &[&[(Method, &str)]]) {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let server = tokio::spawn(serve(theirs, tx));
    let mut peer = Peer { client: Client::new(Settings::default()), io: ours, out: Vec::new() };
    peer.client.preface(&mut peer.out);
    let mut checked = 0;
    for turn in turns {
        let requests: Vec<Request> = turn.iter().map(|&(m, q)| Request::new(m, headers, q)).collect();
        let answers = peer.exchange(&requests).await;
        let mut decoded: BTreeMap<u32, Decoded> = BTreeMap::new();
        while decoded.len() < requests.len() {
            let (stream, d) = rx.recv().await.expect("the server reports every request");
            decoded.insert(stream, d);
        }
        for (request, (stream, answer)) in requests.iter().zip(answers) {
            assert_eq!(decoded.remove(&stream.0), Some(request.expected(headers)), "{headers:?} stream {}", stream.0);
            assert_eq!(answer, Answer { status: 200, body: answer_body(&request.query) });
            checked += 1;
        }
    }
    assert_eq!(checked, turns.iter().map(|t| t.len()).sum::<usize>());
    drop(peer);
    server.await.expect("server task");
}

/// Requests one at a time, then in batches, POST and GET mixed so that each kind's entries are
/// entered, referred to, and entered again.
const TURNS: &[&[(Method, &str)]] = &[
    &[(Method::Post, "AAABAAAB")],
    &[(Method::Post, "AAACAAAB")],
    &[(Method::Get, "AAADAAAB")],
    &[(Method::Get, "AAAEAAAB")],
    &[(Method::Post, "AAAFAAABAAA")],
    &[(Method::Post, "AAAG"), (Method::Get, "AAAH"), (Method::Post, "AAAI"), (Method::Get, "AAAJ")],
    &[
        (Method::Post, "AAAK"),
        (Method::Post, "AAALAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        (Method::Post, "AAAM"),
    ],
    &[(Method::Get, "AAAN"), (Method::Get, "AAAO"), (Method::Get, "AAAP")],
];

#[tokio::test]
async fn minimal_requests_decode_identically_in_h2() {
    round_trip(Headers::Minimal, TURNS).await;
}

#[tokio::test]
async fn browser_requests_decode_identically_in_h2() {
    round_trip(Headers::Browser, TURNS).await;
}
