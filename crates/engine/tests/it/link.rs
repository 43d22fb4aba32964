//! `dnscost-engine link` between two network namespaces of the test's own, observed from
//! outside the link: UDP round trips timed by the test, datagrams counted by a receiver, a TCP
//! transfer timed. Sockets are made in a namespace by a thread that enters it (`setns`).
//!
//! Needs root (network namespaces, TUN devices): without it these tests are skipped, except
//! under CI=true, where they fail. Everything they make is removed when a test ends, failed or
//! not: the namespaces by their guards, the devices with the link process (stopped by PID).
//! The labs run one at a time, so that their timings do not disturb each other.

use crate::common;
use crate::common::ENGINE;
use serde_json::Value;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// An address of a's namespace outside the link's /30, for --split.
const SPLIT: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
const MS: Duration = Duration::from_millis(1);

static ONE_LAB_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The lab lock, or `None` (test skipped) when not root.
fn lab_lock() -> Option<MutexGuard<'static, ()>> {
    // SAFETY: no arguments, no memory.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/dev/net/tun").exists() {
        assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "the link tests need root and /dev/net/tun (CI=true)");
        eprintln!("skipped: the link tests need root and /dev/net/tun");
        return None;
    }
    Some(ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner()))
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip runs");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// A network namespace of this test process, deleted when dropped.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("dnscost-link-{}-{tag}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        Netns(name)
    }

    /// Runs `f` in a thread inside the namespace: the sockets it makes belong to it.
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let file = File::open(format!("/run/netns/{}", self.0)).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns on a descriptor we own; it moves this thread only.
                assert_eq!(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns");
                f()
            })
            .join()
            .unwrap()
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// How long the link may take to say it is ready, or to stop.
const BOUND: Duration = Duration::from_secs(5);

/// A running `link`, stopped by PID (SIGTERM, then SIGKILL) when dropped.
struct Link {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Link {
    fn start(args: &[String]) -> Link {
        let mut command = Command::new(ENGINE);
        command.arg("link").args(args).stdout(Stdio::piped());
        // SAFETY: prctl only, between fork and exec: the link dies with the test's thread even
        // when the test process is killed and no destructor runs.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            })
        };
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        let link = Link { child, lines };
        let ready: Value =
            serde_json::from_str(&link.lines.recv_timeout(BOUND).expect("link says it is ready")).unwrap();
        assert_eq!((&ready["type"], &ready["ready"]), (&Value::from("ready"), &Value::from(true)), "{ready}");
        link
    }

    /// Stops the link (SIGTERM) and returns its stats line.
    fn stop(mut self) -> Value {
        common::signal(self.child.id(), libc::SIGTERM);
        let line = self.lines.recv_timeout(BOUND).expect("link prints its stats when stopped");
        let status = wait_bounded(&mut self.child).expect("link exits after its stats");
        assert!(status.success(), "{status}");
        let stats: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(stats["type"], "stats");
        stats
    }
}

fn wait_bounded(child: &mut Child) -> Option<std::process::ExitStatus> {
    let started = Instant::now();
    while started.elapsed() < BOUND {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(10 * MS);
    }
    None
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            common::signal(self.child.id(), libc::SIGTERM);
            if wait_bounded(&mut self.child).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

/// Two namespaces joined by a link: a's device has 198.18.0.1, b's 198.18.0.2 (point to
/// point); IPv6 is off on both, so the link carries only what a test sends.
struct Lab {
    // Dropped first: the link, then the namespaces.
    link: Link,
    a: Netns,
    b: Netns,
}

impl Lab {
    fn start(link_args: &[&str]) -> Lab {
        let (a, b) = (Netns::new("a"), Netns::new("b"));
        let mut args = vec!["--a".to_string(), format!("{}:lka", a.0), "--b".into(), format!("{}:lkb", b.0)];
        args.extend(link_args.iter().map(|s| s.to_string()));
        let link = Link::start(&args);
        for (ns, device, local, peer) in [(&a, "lka", A, B), (&b, "lkb", B, A)] {
            let sysctl = format!("net.ipv6.conf.{device}.disable_ipv6=1");
            ip(&["netns", "exec", &ns.0, "sysctl", "-qw", &sysctl]);
            ip(&["-n", &ns.0, "addr", "add", &local.to_string(), "peer", &peer.to_string(), "dev", device]);
            ip(&["-n", &ns.0, "link", "set", device, "up"]);
        }
        Lab { link, a, b }
    }

    fn stop(self) -> Value {
        let Lab { link, a, b } = self;
        let stats = link.stop();
        drop((a, b));
        stats
    }
}

/// A UDP echo server on a socket of its own, stopped when dropped.
struct Echo {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Echo {
    fn start(socket: UdpSocket) -> Echo {
        let stop = Arc::new(AtomicBool::new(false));
        socket.set_read_timeout(Some(50 * MS)).unwrap();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !flag.load(Ordering::Relaxed) {
                if let Ok((n, peer)) = socket.recv_from(&mut buf) {
                    let _ = socket.send_to(&buf[..n], peer);
                }
            }
        });
        Echo { stop, thread: Some(thread) }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.take().unwrap().join();
    }
}

fn udp_in(ns: &Netns, address: Ipv4Addr, port: u16) -> UdpSocket {
    ns.run(|| UdpSocket::bind(SocketAddr::from((address, port))).unwrap())
}

/// Round trips of `n` probes to `server`, one at a time.
fn round_trips(client: &UdpSocket, server: SocketAddr, n: u32) -> Vec<Duration> {
    client.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut buf = [0u8; 64];
    (0..n)
        .map(|i| {
            let started = Instant::now();
            client.send_to(&i.to_be_bytes(), server).unwrap();
            loop {
                let (len, _) = client.recv_from(&mut buf).unwrap_or_else(|e| panic!("probe {i} to {server}: {e}"));
                if buf[..len] == i.to_be_bytes() {
                    return started.elapsed();
                }
            }
        })
        .collect()
}

/// min, median, max.
fn summary(rtts: &[Duration]) -> (Duration, Duration, Duration) {
    let mut sorted = rtts.to_vec();
    sorted.sort();
    (sorted[0], sorted[sorted.len() / 2], sorted[sorted.len() - 1])
}

fn delays(stats: &Value, direction: &str) -> String {
    let d = &stats[direction];
    format!("{}/{}/{} µs", d["delay_min_us"], d["delay_mean_us"], d["delay_max_us"])
}

#[test]
fn delay_adds_what_was_asked() {
    let Some(_lab) = lab_lock() else { return };
    let probe = |link_args: &[&str]| {
        let lab = Lab::start(link_args);
        let _echo = Echo::start(udp_in(&lab.a, A, 7000));
        let client = udp_in(&lab.b, B, 0);
        let rtts = round_trips(&client, (A, 7000).into(), 50);
        (summary(&rtts), lab.stop())
    };
    let ((min0, median0, max0), stats0) = probe(&[]);
    eprintln!(
        "no delay: RTT min {min0:?} median {median0:?} max {max0:?}; link held a→b {}",
        delays(&stats0, "a_to_b")
    );
    assert!(median0 < 2 * MS, "{median0:?}");
    let ((min, median, max), stats) = probe(&["--a-to-b", "delay=10ms", "--b-to-a", "delay=10ms"]);
    eprintln!(
        "10 ms each way: RTT min {min:?} median {median:?} max {max:?} (median − 20 ms − the undelayed median: {:?}); \
         link held a→b {}, b→a {}",
        median.saturating_sub(20 * MS + median0),
        delays(&stats, "a_to_b"),
        delays(&stats, "b_to_a"),
    );
    assert!(min >= 20 * MS, "{min:?}");
    // Within 3 ms of what was asked plus the undelayed path (a noisy 2-core VM once took 21.1
    // ms; a delay applied twice, or per packet of a burst, takes 40 ms and more).
    assert!(median <= 20 * MS + median0 + 3 * MS, "{median:?}");
    for direction in ["a_to_b", "b_to_a"] {
        assert_eq!(stats[direction]["packets_delivered"], 50, "{stats}");
        assert!(stats[direction]["delay_min_us"].as_u64().unwrap() >= 10_000, "{stats}");
    }
}

#[test]
fn loss_drops_what_the_receiver_misses() {
    let Some(_lab) = lab_lock() else { return };
    let stats_file = std::env::temp_dir().join(format!("dnscost-link-stats-{}.json", std::process::id()));
    let lab = Lab::start(&["--a-to-b", "loss=20%", "--stats", stats_file.to_str().unwrap()]);
    let receiver = udp_in(&lab.b, B, 7001);
    let sender = udp_in(&lab.a, A, 0);
    let sent = 1000u32;
    // Received as they come (a socket's buffer holds a few hundred small datagrams), until
    // 300 ms without any.
    let receiving = std::thread::spawn(move || {
        receiver.set_read_timeout(Some(300 * MS)).unwrap();
        let mut seen = std::collections::HashSet::new();
        let mut buf = [0u8; 64];
        let started = Instant::now();
        while let Ok(n) = receiver.recv(&mut buf) {
            assert_eq!(n, 4);
            assert!(seen.insert(u32::from_be_bytes(buf[..4].try_into().unwrap())), "a datagram twice");
            assert!(started.elapsed() < BOUND, "datagrams keep coming");
        }
        seen
    });
    for i in 0..sent {
        sender.send_to(&i.to_be_bytes(), (B, 7001)).unwrap();
        if i % 20 == 19 {
            // Well below what the devices' queues hold (500), so that only the link drops.
            std::thread::sleep(MS);
        }
    }
    let seen = receiving.join().unwrap();
    let received = seen.len() as u64;
    let stats = lab.stop();
    let from_file = std::fs::read_to_string(&stats_file).unwrap();
    let _ = std::fs::remove_file(&stats_file);
    assert_eq!(serde_json::from_str::<Value>(&from_file).unwrap(), stats, "--stats has the stats line");
    // 20 % of 1 000: σ = √(1 000 × 0.2 × 0.8) ≈ 12.6.
    eprintln!("received {received} of {sent}; link: {}", stats["a_to_b"]);
    assert!((750..=850).contains(&received), "{received}");
    let a_to_b = &stats["a_to_b"];
    assert_eq!(a_to_b["packets_read"], sent, "{stats}");
    assert_eq!(a_to_b["packets_delivered"], received, "{stats}");
    assert_eq!(a_to_b["packets_dropped_loss"], sent as u64 - received, "{stats}");
    assert_eq!(a_to_b["packets_dropped_queue"], 0, "{stats}");
    assert_eq!(stats["b_to_a"]["packets_read"], 0, "{stats}");
}

#[test]
fn rate_paces_a_tcp_transfer() {
    let Some(_lab) = lab_lock() else { return };
    let rate_bps = 8_000_000.0;
    let lab = Lab::start(&["--a-to-b", "rate=8000kbit"]);
    let listener = lab.b.run(|| TcpListener::bind((B, 7002)).unwrap());
    let mut client = lab.a.run(|| TcpStream::connect_timeout(&(B, 7002).into(), BOUND).unwrap());
    let (mut server, _) = listener.accept().unwrap();
    for s in [&client, &server] {
        s.set_read_timeout(Some(3 * BOUND)).unwrap();
        s.set_write_timeout(Some(3 * BOUND)).unwrap();
    }
    let reader = std::thread::spawn(move || {
        let mut total = 0u64;
        let mut buf = vec![0u8; 65536];
        loop {
            match server.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => total += n as u64,
                Err(e) => panic!("server read: {e}"),
            }
        }
        server.write_all(b"!").unwrap();
        total
    });
    let payload = 2_000_000u64;
    let started = Instant::now();
    client.write_all(&vec![7u8; payload as usize]).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let mut done = [0u8; 1];
    client.read_exact(&mut done).unwrap();
    let took = started.elapsed();
    assert_eq!(reader.join().unwrap(), payload);
    // Every segment carries the IP and TCP headers (with options): the MTU less the MSS.
    let mss = socket2::SockRef::from(&client).mss().unwrap() as u64;
    let on_wire = payload + payload.div_ceil(mss) * (1500 - mss);
    let expected = Duration::from_secs_f64(on_wire as f64 * 8.0 / rate_bps);
    let stats = lab.stop();
    eprintln!(
        "2 MB at 8 Mbit/s: {took:?}, expected {expected:?} ({on_wire} octets on the wire at MSS {mss}); link a→b read {} \
         octets, dropped {} packets at the queue",
        stats["a_to_b"]["bytes_read"], stats["a_to_b"]["packets_dropped_queue"]
    );
    assert!(took >= expected.mul_f64(0.95), "{took:?} < 0.95 × {expected:?}");
    assert!(took <= expected.mul_f64(1.3), "{took:?} > 1.3 × {expected:?}");
}

#[test]
fn split_address_takes_its_own_path() {
    let Some(_lab) = lab_lock() else { return };
    let split = SPLIT.to_string();
    let lab = Lab::start(&[
        "--a-to-b",
        "delay=5ms",
        "--b-to-a",
        "delay=5ms",
        "--split",
        &split,
        "--split-a-to-b",
        "delay=1ms",
        "--split-b-to-a",
        "delay=1ms",
    ]);
    ip(&["-n", &lab.a.0, "addr", "add", &format!("{split}/32"), "dev", "lka"]);
    ip(&["-n", &lab.b.0, "route", "add", &format!("{split}/32"), "dev", "lkb"]);
    let _main = Echo::start(udp_in(&lab.a, A, 7000));
    let _split = Echo::start(udp_in(&lab.a, SPLIT, 7000));
    let client = udp_in(&lab.b, B, 0);
    let (min_main, median_main, _) = summary(&round_trips(&client, (A, 7000).into(), 20));
    let (min_split, median_split, _) = summary(&round_trips(&client, (SPLIT, 7000).into(), 20));
    let stats = lab.stop();
    eprintln!("main path RTT median {median_main:?}, split path {median_split:?}");
    // The fastest round trip of each path is its delay (a median on a busy 2-core machine may be
    // a scheduler's tick late: CI saw the main path's at 11.29 ms), and the split path's median
    // is below the main path's fastest: every one of its packets took its own path.
    assert!((10 * MS..11 * MS).contains(&min_main), "{min_main:?} {median_main:?}");
    assert!((2 * MS..3 * MS).contains(&min_split), "{min_split:?} {median_split:?}");
    assert!(median_split < min_main, "{median_split:?} {min_main:?}");
    for direction in ["a_to_b", "b_to_a"] {
        assert_eq!(stats[direction]["packets_delivered"], 40, "{stats}");
        assert_eq!(stats[direction]["split"]["packets_delivered"], 20, "{stats}");
    }
}

/// Runs `link` with arguments that it must refuse: its exit code and stderr.
fn refused(args: &[&str]) -> (i32, String) {
    let mut child =
        Command::new(ENGINE).arg("link").args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let status = wait_bounded(&mut child).unwrap_or_else(|| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("link {args:?} still ran: it should have refused its arguments");
    });
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    (status.code().unwrap_or(-1), err.trim_end().to_string())
}

#[test]
fn bad_arguments_are_one_line_each() {
    let ends = ["--a", "dnscost-no-such-netns-a:t0", "--b", "dnscost-no-such-netns-b:t1"];
    let with = |extra: &[&'static str]| -> Vec<&str> { ends.iter().chain(extra).copied().collect() };
    let (code, err) = refused(&with(&["--a-to-b", "delay=1ms,colour=red"]));
    assert_eq!(code, 2);
    assert_eq!(err, "dnscost-engine: --a-to-b: unknown key \"colour\" (expected delay, jitter, loss, rate or queue)");
    let (code, err) = refused(&with(&["--b-to-a", "delay=-5ms"]));
    assert_eq!(code, 2);
    assert!(err.starts_with("dnscost-engine: --b-to-a: delay: \"-5ms\" is not a duration"), "{err}");
    let (code, err) = refused(&with(&["--a-to-b", "loss=101%"]));
    assert_eq!(code, 2);
    assert!(err.starts_with("dnscost-engine: --a-to-b: loss: \"101%\" is not a probability"), "{err}");
    let (code, err) = refused(&with(&["--a-to-b", "rate=12"]));
    assert_eq!(code, 2, "{err}");
    let (code, err) = refused(&with(&[]));
    assert_eq!(code, 3);
    assert!(
        err.starts_with(
            "dnscost-engine: dnscost-no-such-netns-a:t0: network namespace /run/netns/dnscost-no-such-netns-a:"
        ),
        "{err}"
    );
    // The link's own namespace (empty NETNS) has lo already.
    let (code, err) = refused(&["--a", ":lo", "--b", ":dnscost-t1"]);
    assert_eq!((code, err.as_str()), (3, "dnscost-engine: :lo: the namespace already has a device lo"));
}
