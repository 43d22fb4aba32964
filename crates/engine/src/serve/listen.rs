//! `--listen` addresses (`udp://ADDR:PORT`, `tcp://…`, `dot://…`, `doh://ADDR:PORT[/path]`),
//! and the accept loop of the stream listeners, which hands each connection to its carrier.

use super::accept::Counted;
use super::record::{Conn, Ending};
use super::shared::Shared;
use super::{doh, stream};
use dnscost_load::Transport;
use dnscost_stats::Close;
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Where and how to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenUrl {
    pub transport: Transport,
    /// Port 0 picks a free port.
    pub addr: SocketAddr,
    /// The DoH path (`/dns-query` unless given); empty for the other carriers.
    pub path: String,
}

/// Path DoH answers on unless the URL names another (RFC 8484 §7 examples).
pub const DEFAULT_DOH_PATH: &str = "/dns-query";

impl FromStr for ListenUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| format!("{s:?}: expected udp://, tcp://, dot:// or doh:// followed by ADDRESS:PORT"))?;
        // The transport tokens are the generator's: one enum for both sides.
        let scheme = scheme.to_ascii_lowercase();
        let Some(transport) = Transport::ALL.into_iter().find(|t| t.as_str() == scheme) else {
            return Err(format!("{s:?}: unknown transport {scheme:?} (udp, tcp, dot, doh, doq or doh3)"));
        };
        // The authority ends at the first '/' (an IPv6 address is bracketed and has none).
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let addr: SocketAddr = authority
            .parse()
            .map_err(|_| format!("{s:?}: {authority:?} is not IP:PORT (examples: 127.0.0.1:853, [::1]:0)"))?;
        let path = match transport {
            t if t.is_doh() && (path.is_empty() || path == "/") => DEFAULT_DOH_PATH.to_string(),
            t if t.is_doh() && (path.contains(['?', '#']) || path.contains(char::is_whitespace)) => {
                return Err(format!("{s:?}: the DoH path must not have a query, fragment or spaces"))
            }
            t if t.is_doh() => path.to_string(),
            _ if path.is_empty() => String::new(),
            _ => return Err(format!("{s:?}: only doh:// takes a path")),
        };
        Ok(ListenUrl { transport, addr, path })
    }
}

impl fmt::Display for ListenUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}{}", self.transport.as_str(), self.addr, self.path)
    }
}

/// Accepts connections until the task is aborted; each one gets its own task.
pub async fn accept_loop(
    listener: tokio::net::TcpListener,
    transport: Transport,
    tls: Option<Arc<rustls::ServerConfig>>,
    path: Arc<str>,
    shared: Arc<Shared>,
) {
    let listen_addr = listener.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    loop {
        let (sock, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(_) => {
                // Out of descriptors or a connection reset before accept: try again shortly.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let opened = Instant::now();
        let _ = sock.set_nodelay(true);
        let (id, stop) = shared.registry.register();
        let conn = Conn {
            id,
            transport: transport.as_str(),
            local: sock.local_addr().unwrap_or(listen_addr),
            peer,
            opened_us: shared.now_us(),
            established_us: None,
            handshake: dnscost_stats::Handshake::None,
            tls_version: None,
            queries: 0,
            answers: 0,
        };
        let Some(stop) = stop else {
            // Shutting down: the connection ends as it starts.
            let (sock, tally) = Counted::new(sock, false);
            drop(sock);
            shared.closed(&conn, Ending::Server(Close::End), tally.get(), false);
            continue;
        };
        let shared = shared.clone();
        match (transport, &tls) {
            (Transport::Dot, Some(config)) => {
                tokio::spawn(stream::dot(shared, sock, conn, stop, opened, config.clone()));
            }
            (Transport::Doh, Some(config)) => {
                tokio::spawn(doh::serve(shared, sock, conn, stop, opened, config.clone(), path.clone()));
            }
            _ => {
                tokio::spawn(stream::tcp(shared, sock, conn, stop, opened));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let u: ListenUrl = "udp://127.0.0.1:5353".parse().unwrap();
        assert_eq!((u.transport, u.addr, u.path.as_str()), (Transport::Udp, "127.0.0.1:5353".parse().unwrap(), ""));
        let u: ListenUrl = "TCP://[::1]:0".parse().unwrap();
        assert_eq!((u.transport, u.addr.port(), u.addr.is_ipv6()), (Transport::Tcp, 0, true));
        let u: ListenUrl = "dot://0.0.0.0:853".parse().unwrap();
        assert!(u.transport.uses_tls());
        let u: ListenUrl = "doh://127.0.0.1:443".parse().unwrap();
        assert_eq!(u.path, "/dns-query");
        assert_eq!(u.to_string(), "doh://127.0.0.1:443/dns-query");
        let u: ListenUrl = "doh://[::1]:8443/resolve/v1".parse().unwrap();
        assert_eq!((u.addr.to_string().as_str(), u.path.as_str()), ("[::1]:8443", "/resolve/v1"));
    }

    #[test]
    fn bad_urls_say_why() {
        for (url, why) in [
            ("127.0.0.1:53", "expected udp://"),
            ("quic://127.0.0.1:853", "unknown transport"),
            ("udp://localhost:53", "is not IP:PORT"),
            ("udp://127.0.0.1", "is not IP:PORT"),
            ("tcp://::1:53", "is not IP:PORT"),
            ("tcp://127.0.0.1:53/x", "only doh://"),
            ("doh://127.0.0.1:443/q?dns=1", "must not have a query"),
        ] {
            let e = url.parse::<ListenUrl>().unwrap_err();
            assert!(e.contains(why), "{url}: {e}");
        }
    }
}
