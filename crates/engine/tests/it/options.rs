//! Options beyond the connection model: threads, source addresses, key log, warm-up,
//! padding, query files, Poisson arrivals, GET with padding.

use crate::common::{generate, of_transport, temp_dir, Server};
use std::collections::HashSet;

#[test]
fn threads_and_sources_split_connections() {
    let dir = temp_dir("threads");
    let server = Server::start(&dir, &[]);
    let run = generate(
        &dir,
        &["--transport", "tcp", "--target", server.addr("tcp"), "--synthetic", "1000", "--connections", "4"]
            .into_iter()
            .chain(["--threads", "2", "--cpus", "0-1", "--source", "127.0.0.1,127.0.0.2", "--rate", "400"])
            .chain(["--duration", "1s", "--quiet"])
            .collect::<Vec<_>>(),
    );
    assert!(run.status.success(), "{}", run.stderr);
    run.balanced();
    assert!(run.total("queries.answered") >= 390, "{}", run.summary());
    let log = server.stop();
    let conns = of_transport(&log, "tcp");
    assert_eq!(conns.len(), 4);
    let sources: HashSet<&str> =
        conns.iter().map(|c| c["peer_address"].as_str().unwrap().rsplit_once(':').unwrap().0).collect();
    assert_eq!(sources, HashSet::from(["127.0.0.1", "127.0.0.2"]));
    // Connection ids are unique across threads.
    let ids: HashSet<u64> = run.connections.iter().map(|c| c["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), 4);
}

#[test]
fn warmup_is_marked_and_excluded_from_the_measure() {
    let dir = temp_dir("warmup");
    let server = Server::start(&dir, &[]);
    let run = generate(
        &dir,
        &["--transport", "udp", "--target", server.addr("udp"), "--synthetic", "1000", "--rate", "200"]
            .into_iter()
            .chain(["--warmup", "1s", "--duration", "1500ms", "--quiet"])
            .collect::<Vec<_>>(),
    );
    run.balanced();
    let phases: Vec<&str> =
        run.records.iter().filter(|r| r["type"] == "interval").map(|r| r["phase"].as_str().unwrap()).collect();
    assert_eq!(&phases[..3], &["warmup", "measure", "measure"], "{phases:?}");
    let s = run.summary();
    assert_eq!((s["measure_start_ms"].as_u64(), s["measure_end_ms"].as_u64()), (Some(1000), Some(2500)));
    let measured = s["measured"]["queries"]["answered"].as_u64().unwrap();
    assert!((290..=310).contains(&measured), "{measured}");
    assert!(run.total("queries.answered") >= 490);
    assert_eq!(run.records[0]["config"]["warmup_ms"], 1000);

    // An open loop's schedule starts when every connection is open (4 at 4/s: about 0.75 s
    // in): nothing is due while they open, so nothing is held back or unsent, and the whole
    // run offers 100 qps over the 1.75 s left, not over 2.5 s.
    let run = generate(
        &dir,
        &["--transport", "tcp", "--target", server.addr("tcp"), "--synthetic", "1000", "--rate", "100"]
            .into_iter()
            .chain(["--connections", "4", "--open-rate", "4", "--open-first", "--warmup", "1500ms"])
            .chain(["--duration", "1s", "--timeout", "200ms", "--quiet"])
            .collect::<Vec<_>>(),
    );
    run.balanced();
    assert_eq!(run.total("queries.failed.unsent"), 0, "{}", run.summary());
    let offered = run.total("queries.offered");
    assert!((150..=190).contains(&offered), "{offered} offered: {}", run.summary());
    let measured = run.summary()["measured"]["queries"]["offered"].as_u64().unwrap();
    assert!((95..=105).contains(&measured), "{measured} offered in the window");
    assert_eq!(run.summary()["measured"]["queries"]["failed_total"], 0, "{}", run.summary());
    assert_eq!(run.summary()["generator_kept_up"], true, "{}", run.summary());
}

#[test]
fn keylog_padding_and_query_files() {
    let dir = temp_dir("keylog");
    let server = Server::start(&dir, &[]);
    let keylog = dir.join("keys.log");
    let queries = dir.join("queries.txt");
    std::fs::write(&queries, "# dnsperf format\nq000.test A\nq001.test AAAA\nq002.test TXT\nnope.test A\n").unwrap();
    let run = generate(
        &dir,
        &["--transport", "dot", "--target", server.addr("dot"), "--ca", server.ca.to_str().unwrap()]
            .into_iter()
            .chain(["--keylog", keylog.to_str().unwrap(), "--padding", "--queries", queries.to_str().unwrap()])
            .chain(["--rate", "200", "--arrival", "poisson", "--duration", "1s", "--quiet"])
            .collect::<Vec<_>>(),
    );
    run.balanced();
    let total = &run.summary()["total"];
    let rcodes = &total["queries"]["rcodes"];
    // A and AAAA answered, TXT is NODATA (noerror), the unknown name NXDOMAIN: a quarter.
    let (noerror, nxdomain) = (rcodes["noerror"].as_u64().unwrap(), rcodes["nxdomain"].as_u64().unwrap());
    assert!((nxdomain as f64 / (noerror + nxdomain) as f64 - 0.25).abs() < 0.05, "{rcodes}");
    // Poisson: the count varies around the rate.
    assert!((150..=250).contains(&(noerror + nxdomain)), "{}", noerror + nxdomain);
    let keys = std::fs::read_to_string(&keylog).unwrap();
    assert!(keys.lines().any(|l| l.starts_with("CLIENT_TRAFFIC_SECRET_0 ")), "{keys}");
    // Padded queries are bigger on the wire than unpadded ones (128-octet blocks).
    let padded =
        total["traffic"]["bytes_sent"].as_u64().unwrap() as f64 / total["queries"]["sent"].as_u64().unwrap() as f64;
    assert!(padded > 128.0, "{padded} bytes per query");
}
