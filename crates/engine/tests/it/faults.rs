//! Bad input and misbehaving servers: a clear error or a counted error kind, never a panic,
//! never a lost count.

use crate::common;
use crate::common::{generate, generate_with_files, of_transport, temp_dir, Server, ENGINE};
use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

fn one_line_error(args: &[&str]) -> (i32, String) {
    let out = Command::new(ENGINE).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    (out.status.code().unwrap_or(-1), err)
}

/// QUIC requires TLS 1.3 (RFC 9001 §4.2): TLS 1.2 with doq or doh3 is refused by `--check`
/// and by a run, in one line with exit 2, before anything is sent (it panicked in quinn).
#[test]
fn quic_with_tls_1_2_is_refused_in_one_line() {
    for transport in ["doq", "doh3"] {
        let args =
            ["generate", "--transport", transport, "--target", "127.0.0.1:9", "--insecure", "--tls-version", "1.2"];
        for extra in [&["--check"][..], &["--duration", "100ms", "--output", "/dev/null"][..]] {
            let (code, err) = one_line_error(&[&args[..], extra].concat());
            assert_eq!(
                (code, err.trim().to_string()),
                (
                    2,
                    format!(
                        "dnscost-engine: invalid configuration: tls_version: {transport} runs on QUIC, which \
                         requires TLS 1.3 (RFC 9001 §4.2): give 1.3"
                    )
                ),
                "{extra:?}"
            );
        }
    }
}

#[test]
fn bad_configuration_is_one_clear_line() {
    let dir = temp_dir("bad-config");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"transport":"tcp","target":"127.0.0.1:53","in_flight":0}"#).unwrap();
    let (code, err) = one_line_error(&["generate", "--config", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert_eq!(err.trim(), "dnscost-engine: invalid configuration: in_flight: 0 is out of range 1..=65535");
    std::fs::write(&bad, "{not json").unwrap();
    let (code, err) = one_line_error(&["generate", "--config", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (code, err) =
        one_line_error(&["generate", "--transport", "udp", "--target", "127.0.0.1:53", "--lifetime", "1q"]);
    assert_eq!((code, err.trim()), (2, "dnscost-engine: invalid configuration: lifetime does not apply to udp"));
    let (code, err) =
        one_line_error(&["generate", "--transport", "dot", "--target", "127.0.0.1:853", "--ca", "/nonexistent.pem"]);
    assert_eq!(code, 2);
    assert!(err.starts_with("dnscost-engine: /nonexistent.pem:"), "{err}");
    let (code, err) = one_line_error(&["generate", "--transport", "dot", "--target", "127.0.0.1:853"]);
    assert_eq!(code, 2);
    assert!(err.contains("--ca FILE or --insecure"), "{err}");
    let (code, _) = one_line_error(&["generate", "--transport", "udp", "--target", "no.such.host.invalid:53"]);
    assert_eq!(code, 3);
    // CPUs beyond a CPU set, or not available here: one line, exit 2, never a panic or an
    // unpinned run.
    let udp = ["generate", "--transport", "udp", "--target", "127.0.0.1:9", "--duration", "100ms", "--cpus"];
    let (code, err) = one_line_error(&[&udp[..], &["5000"]].concat());
    assert_eq!((code, err.trim()), (2, "dnscost-engine: invalid configuration: cpus: 5000 is out of range 0..=1023"));
    let (code, err) = one_line_error(&[&udp[..], &["1023"]].concat());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("CPU 1023 does not exist or is not available"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    for cpu in ["5000", "1023"] {
        let (code, err) = one_line_error(&["serve", "--listen", "udp://127.0.0.1:0", "--cpus", cpu]);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let queries = dir.join("q.txt");
    std::fs::write(&queries, "a.test A\nb.test NOPE\n").unwrap();
    let (code, err) = one_line_error(&[
        "generate",
        "--transport",
        "udp",
        "--target",
        "127.0.0.1:53",
        "--queries",
        queries.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.trim().ends_with("line 2: unknown record type \"NOPE\""), "{err}");
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// PROXY v2 headers sent to a server that does not read them (`serve` takes each datagram,
/// header first, for a query): what it replies matches no query sent. The reason said "244
/// queries failed (unsent)", the consequence; it names the unmatched replies and the headers.
#[test]
fn proxy_headers_to_a_server_that_does_not_read_them_are_named() {
    let dir = temp_dir("proxy-unread");
    let server = Server::start(&dir, &[]);
    let a = ["--transport", "udp", "--target", server.addr("udp"), "--proxy-v2", "10.0.0.0/16"];
    let run = generate(&dir, &[&a[..], &["--rate", "200", "--duration", "1s", "--timeout", "500ms"]].concat());
    assert_eq!(run.status.code(), Some(4), "{}", run.stderr);
    assert_eq!(run.balanced()["answered"], 0, "{}", run.summary());
    let unmatched = run.total("queries.unmatched");
    assert!(unmatched > 0, "{}", run.summary());
    let line = run.stderr.lines().last().unwrap_or_default();
    assert!(
        line.ends_with(&format!(
            "queries timed out: the target's {unmatched} replies matched no query: \
             does it read the PROXY v2 headers sent (proxy_v2)?"
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn unreachable_target_counts_refused_connections() {
    let dir = temp_dir("refused");
    let target = format!("127.0.0.1:{}", free_port());
    let run = generate(
        &dir,
        &[
            "--transport",
            "tcp",
            "--target",
            &target,
            "--rate",
            "100",
            "--duration",
            "1s",
            "--timeout",
            "200ms",
            "--quiet",
        ],
    );
    // Nothing answered: exit code 4, and the reason on stderr.
    assert_eq!(run.status.code(), Some(4), "{}", run.stderr);
    assert!(run.stderr.contains("connection attempts failed (refused)"), "{}", run.stderr);
    let a = run.balanced();
    assert_eq!(a["answered"], 0);
    assert!(run.total("connections.failed.refused") > 3, "{}", run.summary());
    assert!(run.total("queries.failed.unsent") > 50, "{}", run.summary());
    assert!(run.connections.iter().all(|c| c["close"] == "error"));
}

#[test]
fn a_closed_udp_port_fails_the_refused_queries_without_counting_them_sent() {
    // A connected UDP socket learns of an ICMP port unreachable on its next send, which then
    // does not leave: that query is failed `refused`, the ones that left time out.
    let dir = temp_dir("udp-refused");
    let target = format!("127.0.0.1:{}", free_port());
    let run = generate(
        &dir,
        &["--transport", "udp", "--target", &target, "--rate", "100", "--duration", "1s", "--timeout", "300ms"],
    );
    assert!(run.stderr.contains("refused"), "{}", run.stderr);
    let refused = run.total("queries.failed.refused");
    let sent = run.total("queries.sent");
    assert!(refused > 10, "{}", run.summary());
    assert_eq!(run.total("queries.answered"), 0);
    assert_eq!(run.total("traffic.packets_sent"), sent, "a refused datagram is not sent: {}", run.summary());
    assert!(run.total("queries.timed_out") + refused >= sent, "{}", run.summary());
    run.balanced();
}

#[test]
fn wrong_ca_is_a_counted_tls_failure() {
    let dir = temp_dir("wrong-ca");
    let a = Server::start(&dir.join("a").tap_mkdir(), &[]);
    let b = Server::start(&dir.join("b").tap_mkdir(), &[]);
    let run = generate(
        &dir,
        &[
            "--transport",
            "dot",
            "--target",
            a.addr("dot"),
            "--ca",
            b.ca.to_str().unwrap(),
            "--rate",
            "50",
            "--duration",
            "500ms",
            "--timeout",
            "200ms",
            "--quiet",
        ],
    );
    assert_eq!(run.status.code(), Some(4), "{}", run.stderr);
    assert!(run.stderr.contains("(tls): invalid peer certificate"), "{}", run.stderr);
    run.balanced();
    assert!(run.total("connections.failed.tls") > 0, "{}", run.summary());
    // The queries due while no connection could be made are offered, not forgotten.
    assert!(run.total("queries.offered") >= 20, "{}", run.summary());
    assert_eq!(run.summary()["generator_kept_up"], false);
    assert_eq!(run.total("queries.answered"), 0);
    assert!(run.connections[0]["error"].as_str().unwrap().contains("certificate"), "{:?}", run.connections[0]);
}

/// DoQ and DoH/3 against a server trusted by another CA: every connection attempt fails `tls`.
#[test]
fn quic_wrong_ca_is_a_counted_tls_failure() {
    for transport in ["doq", "doh3"] {
        wrong_ca_over(transport);
    }
}

fn wrong_ca_over(transport: &str) {
    let dir = temp_dir(&format!("{transport}-wrong-ca"));
    let a = Server::start(&dir.join("a").tap_mkdir(), &[]);
    let b = Server::start(&dir.join("b").tap_mkdir(), &[]);
    let args = ["--rate", "50", "--duration", "500ms", "--timeout", "200ms", "--quiet"];
    let mut all = vec!["--transport", transport, "--target", a.addr(transport), "--ca", b.ca.to_str().unwrap()];
    all.extend(args);
    let run = generate(&dir, &all);
    assert_eq!(run.status.code(), Some(4), "{}", run.stderr);
    run.balanced();
    assert!(run.total("connections.failed.tls") > 0, "{}", run.summary());
    assert_eq!(run.total("queries.answered"), 0);
    assert_eq!(run.summary()["generator_kept_up"], false);
    assert!(run.connections[0]["error"].as_str().unwrap().contains("certificate"), "{:?}", run.connections[0]);
}

/// A DoQ server that allows no query stream: nothing can be sent, and what came due is counted
/// (timed out while the stream waited, or unsent), never lost; the run says it kept no pace.
#[test]
fn doq_server_allowing_no_stream_is_counted() {
    let dir = temp_dir("doq-no-streams");
    let server = Server::start(&dir, &["--quic-max-streams", "0"]);
    let ca = server.ca.to_str().unwrap();
    let run = generate(
        &dir,
        &[
            "--transport",
            "doq",
            "--target",
            server.addr("doq"),
            "--ca",
            ca,
            "--rate",
            "50",
            "--duration",
            "1s",
            "--timeout",
            "200ms",
            "--quiet",
        ],
    );
    assert_eq!(run.status.code(), Some(4), "{}", run.stderr);
    run.balanced();
    assert_eq!(run.total("queries.answered"), 0);
    assert!(run.total("queries.offered") >= 45, "{}", run.summary());
    assert_eq!(run.summary()["generator_kept_up"], false, "{}", run.summary());
    let log = server.stop();
    assert!(log.iter().filter(|c| c["transport"] == "doq").all(|c| c["queries"] == 0), "{log:?}");
}

/// The server's idle timeout (QUIC's, negotiated) shorter than the gap between queries: every
/// query finds its connection expired and opens another; nothing is lost.
#[test]
fn doq_idle_timeout_shorter_than_the_gap_reconnects() {
    let dir = temp_dir("doq-idle");
    let server = Server::start(&dir, &["--idle-timeout", "50ms"]);
    let ca = server.ca.to_str().unwrap();
    let run = generate(
        &dir,
        &[
            "--transport",
            "doq",
            "--target",
            server.addr("doq"),
            "--ca",
            ca,
            "--rate",
            "5",
            "--duration",
            "1s",
            "--quiet",
        ],
    );
    assert!(run.status.success(), "{}", run.stderr);
    run.balanced();
    assert_eq!(run.total("queries.answered"), 5, "{}", run.summary());
    let expired = run.summary()["total"]["connections"]["closed_by_server"]["idle_expired"].as_u64().unwrap_or(0);
    assert!(expired >= 4, "{}", run.summary());
    let log = server.stop();
    let doq: Vec<_> = log.iter().filter(|c| c["transport"] == "doq").collect();
    assert!(doq.len() >= 5, "{doq:?}");
    assert!(doq.iter().filter(|c| c["close"] == "idle" && c["closed_by"] == "server").count() >= 4, "{doq:?}");
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for std::path::PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}

/// A TCP server that runs `handle` on each connection for a bounded time.
fn misbehaving_tcp(handle: fn(std::net::TcpStream)) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            match listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    std::thread::spawn(move || handle(s));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    addr
}

#[test]
fn server_resets_are_counted_not_lost() {
    let dir = temp_dir("reset");
    let addr = misbehaving_tcp(|mut s| {
        let mut buf = [0u8; 64];
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let _ = s.read(&mut buf);
        socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO)).unwrap();
    });
    let run = generate(
        &dir,
        &["--transport", "tcp", "--target", &addr, "--rate", "50", "--duration", "1s", "--timeout", "300ms", "--quiet"],
    );
    assert_eq!(run.status.code(), Some(4), "{}", run.stderr);
    run.balanced();
    assert!(run.total("queries.failed.connection_lost") > 0, "{}", run.summary());
    assert!(run.total("connections.closed_by_server.rst") > 0, "{}", run.summary());
}

#[test]
fn garbage_answers_are_counted_as_malformed() {
    let dir = temp_dir("garbage");
    let addr = misbehaving_tcp(|mut s| {
        let mut buf = [0u8; 512];
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 || n < 4 {
                break;
            }
            // Echo the ID back inside a message that is not a DNS response.
            let reply = [0, 5, buf[2], buf[3], 0xFF, 0xFF, 0xFF];
            if s.write_all(&reply).is_err() {
                break;
            }
        }
    });
    let run = generate(
        &dir,
        &[
            "--transport",
            "tcp",
            "--target",
            &addr,
            "--rate",
            "100",
            "--duration",
            "500ms",
            "--timeout",
            "300ms",
            "--quiet",
        ],
    );
    assert_eq!(run.status.code(), Some(4), "{}", run.stderr);
    assert!(run.stderr.contains("(malformed)"), "{}", run.stderr);
    run.balanced();
    assert!(run.total("queries.failed.malformed") > 20, "{}", run.summary());

    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let uaddr = udp.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        udp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut buf = [0u8; 512];
        for _ in 0..1000 {
            let Ok((n, peer)) = udp.recv_from(&mut buf) else { break };
            let reply = [buf[0], buf[1], 0x80, 0, 0xde, 0xad];
            let _ = udp.send_to(&reply[..n.min(6)], peer);
        }
    });
    let run = generate(
        &dir,
        &[
            "--transport",
            "udp",
            "--target",
            &uaddr,
            "--rate",
            "100",
            "--duration",
            "500ms",
            "--timeout",
            "300ms",
            "--quiet",
        ],
    );
    run.balanced();
    assert!(run.total("queries.failed.malformed") > 20, "{}", run.summary());
}

#[test]
fn interrupt_drains_and_writes_the_summary() {
    let dir = temp_dir("sigint");
    let server = Server::start(&dir, &[]);
    let out = dir.join("out.jsonl");
    let mut child = Command::new(ENGINE)
        .args(["generate", "--transport", "dot", "--target", server.addr("dot"), "--ca", server.ca.to_str().unwrap()])
        .args([
            "--connections",
            "4",
            "--rate",
            "500",
            "--duration",
            "60s",
            "--quiet",
            "--output",
            out.to_str().unwrap(),
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let started = Instant::now();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "an interrupted run exits 130");
    let _ = started;
    let records = common::read_lines(&out);
    assert_eq!(records[0]["type"], "start");
    assert!(records.iter().any(|r| r["type"] == "interval"));
    let summary = records.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["interrupted"], true);
    assert_eq!(summary["accounting"]["balanced"], true);
    assert!(summary["accounting"]["answered"].as_u64().unwrap() > 300);
}

/// An engine whose open-files limit is below its connections: the attempts that found no file
/// descriptor are counted `open_files`, the run exits 5 (it measured the engine's limit), and
/// its last line names the limit it ran with and the ways out.
#[test]
fn running_out_of_file_descriptors_names_the_open_files_limit() {
    let dir = temp_dir("open-files");
    let server = Server::start(&dir, &[]);
    let mut a = vec!["--transport", "tcp", "--target", server.addr("tcp"), "--quiet"];
    a.extend(["--connections", "300", "--rate", "300", "--duration", "1s", "--synthetic", "1000"]);
    let run = generate_with_files(&dir, &a, 128);
    assert_eq!(run.status.code(), Some(5), "{}", run.stderr);
    run.balanced();
    assert!(run.total("connections.failed.open_files") > 0, "{}", run.summary());
    assert_eq!(run.total("connections.failed.connect"), 0, "{}", run.summary());
    let established = run.total("connections.established");
    assert!(established > 0 && established < 128, "{}", run.summary());
    let line = run.stderr.lines().last().unwrap_or_default();
    for words in ["(open_files)", "open-files limit 128 (hard 128)", "300 connections", "--cluster netns:N"] {
        assert!(line.contains(words), "{words}: {}", run.stderr);
    }
    // The server saw exactly the connections the engine could open.
    let log = server.stop();
    assert_eq!(of_transport(&log, "tcp").len() as u64, established, "{}", run.summary());
}
