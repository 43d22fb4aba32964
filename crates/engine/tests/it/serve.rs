//! `dnscost-engine serve` end to end: the built binary listens on udp, tcp, dot and doh (port 0,
//! generated CA), `kdig` queries each, and the connections log must show exactly one line per
//! connection kdig opened, closed by the client. A second test drives server policies
//! (max queries per connection, idle timeout) over raw TCP; a third the observation options
//! (queries log, key log against kdig's own, NXDOMAIN outside, octets as idle activity).
//!
//! Needs `kdig` (Debian: knot-dnsutils). Without it the first test is skipped, unless
//! CI=true, where it fails.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const ENGINE: &str = env!("CARGO_BIN_EXE_dnscost-engine");
const DEADLINE: Duration = Duration::from_secs(20);

/// The server process; killed (by PID) if the test ends without stopping it.
struct Server {
    child: Child,
    listening: Vec<(String, SocketAddr)>,
    dir: PathBuf,
}

impl Server {
    fn start(name: &str, listen: &[&str], extra: &[&str]) -> Server {
        let dir = std::env::temp_dir().join(format!("dnscost-serve-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut cmd = Command::new(ENGINE);
        cmd.arg("serve").args(["--synthetic", "1000", "--tld", "test"]);
        for l in listen {
            cmd.args(["--listen", l]);
        }
        cmd.arg("--connections-log").arg(dir.join("connections.jsonl"));
        cmd.args(extra);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .current_dir(&dir)
            .spawn()
            .expect("start dnscost-engine serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut server = Server { child, listening: Vec::new(), dir };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + DEADLINE;
        while server.listening.len() < listen.len() {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("serve did not report its listeners in time");
            let v: Value = serde_json::from_str(&line).expect("stdout lines are JSON");
            assert_eq!(v["type"], "listening", "{line}");
            let addr: SocketAddr = v["address"].as_str().unwrap().parse().unwrap();
            assert_ne!(addr.port(), 0);
            server.listening.push((v["transport"].as_str().unwrap().to_string(), addr));
        }
        server
    }

    fn port(&self, transport: &str) -> u16 {
        self.listening.iter().find(|(t, _)| t == transport).map(|(_, a)| a.port()).expect("listener")
    }

    /// SIGTERM, wait for a clean exit, and return the connections log.
    fn stop(&mut self) -> Vec<Value> {
        // SAFETY: kill(2) on our own child's PID.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + DEADLINE;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            assert!(Instant::now() < deadline, "serve did not exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "serve exited with {status}");
        let text = std::fs::read_to_string(self.dir.join("connections.jsonl")).expect("connections log");
        text.lines().map(|l| serde_json::from_str(l).expect("log lines are JSON")).collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn kdig_available() -> bool {
    let found = Command::new("kdig").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok();
    if !found {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "kdig is required in CI (apt-get install knot-dnsutils)");
        eprintln!("skipping: kdig not found (apt-get install knot-dnsutils)");
    }
    found
}

fn kdig(port: u16, args: &[&str]) -> String {
    let out = Command::new("kdig")
        .args(["@127.0.0.1", "-p", &port.to_string(), "+timeout=5", "+retry=1"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run kdig");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "kdig {args:?} failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

#[test]
fn every_transport_answers_kdig_and_logs_its_connections() {
    if !kdig_available() {
        return;
    }
    let mut server = Server::start(
        "kdig",
        &["udp://127.0.0.1:0", "tcp://127.0.0.1:0", "dot://127.0.0.1:0", "doh://127.0.0.1:0"],
        &["--ca-out", "ca.pem", "--ttl", "300"],
    );
    let ca = server.dir.join("ca.pem");
    let tls_ca = format!("+tls-ca={}", ca.display());
    let tls = [tls_ca.as_str(), "+tls-hostname=localhost"];

    let udp = server.port("udp");
    assert_eq!(kdig(udp, &["+short", "q042.test.", "A"]).trim(), "198.18.0.42");
    assert_eq!(kdig(udp, &["+short", "q042.test.", "AAAA"]).trim(), "2001:db8::2a");
    assert!(kdig(udp, &["nope.test.", "A"]).contains("status: NXDOMAIN"));
    assert!(kdig(udp, &["example.com.", "A"]).contains("status: REFUSED"));

    let tcp = server.port("tcp");
    assert_eq!(kdig(tcp, &["+tcp", "+short", "q007.test.", "A"]).trim(), "198.18.0.7");

    let dot = server.port("dot");
    let mut args = tls.to_vec();
    args.extend(["+short", "q999.test.", "A"]);
    assert_eq!(kdig(dot, &args).trim(), "198.18.3.231");

    let doh = server.port("doh");
    let mut post = tls.to_vec();
    post.extend(["+https", "+short", "q100.test.", "A"]);
    assert_eq!(kdig(doh, &post).trim(), "198.18.0.100");
    let mut get = tls.to_vec();
    get.extend(["+https", "+https-get", "+short", "q101.test.", "A"]);
    assert_eq!(kdig(doh, &get).trim(), "198.18.0.101");

    let log = server.stop();
    let of = |t: &str| log.iter().filter(|r| r["transport"] == t).collect::<Vec<_>>();
    assert_eq!(of("tcp").len(), 1, "{log:#?}");
    assert_eq!(of("dot").len(), 1, "{log:#?}");
    assert_eq!(of("doh").len(), 2, "{log:#?}");
    assert_eq!(log.len(), 4, "udp has no connections: {log:#?}");
    for r in &log {
        assert_eq!(r["type"], "connection");
        assert_eq!(r["role"], "server");
        assert_eq!(r["closed_by"], "client", "{r}");
        assert!(["fin", "close_notify", "goaway"].contains(&r["close"].as_str().unwrap()), "{r}");
        assert_eq!((r["queries"].as_u64(), r["answers"].as_u64()), (Some(1), Some(1)), "{r}");
        assert!(r["bytes_received"].as_u64().unwrap() > 0, "{r}");
        assert!(r["closed_us"].as_u64() >= r["opened_us"].as_u64());
        let tls = r["transport"] != "tcp";
        assert_eq!(r["handshake"], if tls { "full" } else { "none" }, "{r}");
        assert_eq!(r["tls_version"].is_string(), tls, "{r}");
    }
}

/// What `observe` needs from the responder: every query logged with its connection, the TLS
/// secrets of every connection (the same lines kdig's GnuTLS writes as the client), names
/// outside the lab answered NXDOMAIN, and octets other than queries counted as activity.
#[test]
fn queries_log_keylog_outside_and_idle_on_bytes() {
    if !kdig_available() {
        return;
    }
    let mut server = Server::start(
        "observe",
        &["udp://127.0.0.1:0", "tcp://127.0.0.1:0", "dot://127.0.0.1:0", "doh://127.0.0.1:0"],
        &[
            "--ca-out",
            "ca.pem",
            "--queries-log",
            "queries.jsonl",
            "--keylog",
            "server-keys.log",
            "--outside",
            "nxdomain",
            "--idle-timeout",
            "400ms",
            "--idle-activity",
            "bytes",
        ],
    );
    let ca = server.dir.join("ca.pem");
    let client_keys = server.dir.join("client-keys.log");
    let tls_ca = format!("+tls-ca={}", ca.display());
    let kdig_tls = |port: u16, args: &[&str]| {
        let out = Command::new("kdig")
            .env("SSLKEYLOGFILE", &client_keys)
            .args(["@127.0.0.1", "-p", &port.to_string(), "+timeout=5", "+retry=1", &tls_ca, "+tls-hostname=localhost"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run kdig");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(kdig(server.port("udp"), &["accounts.google.com.", "A"]).contains("status: NXDOMAIN"));
    assert_eq!(kdig(server.port("udp"), &["+short", "q001.test.", "A"]).trim(), "198.18.0.1");
    assert_eq!(kdig_tls(server.port("dot"), &["+short", "q002.test.", "AAAA"]).trim(), "2001:db8::2");
    assert_eq!(
        kdig_tls(server.port("doh"), &["+https", "+https-get", "+short", "q003.test.", "A"]).trim(),
        "198.18.0.3"
    );

    // A TCP connection that sends one query, then one octet of the next every 150 ms for
    // 1.2 s: with the octets counted, the 400 ms idle timeout closes it only after they stop.
    let mut t = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], server.port("tcp")))).unwrap();
    t.write_all(&framed_query(4, "q004.test")).unwrap();
    let next = framed_query(5, "q005.test");
    let opened = Instant::now();
    for octet in next.iter().take(8) {
        std::thread::sleep(Duration::from_millis(150));
        t.write_all(&[*octet]).unwrap();
    }
    assert_eq!(read_until_eof(&mut t), vec![4]);
    let lived = opened.elapsed();

    let log = server.stop();
    let queries: Vec<Value> = std::fs::read_to_string(server.dir.join("queries.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let r: dnscost_stats::Record = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            assert!(matches!(r, dnscost_stats::Record::Query(_)), "{l}");
            serde_json::from_str(l).unwrap()
        })
        .collect();
    let row = |q: &Value| {
        let s = |k: &str| q[k].as_str().unwrap_or("-").to_string();
        (s("transport"), s("qname"), s("qtype"), s("rcode"), s("method"))
    };
    let rows: Vec<_> = queries.iter().map(row).collect();
    let expect = |t: &str, n: &str, ty: &str, rc: &str, m: &str| {
        (t.to_string(), n.to_string(), ty.to_string(), rc.to_string(), m.to_string())
    };
    assert_eq!(
        rows,
        vec![
            expect("udp", "accounts.google.com.", "A", "nxdomain", "-"),
            expect("udp", "q001.test.", "A", "noerror", "-"),
            expect("dot", "q002.test.", "AAAA", "noerror", "-"),
            expect("doh", "q003.test.", "A", "noerror", "get"),
            expect("tcp", "q004.test.", "A", "noerror", "-"),
        ],
        "{queries:#?}"
    );
    // Each query names its connection in the connections log; udp has none.
    for q in &queries {
        match q["transport"].as_str().unwrap() {
            "udp" => assert!(q["connection"].is_null(), "{q}"),
            t => {
                let c = log.iter().find(|c| c["id"] == q["connection"]).unwrap_or_else(|| panic!("{q} in {log:#?}"));
                assert_eq!(c["transport"], t);
                assert_eq!(c["peer_address"], q["peer_address"]);
                assert!(c["opened_us"].as_u64() <= q["t_us"].as_u64() && q["t_us"].as_u64() <= c["closed_us"].as_u64());
            }
        }
    }
    // The trickled connection lived past its octets and was closed for idleness.
    let tcp = log.iter().find(|c| c["transport"] == "tcp").unwrap();
    assert_eq!((tcp["closed_by"].as_str(), tcp["close"].as_str()), (Some("server"), Some("idle")), "{tcp}");
    let held_us = tcp["closed_us"].as_u64().unwrap() - tcp["opened_us"].as_u64().unwrap();
    assert!(held_us >= 1_200_000 + 400_000 - 50_000, "closed after {held_us} µs, octets for 1.2 s");
    assert!(lived >= Duration::from_millis(1_550), "{lived:?}");
    // The server's key log holds the traffic secrets the client logged (same randoms, same
    // secrets): four per TLS 1.3 connection, dot's and doh's.
    const TRAFFIC: [&str; 4] = [
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET ",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET ",
        "CLIENT_TRAFFIC_SECRET_0 ",
        "SERVER_TRAFFIC_SECRET_0 ",
    ];
    let keys = |p: PathBuf| -> std::collections::BTreeSet<String> {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        text.lines().filter(|l| TRAFFIC.iter().any(|t| l.starts_with(t))).map(String::from).collect()
    };
    let (server_keys, client) = (keys(server.dir.join("server-keys.log")), keys(client_keys));
    assert_eq!(client.len(), 8, "kdig's key lines: {client:#?}");
    assert!(client.is_subset(&server_keys), "client {client:#?}\nserver {server_keys:#?}");
}

/// A framed A query for `name` with ID `id`.
fn framed_query(id: u16, name: &str) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.extend_from_slice(&[0, 0, 1, 0, 1]);
    let mut f = (m.len() as u16).to_be_bytes().to_vec();
    f.extend_from_slice(&m);
    f
}

/// Reads framed responses until EOF; returns their IDs.
fn read_until_eof(s: &mut TcpStream) -> Vec<u16> {
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).expect("the server closes the connection");
    let mut ids = Vec::new();
    let mut p = 0;
    while p + 2 <= all.len() {
        let len = u16::from_be_bytes([all[p], all[p + 1]]) as usize;
        ids.push(u16::from_be_bytes([all[p + 2], all[p + 3]]));
        p += 2 + len;
    }
    assert_eq!(p, all.len(), "whole frames");
    ids
}

#[test]
fn server_policies_close_connections_and_are_logged() {
    let mut server = Server::start(
        "policy",
        &["tcp://127.0.0.1:0"],
        &["--max-queries-per-connection", "3", "--idle-timeout", "300ms", "--threads", "2"],
    );
    let addr = SocketAddr::from(([127, 0, 0, 1], server.port("tcp")));
    // Five pipelined queries: three answers, then the server closes.
    let mut a = TcpStream::connect(addr).unwrap();
    let burst: Vec<u8> = (1..=5).flat_map(|i| framed_query(i, &format!("q{i:03}.test"))).collect();
    a.write_all(&burst).unwrap();
    assert_eq!(read_until_eof(&mut a), vec![1, 2, 3]);
    // One query, then silence: the idle timeout closes it.
    let mut b = TcpStream::connect(addr).unwrap();
    b.write_all(&framed_query(9, "q009.test")).unwrap();
    assert_eq!(read_until_eof(&mut b), vec![9]);
    let log = server.stop();
    let mut closes: Vec<(String, String, u64, u64)> = log
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap().to_string();
            (s("closed_by"), s("close"), r["queries"].as_u64().unwrap(), r["answers"].as_u64().unwrap())
        })
        .collect();
    closes.sort();
    let expect = |by: &str, how: &str, q: u64| (by.to_string(), how.to_string(), q, q);
    assert_eq!(closes, vec![expect("server", "idle", 1), expect("server", "max_queries", 3)]);
    drop((a, b));

    // Without policies, a connection still open at shutdown ends with "end".
    let mut server = Server::start("end", &["tcp://127.0.0.1:0"], &[]);
    let mut c = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], server.port("tcp")))).unwrap();
    c.write_all(&framed_query(5, "q005.test")).unwrap();
    let mut len = [0u8; 2];
    c.set_read_timeout(Some(DEADLINE)).unwrap();
    c.read_exact(&mut len).unwrap();
    let mut answer = vec![0u8; u16::from_be_bytes(len) as usize];
    c.read_exact(&mut answer).unwrap();
    assert_eq!(u16::from_be_bytes([answer[0], answer[1]]), 5);
    let log = server.stop();
    assert_eq!(log.len(), 1, "{log:#?}");
    assert_eq!((log[0]["closed_by"].as_str(), log[0]["close"].as_str()), (Some("server"), Some("end")));
    assert_eq!(read_until_eof(&mut c), Vec::<u16>::new());
}

/// A DoH POST of an A query for `name` on `send`; the HTTP status and the DNS answer.
async fn doh_post(send: &mut h2::client::SendRequest<bytes::Bytes>, name: &str) -> Result<(u16, Vec<u8>), h2::Error> {
    let query = framed_query(0, name)[2..].to_vec();
    let request = http::Request::post("https://localhost/dns-query")
        .header("content-type", "application/dns-message")
        .body(())
        .unwrap();
    let mut ready = send.clone().ready().await?;
    let (response, mut body) = ready.send_request(request, false)?;
    body.send_data(query.into(), true)?;
    let (parts, mut body) = response.await?.into_parts();
    let mut answer = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        answer.extend_from_slice(&chunk);
    }
    *send = ready;
    Ok((parts.status.as_u16(), answer))
}

async fn doh_connect(port: u16, ca: PathBuf) -> (h2::client::SendRequest<bytes::Bytes>, tokio::task::JoinHandle<()>) {
    use dnscost_transport::tls::{client_config, ClientOptions, Group, Trust, Version};
    let opts = ClientOptions {
        version: Version::Tls13,
        group: Group::X25519,
        trust: Trust::CaFile(ca),
        keylog: None,
        alpn: vec![b"h2".to_vec()],
    };
    let config = client_config(&opts, false, 0).unwrap();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.unwrap();
    let (send, conn) = h2::client::handshake(tls).await.unwrap();
    (
        send,
        tokio::spawn(async move {
            let _ = conn.await;
        }),
    )
}

#[tokio::test(flavor = "current_thread")]
async fn doh_goaway_both_ways() {
    let mut server =
        Server::start("doh", &["doh://127.0.0.1:0"], &["--ca-out", "ca.pem", "--max-queries-per-connection", "2"]);
    let (port, ca) = (server.port("doh"), server.dir.join("ca.pem"));
    // Three queries on one connection: two answers, then the server's GOAWAY refuses the third.
    let (mut send, conn) = doh_connect(port, ca.clone()).await;
    for name in ["q001.test", "q002.test"] {
        let (status, answer) = doh_post(&mut send, name).await.unwrap();
        assert_eq!((status, answer[3] & 0x0F, answer[7]), (200, 0, 1));
    }
    assert!(doh_post(&mut send, "q003.test").await.is_err());
    drop(send);
    conn.await.unwrap();
    // One query, then the client goes away (h2 sends GOAWAY once its handles are dropped).
    let (mut send, conn) = doh_connect(port, ca).await;
    assert_eq!(doh_post(&mut send, "q004.test").await.unwrap().0, 200);
    drop(send);
    conn.await.unwrap();
    let log = tokio::task::spawn_blocking(move || server.stop()).await.unwrap();
    let summary: Vec<(&str, &str, u64, u64)> = log
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap();
            (s("closed_by"), s("close"), r["queries"].as_u64().unwrap(), r["answers"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(summary, vec![("server", "max_queries", 2, 2), ("client", "goaway", 1, 1)], "{log:#?}");
}

/// A TXT query for `name`, with EDNS(0) advertising `edns` octets if given.
fn txt_query(id: u16, name: &str, edns: Option<u16>) -> Vec<u8> {
    let opts = dnscost_wire::QueryOptions { edns_udp_size: edns, ..Default::default() };
    let t = dnscost_wire::QueryTemplate::new(name, 16, &opts).unwrap();
    let mut m = Vec::new();
    t.write(id, &mut m);
    m
}

#[test]
fn udp_answers_fit_the_advertised_size_and_streams_are_whole() {
    // Twenty 200-octet TXT strings: about 4 kB of answer.
    let zone = std::env::temp_dir().join(format!("dnscost-big-{}.zone", std::process::id()));
    let mut text = String::from("$ORIGIN big.example.\n$TTL 60\n@ SOA ns hostmaster 1 60 60 60 60\n");
    for i in 0..20 {
        text.push_str(&format!("txt TXT \"{}{i:02}\"\n", "x".repeat(198)));
    }
    std::fs::write(&zone, text).unwrap();
    let mut server =
        Server::start("truncation", &["udp://127.0.0.1:0", "tcp://127.0.0.1:0"], &["--zone", zone.to_str().unwrap()]);
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(DEADLINE)).unwrap();
    udp.connect(("127.0.0.1", server.port("udp"))).unwrap();
    let mut buf = [0u8; 65_536];
    let mut ask = |edns: Option<u16>| {
        udp.send(&txt_query(9, "txt.big.example.", edns)).unwrap();
        let n = udp.recv(&mut buf).unwrap();
        let answers = u16::from_be_bytes([buf[6], buf[7]]);
        (n, buf[2] & 0x02 != 0, answers)
    };
    // No EDNS: 512 octets at most, so truncated (TC, no answers).
    let (n, tc, answers) = ask(None);
    assert!(n <= 512 && tc && answers == 0, "{n} octets, TC {tc}, {answers} answers");
    // EDNS 1232: still too small, truncated within 1232.
    let (n, tc, answers) = ask(Some(1232));
    assert!(n <= 1232 && tc && answers == 0, "{n} octets, TC {tc}, {answers} answers");
    // EDNS 8192: the whole answer.
    let (n, tc, answers) = ask(Some(8192));
    assert!(n > 4000 && !tc && answers == 20, "{n} octets, TC {tc}, {answers} answers");
    // TCP: never truncated, EDNS or not.
    let mut tcp = TcpStream::connect(("127.0.0.1", server.port("tcp"))).unwrap();
    let q = txt_query(10, "txt.big.example.", None);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    tcp.write_all(&framed).unwrap();
    tcp.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut len = [0u8; 2];
    tcp.read_exact(&mut len).unwrap();
    let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
    tcp.read_exact(&mut msg).unwrap();
    assert!(msg.len() > 4000 && msg[2] & 0x02 == 0, "{} octets", msg.len());
    assert_eq!(u16::from_be_bytes([msg[6], msg[7]]), 20);
    drop(tcp);
    server.stop();
    let _ = std::fs::remove_file(&zone);
}

#[test]
fn a_second_server_on_a_busy_udp_port_refuses_to_start() {
    let mut first = Server::start("busy-udp", &["udp://127.0.0.1:0"], &[]);
    let port = first.port("udp");
    let out = Command::new(ENGINE)
        .args(["serve", "--listen", &format!("udp://127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("in use"), "{err}");
    first.stop();
}
