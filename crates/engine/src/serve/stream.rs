//! The two-octet framed exchange of tcp and dot (RFC 7766, RFC 7858), pipelined: every query
//! is answered as it arrives and all answers ready at once leave in one write.

use super::accept::{accept_tls, watched};
use super::deadline::ConnDeadline;
use super::record::{Conn, Ending, LINGER};
use super::shared::Shared;
use dnscost_stats::Close;
use dnscost_wire::{FrameDecoder, MAX_FRAME};
use futures_util::FutureExt as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Answers gathered before they are written even if more queries are waiting.
const WRITE_BATCH: usize = 64 * 1024;

/// A tcp connection, until it ends.
pub async fn tcp(
    shared: Arc<Shared>,
    sock: tokio::net::TcpStream,
    mut conn: Conn,
    mut stop: oneshot::Receiver<()>,
    opened: Instant,
) {
    let (mut s, tally, mut timer) = watched(&shared.policy, sock, opened);
    conn.established_us = Some(conn.opened_us);
    let ending = exchange(&shared, &mut s, &mut conn, &mut stop, &mut timer, false).await;
    close(&mut s, &ending).await;
    drop(s);
    shared.closed(&conn, ending, tally.get(), true);
}

/// A dot connection: TLS, then the framed exchange, until it ends.
pub async fn dot(
    shared: Arc<Shared>,
    sock: tokio::net::TcpStream,
    mut conn: Conn,
    mut stop: oneshot::Receiver<()>,
    opened: Instant,
    config: Arc<rustls::ServerConfig>,
) {
    let (s, tally, mut timer) = watched(&shared.policy, sock, opened);
    let Some(mut tls) = accept_tls(&shared, &mut conn, (s, &tally), config, &mut stop, &mut timer).await else {
        return;
    };
    let ending = exchange(&shared, &mut tls, &mut conn, &mut stop, &mut timer, true).await;
    close(&mut tls, &ending).await;
    drop(tls);
    shared.closed(&conn, ending, tally.get(), true);
}

/// Reads framed queries and writes framed answers until one side ends the connection.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    shared: &Shared,
    s: &mut S,
    conn: &mut Conn,
    stop: &mut oneshot::Receiver<()>,
    timer: &mut ConnDeadline,
    tls: bool,
) -> Ending {
    let max_queries = shared.policy.max_queries;
    let mut frames = FrameDecoder::new(16 * 1024);
    let mut out = Vec::with_capacity(16 * 1024);
    let origin = conn.origin();
    loop {
        let first = tokio::select! {
            biased;
            _ = &mut *stop => return Ending::Server(Close::End),
            why = timer.expired() => return Ending::Server(why),
            r = s.read(frames.spare()) => r,
        };
        out.clear();
        let mut ended: Option<Ending> = None;
        let mut limit = false;
        let mut read = Some(first);
        while let Some(r) = read.take() {
            match r {
                Ok(0) => ended = Some(Ending::Client(if tls { Close::CloseNotify } else { Close::Fin }, None)),
                Ok(n) => frames.advance(n),
                Err(e) => ended = Some(Ending::from_io(&e)),
            }
            let before = conn.queries;
            while let Some(frame) = frames.next_frame() {
                let msg = match frame {
                    Ok(msg) => msg,
                    Err(e) => {
                        ended = Some(Ending::Client(Close::Error, Some(e.to_string())));
                        break;
                    }
                };
                conn.queries += 1;
                let at = out.len();
                out.extend_from_slice(&[0, 0]);
                match shared.respond(msg, &mut out, dnscost_wire::Framing::Stream, &origin, None) {
                    Some(reply) if reply.len <= MAX_FRAME => {
                        out[at..at + 2].copy_from_slice(&(reply.len as u16).to_be_bytes());
                        conn.answers += 1;
                    }
                    _ => out.truncate(at),
                }
                if max_queries > 0 && conn.queries >= max_queries {
                    limit = true;
                    break;
                }
            }
            if conn.queries > before {
                timer.touch(Instant::now());
            }
            if limit || ended.is_some() || out.len() >= WRITE_BATCH {
                break;
            }
            // Queries already received go out with these answers, in the same write.
            read = s.read(frames.spare()).now_or_never();
        }
        if !out.is_empty() {
            let written = tokio::select! {
                biased;
                _ = &mut *stop => return Ending::Server(Close::End),
                r = write_flush(s, &out) => r,
            };
            if let Err(e) = written {
                return ended.unwrap_or_else(|| Ending::from_io(&e));
            }
        }
        if limit {
            return Ending::Server(Close::MaxQueries);
        }
        if let Some(ending) = ended {
            return ending;
        }
    }
}

async fn write_flush<S: AsyncWrite + Unpin>(s: &mut S, data: &[u8]) -> std::io::Result<()> {
    s.write_all(data).await?;
    s.flush().await
}

/// Ends the connection from our side: after a server decision, close_notify (TLS) and FIN,
/// then wait briefly for the client to close, discarding what it still sends; after the
/// client's close_notify, answer with ours.
async fn close<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, ending: &Ending) {
    match ending {
        Ending::Server(_) => {
            let _ = tokio::time::timeout(LINGER, async {
                let _ = s.shutdown().await;
                let mut sink = [0u8; 2048];
                while let Ok(n) = s.read(&mut sink).await {
                    if n == 0 {
                        break;
                    }
                }
            })
            .await;
        }
        Ending::Client(Close::CloseNotify, _) => {
            let _ = tokio::time::timeout(Duration::from_millis(200), s.shutdown()).await;
        }
        Ending::Client(..) => {}
    }
}
