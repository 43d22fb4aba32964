//! Running `dnscost-engine serve` and `generate` from tests.
#![allow(dead_code)]

use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub const ENGINE: &str = env!("CARGO_BIN_EXE_dnscost-engine");

/// A fresh directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dnscost-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A running responder, stopped (SIGTERM, then waited for) when dropped.
pub struct Server {
    child: Child,
    pub addresses: HashMap<String, String>,
    pub ca: PathBuf,
    pub log: PathBuf,
}

impl Server {
    /// Starts `serve` on port 0 for every transport, with `extra` flags.
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        let ca = dir.join("ca.pem");
        let log = dir.join("server-connections.jsonl");
        let mut args: Vec<String> = [
            "serve",
            "--listen",
            "udp://127.0.0.1:0",
            "--listen",
            "tcp://127.0.0.1:0",
            "--listen",
            "dot://127.0.0.1:0",
            "--listen",
            "doh://127.0.0.1:0/dns-query",
            "--listen",
            "doq://127.0.0.1:0",
            "--listen",
            "doh3://127.0.0.1:0/dns-query",
            "--synthetic",
            "1000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(["--ca-out".into(), ca.display().to_string()]);
        args.extend(["--connections-log".into(), log.display().to_string()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut child = Command::new(ENGINE).args(&args).stdout(Stdio::piped()).spawn().expect("serve starts");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut addresses = HashMap::new();
        while addresses.len() < 6 {
            let line = lines.next().expect("serve prints its listeners").unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["type"], "listening");
            addresses.insert(v["transport"].as_str().unwrap().to_string(), v["address"].as_str().unwrap().to_string());
        }
        Server { child, addresses, ca, log }
    }

    pub fn addr(&self, transport: &str) -> &str {
        &self.addresses[transport]
    }

    /// Stops the server and returns its connection log.
    pub fn stop(mut self) -> Vec<Value> {
        self.terminate();
        read_lines(&self.log)
    }

    fn terminate(&mut self) {
        // SAFETY: signalling our own child by PID.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
    }
}

/// Reads JSON lines, checking each against the output contract (the typed records reject
/// unknown and missing fields).
pub fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            if !l.contains(r#""type":"listening""#) {
                serde_json::from_str::<dnscost_stats::Record>(l)
                    .unwrap_or_else(|e| panic!("{}: not a valid record: {e}: {l}", path.display()));
            }
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", path.display()))
        })
        .collect()
}

/// The result of one `generate` run.
pub struct Run {
    pub status: std::process::ExitStatus,
    pub records: Vec<Value>,
    pub connections: Vec<Value>,
    pub stderr: String,
}

impl Run {
    pub fn summary(&self) -> &Value {
        let last = self.records.last().unwrap_or_else(|| panic!("no output; stderr: {}", self.stderr));
        assert_eq!(last["type"], "summary", "stderr: {}", self.stderr);
        last
    }

    /// Totals of the whole run.
    pub fn total(&self, path: &str) -> u64 {
        let mut v = &self.summary()["total"];
        for key in path.split('.') {
            v = &v[key];
        }
        v.as_u64().unwrap_or(0)
    }

    /// Asserts the accounting invariant and returns the summary's accounting.
    pub fn balanced(&self) -> &Value {
        let a = &self.summary()["accounting"];
        assert_eq!(a["balanced"], true, "{a}");
        let sum: u64 = ["answered", "timed_out", "failed", "aborted"].iter().map(|k| a[k].as_u64().unwrap()).sum();
        assert_eq!(sum, a["offered"].as_u64().unwrap());
        a
    }
}

/// Runs `generate` with `args` (plus output files in `dir`).
pub fn generate(dir: &Path, args: &[&str]) -> Run {
    generate_with(dir, args, |_| {})
}

/// How long any one `generate` of the tests may live. A kill switch, not an assertion: every
/// run is a few seconds, so an engine still alive after this hangs, and the test says so.
pub const KILL_SWITCH: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs `generate` with `args` (plus output files in `dir`), calling `during` with its PID
/// once started; kills it (and fails the test) if it outlives [`KILL_SWITCH`].
pub fn generate_with(dir: &Path, args: &[&str], during: impl FnOnce(u32)) -> Run {
    run_generate(dir, args, None, during)
}

/// Runs `generate` with `args` (plus output files in `dir`) with its open-files limit, soft and
/// hard, lowered to `files`.
pub fn generate_with_files(dir: &Path, args: &[&str], files: u64) -> Run {
    run_generate(dir, args, Some(files), |_| {})
}

fn run_generate(dir: &Path, args: &[&str], files: Option<u64>, during: impl FnOnce(u32)) -> Run {
    use std::os::unix::process::CommandExt;
    let out = dir.join("out.jsonl");
    let log = dir.join("client-connections.jsonl");
    let err = dir.join("stderr.txt");
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&log);
    let mut command = Command::new(ENGINE);
    command
        .arg("generate")
        .args(args)
        .args(["--output", out.to_str().unwrap(), "--connections-log", log.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap());
    if let Some(files) = files {
        let limit = libc::rlimit { rlim_cur: files, rlim_max: files };
        // SAFETY: setrlimit is async-signal-safe and touches only the child's own limits.
        unsafe {
            command.pre_exec(move || match libc::setrlimit(libc::RLIMIT_NOFILE, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
    }
    let mut child = command.spawn().expect("generate runs");
    during(child.id());
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > KILL_SWITCH {
            let _ = child.kill();
            let _ = child.wait();
            panic!("generate {args:?} still ran after {KILL_SWITCH:?}: killed");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Run {
        status,
        records: read_lines(&out),
        connections: read_lines(&log),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
    }
}

/// Sends `signal` to our own child `pid`.
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: signalling our own child by PID.
    unsafe { libc::kill(pid as i32, signal) };
}

/// The server log's lines for one transport.
pub fn of_transport<'a>(log: &'a [Value], transport: &str) -> Vec<&'a Value> {
    log.iter().filter(|c| c["transport"] == transport).collect()
}
