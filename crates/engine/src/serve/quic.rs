//! QUIC connections, for doq and doh3 alike: accepted, their 0-RTT data taken (answered before
//! the handshake is done), handed to the transport's session (`doq.rs`, `doh3.rs`), their
//! handshake's kind read off its messages (`dnscost_transport::quic`) and their record written.

use super::record::{Conn, Ending};
use super::shared::Shared;
use dnscost_load::Transport;
use dnscost_stats::{Close, Handshake};
use dnscost_transport::quic::HandshakeFacts;
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

/// One QUIC connection, until it ends: its session (`doq.rs` or `doh3.rs`), then its record.
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
            let ending = Ending::from_quic(&e, false);
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
        super::doq::session(&shared, &connection, handshake_done, conn, stop, opened).await
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
