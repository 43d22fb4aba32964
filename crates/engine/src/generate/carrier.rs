//! Carriers: what a session's bytes travel on. A connection carrier connects (TCP, then TLS
//! with resumption for the configured share), is metered by the kernel (TCP_INFO), and closes
//! the way the client is configured to (graceful, FIN, RST): tcp sessions ride `Tcp`, dot and
//! doh ride `Tls`. udp rides `Udp`, a connected socket that the driver sees as a stream of
//! two-octet-framed messages, as over TCP: a frame written is one datagram, a datagram read
//! comes framed; it counts its datagrams itself. doq rides `Quic` (`quic.rs`), a QUIC
//! connection seen the same way, a frame per stream. The driver sees one byte stream in all cases:
//! what it reads is bytes, [`Events`] (what the network refused, streams that failed, queries
//! that went or waited for a stream; [`Carrier::take_events`]) or the stream's [`End`], the
//! same types whatever the carrier.

use super::ctx::{Connectors, Ctx, Setup};
use super::events::Events;
use super::quic::{QuicEnd, QuicStreams};
use super::session::End;
use dnscost_load::CloseMode;
use dnscost_stats::{Counters, ErrorKind, Handshake};
use dnscost_transport::socket::{self, TcpCounts};
use dnscost_transport::tls_client::TlsClient;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UdpSocket};

/// An established connection.
pub enum Carrier {
    Tcp(TcpStream),
    Tls(Box<TlsClient>),
    Udp(Box<Datagrams>),
    Quic(Box<QuicStreams>),
}

/// What one read of a carrier gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Got {
    /// Bytes into the buffer.
    Bytes(usize),
    /// No bytes, but [`Events`] to take: streams that failed, or the last query waiting for a
    /// stream went (the carrier has room again).
    Events,
}

/// A failed read or write as the session gets it: a QUIC carrier's error carries how its
/// connection ended.
fn end_of(e: std::io::Error) -> End {
    match e.get_ref().and_then(|i| i.downcast_ref::<QuicEnd>()) {
        Some(QuicEnd(close, message)) => End::Quic(*close, message.clone()),
        None => End::Io(e),
    }
}

/// A connection as set up: its carrier and the TLS handshake it took (`None`: a 0-RTT
/// connection, handed over before its handshake is done; ask the carrier at its end).
pub struct Established {
    pub carrier: Carrier,
    pub handshake: Option<Handshake>,
}

/// Whether a connection offers a stored TLS session, and sends its first queries as 0-RTT data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    No,
    Yes,
    Early,
}

/// What a slot connects from: its source address (the set-up's, taken in turn by slot), and
/// over QUIC its endpoint (one UDP socket, kept from one connection to the next).
pub struct Dial {
    pub slot: u64,
    /// Boxed: a QUIC slot's only, it would size every slot's task.
    pub endpoint: Option<Box<quinn::Endpoint>>,
}

impl Dial {
    fn source(&self, ctx: &Ctx) -> Option<IpAddr> {
        let sources = &ctx.setup.sources;
        (!sources.is_empty()).then(|| sources[self.slot as usize % sources.len()])
    }
}

/// The counted kind of a failure to set up a socket or connection.
pub fn classify(e: &std::io::Error) -> ErrorKind {
    use std::io::ErrorKind as K;
    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
        return ErrorKind::OpenFiles;
    }
    match e.kind() {
        K::ConnectionRefused => ErrorKind::Refused,
        K::TimedOut => ErrorKind::ConnectTimeout,
        K::InvalidData => ErrorKind::Tls,
        _ if e.get_ref().is_some_and(|i| i.is::<rustls::Error>()) => ErrorKind::Tls,
        _ => ErrorKind::Connect,
    }
}

/// With `proxy_v2`: the PROXY v2 header that opens slot `slot`'s connection `tcp`, before TLS
/// (the spec's place for it). A new connection's send buffer takes its few dozen octets at
/// once, so it is written without an await: an await in `Carrier::connect` made every slot's
/// task 40 octets larger (1 192 against 1 152) and an idle TCP connection about 0.15 KiB dearer
/// (bench/engine-memory), whether or not the header was sent.
fn send_proxy_header(setup: &Setup, slot: u64, tcp: &TcpStream) -> Result<(), (ErrorKind, String)> {
    let Some(header) = setup.proxy_header(slot, true, tcp.local_addr().ok()) else {
        return Ok(());
    };
    match tcp.try_write(&header) {
        Ok(n) if n == header.len() => Ok(()),
        Ok(n) => Err((ErrorKind::Connect, format!("PROXY v2 header: {n} of {} octets sent", header.len()))),
        Err(e) => Err((classify(&e), format!("PROXY v2 header: {e}"))),
    }
}

impl Carrier {
    /// Connects to the set-up's target from the slot's source; over TLS or QUIC when the set-up
    /// has connectors, offering a stored session (and sending early data) as `resume` says.
    /// The TLS and QUIC set-ups are boxed: a plain TCP connection's set-up carries only its own.
    pub async fn connect(ctx: &Ctx, dial: &mut Dial, resume: Resume) -> Result<Established, (ErrorKind, String)> {
        let setup = &ctx.setup;
        let connectors = match &ctx.connectors {
            Some(Connectors::Quic { fresh, resume: resumed, early }) => {
                let config = match resume {
                    Resume::No => fresh,
                    Resume::Yes => resumed,
                    Resume::Early => early,
                };
                return Box::pin(connect_quic(ctx, dial, config, resume == Resume::Early)).await;
            }
            Some(Connectors::Tls { fresh, resume }) => Some((fresh, resume)),
            None => None,
        };
        let tcp =
            socket::tcp_connect(setup.target, dial.source(ctx)).await.map_err(|e| (classify(&e), e.to_string()))?;
        send_proxy_header(setup, dial.slot, &tcp)?;
        let Some((fresh, resumed)) = connectors else {
            return Ok(Established { carrier: Carrier::Tcp(tcp), handshake: Some(Handshake::None) });
        };
        let config = if resume == Resume::No { fresh } else { resumed };
        let name = setup.server_name.clone().expect("TLS setups have a server name");
        let tls = Box::pin(TlsClient::connect(config.clone(), name, tcp, dial.slot))
            .await
            .map_err(|e| (classify(&e), e.to_string()))?;
        let (resumed, _) = dnscost_transport::tls::handshake_facts(tls.common());
        let handshake = if resumed { Handshake::Resumed } else { Handshake::Full };
        Ok(Established { carrier: Carrier::Tls(Box::new(tls)), handshake: Some(handshake) })
    }

    /// The TLS version the connection speaks (QUIC's is 1.3), if it has one.
    pub fn tls_version(&self) -> Option<&'static str> {
        match self {
            Carrier::Tls(s) => dnscost_transport::tls::handshake_facts(s.common()).1,
            Carrier::Quic(_) => Some("1.3"),
            Carrier::Tcp(_) | Carrier::Udp(_) => None,
        }
    }

    fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Carrier::Tcp(s) => Some(s),
            Carrier::Tls(s) => Some(s.tcp()),
            Carrier::Udp(_) | Carrier::Quic(_) => None,
        }
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Carrier::Udp(d) => d.sock.local_addr().ok(),
            Carrier::Quic(q) => q.local_addr(),
            _ => self.tcp()?.local_addr().ok(),
        }
    }

    /// The handshake's kind, known at set-up except for a 0-RTT connection.
    pub fn handshake(&mut self) -> Handshake {
        match self {
            Carrier::Quic(q) => q.handshake(),
            _ => Handshake::None,
        }
    }

    /// Reads into `buf` if something came: bytes, events to take, or the stream's end.
    /// `buf` is lent for this poll only (see `slot::receive`).
    pub fn poll_receive(&mut self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<Result<Got, End>> {
        let mut rb = ReadBuf::new(buf);
        Poll::Ready(match ready!(Pin::new(&mut *self).poll_read(cx, &mut rb)) {
            Ok(()) if rb.filled().is_empty() => Err(End::Closed),
            Ok(()) => Ok(Got::Bytes(rb.filled().len())),
            // A QUIC carrier's way of saying it has events and no bytes.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(Got::Events),
            Err(e) => Err(end_of(e)),
        })
    }

    /// Writes and flushes `out`.
    pub async fn send(&mut self, out: &[u8]) -> Result<(), End> {
        let write = async {
            self.write_all(out).await?;
            self.flush().await
        };
        write.await.map_err(end_of)
    }

    /// What the carrier saw since the last call (see [`Events`]).
    pub fn take_events(&mut self) -> Events {
        match self {
            Carrier::Udp(d) => d.take_events(),
            Carrier::Quic(q) => q.take_events(),
            Carrier::Tcp(_) | Carrier::Tls(_) => Events::default(),
        }
    }

    /// Whether a query written now goes on the wire at once: false while queries wait in a
    /// QUIC carrier for the server to allow more streams.
    pub fn has_room(&self) -> bool {
        match self {
            Carrier::Quic(q) => q.has_room(),
            _ => true,
        }
    }

    /// The last `n` frames of the next write are first sends; returns how many of them the
    /// write itself sends. A QUIC carrier takes them, to count each as sent once its stream
    /// opens ([`Events::went`]): none; other carriers send them with the write: all.
    pub fn fresh_frames(&mut self, n: u64) -> u64 {
        match self {
            Carrier::Quic(q) => {
                q.fresh_frames(n);
                0
            }
            _ => n,
        }
    }

    /// First sends still waiting in a QUIC carrier for a stream.
    pub fn fresh_waiting(&self) -> u64 {
        match self {
            Carrier::Quic(q) => q.fresh_waiting(),
            _ => 0,
        }
    }

    /// Takes back the queries waiting for a stream for which `expired` is true; returns their
    /// DNS IDs (none but on a QUIC carrier).
    pub fn drop_waiting(&mut self, expired: impl FnMut(u16) -> bool) -> Vec<u16> {
        match self {
            Carrier::Quic(q) => q.drop_waiting(expired),
            _ => Vec::new(),
        }
    }

    /// Ends the connection the configured way; `goodbye` is what the session says first when
    /// the close is graceful (then close_notify over TLS, and FIN; bounded to a second). The
    /// socket itself closes when the carrier is dropped: after a graceful or FIN close, the
    /// driver first waits for the server's end ([`Carrier::await_end`]) to count the close.
    pub async fn close(&mut self, mode: CloseMode, goodbye: &[u8]) {
        if let Carrier::Quic(q) = self {
            return q.close(mode == CloseMode::Silent).await;
        }
        match mode {
            CloseMode::Graceful => {
                let close = async {
                    self.write_all(goodbye).await?;
                    self.flush().await?;
                    self.shutdown().await
                };
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), close).await;
            }
            CloseMode::Fin => {
                if let Some(tcp) = self.tcp() {
                    let _ = socket::shutdown_write(tcp);
                }
            }
            CloseMode::Rst => {
                if let Some(tcp) = self.tcp() {
                    let _ = socket::set_reset_on_close(tcp);
                }
            }
            CloseMode::Silent => {}
        }
    }
}

impl Carrier {
    /// After our close: reads (and discards) until the server ends its side too, or `bound`
    /// passes, so that the segments of the close are on the socket's counters.
    pub async fn await_end(&mut self, bound: std::time::Duration) {
        if let Carrier::Quic(q) = self {
            return q.await_end(bound).await;
        }
        let mut scratch = [0u8; 1024];
        let until_end = async {
            while let Ok(n) = self.read(&mut scratch).await {
                if n == 0 {
                    break;
                }
            }
            // TLS ends at the server's close_notify, which may come before its FIN.
            if let Carrier::Tls(s) = self {
                while let Ok(n) = s.tcp_mut().read(&mut scratch).await {
                    if n == 0 {
                        break;
                    }
                }
            }
        };
        let _ = tokio::time::timeout(bound, until_end).await;
    }

    /// Half-closes a stream carrier (our FIN) after the server closed its side.
    pub fn shutdown_write(&self) {
        if let Some(tcp) = self.tcp() {
            let _ = socket::shutdown_write(tcp);
        }
    }
}

impl AsyncRead for Carrier {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Carrier::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Carrier::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
            Carrier::Udp(d) => Pin::new(&mut **d).poll_read(cx, buf),
            Carrier::Quic(q) => Pin::new(&mut **q).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Carrier {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Carrier::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Carrier::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
            Carrier::Udp(d) => Pin::new(&mut **d).poll_write(cx, buf),
            Carrier::Quic(q) => Pin::new(&mut **q).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Carrier::Tcp(s) => Pin::new(s).poll_flush(cx),
            Carrier::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
            Carrier::Udp(d) => Pin::new(&mut **d).poll_flush(cx),
            Carrier::Quic(q) => Pin::new(&mut **q).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Carrier::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Carrier::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
            Carrier::Udp(d) => Pin::new(&mut **d).poll_shutdown(cx),
            Carrier::Quic(q) => Pin::new(&mut **q).poll_shutdown(cx),
        }
    }
}

/// Kernel byte and segment counts of one connection, added to the thread's counters at most
/// once a second and at close.
pub struct TcpMeter {
    /// The counts so far: TCP_INFO's last reading; a QUIC connection's octets added up.
    pub total: TcpCounts,
    next_ns: u64,
}

impl TcpMeter {
    /// A meter whose first reading is a second after `now` (a shorter connection is read at
    /// its close only).
    pub fn new(now: u64) -> Self {
        TcpMeter { total: TcpCounts::default(), next_ns: now + 1_000_000_000 }
    }

    #[inline]
    pub fn tick(&mut self, now: u64, carrier: &mut Carrier, c: &mut Counters) {
        if let Carrier::Udp(d) = carrier {
            // Datagrams are counted as they go: every step takes the counts.
            d.take_counts(c);
            return;
        }
        if now >= self.next_ns {
            self.next_ns = now + 1_000_000_000;
            self.sample(carrier, c);
        }
    }

    /// Reads TCP_INFO now (a UDP carrier's own counts; a QUIC connection's from quinn).
    pub fn sample(&mut self, carrier: &mut Carrier, c: &mut Counters) {
        match carrier {
            Carrier::Udp(d) => return d.take_counts(c),
            Carrier::Quic(q) => {
                let d = q.take_counts();
                self.total.bytes_sent += d.bytes_sent;
                self.total.bytes_received += d.bytes_received;
                c.bytes_sent += d.bytes_sent;
                c.bytes_received += d.bytes_received;
                c.packets_sent += d.segments_sent;
                c.packets_received += d.segments_received;
                return;
            }
            _ => {}
        }
        if let Some(now) = carrier.tcp().and_then(socket::tcp_counts) {
            let d = now.since(&self.total);
            self.total = now;
            c.bytes_sent += d.bytes_sent;
            c.bytes_received += d.bytes_received;
            c.packets_sent += d.segments_sent;
            c.packets_received += d.segments_received;
        }
    }
}

/// A connected UDP socket as a stream of two-octet-framed messages (see the module
/// documentation), with its own counts: datagrams and payload octets each way, datagrams too
/// short to carry an ID, and what the network refused (an ICMP port unreachable surfaces on
/// the next send or receive of a connected socket).
pub struct Datagrams {
    sock: UdpSocket,
    /// The datagram being handed out, framed: `scratch[pending.0..pending.1]`.
    scratch: Box<[u8]>,
    pending: (usize, usize),
    counts: TcpCounts,
    short: u64,
    /// Receives that reported a refusal, and the first refusal's message.
    refused_reads: u64,
    /// DNS IDs of the queries whose send was refused: they never left.
    refused_sends: Vec<u16>,
    refusal: Option<String>,
    /// With a PROXY v2 header: the header, then the datagram being sent (the header's length
    /// first, kept while the rest is rewritten for each datagram).
    proxied: Option<(usize, Vec<u8>)>,
}

impl Datagrams {
    pub fn new(sock: UdpSocket) -> Self {
        Datagrams {
            sock,
            scratch: vec![0; 2 + 65_535].into_boxed_slice(),
            pending: (0, 0),
            counts: TcpCounts::default(),
            short: 0,
            refused_reads: 0,
            refused_sends: Vec::new(),
            refusal: None,
            proxied: None,
        }
    }

    /// Every datagram sent behind `header` (a PROXY v2 header), when given.
    pub fn behind(mut self, header: Option<Box<[u8]>>) -> Self {
        self.proxied = header.map(|h| (h.len(), h.into_vec()));
        self
    }

    /// Adds the counts since the last call to the thread's counters.
    fn take_counts(&mut self, c: &mut Counters) {
        let d = std::mem::take(&mut self.counts);
        c.bytes_sent += d.bytes_sent;
        c.bytes_received += d.bytes_received;
        c.packets_sent += d.segments_sent;
        c.packets_received += d.segments_received;
        c.unmatched += std::mem::take(&mut self.short);
    }

    /// What the network refused since the last call: receives that reported a refusal, the IDs
    /// of queries whose send was refused, and the first refusal's message.
    fn take_events(&mut self) -> Events {
        Events {
            refused_reads: std::mem::take(&mut self.refused_reads),
            refused_sends: std::mem::take(&mut self.refused_sends),
            refusal: self.refusal.take(),
            ..Events::default()
        }
    }

    fn refused(&mut self, e: &std::io::Error) {
        if self.refusal.is_none() {
            self.refusal = Some(e.to_string());
        }
    }
}

impl AsyncRead for Datagrams {
    /// Hands out every datagram already received, each framed, as far as `buf` has room.
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let mut got = false;
        loop {
            let (start, end) = this.pending;
            if start < end {
                let n = buf.remaining().min(end - start);
                buf.put_slice(&this.scratch[start..start + n]);
                this.pending.0 += n;
                got |= n > 0;
                if this.pending.0 < end {
                    break;
                }
                continue;
            }
            let mut rb = ReadBuf::new(&mut this.scratch[2..]);
            match this.sock.poll_recv(cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    this.counts.segments_received += 1;
                    this.counts.bytes_received += n as u64;
                    if n < 2 {
                        this.short += 1;
                        continue;
                    }
                    this.scratch[..2].copy_from_slice(&(n as u16).to_be_bytes());
                    this.pending = (0, n + 2);
                }
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    this.refused_reads += 1;
                    this.refused(&e);
                }
                Poll::Ready(Err(e)) => return if got { Poll::Ready(Ok(())) } else { Poll::Ready(Err(e)) },
                Poll::Pending => break,
            }
        }
        if got {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}

impl AsyncWrite for Datagrams {
    /// Sends every whole frame of `buf` as one datagram; returns the octets of the frames
    /// sent (a refused one counts as sent: it is reported by [`Carrier::take_events`]).
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let mut done = 0;
        while buf.len() - done >= 2 {
            let len = u16::from_be_bytes([buf[done], buf[done + 1]]) as usize;
            let end = done + 2 + len;
            if end > buf.len() {
                break;
            }
            let msg = &buf[done + 2..end];
            let datagram = match &mut this.proxied {
                Some((header, out)) => {
                    out.truncate(*header);
                    out.extend_from_slice(msg);
                    &out[..]
                }
                None => msg,
            };
            match this.sock.poll_send(cx, datagram) {
                Poll::Ready(Ok(n)) => {
                    this.counts.segments_sent += 1;
                    this.counts.bytes_sent += n as u64;
                }
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    this.refused(&e);
                    if let Some(id) = msg.get(..2) {
                        this.refused_sends.push(u16::from_be_bytes([id[0], id[1]]));
                    }
                }
                Poll::Ready(Err(e)) => return if done > 0 { Poll::Ready(Ok(done)) } else { Poll::Ready(Err(e)) },
                Poll::Pending => return if done > 0 { Poll::Ready(Ok(done)) } else { Poll::Pending },
            }
            done = end;
        }
        Poll::Ready(Ok(done))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Connects over QUIC on the slot's endpoint (made at its first connection), with `config`;
/// `early`: the first queries go as 0-RTT data when the stored session allows it, and the
/// connection is handed over before its handshake is done.
async fn connect_quic(
    ctx: &Ctx,
    dial: &mut Dial,
    config: &quinn::ClientConfig,
    early: bool,
) -> Result<Established, (ErrorKind, String)> {
    let setup = &ctx.setup;
    let endpoint = match &dial.endpoint {
        Some(e) => quinn::Endpoint::clone(e),
        None => {
            let e = dnscost_transport::quic::client_endpoint(setup.target, dial.source(ctx))
                .map_err(|e| (classify(&e), format!("QUIC endpoint: {e}")))?;
            dial.endpoint = Some(Box::new(e.clone()));
            e
        }
    };
    let name = setup.quic_server_name.as_deref().expect("QUIC setups have a server name");
    // The slot is the client: its own tickets (see `dnscost_transport::tls::AsClient`).
    let connecting = {
        let _as = dnscost_transport::tls::AsClient::enter(dial.slot);
        endpoint.connect_with(config.clone(), setup.target, name).map_err(|e| (ErrorKind::Connect, e.to_string()))?
    };
    let local = endpoint.local_addr().ok();
    let quic_error = |e: quinn::ConnectionError| {
        let kind = match &e {
            quinn::ConnectionError::TimedOut => ErrorKind::ConnectTimeout,
            quinn::ConnectionError::TransportError(t) if dnscost_transport::quic::is_tls_alert(t.code) => {
                ErrorKind::Tls
            }
            quinn::ConnectionError::ConnectionClosed(c) if dnscost_transport::quic::is_tls_alert(c.error_code) => {
                ErrorKind::Tls
            }
            _ => ErrorKind::Connect,
        };
        (kind, e.to_string())
    };
    let (conn, handshake) = if early {
        match connecting.into_0rtt() {
            Ok((conn, _accepted)) => (conn, None),
            Err(connecting) => {
                let conn = connecting.await.map_err(quic_error)?;
                let h = handshake_of(&conn);
                (conn, Some(h))
            }
        }
    } else {
        let conn = connecting.await.map_err(quic_error)?;
        let h = handshake_of(&conn);
        (conn, Some(h))
    };
    let protocol = match &setup.doh3 {
        None => super::quic::Protocol::Doq,
        Some(target) => {
            let mut builder = h3::client::builder();
            let h3 = builder.build::<_, _, bytes::Bytes>(super::h3conn::H3Connection::new(conn.clone()));
            let (mut driver, send) = h3.await.map_err(|e| (ErrorKind::Connect, format!("HTTP/3: {e}")))?;
            // The connection's control streams (SETTINGS, GOAWAY) are read here; it ends with
            // the connection.
            tokio::task::spawn_local(async move {
                let _ = driver.wait_idle().await;
            });
            super::quic::Protocol::H3 { send, target: target.clone() }
        }
    };
    let carrier = Carrier::Quic(Box::new(QuicStreams::new(conn, protocol, local, handshake)));
    Ok(Established { carrier, handshake })
}

fn handshake_of(conn: &quinn::Connection) -> Handshake {
    dnscost_transport::quic::HandshakeFacts::of(conn).map_or(Handshake::Full, crate::quic::handshake_kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnscost_stats::Close;

    #[test]
    fn a_quic_end_reaches_the_session_typed_and_other_failures_as_they_are() {
        let quic = std::io::Error::other(QuicEnd(Close::Goaway, "request rejected".into()));
        assert!(matches!(end_of(quic), End::Quic(Close::Goaway, m) if m == "request rejected"));
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(matches!(end_of(reset), End::Io(e) if e.kind() == std::io::ErrorKind::ConnectionReset));
    }

    /// A query sent to a port nobody listens on: the kernel's ICMP port unreachable refuses the
    /// next send on the connected socket, and that query's ID comes out as an event, not as an
    /// error of the byte stream.
    #[test]
    fn a_refused_datagram_is_an_event_with_its_query_id() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let port = closed.local_addr().unwrap().port();
            drop(closed);
            let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            sock.connect(("127.0.0.1", port)).await.unwrap();
            let mut carrier = Carrier::Udp(Box::new(Datagrams::new(sock)));
            let frame = |id: u16| [[0, 12].as_slice(), &id.to_be_bytes(), &[1, 0, 0, 1, 0, 0, 0, 0, 0, 0]].concat();
            carrier.send(&frame(1)).await.unwrap();
            assert_eq!(carrier.take_events(), Events::default(), "the first datagram left");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            carrier.send(&frame(2)).await.unwrap();
            let events = carrier.take_events();
            assert_eq!((events.refused_reads, events.refused_sends.as_slice()), (0, [2].as_slice()));
            assert!(events.refusal.is_some_and(|m| m.contains("refused")));
            assert_eq!(carrier.take_events(), Events::default(), "taken once");
        });
    }

    fn framed(id: u16, len: usize) -> Vec<u8> {
        let mut f = (len as u16).to_be_bytes().to_vec();
        f.extend(id.to_be_bytes());
        f.resize(2 + len, 0xab);
        f
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    }

    /// A carrier connected to `peer`, and `peer` connected back to it.
    async fn udp_pair() -> (Carrier, UdpSocket) {
        let peer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        sock.connect(peer.local_addr().unwrap()).await.unwrap();
        peer.connect(sock.local_addr().unwrap()).await.unwrap();
        (Carrier::Udp(Box::new(Datagrams::new(sock))), peer)
    }

    /// One read of the carrier. A read that is not woken fails the test after 10 s (a kill
    /// switch, not a timing: the read is not polled again once it fires).
    async fn read(carrier: &mut Carrier, buf: &mut [u8]) -> usize {
        let read = std::future::poll_fn(|cx| carrier.poll_receive(cx, buf));
        tokio::select! {
            biased;
            _ = tokio::time::sleep(std::time::Duration::from_secs(10)) => panic!("the read was never woken"),
            r = read => match r {
                Ok(Got::Bytes(n)) => n,
                other => panic!("a read gave {:?}", other.map_err(|e| e.message())),
            },
        }
    }

    fn traffic(carrier: &mut Carrier) -> (u64, u64, u64, u64, u64) {
        let mut c = Counters::default();
        TcpMeter::new(0).sample(carrier, &mut c);
        (c.packets_sent, c.bytes_sent, c.packets_received, c.bytes_received, c.unmatched)
    }

    /// Every frame of a write is a datagram of its own at the peer, in order, with the PROXY v2
    /// header ahead of each when there is one, and counted so (what any way of sending them,
    /// batched or not, must keep).
    #[test]
    fn every_frame_of_a_write_is_one_datagram_at_the_peer() {
        block_on(async {
            for proxy in [None, Some(b"PROXY".to_vec().into_boxed_slice())] {
                let (carrier, peer) = udp_pair().await;
                let Carrier::Udp(d) = carrier else { unreachable!() };
                let mut carrier = Carrier::Udp(Box::new(d.behind(proxy.clone())));
                let n = 131;
                let frames: Vec<Vec<u8>> = (0..n).map(|i| framed(i as u16, 12 + i % 7)).collect();
                carrier.send(&frames.concat()).await.unwrap();
                let header = proxy.as_deref().unwrap_or_default();
                let mut buf = [0u8; 100];
                for f in &frames {
                    let len = peer.recv(&mut buf).await.unwrap();
                    assert_eq!(&buf[..len], [header, &f[2..]].concat());
                }
                let octets: usize = frames.iter().map(|f| header.len() + f.len() - 2).sum();
                assert_eq!(traffic(&mut carrier), (n as u64, octets as u64, 0, 0, 0));
                assert_eq!(peer.try_recv(&mut buf).unwrap_err().kind(), std::io::ErrorKind::WouldBlock, "no more");
            }
        });
    }

    /// The port unreachable that the first datagram of a write provokes (on loopback at once)
    /// fails the second's send: that query is refused and did not leave; the third goes. (A
    /// batched send, `sendmmsg`, stops at the second and drops its error: it must still come
    /// out so.)
    #[test]
    fn a_refusal_in_the_middle_of_a_write_refuses_the_query_it_failed() {
        block_on(async {
            let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let port = closed.local_addr().unwrap().port();
            drop(closed);
            let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            sock.connect(("127.0.0.1", port)).await.unwrap();
            let mut carrier = Carrier::Udp(Box::new(Datagrams::new(sock)));
            carrier.send(&[framed(1, 12), framed(2, 12), framed(3, 12)].concat()).await.unwrap();
            let events = carrier.take_events();
            assert_eq!(events.refused_sends, [2]);
            assert!(events.refusal.is_some_and(|m| m.contains("refused")));
            assert_eq!(traffic(&mut carrier).0, 2, "two datagrams left");
        });
    }

    /// Reads hand out every datagram queued, framed, as far as the buffer has room, the rest
    /// at the next read in order; one too short for an ID is counted, not handed out. A
    /// datagram that comes after a read found the queue empty wakes the next read.
    #[test]
    fn datagrams_queued_come_out_framed_in_order_and_a_later_one_wakes_the_reader() {
        block_on(async {
            let (mut carrier, peer) = udp_pair().await;
            let sizes = [12usize, 1, 30, 12, 65_000];
            for &s in &sizes {
                peer.send(&vec![s as u8; s]).await.unwrap();
            }
            let mut stream = Vec::new();
            let mut buf = vec![0u8; 40];
            while stream.len() < (2 + 12) * 2 + 2 + 30 + 2 + 65_000 {
                let got = read(&mut carrier, &mut buf).await;
                stream.extend_from_slice(&buf[..got]);
            }
            let expected: Vec<u8> = sizes
                .iter()
                .filter(|&&s| s >= 2)
                .flat_map(|&s| [(s as u16).to_be_bytes().to_vec(), vec![s as u8; s]])
                .flatten()
                .collect();
            assert!(stream == expected, "framed, in order, the short one left out");
            let octets = sizes.iter().sum::<usize>() as u64;
            assert_eq!(traffic(&mut carrier), (0, 0, sizes.len() as u64, octets, 1));
            // The queue is empty now, and a read that finds only a datagram too short to hand
            // out waits: the next datagram must still wake it.
            peer.send(&[1]).await.unwrap();
            // Sent by a task of its own: its timer does not poll the read again.
            let later = tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                peer.send(&[7; 12]).await.unwrap();
            });
            let mut buf = [0u8; 100];
            let got = read(&mut carrier, &mut buf).await;
            later.await.unwrap();
            assert_eq!(&buf[..got], [&[0, 12][..], &[7; 12]].concat());
            assert_eq!(traffic(&mut carrier), (0, 0, 2, 13, 1));
        });
    }
}
