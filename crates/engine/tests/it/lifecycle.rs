//! The connection-lifecycle model, checked from the server's side: for every connection
//! transport and every knob, `generate` runs against `serve` on loopback and the assertions
//! read the **server's** connection log, not the generator's own counters.

use crate::common;
use crate::common::{generate, of_transport, temp_dir, Server};
use serde_json::Value;

fn target_args<'a>(server: &'a Server, transport: &'a str) -> Vec<&'a str> {
    let mut a = vec!["--transport", transport, "--target", server.addr(transport), "--synthetic", "1000", "--quiet"];
    if transport != "tcp" {
        a.extend(["--ca", server.ca.to_str().unwrap()]);
    }
    a
}

fn queries(conns: &[&Value]) -> Vec<u64> {
    conns.iter().map(|c| c["queries"].as_u64().unwrap()).collect()
}

/// What a graceful client close looks like to the server.
fn graceful(transport: &str) -> &'static str {
    match transport {
        "tcp" => "fin",
        "dot" => "close_notify",
        "doq" | "doh3" => "connection_close",
        _ => "goaway",
    }
}

fn scenario(transport: &str, name: &str, server_flags: &[&str], flags: &[&str]) -> (common::Run, Vec<Value>) {
    let dir = temp_dir(&format!("{transport}-{name}"));
    let server = Server::start(&dir, server_flags);
    let mut args = target_args(&server, transport);
    args.extend_from_slice(flags);
    let run = generate(&dir, &args);
    assert!(run.status.success(), "{transport} {name}: {}", run.stderr);
    run.balanced();
    let log = server.stop();
    let conns = of_transport(&log, transport).into_iter().cloned().collect();
    (run, conns)
}

fn lifecycle(transport: &str) {
    let tls = transport != "tcp";

    // Persistent connections: exactly N, carrying every answered query, closed by the client.
    let (run, conns) =
        scenario(transport, "forever", &[], &["--connections", "3", "--rate", "300", "--duration", "1s"]);
    let c: Vec<&Value> = conns.iter().collect();
    assert_eq!(c.len(), 3, "{c:?}");
    assert_eq!(queries(&c).iter().sum::<u64>(), run.total("queries.answered"));
    assert!(run.total("queries.answered") >= 280, "{}", run.summary());
    for conn in &c {
        assert_eq!(conn["closed_by"], "client");
        assert_eq!(conn["close"], graceful(transport));
        assert_eq!(conn["handshake"], if tls { "full" } else { "none" });
    }

    // One query per connection.
    let (run, conns) =
        scenario(transport, "1q", &[], &["--connections", "2", "--lifetime", "1q", "--rate", "40", "--duration", "1s"]);
    let answered = run.total("queries.answered");
    assert!(answered >= 38, "{}", run.summary());
    assert_eq!(conns.len() as u64, answered, "one connection per answered query");
    assert!(conns.iter().all(|c| c["queries"] == 1 && c["closed_by"] == "client"), "{conns:?}");

    // One query per connection, open loop, more slots than queries: each connection opens when
    // its query is due, none ahead of it (the server sees as many connections as answers, and
    // their openings spread over the run rather than all at its start).
    let (run, conns) = scenario(
        transport,
        "1q-slow",
        &[],
        &["--connections", "40", "--lifetime", "1q", "--rate", "20", "--duration", "1s"],
    );
    let answered = run.total("queries.answered");
    assert!(answered >= 18, "{}", run.summary());
    assert_eq!(conns.len() as u64, answered, "a connection opened ahead of its query: {conns:?}");
    let opened: Vec<u64> = conns.iter().map(|c| c["opened_us"].as_u64().unwrap()).collect();
    let spread = opened.iter().max().unwrap() - opened.iter().min().unwrap();
    assert!(spread >= 700_000, "connections opened within {spread} µs");

    // Lifetime in time: connections last about a second each.
    let (_, conns) = scenario(
        transport,
        "1s",
        &[],
        &["--connections", "2", "--lifetime", "1s", "--rate", "100", "--duration", "3s"],
    );
    assert!(conns.len() >= 5, "{}", conns.len());
    let full: Vec<u64> = conns
        .iter()
        .map(|c| c["closed_us"].as_u64().unwrap() - c["opened_us"].as_u64().unwrap())
        .filter(|d| *d >= 900_000)
        .collect();
    assert!(full.len() >= 4, "{conns:?}");
    assert!(full.iter().all(|d| *d < 1_400_000), "{full:?}");

    // First lifetimes are staggered: 40 connections living 2 s, run for 1 s, renew about half
    // of themselves (a uniform share of the first lifetime), not none.
    let (_, conns) = scenario(
        transport,
        "stagger",
        &[],
        &["--connections", "40", "--lifetime", "2s", "--rate", "400", "--duration", "1s"],
    );
    assert!((48..=72).contains(&conns.len()), "{} connections for 40 slots", conns.len());

    // Idle timeout: a query every 250 ms, idle close after 50 ms: one connection per query.
    let (run, conns) = scenario(
        transport,
        "idle",
        &[],
        &["--connections", "1", "--idle-timeout", "50ms", "--rate", "4", "--duration", "1s"],
    );
    // (A connection opened for a query the end of the run then cancels carries none.)
    let carried = conns.iter().filter(|c| c["answers"] == 1).count() as u64;
    assert_eq!(carried, run.total("queries.answered"), "{conns:?}");
    assert!(carried >= 3, "{conns:?}");
    assert!(conns.iter().all(|c| c["queries"].as_u64() <= Some(1) && c["closed_by"] == "client"), "{conns:?}");
    let idle = run.summary()["total"]["connections"]["closed_by_client"]["idle"].as_u64().unwrap();
    assert!(idle + 1 >= conns.len() as u64 && idle <= conns.len() as u64, "{idle} idle closes");

    // A client that closes idle connections opens its first one when its first query is due,
    // as every later one: 4 slots at a query a second each, due 250 ms apart, idle close after
    // 300 ms. Their first connections open over most of the first second, not all at the start.
    let (_, conns) = scenario(
        transport,
        "idle-first",
        &[],
        &["--connections", "4", "--idle-timeout", "300ms", "--rate", "4", "--duration", "1500ms"],
    );
    let mut opened: Vec<u64> = conns.iter().map(|c| c["opened_us"].as_u64().unwrap()).collect();
    opened.sort_unstable();
    assert!(opened.len() >= 5 && opened[3] - opened[0] >= 600_000, "first opens {opened:?}");

    // Open-rate cap: one query per connection as fast as possible, at most 20 openings/s.
    let (_, conns) = scenario(
        transport,
        "open-rate",
        &[],
        &["--connections", "4", "--lifetime", "1q", "--rate", "max", "--open-rate", "20", "--duration", "1s"],
    );
    assert!((15..=23).contains(&conns.len()), "{} connections opened", conns.len());

    // Open first: 20 connections opened at 10/s, no query before the last is established.
    let (run, conns) = scenario(
        transport,
        "open-first",
        &[],
        &["--connections", "20", "--open-rate", "10", "--open-first", "--warmup", "3s", "--duration", "500ms"],
    );
    assert_eq!(conns.len(), 20);
    assert!(conns.iter().all(|c| c["queries"].as_u64().unwrap() > 0), "{conns:?}");
    let intervals: Vec<&Value> = run.records.iter().filter(|r| r["type"] == "interval").collect();
    assert_eq!(intervals[0]["queries"]["sent"], 0, "{:?}", intervals[0]);
    assert!(intervals[0]["connections"]["established"].as_u64().unwrap() >= 5);
    let last_open = conns.iter().map(|c| c["opened_us"].as_u64().unwrap()).max().unwrap();
    let first_open = conns.iter().map(|c| c["opened_us"].as_u64().unwrap()).min().unwrap();
    assert!(last_open - first_open >= 1_500_000, "opening took {} µs", last_open - first_open);

    // One connection carries everything. (That it keeps 8 in flight is checked from the server's
    // side in hostile.rs, in_flight_is_what_the_server_sees_outstanding.)
    let (run, conns) = scenario(
        transport,
        "in-flight",
        &[],
        &["--connections", "1", "--in-flight", "8", "--rate", "max", "--duration", "500ms"],
    );
    assert_eq!(conns.len(), 1);
    assert_eq!(conns[0]["queries"].as_u64().unwrap(), run.total("queries.answered"));
    assert!(run.total("queries.answered") > 100);

    // Close modes as the server sees them (a silent QUIC close, as the server's idle timeout).
    let modes: &[(&str, &str, &[&str])] = if transport.starts_with("doq") || transport == "doh3" {
        &[("graceful", "connection_close", &[]), ("silent", "idle", &["--idle-timeout", "80ms"])]
    } else {
        &[("fin", "fin", &[]), ("rst", "rst", &[])]
    };
    for &(mode, seen, server_flags) in modes {
        let by = if mode == "silent" { "server" } else { "client" };
        let (_, conns) = scenario(
            transport,
            mode,
            server_flags,
            &["--connections", "1", "--lifetime", "2q", "--close", mode, "--rate", "20", "--duration", "500ms"],
        );
        // 10 queries at 2 per connection: at least 3 whole connections to judge by (the last
        // may be cut by the end of the run), and every one of them closed as asked.
        let whole: Vec<&Value> = conns.iter().filter(|c| c["queries"] == 2).collect();
        assert!(whole.len() >= 3, "{mode}: {conns:?}");
        assert!(whole.iter().all(|c| c["close"] == seen && c["closed_by"] == by), "{mode}: {conns:?}");
    }

    // rate once: every connection carries exactly one query, then stays open until the end.
    let (run, conns) =
        scenario(transport, "once", &[], &["--connections", "5", "--rate", "once", "--open-first", "--duration", "1s"]);
    assert_eq!(conns.len(), 5, "{conns:?}");
    assert!(conns.iter().all(|c| c["queries"] == 1 && c["answers"] == 1), "{conns:?}");
    assert!(conns.iter().all(|c| c["closed_by"] == "client" && c["close"] == graceful(transport)), "{conns:?}");
    assert_eq!((run.total("queries.offered"), run.total("queries.answered")), (5, 5), "{}", run.summary());
    assert_eq!(run.summary()["total"]["connections"]["closed_by_client"]["end"], 5, "open until the end");

    // Server policy: the server closes after 5 queries; the generator reconnects.
    let (run, conns) = scenario(
        transport,
        "max-queries",
        &["--max-queries-per-connection", "5"],
        &["--connections", "1", "--in-flight", "1", "--rate", "100", "--duration", "1s"],
    );
    assert!(conns.len() >= 15, "{}", conns.len());
    assert!(conns.iter().all(|c| c["queries"].as_u64().unwrap() <= 5));
    assert!(conns.iter().filter(|c| c["closed_by"] == "server").count() >= conns.len() - 1);
    let by_server = &run.summary()["total"]["connections"]["closed_by_server"];
    assert!(by_server.as_object().is_some_and(|m| !m.is_empty()), "{}", run.summary());
    // A query the server's close refused before it left still counts as sent, once.
    assert_eq!(run.total("queries.sent"), run.total("queries.offered"), "{}", run.summary());

    // The same in a closed loop, 4 queries in flight: the queries sent after the limit are
    // refused (doh3: H3_REQUEST_REJECTED above GOAWAY) and go again at once on a new
    // connection; waiting for the server's own close (a second for doh3) would leave a
    // handful of connections.
    let (run, conns) = scenario(
        transport,
        "max-queries-closed-loop",
        &["--max-queries-per-connection", "5"],
        &["--connections", "1", "--in-flight", "4", "--rate", "max", "--duration", "1s"],
    );
    assert!(conns.len() >= 30, "{} connections: {}", conns.len(), run.summary());
    assert!(conns.iter().all(|c| c["queries"].as_u64().unwrap() <= 5), "{conns:?}");

    // The same with 8 queries pipelined (8 concurrent streams): what the server did not process
    // before closing (tcp/dot: outstanding at its FIN or close_notify; doh: above its GOAWAY's
    // last stream, or REFUSED_STREAM) goes again on the next connection and is answered.
    let (run, conns) = scenario(
        transport,
        "max-queries-pipelined",
        &["--max-queries-per-connection", "5"],
        &["--connections", "1", "--in-flight", "8", "--rate", "200", "--duration", "1s", "--timeout", "1s"],
    );
    assert!(conns.len() >= 10, "{}", conns.len());
    assert!(conns.iter().all(|c| c["queries"].as_u64().unwrap() <= 8), "{conns:?}");
    // Every query is answered, but one that fell due as sending stopped while the slot was
    // between connections (it reconnects forty times a second here): that one is unsent.
    let unsent = run.summary()["total"]["queries"]["failed"]["unsent"].as_u64().unwrap_or(0);
    assert!(unsent <= 1, "{}", run.summary());
    assert_eq!(run.total("queries.failed_total"), unsent, "{}", run.summary());
    assert_eq!(run.total("queries.answered") + unsent, run.total("queries.offered"), "{}", run.summary());
}

fn resumption(transport: &str) {
    // Resumption 0: every handshake full. Resumption 1: every reconnection resumes.
    let (run, conns) = scenario(
        transport,
        "resume0",
        &[],
        &["--connections", "1", "--lifetime", "2q", "--rate", "40", "--duration", "1s", "--resumption", "0"],
    );
    assert!(conns.len() >= 15);
    assert!(conns.iter().all(|c| c["handshake"] == "full"), "{conns:?}");
    assert_eq!(run.total("handshakes.resumed"), 0);
    let (run, conns) = scenario(
        transport,
        "resume1",
        &[],
        &["--connections", "1", "--lifetime", "2q", "--rate", "40", "--duration", "1s", "--resumption", "1"],
    );
    assert!(conns.len() >= 15);
    let mut by_open: Vec<&Value> = conns.iter().collect();
    by_open.sort_by_key(|c| c["opened_us"].as_u64());
    assert_eq!(by_open[0]["handshake"], "full");
    assert!(by_open[1..].iter().all(|c| c["handshake"] == "resumed"), "{by_open:?}");
    assert_eq!(run.total("handshakes.full"), 1, "{}", run.summary());
    // Half: about half of the reconnections resume.
    let (_, conns) = scenario(
        transport,
        "resume-half",
        &[],
        &["--connections", "1", "--lifetime", "1q", "--rate", "100", "--duration", "1s", "--resumption", "0.5"],
    );
    let resumed = conns.iter().filter(|c| c["handshake"] == "resumed").count() as f64 / conns.len() as f64;
    assert!((0.3..=0.7).contains(&resumed), "{resumed}");
}

#[test]
fn tcp_lifecycle() {
    lifecycle("tcp");
}

#[test]
fn dot_lifecycle() {
    lifecycle("dot");
}

#[test]
fn doh_lifecycle() {
    lifecycle("doh");
}

#[test]
fn doq_lifecycle() {
    lifecycle("doq");
}

#[test]
fn doq_resumption() {
    resumption("doq");
}

#[test]
fn doh3_lifecycle() {
    lifecycle("doh3");
}

#[test]
fn doh3_resumption() {
    resumption("doh3");
}

#[test]
fn doq_early_data() {
    early_data("doq");
}

#[test]
fn doh3_early_data() {
    early_data("doh3");
}

/// 0-RTT (doq, doh3): every resumed connection sends its query as early data, which the server takes
/// (`zero_rtt_accepted` in the server's log, from the handshake's own messages); half of them
/// send it: the rest resume without.
fn early_data(transport: &str) {
    let flags = ["--connections", "1", "--lifetime", "1q", "--rate", "50", "--duration", "1s", "--resumption", "1"];
    let mut all = flags.to_vec();
    all.extend(["--early-data", "1"]);
    let (run, conns) = scenario(transport, "early1", &[], &all);
    assert!(conns.len() >= 45, "{}", conns.len());
    let mut by_open: Vec<&Value> = conns.iter().collect();
    by_open.sort_by_key(|c| c["opened_us"].as_u64());
    assert_eq!(by_open[0]["handshake"], "full");
    assert!(by_open[1..].iter().all(|c| c["handshake"] == "zero_rtt_accepted"), "{by_open:?}");
    assert_eq!(run.total("handshakes.zero_rtt_accepted"), conns.len() as u64 - 1, "{}", run.summary());
    assert_eq!(run.total("handshakes.resumed"), conns.len() as u64 - 1, "0-RTT connections are resumed");
    let mut half = flags.to_vec();
    half.extend(["--early-data", "0.5"]);
    let (_, conns) = scenario(transport, "early-half", &[], &half);
    let early = conns.iter().filter(|c| c["handshake"] == "zero_rtt_accepted").count() as f64 / conns.len() as f64;
    let resumed = conns.iter().filter(|c| c["handshake"] == "resumed").count() as f64 / conns.len() as f64;
    assert!((0.3..=0.7).contains(&early) && (0.3..=0.7).contains(&resumed), "{early} {resumed}");
}

#[test]
fn dot_resumption() {
    resumption("dot");
}

#[test]
fn doh_resumption() {
    resumption("doh");
}

/// Browser header fields, POST and GET: every query answered, the choice in the start record.
#[test]
fn doh_browser_headers() {
    let dir = temp_dir("doh-browser");
    let server = Server::start(&dir, &[]);
    for method in ["post", "get"] {
        let mut args = target_args(&server, "doh");
        args.extend(["--doh-method", method, "--doh-headers", "browser", "--rate", "200", "--duration", "500ms"]);
        let run = generate(&dir, &args);
        run.balanced();
        assert_eq!(run.records[0]["config"]["doh_headers"], "browser");
        assert!(run.total("queries.answered") >= 95, "{method}: {}", run.summary());
    }
}

/// DoH/3 GET (`?dns=`, base64url) and POST: the responder decodes each its own way (a GET it
/// cannot decode is a 400), every query answered, the method in the start record.
#[test]
fn doh3_get_and_post() {
    let dir = temp_dir("doh3-get");
    let server = Server::start(&dir, &[]);
    for method in ["get", "post"] {
        let mut args = target_args(&server, "doh3");
        args.extend(["--doh-method", method, "--rate", "200", "--duration", "500ms", "--connections", "2"]);
        let run = generate(&dir, &args);
        run.balanced();
        assert_eq!(run.records[0]["config"]["doh_method"], method);
        assert!(run.total("queries.answered") >= 95, "{method}: {}", run.summary());
        // A query the responder could not decode fails with its status; the one due just as
        // sending stops may still be counted unsent after the window, which is no failure here.
        let summary = run.summary();
        assert_eq!(summary["measured"]["queries"]["failed_total"], 0, "{method}: {summary}");
        let failed = summary["total"]["queries"]["failed"].as_object().unwrap();
        assert!(failed.keys().all(|reason| reason == "unsent"), "{method}: {summary}");
    }
}

#[test]
fn doh_get_and_udp_answer() {
    let dir = temp_dir("doh-get");
    let server = Server::start(&dir, &[]);
    let mut args = target_args(&server, "doh");
    args.extend(["--doh-method", "get", "--rate", "200", "--duration", "500ms", "--connections", "2"]);
    let run = generate(&dir, &args);
    run.balanced();
    assert!(run.total("queries.answered") >= 95, "{}", run.summary());
    let udp = generate(
        &dir,
        &[
            "--transport",
            "udp",
            "--target",
            server.addr("udp"),
            "--synthetic",
            "1000",
            "--rate",
            "500",
            "--duration",
            "500ms",
            "--quiet",
        ],
    );
    udp.balanced();
    assert!(udp.total("queries.answered") >= 245);
    // The first query of a slot is due at time 0: it must not expire before its timeout.
    assert_eq!(udp.total("queries.timed_out"), 0, "{}", udp.summary());
    assert_eq!(udp.summary()["total"]["queries"]["rcodes"]["noerror"], udp.total("queries.answered"));
    // Names outside the synthetic set are NXDOMAIN, and counted as such.
    let nx = generate(
        &dir,
        &[
            "--transport",
            "udp",
            "--target",
            server.addr("udp"),
            "--synthetic",
            "5000",
            "--rate",
            "500",
            "--duration",
            "500ms",
            "--quiet",
        ],
    );
    assert!(nx.summary()["total"]["queries"]["rcodes"]["nxdomain"].as_u64().unwrap() > 0);
}
