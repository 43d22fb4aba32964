//! The QUIC connection under a DoH/3 client, opening HTTP/3's optional unidirectional streams
//! only where the server's stream credit allows them.
//!
//! `h3` opens three unidirectional streams before anything else: the control stream (required,
//! RFC 9114 §6.2.1) and QPACK's encoder and decoder streams, which an endpoint "MAY avoid
//! creating" when it uses no dynamic table (RFC 9204 §4.2; ours has none). It waits for
//! credit for each. A server that allows fewer than three (CoreDNS's `https3 max_streams N`
//! sets its unidirectional limit to N as well) would then hold the connection before its
//! first request for ever. Here the two QPACK streams are opened when credit is there at
//! once, and otherwise left out (`h3` takes an error for them as "not opened").

use bytes::Buf;
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming};
use std::task::{Context, Poll};

pub struct H3Connection {
    inner: h3_quinn::Connection,
    /// Unidirectional streams asked for so far.
    uni_asked: u32,
}

impl H3Connection {
    pub fn new(conn: quinn::Connection) -> H3Connection {
        H3Connection { inner: h3_quinn::Connection::new(conn), uni_asked: 0 }
    }
}

/// The QPACK streams `h3` asks for second and third.
fn optional(uni_asked: u32) -> bool {
    matches!(uni_asked, 2 | 3)
}

#[derive(Debug)]
struct NoCredit;

impl std::fmt::Display for NoCredit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no unidirectional stream credit for an optional QPACK stream")
    }
}

impl std::error::Error for NoCredit {}

impl<B: Buf> quic::Connection<B> for H3Connection {
    type RecvStream = <h3_quinn::Connection as quic::Connection<B>>::RecvStream;
    type OpenStreams = <h3_quinn::Connection as quic::Connection<B>>::OpenStreams;

    fn poll_accept_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Self::RecvStream, ConnectionErrorIncoming>> {
        quic::Connection::<B>::poll_accept_recv(&mut self.inner, cx)
    }

    fn poll_accept_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<Self::BidiStream, ConnectionErrorIncoming>> {
        quic::Connection::<B>::poll_accept_bidi(&mut self.inner, cx)
    }

    fn opener(&self) -> Self::OpenStreams {
        quic::Connection::<B>::opener(&self.inner)
    }
}

impl<B: Buf> quic::OpenStreams<B> for H3Connection {
    type BidiStream = <h3_quinn::Connection as quic::OpenStreams<B>>::BidiStream;
    type SendStream = <h3_quinn::Connection as quic::OpenStreams<B>>::SendStream;

    fn poll_open_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
        quic::OpenStreams::<B>::poll_open_bidi(&mut self.inner, cx)
    }

    fn poll_open_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        self.uni_asked += 1;
        match quic::OpenStreams::<B>::poll_open_send(&mut self.inner, cx) {
            // The pending open stays in `inner` and completes for the next stream asked for
            // (h3's grease stream) once credit comes.
            Poll::Pending if optional(self.uni_asked) => {
                Poll::Ready(Err(StreamErrorIncoming::Unknown(Box::new(NoCredit))))
            }
            Poll::Pending => {
                self.uni_asked -= 1;
                Poll::Pending
            }
            ready => ready,
        }
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        quic::OpenStreams::<B>::close(&mut self.inner, code, reason);
    }
}
