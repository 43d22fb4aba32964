//! Every UDP query is a datagram of its own, one DNS message, observed from outside the
//! engine, closed loop and open loop: `serve`'s query log counts the queries it received; as
//! root, with tcpdump, a capture on a loopback address of the test's own counts the query
//! datagrams and reads one whole query in each. What any way of sending them (batched system
//! calls, segmentation offload) must keep: docs/engine.md, "UDP sends".

use crate::common::{generate, signal, temp_dir, Run, ENGINE};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The loads checked: a closed loop (a socket writes as many queries at once as answers freed
/// its window), and an open loop (what is due in a pacing slot goes at once).
const LOADS: [(&str, &[&str]); 2] = [
    ("closed", &["--rate", "max", "--connections", "4", "--in-flight", "32", "--duration", "300ms"]),
    ("open", &["--rate", "6000", "--connections", "3", "--duration", "1s"]),
];

/// `serve` over udp only, on `ip` port 0, logging every query it receives.
struct Serve {
    child: Child,
    addr: String,
    queries_log: PathBuf,
}

impl Serve {
    fn start(dir: &Path, ip: &str) -> Serve {
        let queries_log = dir.join("server-queries.jsonl");
        let mut child = Command::new(ENGINE)
            .args(["serve", "--listen", &format!("udp://{ip}:0"), "--synthetic", "1000", "--queries-log"])
            .arg(&queries_log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("serve starts");
        let line = BufReader::new(child.stdout.take().unwrap()).lines().next().expect("serve says where").unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "listening", "{line}");
        Serve { child, addr: v["address"].as_str().unwrap().to_string(), queries_log }
    }

    /// Stops it; the udp queries it logged.
    fn stop(mut self) -> u64 {
        signal(self.child.id(), libc::SIGTERM);
        let _ = self.child.wait();
        let log = std::fs::read_to_string(&self.queries_log).unwrap();
        log.lines().filter(|l| l.contains(r#""transport":"udp""#)).count() as u64
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            signal(self.child.id(), libc::SIGTERM);
            let _ = self.child.wait();
        }
    }
}

fn run(dir: &Path, target: &str, load: &[&str]) -> Run {
    let mut args = vec!["--transport", "udp", "--target", target, "--quiet"];
    args.extend(load);
    let run = generate(dir, &args);
    assert!(run.status.success(), "{}", run.stderr);
    run.balanced();
    assert_eq!(run.total("queries.retransmitted"), 0);
    run
}

#[test]
fn serve_receives_every_query_sent_once() {
    for (name, load) in LOADS {
        let dir = temp_dir(&format!("udp-wire-{name}"));
        let serve = Serve::start(&dir, "127.0.0.1");
        let run = run(&dir, &serve.addr, load);
        let sent = run.total("queries.sent");
        let logged = serve.stop();
        assert!(sent > 1000, "{name}: {sent} queries sent");
        assert_eq!(logged, sent, "{name}: serve logged {logged} queries of {sent} sent");
        assert_eq!(run.total("traffic.packets_sent"), sent, "{name}");
        if name == "open" {
            assert_eq!(run.total("queries.offered"), 6000, "the whole schedule");
        }
    }
}

/// A running tcpdump writing a capture of `filter` on loopback.
struct Tcpdump {
    child: Child,
    file: PathBuf,
    stderr: PathBuf,
}

impl Tcpdump {
    /// Started and listening (it says so on stderr), or `None` (test skipped) when not root or
    /// without tcpdump; under CI=true the test fails instead.
    fn start(dir: &Path, filter: &str) -> Option<Tcpdump> {
        // SAFETY: no arguments, no memory.
        let root = unsafe { libc::geteuid() } == 0;
        let tcpdump = Command::new("tcpdump").arg("--version").output().is_ok_and(|o| o.status.success());
        if !root || !tcpdump {
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "the capture check needs root and tcpdump (CI=true)"
            );
            eprintln!("skipped: the capture check needs root and tcpdump");
            return None;
        }
        let (file, stderr) = (dir.join("udp.pcap"), dir.join("tcpdump.txt"));
        // Each packet read as it comes (not a block at a time, after up to a second) and
        // written as it is read; a kernel buffer that no burst fills.
        let child = Command::new("tcpdump")
            .args(["-i", "lo", "-n", "--immediate-mode", "-U", "-B", "65536", "-s", "2048", "-w"])
            .arg(&file)
            .arg(filter)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("tcpdump starts");
        let started = std::time::Instant::now();
        while !std::fs::read_to_string(&stderr).unwrap_or_default().contains("listening on") {
            assert!(started.elapsed() < std::time::Duration::from_secs(30), "tcpdump did not start");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Some(Tcpdump { child, file, stderr })
    }

    /// Stops it once it has written what it captured (SIGINT ends it without reading what
    /// waits in its buffer) and hands every UDP datagram captured to `each`; fails if the
    /// kernel dropped any for the capture.
    fn stop(mut self, mut each: impl FnMut(&dnscost_capture::packet::Packet<'_>)) {
        let size = || std::fs::metadata(&self.file).map_or(0, |m| m.len());
        let mut last = u64::MAX;
        while size() != last {
            last = size();
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        signal(self.child.id(), libc::SIGINT);
        let _ = self.child.wait();
        let said = std::fs::read_to_string(&self.stderr).unwrap();
        let count = |what: &str| {
            let line = said.lines().find(|l| l.ends_with(what)).unwrap_or_else(|| panic!("tcpdump: {said}"));
            line.split(' ').next().unwrap().parse::<u64>().unwrap()
        };
        // (On lo the filter sees each packet twice, going and coming; libpcap keeps one.)
        assert_eq!(count("packets dropped by kernel"), 0, "the capture is not whole: {said}");
        let file = std::fs::File::open(&self.file).unwrap();
        dnscost_capture::read::read(file, |_, link, frame| {
            if let Some(p) = dnscost_capture::packet::parse(link, frame) {
                each(&p);
            }
        })
        .unwrap();
    }
}

impl Drop for Tcpdump {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            signal(self.child.id(), libc::SIGINT);
            let _ = self.child.wait();
        }
    }
}

#[test]
fn a_capture_counts_one_datagram_per_query_sent_each_one_query() {
    // A loopback address of this test's own (the rest of 127.0.0.0/8 is carried by lo too).
    let ip = "127.0.55.55";
    for (name, load) in LOADS {
        let dir = temp_dir(&format!("udp-wire-capture-{name}"));
        let serve = Serve::start(&dir, ip);
        let port: u16 = serve.addr.rsplit(':').next().unwrap().parse().unwrap();
        let Some(capture) = Tcpdump::start(&dir, &format!("udp and host {ip} and port {port}")) else { return };
        let run = run(&dir, &serve.addr, load);
        let logged = serve.stop();
        let (mut queries, mut answers, mut lengths) = (0u64, 0u64, std::collections::BTreeSet::new());
        capture.stop(|p| {
            assert!(p.whole(), "a datagram of {} octets cut by the capture", p.payload_len);
            if p.dport == port {
                queries += 1;
                // Synthetic names are of equal length: every query is one message of one
                // length, its question and its OPT record, and nothing after them.
                let q = dnscost_wire::parse_query(p.payload).expect("a DNS query");
                assert!(q.edns.is_some());
                assert_eq!(p.payload_len, q.question.end + 11, "one query, one OPT record, nothing more");
                lengths.insert(p.payload_len);
            } else {
                answers += 1;
            }
        });
        let sent = run.total("queries.sent");
        assert!(sent > 1000, "{name}: {sent} queries sent");
        assert_eq!(queries, sent, "{name}: {queries} query datagrams captured, {sent} sent");
        assert_eq!(logged, sent, "{name}");
        assert_eq!(lengths.len(), 1, "{name}: every query of one length: {lengths:?}");
        assert_eq!(answers, run.total("traffic.packets_received"), "{name}: the answers, as received");
        assert_eq!(answers, run.total("queries.answered"), "{name}");
    }
}
