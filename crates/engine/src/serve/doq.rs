//! QUIC connections (doq and doh3) and DNS over QUIC's session.
//!
//! DNS over QUIC (RFC 9250): one query per client-opened bidirectional stream, answered on the
//! same stream, which the answer finishes. 0-RTT data is taken (its queries answered before the
//! handshake is done); the handshake's kind is read off its messages
//! (`dnscost_transport::quic`). The server's policies: its idle timeout is QUIC's (a transport
//! parameter: the connection ends silently), the query limit and the age end the connection
//! with CONNECTION_CLOSE and DOQ_NO_ERROR.

use super::conn::{Conn, Ending, Timer};
use super::{Origin, Shared};
use dnscost_load::Transport;
use dnscost_stats::{Close, Handshake};
use dnscost_transport::quic::{HandshakeFacts, DOQ_NO_ERROR, DOQ_PROTOCOL_ERROR, MAX_DOQ_MESSAGE};
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use quinn::ConnectionError;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Accepts QUIC connections (doq, or doh3 with its request `path`) until the task is aborted;
/// each one gets its own task.
pub async fn accept_loop(endpoint: quinn::Endpoint, shared: Arc<Shared>, transport: Transport, path: Arc<str>) {
    let local = endpoint.local_addr().unwrap_or_else(|_| std::net::SocketAddr::from(([0, 0, 0, 0], 0)));
    while let Some(incoming) = endpoint.accept().await {
        let opened = Instant::now();
        let (id, stop) = shared.registry.register();
        let conn = Conn {
            id,
            transport: transport.as_str(),
            local,
            peer: incoming.remote_address(),
            opened_us: shared.now_us(),
            established_us: None,
            handshake: Handshake::None,
            tls_version: None,
            queries: 0,
            answers: 0,
        };
        let Some(stop) = stop else {
            // Shutting down: the connection ends as it starts.
            incoming.refuse();
            shared.closed(&conn, Ending::Server(Close::End), (0, 0), false);
            continue;
        };
        tokio::spawn(serve(shared.clone(), incoming, conn, stop, opened, transport, path.clone()));
    }
}

/// How the client ended the connection, as the server saw it: from the connection's close
/// reason when it is closed, else the protocol's `error`.
pub fn client_ending(connection: &quinn::Connection, error: Option<String>, shared: &Shared) -> Ending {
    match connection.close_reason() {
        Some(e) => ending_of(&e, shared.policy.idle.is_some()),
        None => Ending::Client(Close::Error, error),
    }
}

/// How a connection error reads from the server's side: the client's doing, but for the idle
/// timeout when the server has an idle policy (its own then).
fn ending_of(e: &ConnectionError, idle_policy: bool) -> Ending {
    match crate::quic::close_kind(e) {
        Close::IdleExpired if idle_policy => Ending::Server(Close::Idle),
        close @ (Close::TlsAlert | Close::Error) => Ending::Client(close, Some(e.to_string())),
        close => Ending::Client(close, None),
    }
}

/// Answers one stream's query; returns whether it was answered. With `acked`, returns once
/// the client acknowledged the whole answer: a server that will close the connection by policy
/// must not close before (QUIC's CONNECTION_CLOSE discards what is not yet delivered).
async fn answer(
    shared: Arc<Shared>,
    origin: Origin,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    acked: bool,
) -> bool {
    let Ok(bytes) = recv.read_to_end(MAX_DOQ_MESSAGE).await else {
        let _ = send.reset(DOQ_PROTOCOL_ERROR);
        return false;
    };
    let Some(query) = dnscost_wire::doq_message(&bytes) else {
        let _ = send.reset(DOQ_PROTOCOL_ERROR);
        return false;
    };
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(&[0, 0]);
    let reply = shared.respond(query, &mut out, dnscost_wire::Carrier::Stream, &origin, None);
    match reply {
        Some(r) if r.len <= usize::from(u16::MAX) => {
            out[..2].copy_from_slice(&(r.len as u16).to_be_bytes());
            if send.write_all(&out).await.is_err() || send.finish().is_err() {
                return false;
            }
            !acked || matches!(send.stopped().await, Ok(None))
        }
        _ => {
            let _ = send.reset(DOQ_PROTOCOL_ERROR);
            false
        }
    }
}

/// One QUIC connection, until it ends: its session (doq's here, doh3's in `doh3.rs`), then
/// its record.
async fn serve(
    shared: Arc<Shared>,
    incoming: quinn::Incoming,
    conn: Conn,
    stop: oneshot::Receiver<()>,
    opened: Instant,
    transport: Transport,
    path: Arc<str>,
) {
    let connecting = match incoming.accept() {
        Ok(c) => c,
        Err(e) => {
            let ending = ending_of(&e, false);
            return shared.closed(&conn, ending, (0, 0), true);
        }
    };
    // 0-RTT data, when the TLS layer takes it, is answered at once (on a server this always
    // succeeds: 0.5-RTT).
    let (connection, handshake_done) = match connecting.into_0rtt() {
        Ok(x) => x,
        Err(_) => unreachable!("a server connection always converts to 0.5-RTT"),
    };
    let (mut conn, ending) = if transport == Transport::Doh3 {
        super::doh3::serve(shared.clone(), connection.clone(), handshake_done, conn, stop, opened, path).await
    } else {
        doq(&shared, &connection, handshake_done, conn, stop, opened).await
    };
    if let Some(facts) = HandshakeFacts::of(&connection) {
        conn.handshake = crate::quic::handshake_kind(facts);
        conn.tls_version = Some("1.3");
    }
    // Let the endpoint send the CONNECTION_CLOSE, so that it is counted.
    tokio::task::yield_now().await;
    let stats = connection.stats();
    shared.closed(&conn, ending, (stats.udp_tx.bytes, stats.udp_rx.bytes), true);
}

/// The DoQ session of one connection: a stream per query.
async fn doq(
    shared: &Arc<Shared>,
    connection: &quinn::Connection,
    handshake_done: quinn::ZeroRttAccepted,
    mut conn: Conn,
    mut stop: oneshot::Receiver<()>,
    opened: Instant,
) -> (Conn, Ending) {
    let mut handshake_done = Box::pin(handshake_done);
    // The idle policy is QUIC's own timeout (silent); the timer keeps the age.
    let mut timer = Timer::new(&super::Policy { idle: None, ..shared.policy }, opened);
    let max_queries = shared.policy.max_queries;
    let acked = max_queries > 0 || shared.policy.max_age.is_some();
    let mut streams = FuturesUnordered::new();
    let ending = loop {
        tokio::select! {
            biased;
            _ = &mut stop => break Ending::Server(Close::End),
            why = timer.expired() => break Ending::Server(why),
            _ = &mut handshake_done, if conn.established_us.is_none() => {
                conn.established_us = Some(shared.now_us());
            }
            Some(answered) = streams.next() => {
                conn.answers += u64::from(answered);
                if max_queries > 0 && conn.answers >= max_queries {
                    break Ending::Server(Close::MaxQueries);
                }
            }
            s = connection.accept_bi(), if max_queries == 0 || conn.queries < max_queries => match s {
                Ok((send, recv)) => {
                    conn.queries += 1;
                    timer.touch(Instant::now());
                    streams.push(answer(shared.clone(), conn.origin(), send, recv, acked));
                }
                Err(e) => break ending_of(&e, shared.policy.idle.is_some()),
            },
        }
    };
    if matches!(ending, Ending::Server(why) if why != Close::Idle) {
        connection.close(DOQ_NO_ERROR, b"");
    }
    (conn, ending)
}
