//! `--udp-retry` against a server that drops the first datagram of every query: the engine
//! sends each query again after a try's timeout with the same ID, as a stub resolver does, and
//! the server, not the engine, counts the datagrams.

use crate::common;
use crate::common::{generate, temp_dir};
use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the server saw: datagrams received, and how many times each DNS ID came.
struct Seen {
    datagrams: u64,
    by_id: HashMap<u16, u32>,
}

/// A UDP server on loopback that ignores the first datagram of every DNS ID and answers each
/// later one (the query with QR set), until `stop` is set.
fn second_time_lucky(stop: Arc<AtomicBool>) -> (String, std::thread::JoinHandle<Seen>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let addr = sock.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        let mut seen = Seen { datagrams: 0, by_id: HashMap::new() };
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            let Ok((n, peer)) = sock.recv_from(&mut buf) else { continue };
            seen.datagrams += 1;
            if n < 12 {
                continue;
            }
            let times = seen.by_id.entry(u16::from_be_bytes([buf[0], buf[1]])).or_default();
            *times += 1;
            if *times > 1 {
                buf[2] |= 0x80;
                sock.send_to(&buf[..n], peer).unwrap();
            }
        }
        seen
    });
    (addr, handle)
}

/// Runs 50 queries (50 qps for 1 s) with `--udp-retry retry` against a fresh server.
fn run(name: &str, retry: &str) -> (common::Run, Seen) {
    let dir = temp_dir(name);
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, server) = second_time_lucky(stop.clone());
    let run = generate(
        &dir,
        &["--transport", "udp", "--target", &addr, "--rate", "50", "--duration", "1s", "--udp-retry", retry, "--quiet"],
    );
    stop.store(true, Ordering::Relaxed);
    let seen = server.join().unwrap();
    run.balanced();
    (run, seen)
}

#[test]
fn a_query_whose_first_datagram_is_lost_is_answered_after_one_try() {
    let (run, seen) = run("udp-retry-2", "200ms,2");
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.records[0]["config"]["udp_retry"], serde_json::json!({"timeout_ms": 200, "attempts": 2}));
    assert_eq!(run.records[0]["config"]["timeout_ms"], 400, "the query's timeout: both tries");
    let sent = run.total("queries.sent");
    assert_eq!(sent, 50, "{}", run.summary());
    assert_eq!(run.total("queries.answered"), sent, "{}", run.summary());
    assert_eq!(run.total("queries.timed_out"), 0);
    assert_eq!(run.total("queries.retransmitted"), sent, "every query sent again once");
    // HDR histograms keep three significant digits: 200 ms reads as 199.9 ms at worst.
    assert!(run.total("latency.min_us") >= 199_800, "answered after a try's timeout: {}", run.summary());
    assert!(run.total("latency.max_us") < 400_000, "{}", run.summary());
    // The server's count: every query's ID twice, and nothing else.
    assert_eq!(seen.by_id.len() as u64, sent);
    assert!(seen.by_id.values().all(|&n| n == 2), "{:?}", seen.by_id);
    assert_eq!(seen.datagrams, 2 * sent);
    assert_eq!(run.total("traffic.packets_sent"), seen.datagrams, "the kernel's count includes the resends");
}

#[test]
fn one_attempt_sends_nothing_again_and_every_query_times_out() {
    let (run, seen) = run("udp-retry-1", "200ms,1");
    assert_eq!(run.status.code(), Some(4), "nothing answered: {}", run.stderr);
    assert_eq!(run.records[0]["config"]["timeout_ms"], 200);
    let sent = run.total("queries.sent");
    assert_eq!(sent, 50, "{}", run.summary());
    assert_eq!(run.total("queries.timed_out"), sent, "{}", run.summary());
    assert_eq!((run.total("queries.answered"), run.total("queries.retransmitted")), (0, 0));
    assert_eq!(seen.datagrams, sent);
    assert!(seen.by_id.values().all(|&n| n == 1), "{:?}", seen.by_id);
}
