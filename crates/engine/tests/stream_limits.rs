//! The server's concurrent-stream limit (QUIC MAX_STREAMS for doq and doh3, HTTP/2
//! SETTINGS_MAX_CONCURRENT_STREAMS for doh) below `in_flight`: queries wait for streams,
//! counted as `stream_waits`, and are answered; none is lost and the connection never stalls.

mod common;

use common::{generate, temp_dir, Server};

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

/// A server that allows no stream at all: what went out times out, and the reason names the
/// stream limit instead of a server that does not answer.
#[test]
fn no_stream_at_all_names_the_limit() {
    let dir = temp_dir("stream-limit-0");
    let server = Server::start(&dir, &["--quic-max-streams", "0"]);
    let ca = server.ca.to_str().unwrap();
    for transport in ["doq", "doh3"] {
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
                "20",
                "--rate",
                "max",
                "--duration",
                "500ms",
                "--timeout",
                "200ms",
            ],
        );
        assert_eq!(run.status.code(), Some(4), "{}", run.stderr);
        run.balanced();
        assert_eq!(run.total("queries.answered"), 0);
        assert!(run.total("queries.stream_waits") > 0, "{}", run.summary());
        assert!(run.stderr.contains("the target allowed no stream for them"), "{transport}: {}", run.stderr);
    }
}
