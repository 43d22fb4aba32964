//! The open phase of `--open-first`, against a server whose handshakes queue: a TCP relay in
//! front of `serve` holds each accepted connection for a while before it passes any byte, as a
//! server signing slow certificates does with its backlog. Asserted from the server's log: a
//! first connection still in its handshake is not given up at the query timeout and opened
//! again, and the summary says when every connection was open (`opened_ms`).

use crate::common;
use crate::common::{generate, of_transport, temp_dir, Server};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

/// A relay on loopback that forwards each connection to `to` once it has waited `hold`.
fn holding_relay(to: String, hold: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let to = to.clone();
            thread::spawn(move || {
                thread::sleep(hold);
                let Ok(server) = TcpStream::connect(&to) else { return };
                let pipe = |mut from: TcpStream, mut into: TcpStream| {
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 || into.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = into.shutdown(Shutdown::Write);
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                thread::spawn(move || pipe(c2, s2));
                pipe(server, client);
            });
        }
    });
    addr
}

fn run(name: &str, warmup: &str, timeout: &str, duration: &str) -> (common::Run, Vec<serde_json::Value>) {
    let dir = temp_dir(name);
    let server = Server::start(&dir, &[]);
    let relay = holding_relay(server.addr("dot").to_string(), Duration::from_millis(1500));
    let ca = server.ca.to_str().unwrap().to_string();
    #[rustfmt::skip]
    let args = [
        "--transport", "dot", "--target", &relay, "--ca", &ca, "--synthetic", "100", "--quiet",
        "--connections", "4", "--open-first", "--rate", "max", "--in-flight", "1",
        "--timeout", timeout, "--warmup", warmup, "--duration", duration,
    ];
    let run = generate(&dir, &args);
    assert!(run.status.success(), "{}", run.stderr);
    run.balanced();
    let log = server.stop();
    let conns = of_transport(&log, "dot").into_iter().cloned().collect();
    (run, conns)
}

#[test]
fn a_first_handshake_that_queues_is_waited_for_not_opened_again() {
    // Handshakes held 1.5 s, three times the query timeout, within a 2.5 s warm-up.
    let (run, conns) = run("open-phase-within", "2500ms", "500ms", "1s");
    assert_eq!(conns.len(), 4, "each slot's connection once: {conns:?}");
    assert_eq!(run.total("connections.established"), 4, "{}", run.summary());
    assert_eq!(run.summary()["measured"]["connections"]["established"], 0, "{}", run.summary());
    let opened = run.summary()["opened_ms"].as_u64().expect("opened_ms with --open-first");
    assert!((1500..2500).contains(&opened), "every connection open after the hold: {opened}");
    assert!(opened <= run.summary()["measure_start_ms"].as_u64().unwrap());
    assert!(run.total("queries.answered") > 0, "{}", run.summary());
}

#[test]
fn an_open_phase_that_outlasts_the_warm_up_is_reported() {
    // The same hold with a 0.5 s warm-up (and a timeout the hold fits in): the handshakes end
    // in the measured period, which the summary shows (opened_ms after measure_start_ms) so
    // that the caller can measure again with a longer warm-up.
    let (run, conns) = run("open-phase-spilled", "500ms", "2s", "2s");
    assert_eq!(conns.len(), 4, "still each slot's connection once: {conns:?}");
    let s = run.summary();
    let opened = s["opened_ms"].as_u64().expect("opened_ms with --open-first");
    assert!(opened > s["measure_start_ms"].as_u64().unwrap(), "{s}");
    assert_eq!(s["measured"]["connections"]["established"], 4, "{s}");
}

#[test]
fn without_open_first_there_is_no_open_phase() {
    let dir = temp_dir("open-phase-none");
    let server = Server::start(&dir, &[]);
    let ca = server.ca.to_str().unwrap().to_string();
    #[rustfmt::skip]
    let args = [
        "--transport", "dot", "--target", server.addr("dot"), "--ca", &ca, "--synthetic", "100", "--quiet",
        "--connections", "2", "--rate", "100", "--duration", "300ms",
    ];
    let run = generate(&dir, &args);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.summary().get("opened_ms").is_none(), "{}", run.summary());
    server.stop();
}
