//! Hostile servers, made here as fixtures: a server that stops reading, one that never answers,
//! an HTTP/2 server that lets no stream open, never refills its flow-control window or refuses
//! every connection with GOAWAY, a server that closes in the middle of an answer, and a dead
//! port. Against each the engine must end on time (the test harness only has a kill
//! switch, `common::KILL_SWITCH`), write a summary that balances, and either count the
//! shortfall or say that it did not keep up. And against `serve`, a constant rate must offer
//! exactly rate × duration on every transport.

use crate::common;
use crate::common::{generate, generate_with, signal, temp_dir, Server};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a fixture accepts connections: longer than any run of these tests.
const FIXTURE_LIFE: Duration = Duration::from_secs(30);

/// What a fixture does with each connection once accepted (and, for TLS, handshaken).
#[derive(Clone, Copy)]
enum Behaviour {
    /// Holds the connection and never reads (its receive buffer is tiny).
    NoRead,
    /// Reads and discards everything, never answers.
    Mute,
    /// HTTP/2: SETTINGS, then a SETTINGS update to MAX_CONCURRENT_STREAMS = 0; reads, never
    /// answers.
    NoStreams,
    /// HTTP/2: SETTINGS, then a SETTINGS update to INITIAL_WINDOW_SIZE = 1, never a
    /// WINDOW_UPDATE; reads, never answers.
    NoWindow,
    /// HTTP/2: SETTINGS and GOAWAY(last_stream_id = 0) at once, on every connection; reads,
    /// never answers, never closes (the client has to).
    Goaway,
    /// Reads the first query, sends a length prefix of 65 535 octets and 100 of them, then closes
    /// (FIN): the answer is cut off.
    CutAnswer,
    /// Holds queries unanswered until this many are outstanding on the connection, then
    /// answers them all: only a client that keeps that many in flight gets answers. tcp/dot
    /// framing, or HTTP/2 streams with ALPN h2.
    Batch(usize),
}

/// A fixture on loopback: its address, with TLS the CA file that trusts it, the most queries a
/// connection had outstanding at once (as the server saw them; `Batch` only) and how many
/// connections it accepted (and, with TLS, handshook).
struct Fixture {
    addr: String,
    ca: Option<PathBuf>,
    most_outstanding: Arc<AtomicUsize>,
    accepted: Arc<AtomicUsize>,
}

fn h2_frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags, 0, 0, 0, 0];
    f.extend_from_slice(payload);
    f
}

/// A DNS answer to `query`: the query itself with QR set (no records; the generator checks the
/// header and the question).
fn echo_answer(query: &[u8]) -> Vec<u8> {
    let mut a = query.to_vec();
    if a.len() > 2 {
        a[2] |= 0x80;
    }
    a
}

/// `Batch` over two-octet framing (tcp, dot).
async fn batch_framed<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut s: S,
    n: usize,
    most: Arc<AtomicUsize>,
) {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 65_536];
    let mut held: Vec<Vec<u8>> = Vec::new();
    loop {
        let r = tokio::time::timeout(FIXTURE_LIFE, s.read(&mut chunk)).await;
        let Ok(Ok(k)) = r else { return };
        if k == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..k]);
        while buf.len() >= 2 {
            let len = u16::from_be_bytes([buf[0], buf[1]]) as usize;
            if buf.len() < 2 + len {
                break;
            }
            held.push(buf[2..2 + len].to_vec());
            buf.drain(..2 + len);
        }
        if held.len() >= n {
            most.fetch_max(held.len(), Ordering::Relaxed);
            let mut out = Vec::new();
            for q in held.drain(..) {
                let a = echo_answer(&q);
                out.extend_from_slice(&(a.len() as u16).to_be_bytes());
                out.extend_from_slice(&a);
            }
            if s.write_all(&out).await.is_err() || s.flush().await.is_err() {
                return;
            }
        }
    }
}

/// `Batch` over HTTP/2: POST bodies held until `n` streams are open, then all answered.
async fn batch_h2<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(s: S, n: usize, most: Arc<AtomicUsize>) {
    type Held = (bytes::Bytes, h2::server::SendResponse<bytes::Bytes>);
    let Ok(mut conn) = h2::server::handshake(s).await else { return };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Held>();
    let mut held: Vec<Held> = Vec::new();
    loop {
        tokio::select! {
            r = conn.accept() => match r {
                Some(Ok((request, respond))) => {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let mut body = request.into_body();
                        let mut query = Vec::new();
                        while let Some(Ok(data)) = body.data().await {
                            let _ = body.flow_control().release_capacity(data.len());
                            query.extend_from_slice(&data);
                        }
                        let _ = tx.send((query.into(), respond));
                    });
                }
                _ => return,
            },
            Some(h) = rx.recv() => {
                held.push(h);
                if held.len() >= n {
                    most.fetch_max(held.len(), Ordering::Relaxed);
                    for (query, mut respond) in held.drain(..) {
                        let response = http::Response::builder()
                            .status(200)
                            .header("content-type", "application/dns-message")
                            .body(())
                            .unwrap();
                        if let Ok(mut send) = respond.send_response(response, false) {
                            let _ = send.send_data(echo_answer(&query).into(), true);
                        }
                    }
                }
            }
            _ = tokio::time::sleep(FIXTURE_LIFE) => return,
        }
    }
}

async fn behave<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut s: S,
    how: Behaviour,
    h2: bool,
    most: Arc<AtomicUsize>,
) {
    let end = tokio::time::Instant::now() + FIXTURE_LIFE;
    let update = match how {
        Behaviour::Batch(n) if h2 => return batch_h2(s, n, most).await,
        Behaviour::Batch(n) => return batch_framed(s, n, most).await,
        Behaviour::NoRead => {
            tokio::time::sleep_until(end).await;
            return;
        }
        Behaviour::CutAnswer => {
            let mut buf = vec![0u8; 4096];
            if s.read(&mut buf).await.is_ok_and(|n| n > 0) {
                let mut cut = vec![0xff, 0xff];
                cut.extend_from_slice(&[0u8; 100]);
                let _ = s.write_all(&cut).await;
                let _ = s.shutdown().await;
                // Reads on until the client's end, so that the close stays a FIN (a socket
                // closed with unread octets would reset).
                while let Ok(Ok(n)) = tokio::time::timeout_at(end, s.read(&mut buf)).await {
                    if n == 0 {
                        break;
                    }
                }
            }
            return;
        }
        Behaviour::Mute => None,
        Behaviour::Goaway => {
            // SETTINGS, then GOAWAY(last stream 0, NO_ERROR): no request will be processed.
            let mut first = h2_frame(4, 0, &[]);
            first.extend(h2_frame(7, 0, &[0u8; 8]));
            if s.write_all(&first).await.is_err() {
                return;
            }
            let _ = s.flush().await;
            None
        }
        Behaviour::NoStreams => Some([0u8, 3, 0, 0, 0, 0]),
        Behaviour::NoWindow => Some([0u8, 4, 0, 0, 0, 1]),
    };
    if let Some(setting) = update {
        let mut first = h2_frame(4, 0, &[]);
        first.extend(h2_frame(4, 0, &setting));
        if s.write_all(&first).await.is_err() {
            return;
        }
        let _ = s.flush().await;
    }
    let mut buf = vec![0u8; 65_536];
    let mut acked = false;
    loop {
        tokio::select! {
            r = s.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    // Acknowledge the client's SETTINGS once (it follows the 24-octet preface).
                    if (update.is_some() || matches!(how, Behaviour::Goaway)) && !acked {
                        acked = true;
                        let _ = s.write_all(&h2_frame(4, 1, &[])).await;
                        let _ = s.flush().await;
                    }
                }
            },
            _ = tokio::time::sleep_until(end) => return,
        }
    }
}

/// Starts a fixture on its own thread and runtime, with TLS (ALPN `alpn`) or not.
fn fixture(dir: &Path, how: Behaviour, alpn: Option<&[u8]>) -> Fixture {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    if matches!(how, Behaviour::NoRead) {
        socket.set_recv_buffer_size(2048).unwrap();
    }
    socket.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    socket.listen(1024).unwrap();
    let listener: std::net::TcpListener = socket.into();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (acceptor, ca) = match alpn {
        Some(alpn) => {
            let cert = dnscost_transport::tls::generate(&["127.0.0.1".into()]).unwrap();
            let ca = dir.join("hostile-ca.pem");
            std::fs::write(&ca, &cert.ca_pem).unwrap();
            let config =
                dnscost_transport::tls::server_config(cert.chain, cert.key, vec![alpn.to_vec()], None).unwrap();
            (Some(tokio_rustls::TlsAcceptor::from(config)), Some(ca))
        }
        None => (None, None),
    };
    let most_outstanding = Arc::new(AtomicUsize::new(0));
    let most = most_outstanding.clone();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let h2 = alpn == Some(&b"h2"[..]);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let end = tokio::time::Instant::now() + FIXTURE_LIFE;
            let acceptor = acceptor.map(Arc::new);
            loop {
                let (tcp, _) = tokio::select! {
                    r = listener.accept() => match r { Ok(x) => x, Err(_) => continue },
                    _ = tokio::time::sleep_until(end) => return,
                };
                let (acceptor, most, count) = (acceptor.clone(), most.clone(), count.clone());
                tokio::spawn(async move {
                    match acceptor {
                        Some(a) => {
                            if let Ok(tls) = a.accept(tcp).await {
                                count.fetch_add(1, Ordering::Relaxed);
                                behave(tls, how, h2, most).await;
                            }
                        }
                        None => {
                            count.fetch_add(1, Ordering::Relaxed);
                            behave(tcp, how, h2, most).await
                        }
                    }
                });
            }
        });
    });
    Fixture { addr, ca, most_outstanding, accepted }
}

fn args<'a>(f: &'a Fixture, transport: &'a str) -> Vec<&'a str> {
    let mut a = vec!["--transport", transport, "--target", &f.addr, "--quiet"];
    if let Some(ca) = &f.ca {
        a.extend(["--ca", ca.to_str().unwrap()]);
    }
    a
}

fn kept_up(run: &common::Run) -> bool {
    run.summary()["generator_kept_up"].as_bool().unwrap()
}

#[test]
fn a_server_that_stops_reading_cannot_hold_the_run() {
    for (transport, alpn) in [("tcp", None), ("dot", Some(&b"dot"[..]))] {
        let dir = temp_dir(&format!("noread-{transport}"));
        let f = fixture(&dir, Behaviour::NoRead, alpn);
        let mut a = args(&f, transport);
        a.extend(["--in-flight", "65535", "--rate", "max", "--duration", "2s", "--timeout", "1s"]);
        let run = generate(&dir, &a);
        let s = run.summary();
        assert_eq!(s["interrupted"], false, "{s}");
        let acc = run.balanced();
        assert_eq!(acc["answered"], 0);
        assert!(acc["offered"].as_u64().unwrap() > 1000, "{acc}");
        // The connection whose writes never completed was given up.
        assert!(
            run.connections.iter().any(|c| c["error"].as_str().is_some_and(|e| e.contains("not reading"))),
            "{transport}: {:?}",
            run.connections
        );
        assert_eq!(run.status.code(), Some(4), "{transport}: nothing answered: {}", run.stderr);
        // Queries whose write never completed were not sent, and the run says so.
        assert!(run.total("queries.sent") < run.total("queries.offered"), "{}", run.summary());
        assert!(!kept_up(&run), "{}", run.summary());
    }
}

#[test]
fn a_second_signal_aborts_a_run_blocked_on_writes() {
    for signo in [libc::SIGINT, libc::SIGTERM] {
        let dir = temp_dir(&format!("noread-abort-{signo}"));
        let f = fixture(&dir, Behaviour::NoRead, Some(b"dot"));
        let mut a = args(&f, "dot");
        // A timeout far beyond the test: only the signals can end the run early.
        a.extend(["--in-flight", "65535", "--rate", "max", "--duration", "30s", "--timeout", "600s"]);
        let run = generate_with(&dir, &a, |pid| {
            // Wait until the engine has written its start record and is sending.
            let out = dir.join("out.jsonl");
            let until = Instant::now() + Duration::from_secs(20);
            while Instant::now() < until && std::fs::read_to_string(&out).map_or(true, |t| !t.contains("interval")) {
                std::thread::sleep(Duration::from_millis(50));
            }
            signal(pid, signo);
            std::thread::sleep(Duration::from_millis(300));
            signal(pid, signo);
        });
        let s = run.summary();
        assert_eq!((s["interrupted"].as_bool(), s["aborted"].as_bool()), (Some(true), Some(true)), "{s}");
        let acc = run.balanced();
        assert!(acc["aborted"].as_u64().unwrap() > 0, "{acc}");
        assert_eq!(run.status.code(), Some(130));
        assert!(run.stderr.contains("interrupted"), "{}", run.stderr);
    }
}

#[test]
fn a_mute_server_shows_every_query_of_the_schedule() {
    // 200 queries are due; those in the last timeout before the end are unsent, not missing.
    let dir = temp_dir("mute");
    let f = fixture(&dir, Behaviour::Mute, None);
    let mut a = args(&f, "tcp");
    a.extend(["--rate", "100", "--duration", "2s", "--timeout", "500ms"]);
    let run = generate(&dir, &a);
    let acc = run.balanced();
    assert_eq!(acc["offered"], 200, "{}", run.summary());
    assert_eq!(acc["answered"], 0);
    assert!(!kept_up(&run), "{}", run.summary());
    assert_eq!(run.status.code(), Some(4));
    assert!(run.stderr.contains("timed out"), "{}", run.stderr);

    // Interrupted with full windows: what was due until the interrupt is offered (unsent),
    // not dropped. 2 × 100 go out; about 500/s × 1.5 s are due.
    let mut a = args(&f, "tcp");
    a.extend(["--connections", "2", "--in-flight", "100", "--rate", "500", "--duration", "20s", "--timeout", "10s"]);
    let run = generate_with(&dir, &a, |pid| {
        std::thread::sleep(Duration::from_millis(1500));
        signal(pid, libc::SIGINT);
        std::thread::sleep(Duration::from_millis(300));
        signal(pid, libc::SIGINT);
    });
    let acc = run.balanced();
    assert_eq!(run.total("queries.sent"), 200, "{}", run.summary());
    assert!(acc["offered"].as_u64().unwrap() >= 600, "{acc}");
    assert!(run.total("queries.failed.unsent") >= 400, "{}", run.summary());
    assert_eq!(acc["aborted"], 200, "{acc}");
    assert!(!kept_up(&run));
    assert_eq!(run.status.code(), Some(130));
}

#[test]
fn http2_servers_that_let_nothing_through_show_the_shortfall() {
    for how in [Behaviour::NoStreams, Behaviour::NoWindow] {
        let dir = temp_dir("h2-blocked");
        let f = fixture(&dir, how, Some(b"h2"));
        let mut a = args(&f, "doh");
        a.extend(["--rate", "100", "--duration", "2s", "--timeout", "500ms"]);
        let run = generate(&dir, &a);
        let acc = run.balanced();
        assert_eq!(acc["offered"], 200, "{}", run.summary());
        assert!(run.total("queries.failed.unsent") >= 150, "{}", run.summary());
        assert!(!kept_up(&run), "{}", run.summary());
        // The closed loop too: the blocked window counts as unsent, once per timeout.
        let mut a = args(&f, "doh");
        a.extend(["--rate", "max", "--in-flight", "4", "--duration", "2s", "--timeout", "500ms"]);
        let run = generate(&dir, &a);
        run.balanced();
        assert!(run.total("queries.failed.unsent") >= 4, "{}", run.summary());
        assert!(!kept_up(&run), "{}", run.summary());
    }
}

#[test]
fn a_dead_server_under_a_closed_loop_is_not_kept_up() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let target = format!("127.0.0.1:{port}");
    for transport in ["tcp", "dot"] {
        let dir = temp_dir(&format!("dead-{transport}"));
        let mut a = vec!["--transport", transport, "--target", &target, "--quiet", "--rate", "max"];
        a.extend(["--duration", "1s", "--timeout", "200ms"]);
        if transport == "dot" {
            a.push("--insecure");
        }
        let run = generate(&dir, &a);
        run.balanced();
        assert!(run.total("queries.offered") > 0, "{}", run.summary());
        assert!(run.total("queries.failed.unsent") > 0, "{}", run.summary());
        assert!(!kept_up(&run), "{}", run.summary());
        assert_eq!(run.status.code(), Some(4));
        assert!(run.stderr.contains("refused"), "{}", run.stderr);
    }
}

#[test]
fn routine_reconnections_are_not_a_shortfall() {
    // A closed loop of one query per connection reconnects all the time; the end of the run
    // finds slots between connections, which is not a query that could not be sent.
    let dir = temp_dir("reconnect");
    let server = Server::start(&dir, &[]);
    for transport in ["tcp", "dot"] {
        let mut a = vec!["--transport", transport, "--target", server.addr(transport), "--quiet"];
        if transport == "dot" {
            a.extend(["--ca", server.ca.to_str().unwrap()]);
        }
        a.extend(["--connections", "4", "--in-flight", "16", "--lifetime", "1q", "--rate", "max"]);
        a.extend(["--duration", "500ms", "--synthetic", "1000"]);
        let run = generate(&dir, &a);
        run.balanced();
        assert_eq!(run.total("queries.failed_total"), 0, "{transport}: {}", run.summary());
        // Every query offered was sent. (Not generator_kept_up: at one query per connection in
        // a closed loop the generator's core may well be the one saturated, which that flag
        // rightly reports.)
        assert_eq!(run.total("queries.sent"), run.total("queries.offered"), "{transport}: {}", run.summary());
    }
}

#[test]
fn a_constant_rate_offers_exactly_its_schedule_on_every_transport() {
    let dir = temp_dir("schedule");
    let server = Server::start(&dir, &[]);
    for transport in ["udp", "tcp", "dot", "doh"] {
        let mut a = vec!["--transport", transport, "--target", server.addr(transport), "--quiet"];
        if transport == "dot" || transport == "doh" {
            a.extend(["--ca", server.ca.to_str().unwrap()]);
        }
        a.extend(["--connections", "3", "--rate", "300", "--synthetic", "1000"]);
        let run = generate(&dir, &[&a[..], &["--duration", "1s"]].concat());
        assert!(run.status.success(), "{transport}: {}", run.stderr);
        let acc = run.balanced();
        let offered = acc["offered"].as_u64().unwrap();
        assert!(offered.abs_diff(300) <= 1, "{transport}: offered {offered} of 300");
        // Interrupted early, the schedule up to the interrupt is still all there.
        let run = generate_with(&dir, &[&a[..], &["--duration", "20s"]].concat(), |pid| {
            std::thread::sleep(Duration::from_millis(1500));
            signal(pid, libc::SIGINT);
        });
        let acc = run.balanced();
        let s = run.summary();
        assert_eq!(s["interrupted"], true);
        assert_eq!(run.status.code(), Some(130));
        let sent = run.total("queries.sent");
        let offered = acc["offered"].as_u64().unwrap();
        assert!(offered >= sent && offered - sent <= 3, "{transport}: offered {offered}, sent {sent}");
    }
}

#[test]
fn in_flight_is_what_the_server_sees_outstanding() {
    // The server answers only once 8 queries are outstanding on a connection: a generator that
    // does not pipeline (or opens fewer streams) gets nothing, one that sends more than its
    // window shows more than 8.
    for (transport, alpn) in [("tcp", None), ("dot", Some(&b"dot"[..])), ("doh", Some(&b"h2"[..]))] {
        let dir = temp_dir(&format!("batch-{transport}"));
        let f = fixture(&dir, Behaviour::Batch(8), alpn);
        let mut a = args(&f, transport);
        a.extend(["--connections", "1", "--in-flight", "8", "--rate", "max", "--duration", "500ms"]);
        let run = generate(&dir, &a);
        run.balanced();
        assert!(run.total("queries.answered") >= 8, "{transport}: {}", run.summary());
        assert_eq!(f.most_outstanding.load(Ordering::Relaxed), 8, "{transport}");
    }
}

#[test]
fn an_http2_server_that_refuses_every_connection_with_goaway_is_named() {
    // GOAWAY(last_stream_id = 0) on every connection: no request is ever processed. The queries
    // are refused, not unanswered, and the reason names the GOAWAYs.
    let dir = temp_dir("h2-goaway");
    let f = fixture(&dir, Behaviour::Goaway, Some(b"h2"));
    let mut a = args(&f, "doh");
    a.extend(["--rate", "100", "--duration", "2s", "--timeout", "500ms"]);
    let run = generate(&dir, &a);
    let acc = run.balanced();
    assert_eq!(acc["offered"], 200, "{}", run.summary());
    assert_eq!(acc["answered"], 0);
    // Refused queries wait for the next connection, and fail `rejected` when their timeout
    // passes there (a query sent again a moment before its timeout may time out on the wire).
    let rejected = run.total("queries.failed.rejected");
    assert!(rejected >= 100 && rejected > 2 * run.total("queries.timed_out"), "{}", run.summary());
    let goaways = run.total("connections.closed_by_server.goaway");
    let accepted = f.accepted.load(Ordering::Relaxed) as u64;
    // Every connection the server accepted ended with its GOAWAY but perhaps the last (the run's end).
    assert!(
        goaways > 1 && goaways <= accepted && accepted <= goaways + 1,
        "{goaways} of {accepted}: {}",
        run.summary()
    );
    assert_eq!(run.status.code(), Some(4));
    let line = run.stderr.lines().last().unwrap_or_default();
    assert!(line.contains("GOAWAY") && line.contains(&format!("{goaways} connections")), "{}", run.stderr);
    assert!(!run.stderr.contains("did not answer"), "{}", run.stderr);
}

#[test]
fn a_server_that_closes_in_the_middle_of_an_answer_loses_the_connection() {
    // A length prefix of 65 535 octets, 100 of them, then FIN: the answer was cut off, which is
    // no orderly close (whose queries would go again, and time out).
    let dir = temp_dir("cut-answer");
    let f = fixture(&dir, Behaviour::CutAnswer, None);
    let mut a = args(&f, "tcp");
    a.extend(["--rate", "100", "--duration", "2s", "--timeout", "500ms"]);
    let run = generate(&dir, &a);
    let acc = run.balanced();
    assert_eq!(acc["offered"], 200, "{}", run.summary());
    assert_eq!(acc["answered"], 0);
    assert_eq!(acc["timed_out"], 0, "{}", run.summary());
    let accepted = f.accepted.load(Ordering::Relaxed) as u64;
    // Every connection the server accepted it closed (FIN), and lost its queries, one at least.
    assert!(accepted > 1, "{}", run.summary());
    assert_eq!(run.total("connections.closed_by_server.fin"), accepted, "{}", run.summary());
    assert!(run.total("queries.failed.connection_lost") >= accepted, "{}", run.summary());
    let cut = run.connections.iter().filter(|c| c["error"].as_str().is_some_and(|e| e.contains("middle of an answer")));
    assert_eq!(cut.count() as u64, accepted, "{:?}", run.connections);
    assert_eq!(run.status.code(), Some(4));
    assert!(run.stderr.contains("closed the connection in the middle of an answer"), "{}", run.stderr);
}
