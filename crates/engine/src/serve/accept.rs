//! An accepted TCP connection: its [`Counted`] socket, which reads the kernel's byte counts
//! into its [`Tally`] as it closes, its policy timer ([`watched`]), and its TLS handshake
//! ([`accept_tls`]).

use super::deadline::{guarded, ConnDeadline, Tally};
use super::record::{handshake_failure, Conn};
use super::shared::{Policy, Shared};
use dnscost_stats::Handshake;
use dnscost_transport::socket;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// A TCP stream that reads TCP_INFO into its [`Tally`] when dropped, whoever drops it, and
/// with `stamp_reads` notes the time of every read that returns octets.
pub(crate) struct Counted {
    inner: tokio::net::TcpStream,
    tally: Arc<Tally>,
    stamp_reads: bool,
}

impl Counted {
    pub fn new(inner: tokio::net::TcpStream, stamp_reads: bool) -> (Self, Arc<Tally>) {
        let tally = Arc::new(Tally::new());
        (Counted { inner, tally: tally.clone(), stamp_reads }, tally)
    }
}

/// An accepted TCP connection's counted stream, its tally and its policy timer (which counts
/// any octet read as activity when the policy says so).
pub(crate) fn watched(
    policy: &Policy,
    sock: tokio::net::TcpStream,
    opened: Instant,
) -> (Counted, Arc<Tally>, ConnDeadline) {
    let (s, tally) = Counted::new(sock, policy.idle_on_bytes);
    let mut timer = ConnDeadline::new(policy, opened);
    if policy.idle_on_bytes {
        timer.count_reads(tally.clone());
    }
    (s, tally, timer)
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(c) = socket::tcp_counts(&self.inner) {
            self.tally.set_counts(c.bytes_sent, c.bytes_received);
        }
    }
}

impl AsyncRead for Counted {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if this.stamp_reads && buf.filled().len() > before {
            this.tally.note_read();
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The TLS handshake of an accepted connection, bounded by the server's stop and the
/// connection's policy; on failure the connection's record is written and None returned.
pub(crate) async fn accept_tls(
    shared: &Shared,
    conn: &mut Conn,
    (s, tally): (Counted, &Tally),
    config: Arc<rustls::ServerConfig>,
    stop: &mut oneshot::Receiver<()>,
    timer: &mut ConnDeadline,
) -> Option<tokio_rustls::server::TlsStream<Counted>> {
    // Boxed so that dropping it closes the socket (and reads its counts) before the record.
    let mut accept = Box::pin(tokio_rustls::TlsAcceptor::from(config).accept(s));
    let ending = match guarded(accept.as_mut(), stop, timer).await {
        Ok(Ok(tls)) => {
            conn.established_us = Some(shared.now_us());
            let (resumed, version) = dnscost_transport::tls::handshake_facts(tls.get_ref().1);
            conn.handshake = if resumed { Handshake::Resumed } else { Handshake::Full };
            conn.tls_version = version;
            return Some(tls);
        }
        Ok(Err(e)) => handshake_failure(&e),
        Err(ending) => ending,
    };
    drop(accept);
    shared.closed(conn, ending, tally.get(), true);
    None
}
