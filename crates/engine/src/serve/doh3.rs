//! DoH over HTTP/3 (RFC 8484, RFC 9114): POST with an `application/dns-message` body or GET
//! with `?dns=<base64url>`, one request per stream, on h3 over quinn. The QUIC connection is
//! accepted as for doq (`doq.rs`: 0-RTT taken, handshake kind from its messages, the idle policy
//! QUIC's own). The query limit (once its answers are sent) and the age send GOAWAY; requests
//! above it are reset with H3_REQUEST_REJECTED (unprocessed, RFC 9114 §4.1.1: the client sends
//! them again elsewhere), the answers still owed are sent, and the server closes with
//! H3_NO_ERROR if the client has not closed within a second.

use super::deadline::ConnDeadline;
use super::record::Origin;
use super::record::{Conn, Ending, LINGER};
use super::shared::{Policy, Shared};
use bytes::{Buf, BufMut, Bytes};
use dnscost_stats::Close;
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use http::{header, Method, Response, StatusCode};
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::time::Instant;

const DNS_MESSAGE: &str = "application/dns-message";
use dnscost_transport::quic::H3_NO_ERROR;

type Resolver = h3::server::RequestResolver<h3_quinn::Connection, Bytes>;

/// After GOAWAY, how many "no request" answers from h3 before the server stops asking: each
/// request rejected gives one (a client has at most `--quic-max-streams` open, 256 by
/// default), and a client that said GOAWAY itself gives them at once and for ever.
const MAX_REJECTED: u32 = 4096;

/// Answers one request; true when a DNS answer was sent.
async fn answer(resolver: Resolver, shared: Arc<Shared>, origin: Origin, path: Arc<str>) -> bool {
    let Ok((request, mut stream)) = resolver.resolve_request().await else { return false };
    let mut body = Vec::new();
    loop {
        match stream.recv_data().await {
            Ok(Some(mut chunk)) => {
                if body.len() + chunk.remaining() > usize::from(u16::MAX) {
                    return respond(&mut stream, StatusCode::PAYLOAD_TOO_LARGE, None).await;
                }
                body.put(&mut chunk);
            }
            Ok(None) => break,
            Err(_) => return false,
        }
    }
    let query = match query(&request, body, &path) {
        Ok(q) => q,
        Err(code) => return respond(&mut stream, code, None).await,
    };
    let mut out = Vec::with_capacity(query.len() + 64);
    let method = if request.method() == Method::GET { "get" } else { "post" };
    match shared.respond(&query, &mut out, dnscost_wire::Framing::Stream, &origin, Some(method)) {
        Some(reply) => respond(&mut stream, StatusCode::OK, Some((out, reply.ttl))).await,
        None => respond(&mut stream, StatusCode::BAD_REQUEST, None).await,
    }
}

/// The DNS query of a request (its path, method and content type checked).
fn query(request: &http::Request<()>, body: Vec<u8>, path: &str) -> Result<Vec<u8>, StatusCode> {
    if request.uri().path() != path {
        return Err(StatusCode::NOT_FOUND);
    }
    match *request.method() {
        Method::GET => {
            let param = request.uri().query().unwrap_or("").split('&').find_map(|kv| kv.strip_prefix("dns="));
            param.and_then(dnscost_wire::base64url_decode).ok_or(StatusCode::BAD_REQUEST)
        }
        Method::POST => {
            let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
            if !content_type.unwrap_or("").split(';').next().unwrap_or("").trim().eq_ignore_ascii_case(DNS_MESSAGE) {
                return Err(StatusCode::UNSUPPORTED_MEDIA_TYPE);
            }
            if body.is_empty() {
                return Err(StatusCode::BAD_REQUEST);
            }
            Ok(body)
        }
        _ => Err(StatusCode::METHOD_NOT_ALLOWED),
    }
}

/// Sends the response (with the DNS answer and its TTL, or an error status); true when an
/// answer went.
async fn respond(
    stream: &mut h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>,
    status: StatusCode,
    answer: Option<(Vec<u8>, u32)>,
) -> bool {
    let mut response = Response::builder().status(status);
    if let Some((out, ttl)) = &answer {
        response = response
            .header(header::CONTENT_TYPE, DNS_MESSAGE)
            .header(header::CONTENT_LENGTH, out.len())
            .header(header::CACHE_CONTROL, format!("max-age={ttl}"));
    }
    let Ok(response) = response.body(()) else { return false };
    if stream.send_response(response).await.is_err() {
        return false;
    }
    let answered = answer.is_some();
    if let Some((out, _)) = answer {
        if stream.send_data(Bytes::from(out)).await.is_err() {
            return false;
        }
    }
    stream.finish().await.is_ok() && answered
}

/// One connection, once its QUIC handshake is under way, until it ends.
pub async fn serve(
    shared: Arc<Shared>,
    connection: quinn::Connection,
    handshake_done: quinn::ZeroRttAccepted,
    mut conn: Conn,
    mut stop: oneshot::Receiver<()>,
    opened: Instant,
    path: Arc<str>,
) -> (Conn, Ending) {
    let mut handshake_done = Box::pin(handshake_done);
    let mut timer = ConnDeadline::new(&Policy { idle: None, ..shared.policy }, opened);
    let max_queries = shared.policy.max_queries;
    let builder = h3::server::builder();
    let built = tokio::select! {
        biased;
        _ = &mut stop => return (conn, Ending::Server(Close::End)),
        why = timer.expired() => return (conn, Ending::Server(why)),
        c = builder.build::<_, Bytes>(h3_quinn::Connection::new(connection.clone())) => c,
    };
    let mut h3 = match built {
        Ok(h3) => h3,
        Err(e) => return (conn, Ending::quic_client(&connection, Some(e.to_string()), shared.policy.idle.is_some())),
    };
    let mut streams = FuturesUnordered::new();
    // Once the query limit (with its answers sent) or the age is reached: why, and until when
    // the server waits for the client to close. GOAWAY is sent then; h3 rejects the requests
    // above it with H3_REQUEST_REJECTED, unprocessed, so that the client sends them again on
    // another connection (RFC 9114 §4.1.1); the answers still owed go.
    let mut closing: Option<(Close, Instant)> = None;
    let mut accepting = true;
    let mut rejected = 0u32;
    let ending = loop {
        let at_limit = closing.is_none() && max_queries > 0 && conn.queries >= max_queries;
        tokio::select! {
            biased;
            _ = &mut stop => break Ending::Server(Close::End),
            why = timer.expired(), if closing.is_none() => {
                let _ = h3.shutdown(0).await;
                closing = Some((why, Instant::now() + LINGER));
            }
            _ = &mut handshake_done, if conn.established_us.is_none() => {
                conn.established_us = Some(shared.now_us());
            }
            Some(answered) = streams.next() => {
                conn.answers += u64::from(answered);
            }
            _ = std::future::ready(()), if at_limit && streams.is_empty() => {
                let _ = h3.shutdown(0).await;
                closing = Some((Close::MaxQueries, Instant::now() + LINGER));
            }
            r = h3.accept(), if accepting && !at_limit => match r {
                Ok(Some(resolver)) => {
                    conn.queries += 1;
                    timer.touch(Instant::now());
                    streams.push(answer(resolver, shared.clone(), conn.origin(), path.clone()));
                }
                // After our GOAWAY: h3 rejected a request (each such answer takes one) and has
                // none under way. Had the client said GOAWAY too, it would answer so at once
                // for ever: after more of them than a connection can have requests, stop asking.
                Ok(None) if closing.is_some() => {
                    rejected += 1;
                    accepting = rejected <= MAX_REJECTED;
                }
                // The client said GOAWAY and its requests are done.
                Ok(None) => break Ending::Client(Close::Goaway, None),
                Err(_) if closing.is_some() => accepting = false,
                Err(e) => break Ending::quic_client(&connection, Some(e.to_string()), shared.policy.idle.is_some()),
            },
            // The client closes once its answers are in; the server does after a second.
            _ = tokio::time::timeout_at(closing.map_or_else(Instant::now, |c| c.1), connection.closed()),
                if closing.is_some() => break Ending::Server(closing.map_or(Close::End, |c| c.0)),
        }
    };
    if let Ending::Server(_) = ending {
        connection.close(H3_NO_ERROR, b"");
    }
    (conn, ending)
}
