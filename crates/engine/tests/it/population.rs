//! A population: six classes of clients, one per transport, each with its own shape, in one
//! run; every class's counts checked against what the responder logged of its transport.

use crate::common::*;
use serde_json::{json, Value};

#[test]
fn a_population_is_counted_per_class_as_the_responder_saw_it() {
    let dir = temp_dir("population");
    let queries_log = dir.join("server-queries.jsonl");
    let server = Server::start(&dir, &["--queries-log", queries_log.to_str().unwrap()]);
    let ca = server.ca.display().to_string();
    let profile = |transport: &str, interval_ms: u64, extra: Value| {
        let mut p = json!({"name": transport, "transport": transport, "query_interval_ms": interval_ms});
        p.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        p
    };
    let class = |name: &str, transport: &str, clients: u32, p: Value| {
        let mut config = json!({"target": server.addr(transport), "profile": p, "clients": clients});
        if transport != "udp" && transport != "tcp" {
            config
                .as_object_mut()
                .unwrap()
                .extend(json!({"ca_file": ca, "sni": "localhost"}).as_object().unwrap().clone());
        }
        json!({"name": name, "config": config})
    };
    // Rates per class: 200, 50, 100, 50, 30 and 20 queries per second.
    let config = json!({
        "target": server.addr("udp"), "duration_ms": 2000, "warmup_ms": 500, "synthetic": 1000,
        "classes": [
            class("stub", "udp", 20, profile("udp", 100, json!({}))),
            class("one-query", "tcp", 10, profile("tcp", 200, json!({"lifetime": {"queries": 1}}))),
            class("persistent", "dot", 5, profile("dot", 50, json!({}))),
            class("ten", "doh", 5, profile("doh", 100, json!({"lifetime": {"queries": 10}, "resumption": 1.0}))),
            class("quic", "doq", 3, profile("doq", 100, json!({}))),
            class("h3", "doh3", 2, profile("doh3", 100, json!({}))),
        ],
    });
    let file = dir.join("population.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let run = generate(&dir, &["--config", file.to_str().unwrap()]);
    assert!(run.status.success(), "{}", run.stderr);
    run.balanced();
    let served = server.stop();
    let queries = read_lines_raw(&queries_log);

    let start = &run.records[0];
    assert_eq!(start["classes"].as_array().unwrap().len(), 6, "{start}");
    let summary = run.summary();
    let classes = summary["classes"].as_array().unwrap();
    let names: Vec<&str> = classes.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["stub", "one-query", "persistent", "ten", "quic", "h3"]);
    let sum = |path: &[&str]| -> u64 {
        classes.iter().map(|c| path.iter().fold(&c["total"], |v, k| &v[k]).as_u64().unwrap()).sum()
    };
    // The classes add up to the run.
    assert_eq!(sum(&["queries", "answered"]), run.total("queries.answered"));
    assert_eq!(sum(&["connections", "opened"]), run.total("connections.opened"));
    for c in classes {
        let transport = c["transport"].as_str().unwrap();
        let answered = c["total"]["queries"]["answered"].as_u64().unwrap();
        // The responder answered as many queries of this transport as the class counted.
        let logged = queries.iter().filter(|q| q["transport"] == transport).count() as u64;
        assert_eq!(answered, logged, "{transport}: {c}");
        assert_eq!(c["accounting"]["balanced"], true, "{c}");
        // Each class got its own rate, and its own threads' CPU time.
        let offered = c["measured"]["engine"]["offered_qps"].as_f64().unwrap();
        let rate = match c["name"].as_str().unwrap() {
            "stub" => 200.0,
            "one-query" | "ten" => 50.0,
            "persistent" => 100.0,
            "quic" => 30.0,
            _ => 20.0,
        };
        assert!((offered - rate).abs() <= 0.05 * rate, "{transport}: offered {offered} qps, not {rate}");
        let cpu = c["total"]["engine"]["cpu_user_us"].as_u64().unwrap()
            + c["total"]["engine"]["cpu_system_us"].as_u64().unwrap();
        assert!(cpu > 0, "{transport}: no CPU time");
        if transport != "udp" {
            let opened = c["total"]["connections"]["opened"].as_u64().unwrap();
            assert_eq!(opened, of_transport(&served, transport).len() as u64, "{transport}: {c}");
        }
    }
    // The connection shapes stayed apart: one query per TCP connection, ten per DoH one
    // (resumed after the first), and the DoT clients' five connections kept.
    let opened = |name: &str| {
        classes.iter().find(|c| c["name"] == name).unwrap()["total"]["connections"]["opened"].as_u64().unwrap()
    };
    let answered = |name: &str| {
        classes.iter().find(|c| c["name"] == name).unwrap()["total"]["queries"]["answered"].as_u64().unwrap()
    };
    // (a slot's last connection may have opened as sending stopped, or have fewer queries).
    let (one, ten) = (answered("one-query"), answered("ten"));
    assert!((one..=one + 10).contains(&opened("one-query")), "{} connections for {one} queries", opened("one-query"));
    assert!(
        (ten.div_ceil(10)..=ten / 10 + 5).contains(&opened("ten")),
        "{} connections for {ten} queries",
        opened("ten")
    );
    assert_eq!(opened("persistent"), 5);
    let ten = &classes[3]["total"]["handshakes"];
    assert_eq!(ten["resumed"].as_u64().unwrap() + 5, opened("ten"), "{ten}");
    // Every interval's classes add up to it too.
    for r in run.records.iter().filter(|r| r["type"] == "interval") {
        let per_class: u64 =
            r["classes"].as_array().unwrap().iter().map(|c| c["queries"]["answered"].as_u64().unwrap()).sum();
        assert_eq!(per_class, r["queries"]["answered"].as_u64().unwrap(), "{r}");
    }
}

/// JSON lines as they are (the responder's queries log is not an engine record).
fn read_lines_raw(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A queries file is asked in its order by every thread of every class asking from it (as
/// dnsperf reads its data file), not from a share of its own per thread: a run that asks
/// fewer queries than the file holds asks none twice, whatever the classes' rates, and asks
/// the file's first lines. Here a busy class (1 500 qps over two threads) would have run into
/// the share of a slow one (DoH, which takes a query's index before it can send it).
#[test]
fn a_queries_file_is_asked_once_in_order_by_every_class() {
    let dir = temp_dir("population-order");
    let queries_log = dir.join("server-queries.jsonl");
    let server = Server::start(&dir, &["--queries-log", queries_log.to_str().unwrap()]);
    let names: Vec<String> = (0..4000).map(|i| format!("n{i}.test.")).collect();
    let file = dir.join("names.txt");
    std::fs::write(&file, names.iter().map(|n| format!("{n} A\n")).collect::<String>()).unwrap();
    let ca = server.ca.display().to_string();
    let config = json!({
        "target": server.addr("udp"), "duration_ms": 2000, "warmup_ms": 0, "queries_file": file,
        "classes": [
            {"name": "busy", "config": {"transport": "udp", "rate": 1500, "connections": 4, "threads": 2}},
            {"name": "slow", "config": {"transport": "doh", "target": server.addr("doh"), "rate": 100,
                "connections": 2, "ca_file": ca, "sni": "localhost"}},
        ],
    });
    let path = dir.join("order.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let run = generate(&dir, &["--config", path.to_str().unwrap()]);
    assert!(run.status.success(), "{}", run.stderr);
    server.stop();
    let asked: Vec<String> =
        read_lines_raw(&queries_log).iter().map(|q| q["qname"].as_str().unwrap().to_string()).collect();
    assert!(asked.len() > 3000, "{} queries", asked.len());
    let distinct: std::collections::HashSet<&String> = asked.iter().collect();
    assert_eq!(distinct.len(), asked.len(), "a name asked twice");
    // The first lines, but for the few taken and not sent as the run stopped.
    let first: std::collections::HashSet<&String> = names[..asked.len() + 20].iter().collect();
    assert!(distinct.is_subset(&first), "asked past the file's first {} lines", asked.len() + 20);
}
