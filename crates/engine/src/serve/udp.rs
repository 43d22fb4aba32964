//! UDP: one socket per runtime thread (SO_REUSEPORT), one receive and one send per query, no
//! allocation.

use super::record::Origin;
use super::shared::Shared;
use std::sync::Arc;
use std::time::Duration;

/// Answers queries on `socket` until the task is aborted.
pub async fn serve(socket: tokio::net::UdpSocket, shared: Arc<Shared>) {
    let mut buf = vec![0u8; 65_535];
    let mut out = Vec::with_capacity(4096);
    loop {
        let (n, peer) = match socket.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(e) => {
                // ICMP errors surface here (ECONNREFUSED): ignore them; back off on others.
                if e.kind() != std::io::ErrorKind::ConnectionRefused {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                continue;
            }
        };
        out.clear();
        // The response is limited by the query's EDNS size (512 without EDNS).
        let origin = Origin { transport: "udp", connection: None, peer };
        if shared.respond(&buf[..n], &mut out, dnscost_wire::Framing::Datagram, &origin, None).is_none() {
            continue;
        }
        match socket.try_send_to(&out, peer) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let _ = socket.send_to(&out, peer).await;
            }
            Err(_) => {}
        }
    }
}
