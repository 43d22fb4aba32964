//! DNS over QUIC's session (RFC 9250): one query per client-opened bidirectional stream,
//! answered on the same stream, which the answer finishes. The server's policies: its idle
//! timeout is QUIC's (a transport parameter: the connection ends silently), the query limit and
//! the age end the connection with CONNECTION_CLOSE and DOQ_NO_ERROR.

use super::deadline::ConnDeadline;
use super::record::Origin;
use super::record::{Conn, Ending};
use super::shared::{Policy, Shared};
use dnscost_stats::Close;
use dnscost_transport::quic::{DOQ_NO_ERROR, DOQ_PROTOCOL_ERROR, MAX_DOQ_MESSAGE};
use futures_util::stream::{FuturesUnordered, StreamExt as _};
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::time::Instant;

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
    let reply = shared.respond(query, &mut out, dnscost_wire::Framing::Stream, &origin, None);
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

/// The DoQ session of one connection: a stream per query.
pub async fn session(
    shared: &Arc<Shared>,
    connection: &quinn::Connection,
    handshake_done: quinn::ZeroRttAccepted,
    mut conn: Conn,
    mut stop: oneshot::Receiver<()>,
    opened: Instant,
) -> (Conn, Ending) {
    let mut handshake_done = Box::pin(handshake_done);
    // The idle policy is QUIC's own timeout (silent); the timer keeps the age.
    let mut timer = ConnDeadline::new(&Policy { idle: None, ..shared.policy }, opened);
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
                Err(e) => break Ending::from_quic(&e, shared.policy.idle.is_some()),
            },
        }
    };
    if matches!(ending, Ending::Server(why) if why != Close::Idle) {
        connection.close(DOQ_NO_ERROR, b"");
    }
    (conn, ending)
}
