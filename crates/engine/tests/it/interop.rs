//! Interoperability: `dnscost-engine generate` against real resolvers from the distribution.
//!
//! For each resolver (dnsdist, knot-resolver) the test starts `dnscost-engine serve` as the
//! authoritative upstream for "test.", the resolver in front of it on free loopback ports
//! (configs from `tests/interop/*.conf`), and a certificate chain made with `openssl` (a CA and
//! a leaf for localhost/127.0.0.1, so `--ca` is exercised). It then runs `generate` for 2 s
//! over udp, tcp, dot, doh (POST) and doh (GET) and checks the summary: at least 95 % of the
//! queries sent are answered and none failed.
//!
//! A missing resolver or `openssl` skips the test, except under `CI=true`, where it fails.
//! Every process started here is stopped by PID when the test ends, also on panic.

use std::fs;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

const ENGINE: &str = env!("CARGO_BIN_EXE_dnscost-engine");
const TEMPLATES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop");
/// Synthetic names served and queried: q000.test. .. q999.test.
const SYNTHETIC: u32 = 1000;
const TLD: &str = "test";
const DURATION: &str = "2s";
const RATE_QPS: &str = "500";
/// Generous upper bound on one `generate` run (warm-up + duration + timeout + exit).
const GENERATE_DEADLINE: Duration = Duration::from_secs(30);
const READY_DEADLINE: Duration = Duration::from_secs(15);

/// The two resolvers together would overload a 2-core machine: run them one after the other.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn dnsdist() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    interop(Resolver::Dnsdist);
}

#[test]
fn knot_resolver() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    interop(Resolver::Kresd);
}

#[derive(Clone, Copy, Debug)]
enum Resolver {
    Dnsdist,
    Kresd,
}

impl Resolver {
    fn program(self) -> &'static str {
        match self {
            Resolver::Dnsdist => "dnsdist",
            Resolver::Kresd => "kresd",
        }
    }

    fn template(self) -> &'static str {
        match self {
            Resolver::Dnsdist => "dnsdist.conf",
            Resolver::Kresd => "kresd.conf",
        }
    }

    fn command(self, program: &Path, conf: &Path, rundir: &Path) -> Command {
        let mut cmd = Command::new(program);
        match self {
            // --supervised: foreground, no console on stdin.
            Resolver::Dnsdist => cmd.args(["--supervised", "--disable-syslog", "-C"]).arg(conf),
            // -n: no REPL on stdin; the last argument is the run directory.
            Resolver::Kresd => cmd.arg("-n").arg("-c").arg(conf).arg(rundir),
        };
        cmd
    }
}

/// Ports of one resolver instance, all on 127.0.0.1.
struct Ports {
    dns: u16,
    dot: u16,
    doh: u16,
}

/// Generator cases: (label, transport, extra arguments, which resolver port).
fn cases(resolver: Resolver, ports: &Ports) -> Vec<(&'static str, &'static str, Vec<&'static str>, u16)> {
    // knot-resolver 5.6 reads one DoH stream at a time per connection: the HEADERS of a new
    // stream arriving before the previous POST's DATA is complete get RST_STREAM
    // (REFUSED_STREAM) (its daemon/http.c, "we don't support interweaving"; upstream issue
    // 619). Concurrent POST streams therefore fail there; one in flight works.
    let post_in_flight = match resolver {
        Resolver::Kresd => vec!["--doh-method", "post", "--in-flight", "1"],
        Resolver::Dnsdist => vec!["--doh-method", "post"],
    };
    // Browser header fields: Huffman-coded literals and more table entries for their decoders.
    let browser_post = [post_in_flight.as_slice(), &["--doh-headers", "browser"]].concat();
    vec![
        ("udp", "udp", vec![], ports.dns),
        ("tcp", "tcp", vec![], ports.dns),
        ("dot", "dot", vec![], ports.dot),
        ("doh-post", "doh", post_in_flight, ports.doh),
        ("doh-get", "doh", vec!["--doh-method", "get"], ports.doh),
        ("doh-post-browser", "doh", browser_post, ports.doh),
        ("doh-get-browser", "doh", vec!["--doh-method", "get", "--doh-headers", "browser"], ports.doh),
    ]
}

fn interop(resolver: Resolver) {
    let Some(program) = find_program(resolver.program()) else {
        return skip_or_fail(resolver.program());
    };
    let Some(openssl) = find_program("openssl") else {
        return skip_or_fail("openssl");
    };

    let mut run = Run::new(resolver.program());
    let (cert, key, ca) = make_certificates(&openssl, &run.dir);

    // The authoritative upstream: UDP and TCP on one port, since resolvers use both there.
    let upstream = run.start_serve();
    let probe = format!("q{:0width$}.{TLD}.", 0, width = digits(SYNTHETIC - 1));
    wait_ready(&run, upstream, &probe, "dnscost-engine serve");

    let [dns, dot, doh] = free_ports_udp_tcp::<3>();
    let ports = Ports { dns, dot, doh };
    let rundir = run.dir.join("rundir");
    fs::create_dir_all(&rundir).expect("create resolver run directory");
    let template = fs::read_to_string(Path::new(TEMPLATES).join(resolver.template())).expect("read resolver template");
    let conf_text = template
        .replace("@PORT_DNS@", &ports.dns.to_string())
        .replace("@PORT_DOT@", &ports.dot.to_string())
        .replace("@PORT_DOH@", &ports.doh.to_string())
        .replace("@CERT@", path_str(&cert))
        .replace("@KEY@", path_str(&key))
        .replace("@UPSTREAM@", &upstream.to_string())
        .replace("@RUNDIR@", path_str(&rundir));
    for placeholder in ["@PORT_", "@CERT@", "@KEY@", "@UPSTREAM@", "@RUNDIR@"] {
        assert!(!conf_text.contains(placeholder), "{placeholder} left in {}", resolver.template());
    }
    let conf = run.dir.join(resolver.template());
    fs::write(&conf, conf_text).expect("write resolver config");
    run.spawn(resolver.program(), resolver.command(&program, &conf, &rundir));
    let resolver_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, ports.dns));
    wait_ready(&run, resolver_addr, &probe, resolver.program());

    let mut failures = Vec::new();
    for (label, transport, extra, port) in cases(resolver, &ports) {
        match run.generate(label, transport, &extra, port, &ca) {
            Ok(s) => {
                let line = format!(
                    "{label}: sent {} answered {} (NOERROR {}) timed out {} failed {}",
                    s.sent,
                    s.answered,
                    s.noerror.map_or("?".to_string(), |n| n.to_string()),
                    s.timed_out,
                    s.failed
                );
                eprintln!("{} {line}", resolver.program());
                // Where the summary splits answers by RCODE, a SERVFAIL is no success.
                let good = s.noerror.unwrap_or(s.answered);
                if s.sent == 0 || good * 100 < s.sent * 95 || s.failed > 0 {
                    failures.push(line);
                }
            }
            Err(e) => failures.push(format!("{label}: {e}")),
        }
    }
    if !failures.is_empty() {
        panic!("{} interop failed:\n  {}\n{}", resolver.program(), failures.join("\n  "), run.log_tails());
    }
}

/// The counts the test checks, from the generator's summary record.
struct Summary {
    sent: u64,
    answered: u64,
    /// Answers with RCODE NOERROR, when the summary counts answers by RCODE.
    noerror: Option<u64>,
    timed_out: u64,
    failed: u64,
}

/// Processes and files of one test; stops the processes (by PID) and removes the files on drop.
struct Run {
    dir: PathBuf,
    children: Vec<(String, Child)>,
    logs: Vec<(String, PathBuf)>,
}

impl Run {
    fn new(name: &str) -> Run {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("dnscost-interop-{name}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&dir).expect("create temporary directory");
        Run { dir, children: Vec::new(), logs: Vec::new() }
    }

    /// Starts `cmd` with stdout and stderr to a log file in the run directory.
    fn spawn(&mut self, name: &str, mut cmd: Command) {
        let log = self.dir.join(format!("{name}.log"));
        let out = fs::File::create(&log).expect("create log file");
        let err = out.try_clone().expect("clone log file");
        let child =
            cmd.stdin(Stdio::null()).stdout(out).stderr(err).spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        self.logs.push((name.to_string(), log));
        self.children.push((name.to_string(), child));
    }

    /// Starts the engine's responder and returns the address of its UDP+TCP listener.
    fn start_serve(&mut self) -> SocketAddr {
        // Binding is raced by other processes on the machine: retry on another port.
        let mut last_error = String::new();
        for _ in 0..3 {
            let [port] = free_ports_udp_tcp::<1>();
            let log = self.dir.join("serve.log");
            let mut child = Command::new(ENGINE)
                .arg("serve")
                .arg("--listen")
                .arg(format!("udp://127.0.0.1:{port}"))
                .arg("--listen")
                .arg(format!("tcp://127.0.0.1:{port}"))
                .args(["--synthetic", &SYNTHETIC.to_string(), "--tld", TLD])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(fs::File::create(&log).expect("create serve log"))
                .spawn()
                .expect("start dnscost-engine serve");
            let stdout = child.stdout.take().expect("serve stdout");
            self.logs.push(("serve".to_string(), log));
            self.children.push(("serve".to_string(), child));

            // Read the "listening" lines on a thread that keeps draining stdout afterwards.
            let (tx, rx) = mpsc::channel();
            thread::spawn(move || {
                // Once the receiver is gone, sends fail and lines are just dropped.
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
            let deadline = Instant::now() + READY_DEADLINE;
            let (mut udp, mut tcp) = (false, false);
            while !(udp && tcp) {
                let left = deadline.saturating_duration_since(Instant::now());
                let Ok(line) = rx.recv_timeout(left) else {
                    break;
                };
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if v["type"] != "listening" {
                    continue;
                }
                match v["transport"].as_str() {
                    Some("udp") => udp = true,
                    Some("tcp") => tcp = true,
                    _ => {}
                }
            }
            if udp && tcp {
                return SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            }
            last_error = self.log_tails();
            self.stop_all();
        }
        panic!("dnscost-engine serve did not report its udp and tcp listeners\n{last_error}");
    }

    fn generate(&self, label: &str, transport: &str, extra: &[&str], port: u16, ca: &Path) -> Result<Summary, String> {
        let output = self.dir.join(format!("generate-{label}.jsonl"));
        let log = self.dir.join(format!("generate-{label}.log"));
        let mut child = Command::new(ENGINE)
            .arg("generate")
            .args(["--transport", transport])
            .args(["--target", &format!("127.0.0.1:{port}")])
            .args(extra)
            .args(["--synthetic", &SYNTHETIC.to_string(), "--tld", TLD])
            .args(["--rate", RATE_QPS, "--duration", DURATION, "--timeout", "2s"])
            .args(if transport == "udp" { vec![] } else { vec!["--connections", "2"] })
            .args(if transport == "dot" || transport == "doh" {
                vec!["--ca", path_str(ca), "--sni", "localhost"]
            } else {
                vec![]
            })
            .arg("--output")
            .arg(&output)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| format!("start generate: {e}"))?;
        let deadline = Instant::now() + GENERATE_DEADLINE;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("generate did not end within {GENERATE_DEADLINE:?}"));
                }
                Err(e) => return Err(format!("wait for generate: {e}")),
            }
        };
        let stderr = tail(&log, 10);
        if !status.success() {
            return Err(format!("generate exited with {status}:\n{stderr}"));
        }
        let text = fs::read_to_string(&output).map_err(|e| format!("read output: {e}"))?;
        let summary = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["type"] == "summary")
            .ok_or_else(|| format!("no summary record in the output\n{stderr}"))?;
        Ok(Summary {
            sent: count(&summary, "sent"),
            answered: count(&summary, "answered"),
            noerror: noerror(&summary),
            timed_out: count(&summary, "timed_out"),
            failed: count(&summary, "failed"),
        })
    }

    fn log_tails(&self) -> String {
        let mut s = String::new();
        for (name, path) in &self.logs {
            s += &format!("--- {name} ({})\n{}\n", path.display(), tail(path, 15));
        }
        s
    }

    /// SIGTERM each process, give it a moment to exit cleanly, then SIGKILL.
    fn stop_all(&mut self) {
        for (_, child) in &self.children {
            if let Ok(pid) = libc::pid_t::try_from(child.id()) {
                // SAFETY: kill(2) on the PID of a child we spawned and have not reaped yet.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        for (_, child) in &mut self.children {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(20));
            }
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
        self.children.clear();
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.stop_all();
        if !thread::panicking() {
            let _ = fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("interop: files kept in {}", self.dir.display());
        }
    }
}

/// Sends a query for `name` over UDP until the server answers NOERROR or NXDOMAIN (both
/// prove the path to the authoritative upstream works).
fn wait_ready(run: &Run, server: SocketAddr, name: &str, what: &str) {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind probe socket");
    socket.set_read_timeout(Some(Duration::from_millis(300))).expect("set probe timeout");
    let deadline = Instant::now() + READY_DEADLINE;
    let mut last = String::from("no answer");
    let mut id: u16 = 0x4000;
    while Instant::now() < deadline {
        id = id.wrapping_add(1);
        let query = dns_query(id, name);
        if socket.send_to(&query, server).is_ok() {
            let mut buf = [0u8; 1500];
            if let Ok((n, _)) = socket.recv_from(&mut buf) {
                if n >= 12 && buf[..2] == id.to_be_bytes() {
                    let rcode = buf[3] & 0x0f;
                    if rcode == 0 || rcode == 3 {
                        return;
                    }
                    last = format!("rcode {rcode}");
                }
            }
        }
        thread::sleep(Duration::from_millis(200));
    }
    panic!("{what} on {server} not ready within {READY_DEADLINE:?} ({last})\n{}", run.log_tails());
}

/// A recursive query for `name` IN A (header, one question, no EDNS).
fn dns_query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        q.push(u8::try_from(label.len()).expect("label length"));
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// The query counters of a summary: `measured.queries` (the measured period, after
/// warm-up), else a top-level `queries`.
fn queries(summary: &Value) -> &Value {
    summary.pointer("/measured/queries").or_else(|| summary.get("queries")).unwrap_or(&Value::Null)
}

/// A counter of the summary's queries: a number, or the sum of an object of counts (failed by
/// error kind, answered by RCODE). `failed` prefers `failed_total` where there is one.
fn count(summary: &Value, field: &str) -> u64 {
    fn total(v: &Value) -> u64 {
        match v {
            Value::Number(n) => n.as_u64().unwrap_or(0),
            Value::Object(m) => m.values().map(total).sum(),
            _ => 0,
        }
    }
    let q = queries(summary);
    q.get(format!("{field}_total")).or_else(|| q.get(field)).map_or(0, total)
}

/// Answers with RCODE NOERROR (`rcodes.noerror`, or `answered.noerror` where answers are
/// counted by RCODE), if the summary has them.
fn noerror(summary: &Value) -> Option<u64> {
    let q = queries(summary);
    let by_rcode = q.get("rcodes").or_else(|| q.get("answered"))?.as_object()?;
    by_rcode.iter().find(|(k, _)| k.eq_ignore_ascii_case("noerror")).and_then(|(_, v)| v.as_u64())
}

/// A CA and a leaf for localhost, 127.0.0.1 and ::1 (ECDSA P-256), as PEM files.
/// Returns (leaf certificate, leaf key, CA certificate).
fn make_certificates(openssl: &Path, dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let p = |name: &str| dir.join(name).to_str().expect("UTF-8 path").to_string();
    fs::write(
        p("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nbasicConstraints=CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write leaf extensions");
    let key = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    let steps = [
        format!(
            "req -x509 {key} -days 2 -subj /CN=dnscost-interop-ca \
             -addext basicConstraints=critical,CA:TRUE \
             -addext keyUsage=critical,keyCertSign,cRLSign -keyout {} -out {}",
            p("ca.key"),
            p("ca.pem")
        ),
        format!("req {key} -subj /CN=localhost -keyout {} -out {}", p("leaf.key"), p("leaf.csr")),
        format!(
            "x509 -req -days 2 -in {} -CA {} -CAkey {} -CAcreateserial -extfile {} -out {}",
            p("leaf.csr"),
            p("ca.pem"),
            p("ca.key"),
            p("leaf.ext"),
            p("leaf.pem")
        ),
    ];
    for step in &steps {
        let out =
            Command::new(openssl).args(step.split_whitespace()).stdin(Stdio::null()).output().expect("run openssl");
        assert!(out.status.success(), "openssl {step}: {}", String::from_utf8_lossy(&out.stderr));
    }
    (PathBuf::from(p("leaf.pem")), PathBuf::from(p("leaf.key")), PathBuf::from(p("ca.pem")))
}

/// `N` distinct loopback ports, each free for both UDP and TCP right now (resolvers and the
/// engine's responder serve both on one port). They are drawn below the kernel's ephemeral
/// range (`ip_local_port_range`): a port the kernel hands out for `bind(0)` is also one it
/// hands the next outgoing connection of a test running beside this one, which then holds it
/// when the resolver binds it (CI saw dnsdist fail so: "Address already in use").
fn free_ports_udp_tcp<const N: usize>() -> [u16; N] {
    let ephemeral = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let (low, span) = (ephemeral / 2, ephemeral - ephemeral / 2);
    let seed =
        u64::from(std::process::id()) ^ SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut held = Vec::new();
    let mut ports = [0; N];
    let mut draw = seed;
    for port in &mut ports {
        for attempt in 0.. {
            assert!(attempt < 1000, "no free loopback port for UDP and TCP below {ephemeral}");
            // A step of a 64-bit linear congruential generator (Knuth's MMIX constants).
            draw = draw.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let candidate = low + ((draw >> 33) % u64::from(span)) as u16;
            let Ok(udp) = UdpSocket::bind((Ipv4Addr::LOCALHOST, candidate)) else { continue };
            if let Ok(tcp) = TcpListener::bind((Ipv4Addr::LOCALHOST, candidate)) {
                *port = candidate;
                held.push((udp, tcp)); // keep until all are chosen, so none repeats
                break;
            }
        }
    }
    ports
}

/// `name` on PATH, or in the sbin directories that a non-root PATH may lack.
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/sbin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Under CI=true a missing program is an error; elsewhere the test is skipped.
fn skip_or_fail(program: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{program} is not installed (CI=true): run scripts/setup");
    }
    eprintln!("interop: skipped, {program} is not installed (scripts/setup installs it)");
}

fn digits(n: u32) -> usize {
    n.to_string().len()
}

/// The last `lines` lines of a log file.
fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temporary path")
}
