//! The server's concurrent-stream limit (QUIC MAX_STREAMS for doq and doh3, HTTP/2
//! SETTINGS_MAX_CONCURRENT_STREAMS for doh) below `in_flight`: queries wait for streams,
//! counted as `stream_waits`, and are answered; none is lost and the connection never stalls.

use crate::common::{generate, temp_dir, Server};

/// Against `serve` allowing `limit` streams per connection, a closed loop of more than twice
/// as many in flight on one connection is answered on every stream transport.
fn in_flight_above_the_limit_is_answered(limit: u32) {
    let dir = temp_dir(&format!("stream-limit-{limit}"));
    let n = limit.to_string();
    let server = Server::start(&dir, &["--quic-max-streams", &n, "--h2-max-streams", &n]);
    let ca = server.ca.to_str().unwrap();
    let in_flight = (2 * limit + 1).to_string();
    for transport in ["doq", "doh3", "doh"] {
        let run = generate(
            &dir,
            &[
                "--transport",
                transport,
                "--target",
                server.addr(transport),
                "--ca",
                ca,
                "--in-flight",
                &in_flight,
                "--connections",
                "1",
                "--rate",
                "max",
                "--duration",
                "500ms",
                "--timeout",
                "2s",
                "--quiet",
            ],
        );
        let summary = run.summary();
        assert_eq!(run.status.code(), Some(0), "{transport} at limit {limit}: {}", run.stderr);
        let a = run.balanced();
        assert!(run.total("queries.answered") > 0, "{transport} at limit {limit}: {summary}");
        assert_eq!(a["timed_out"], 0, "{transport} at limit {limit}: {summary}");
        assert_eq!(run.total("queries.failed_total"), 0, "{transport} at limit {limit}: {summary}");
        assert!(run.total("queries.stream_waits") > 0, "{transport} at limit {limit}: {summary}");
        assert!(run.total("connections.closed_by_server.goaway") == 0, "{transport}: {summary}");
    }
}

#[test]
fn one_stream_at_a_time() {
    in_flight_above_the_limit_is_answered(1);
}

#[test]
fn ten_streams() {
    in_flight_above_the_limit_is_answered(10);
}

#[test]
fn a_hundred_streams() {
    in_flight_above_the_limit_is_answered(100);
}

/// A server that allows no stream at all: no query goes on the wire, so none is sent; each is
/// `unsent` (as the docs have it for queries that could not be sent within their timeout), in a
/// closed loop and an open one, and the reason names the stream limit instead of a server
/// that does not answer or does not read.
#[test]
fn no_stream_at_all_names_the_limit() {
    let dir = temp_dir("stream-limit-0");
    let server = Server::start(&dir, &["--quic-max-streams", "0"]);
    let ca = server.ca.to_str().unwrap();
    for transport in ["doq", "doh3"] {
        for rate in [&["--rate", "max", "--in-flight", "100"][..], &["--rate", "100"][..]] {
            let mut a = vec!["--transport", transport, "--target", server.addr(transport), "--ca", ca];
            a.extend(rate);
            a.extend(["--duration", "2s", "--timeout", "500ms"]);
            let run = generate(&dir, &a);
            let what = format!("{transport} {rate:?}: {}", run.summary());
            assert_eq!(run.status.code(), Some(4), "{}", run.stderr);
            let acc = run.balanced();
            let offered = acc["offered"].as_u64().unwrap();
            assert!(offered >= 200, "{what}");
            assert_eq!(acc["answered"], 0, "{what}");
            assert_eq!(run.total("queries.sent"), 0, "{what}");
            assert_eq!(acc["timed_out"], 0, "{what}");
            assert_eq!(run.total("queries.failed.unsent"), offered, "{what}");
            assert!(run.total("queries.stream_waits") > 0, "{what}");
            assert!(!run.summary()["generator_kept_up"].as_bool().unwrap(), "{what}");
            let line = run.stderr.lines().last().unwrap_or_default();
            assert!(line.contains("the target allowed no stream for them"), "{transport}: {}", run.stderr);
            assert!(!run.stderr.contains("not reading"), "{transport}: {}", run.stderr);
        }
    }
    // The server saw connections, and not one query on them.
    let log = server.stop();
    let quic: Vec<_> = log.iter().filter(|c| c["transport"] == "doq" || c["transport"] == "doh3").collect();
    assert!(quic.len() >= 4, "{log:?}");
    assert!(quic.iter().all(|c| c["queries"] == 0), "{quic:?}");
}
