//! The main thread's side of a run: merge the threads' reports into interval records as they
//! come, move the phases on (drain at the end, abort on a second signal), and write the
//! summary. Every record is flushed when written, so an interrupted run keeps what it measured.

use super::ctx::Stop;
use super::{Report, Run};
use crate::EngineError;
use dnscost_load::EngineConfig;
use dnscost_stats::{
    Accounting, ClassStart, ClassSummary, ClassTotals, ConnectionRecord, Counters, EngineMemory, IntervalRecord, Phase,
    Record, StartRecord, SummaryRecord, Totals,
};
use dnscost_transport::socket::{process_cpu_us, resident_bytes};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// Where the JSON lines go.
pub struct Output {
    w: Box<dyn Write>,
    name: String,
}

impl Output {
    pub fn open(cfg: &EngineConfig) -> Result<Self, EngineError> {
        Ok(match &cfg.output {
            Some(path) => Output {
                w: Box::new(std::io::BufWriter::new(
                    std::fs::File::create(path).map_err(|e| EngineError::file(path, e))?,
                )),
                name: path.display().to_string(),
            },
            None => Output { w: Box::new(std::io::stdout()), name: "standard output".into() },
        })
    }

    pub fn write(&mut self, r: &Record) -> Result<(), EngineError> {
        let w = &mut self.w;
        serde_json::to_writer(&mut *w, r)
            .map_err(std::io::Error::from)
            .and_then(|()| w.write_all(b"\n"))
            .and_then(|()| w.flush())
            .map_err(|e| EngineError::file(&self.name, e))
    }

    pub fn start(&mut self, run: &Run) -> Result<(), EngineError> {
        let setup = &run.classes[0].1;
        let population = run.classes[0].0.is_some();
        // A population's TLS is its classes': each class's start says it.
        let tls = setup.tls.as_ref().filter(|_| !population);
        let classes = if population {
            run.classes
                .iter()
                .map(|(name, s)| ClassStart {
                    name: name.clone().unwrap_or_default(),
                    config: serde_json::to_value(&s.config).expect("config serialises"),
                    target_address: s.target.to_string(),
                })
                .collect()
        } else {
            Vec::new()
        };
        self.write(&Record::Start(StartRecord {
            engine_version: env!("CARGO_PKG_VERSION").into(),
            config: serde_json::to_value(&run.config).expect("config serialises"),
            tls_version: tls.map(|t| t.version.as_str().into()),
            tls_group: tls.map(|t| t.group.as_str().into()),
            target_address: setup.target.to_string(),
            started_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            classes,
        }))
    }
}

/// The connections log: where connection tasks send records, and the thread writing them
/// (which returns the first write error, naming the file).
pub type LogWriter = (std::sync::mpsc::Sender<ConnectionRecord>, std::thread::JoinHandle<Result<(), EngineError>>);

/// A thread that writes the connections log, waking every 100 ms to write what came meanwhile
/// (a wake-up per record, a futex call on the sending side and a context switch on the
/// generator's core each time, cost up to a tenth of that core at 20 000 connections per
/// second). After a write error it keeps receiving (so that senders never notice) but writes
/// nothing more, and returns the error at the end: a run whose log is incomplete fails.
pub fn connections_log(cfg: &EngineConfig) -> Result<Option<LogWriter>, EngineError> {
    let Some(path) = &cfg.connections_log else { return Ok(None) };
    let file = std::fs::File::create(path).map_err(|e| EngineError::file(path, e))?;
    let (tx, rx) = std::sync::mpsc::channel::<ConnectionRecord>();
    let path = path.clone();
    let handle = std::thread::Builder::new().name("connections-log".into()).spawn(move || {
        let mut w = std::io::BufWriter::new(file);
        let mut failed: Option<std::io::Error> = None;
        let mut open = true;
        while open {
            std::thread::sleep(Duration::from_millis(100));
            loop {
                let r = match rx.try_recv() {
                    Ok(r) if failed.is_none() => serde_json::to_writer(&mut w, &Record::Connection(r))
                        .map_err(std::io::Error::from)
                        .and_then(|()| w.write_all(b"\n")),
                    Ok(_) => Ok(()), // dropped: the error is reported at the end
                    Err(std::sync::mpsc::TryRecvError::Empty) => break,
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                };
                if let Err(e) = r {
                    failed.get_or_insert(e);
                }
            }
            if failed.is_none() {
                if let Err(e) = w.flush() {
                    failed = Some(e);
                }
            }
        }
        match failed {
            None => Ok(()),
            Some(e) => Err(EngineError::file(&path, e)),
        }
    })?;
    Ok(Some((tx, handle)))
}

/// How a run ended, for the exit code and the line on stderr.
#[derive(Debug, Default)]
pub struct Outcome {
    /// SIGINT or SIGTERM stopped the sending early.
    pub interrupted: bool,
    /// A second signal (or the drain's safety net) aborted outstanding queries.
    pub aborted: bool,
    /// Threads did not finish even after the abort: the summary was written without them.
    pub abandoned: bool,
    /// Why nothing was answered, when nothing was.
    pub nothing_answered: Option<String>,
    /// Summary line for an interrupted run.
    pub interrupt_note: Option<String>,
    /// The engine ran out of file descriptors opening connections: what its open-files limit
    /// was, and what to do.
    pub out_of_files: Option<String>,
}

/// One class's counts and gauges over an interval, and its threads' CPU time.
#[derive(Default, Clone)]
struct Part {
    counters: Counters,
    in_flight: u64,
    active: u64,
    cpu: (u64, u64),
}

impl Part {
    fn add(&mut self, r: &Report) {
        self.counters.merge(&r.counters);
        self.in_flight += r.in_flight;
        self.active += r.active;
        self.cpu = (self.cpu.0 + r.cpu_us.0, self.cpu.1 + r.cpu_us.1);
    }

    /// Another class's part of the same interval, added.
    fn merge(&mut self, other: &Part) {
        self.counters.merge(&other.counters);
        self.in_flight += other.in_flight;
        self.active += other.active;
        self.cpu = (self.cpu.0 + other.cpu.0, self.cpu.1 + other.cpu.1);
    }

    /// A later interval of the same class: counts and CPU add up, gauges are the latest.
    fn count(&mut self, later: &Part) {
        self.counters.merge(&later.counters);
        self.cpu = (self.cpu.0 + later.cpu.0, self.cpu.1 + later.cpu.1);
        (self.in_flight, self.active) = (later.in_flight, later.active);
    }

    fn totals(&self, seconds: f64) -> Totals {
        Totals::new(&self.counters, self.in_flight, self.active, self.cpu.0, self.cpu.1, seconds)
    }
}

/// An interval's reports so far, per class.
struct Pending {
    classes: Vec<Part>,
    reports: usize,
    end_ms: u64,
}

/// A class's counts over the measured period and over the whole run.
#[derive(Default, Clone)]
struct Sums {
    measured: Part,
    total: Part,
}

/// Collects reports until every thread is done, writes the summary and says how the run ended.
pub async fn collect(
    run: &Run,
    out: &mut Output,
    mut reports: tokio::sync::mpsc::UnboundedReceiver<Report>,
    stop: tokio::sync::watch::Sender<Stop>,
    quiet: bool,
    mut memory: EngineMemory,
) -> Result<Outcome, EngineError> {
    let cfg = &run.config;
    let threads = run.threads();
    let population = run.classes[0].0.is_some();
    // Per class, for a population only (a run of one class is its totals).
    let mut sums = vec![Sums::default(); if population { run.classes.len() } else { 0 }];
    let measure_end = cfg.warmup_ms + cfg.duration_ms;
    let start = run.start();
    let instant = |ms: u64| tokio::time::Instant::from_std(start + Duration::from_millis(ms));
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let progress = !quiet && std::io::stderr().is_terminal();
    let mut pending: BTreeMap<u32, Pending> = BTreeMap::new();
    let mut last_index: Vec<Option<u32>> = vec![None; threads];
    let mut next_emit = 0u32;
    let mut emitted_end_ms = 0u64;
    let (mut measured, mut total) = (Counters::default(), Counters::default());
    // Sends and offers after the warm-up: the measured period and the drain, where the queries
    // due in the measured period but found unsent only when sending stopped are counted.
    let (mut late_offered, mut late_sent) = (0u64, 0u64);
    let (mut measured_cpu, mut total_cpu) = ((0u64, 0u64), (0u64, 0u64));
    let (mut measure_from, mut measure_to) = (None::<u64>, 0u64);
    let mut cpu_mark = process_cpu_us();
    let (mut interrupted, mut aborted) = (false, false);
    let mut drain_at = instant(measure_end);
    let mut abort_at = None::<tokio::time::Instant>;
    let mut last_gauges = (0u64, 0u64);
    let mut measured_gauges = (0u64, 0u64);
    let mut closed = false;
    // After an abort, threads get this long to report; then the summary is written without
    // them (a thread stuck in a system call must not keep the process alive).
    let mut give_up_at = None::<tokio::time::Instant>;
    let mut abandoned = false;
    loop {
        // Emit every interval all live threads have reported.
        while let Some(p) = pending.get(&next_emit) {
            let expected = last_index.iter().filter(|l| l.is_none_or(|l| l >= next_emit)).count();
            if p.reports < expected && !closed {
                break;
            }
            let p = pending.remove(&next_emit).expect("present");
            let (start_ms, end_ms) = (emitted_end_ms, p.end_ms.max(emitted_end_ms));
            let phase = if end_ms <= cfg.warmup_ms && cfg.warmup_ms > 0 {
                Phase::Warmup
            } else if start_ms < measure_end && start_ms >= cfg.warmup_ms {
                Phase::Measure
            } else {
                Phase::Drain
            };
            let cpu = process_cpu_us();
            let used = (cpu.0 - cpu_mark.0, cpu.1 - cpu_mark.1);
            cpu_mark = cpu;
            let seconds = (end_ms - start_ms) as f64 / 1000.0;
            let mut all = Part::default();
            for part in &p.classes {
                all.merge(part);
            }
            let totals = Totals::new(&all.counters, all.in_flight, all.active, used.0, used.1, seconds);
            memory.sample(resident_bytes(), all.active);
            let mut classes = Vec::with_capacity(sums.len());
            for (((name, s), part), sum) in run.classes.iter().zip(&p.classes).zip(&mut sums) {
                classes.push(ClassTotals {
                    name: name.clone().unwrap_or_default(),
                    transport: s.config.transport.to_string(),
                    totals: part.totals(seconds),
                });
                if phase == Phase::Measure {
                    sum.measured.count(part);
                }
                sum.total.count(part);
            }
            if progress && phase != Phase::Drain {
                eprint!("\r{}", progress_line(&totals, phase, end_ms, measure_end, seconds));
            }
            out.write(&Record::Interval(IntervalRecord {
                index: next_emit,
                phase,
                start_ms,
                end_ms,
                totals,
                classes,
            }))?;
            let p = all;
            if phase == Phase::Measure {
                measured.merge(&p.counters);
                measured_cpu = (measured_cpu.0 + used.0, measured_cpu.1 + used.1);
                measure_from.get_or_insert(start_ms);
                measure_to = end_ms;
                measured_gauges = (p.in_flight, p.active);
            }
            total.merge(&p.counters);
            if phase != Phase::Warmup {
                late_offered += p.counters.offered;
                late_sent += p.counters.sent;
            }
            total_cpu = (total_cpu.0 + used.0, total_cpu.1 + used.1);
            last_gauges = (p.in_flight, p.active);
            emitted_end_ms = end_ms;
            next_emit += 1;
        }
        if (closed || last_index.iter().all(Option::is_some)) && pending.is_empty() {
            break;
        }
        let abort_sleep = tokio::time::sleep_until(abort_at.unwrap_or_else(|| instant(u64::MAX / 4_000_000)));
        let give_up = tokio::time::sleep_until(give_up_at.unwrap_or_else(|| instant(u64::MAX / 4_000_000)));
        tokio::select! {
            r = reports.recv() => match r {
                Some(r) => {
                    let p = pending
                        .entry(r.index)
                        .or_insert_with(|| Pending { classes: vec![Part::default(); run.classes.len()], reports: 0, end_ms: 0 });
                    p.classes[r.class].add(&r);
                    p.reports += 1;
                    p.end_ms = p.end_ms.max(r.end_ms);
                    if r.last {
                        last_index[r.thread] = Some(r.index);
                    }
                }
                // Every thread is gone: emit what they reported, then stop.
                None => closed = true,
            },
            _ = tokio::time::sleep_until(drain_at), if *stop.borrow() == Stop::Running => {
                let _ = stop.send(Stop::Drain);
                abort_at = Some(tokio::time::Instant::now() + Duration::from_nanos(run.timeout_ns()) + Duration::from_secs(2));
            }
            _ = abort_sleep, if abort_at.is_some() && *stop.borrow() == Stop::Drain => {
                // Safety net: threads that still have not drained are stopped.
                let _ = stop.send(Stop::Abort);
                give_up_at = Some(tokio::time::Instant::now() + Duration::from_secs(2));
            }
            _ = give_up, if give_up_at.is_some() => {
                abandoned = true;
                closed = true;
            }
            _ = signal(&mut sigint, &mut sigterm) => {
                if *stop.borrow() == Stop::Running {
                    interrupted = true;
                    drain_at = tokio::time::Instant::now();
                    let _ = stop.send(Stop::Drain);
                    abort_at = Some(tokio::time::Instant::now() + Duration::from_nanos(run.timeout_ns()) + Duration::from_secs(2));
                } else {
                    aborted = true;
                    let _ = stop.send(Stop::Abort);
                    give_up_at.get_or_insert(tokio::time::Instant::now() + Duration::from_secs(2));
                }
            }
        }
    }
    if progress {
        eprintln!();
    }
    let measure_from = measure_from.unwrap_or(cfg.warmup_ms);
    let seconds = measure_to.saturating_sub(measure_from) as f64 / 1000.0;
    let measured =
        Totals::new(&measured, measured_gauges.0, measured_gauges.1, measured_cpu.0, measured_cpu.1, seconds);
    let wall = emitted_end_ms as f64 / 1000.0;
    let total_t = Totals::new(&total, last_gauges.0, last_gauges.1, total_cpu.0, total_cpu.1, wall);
    let accounting = Accounting {
        offered: total.offered,
        answered: total.answered,
        timed_out: total.timed_out,
        failed: total.failed_total(),
        aborted: total.aborted,
        balanced: total.offered == total.resolved(),
    };
    // Threads pinned to fewer CPUs (a population's classes) share them.
    let cores = if cfg.cpus.is_empty() { threads } else { threads.min(cfg.cpus.len()) };
    let busy =
        (measured.engine.cpu_user_us + measured.engine.cpu_system_us) as f64 / (seconds.max(1e-3) * 1e6 * cores as f64);
    // Queries due in the measured period but found unsent only when sending stopped are
    // counted in the drain, so the drain counts too (the warm-up does not: queries held at the
    // open-first gate are not the measured load).
    let kept_up = measured.queries.sent as f64 >= 0.99 * measured.queries.offered as f64
        && late_sent as f64 >= 0.99 * late_offered as f64
        && busy < 0.95;
    let answered_qps =
        if seconds > 0.0 { (measured.queries.answered as f64 / seconds * 10.0).round() / 10.0 } else { 0.0 };
    let nothing_answered = (total.answered == 0 && (total.offered > 0 || total.conn_failed.iter().sum::<u64>() > 0))
        .then(|| why_nothing_answered(run, &total));
    let interrupt_note = interrupted.then(|| {
        format!(
            "interrupted: sending stopped at {:.1} s; {} queries aborted{}",
            start.elapsed().as_secs_f64().min(emitted_end_ms as f64 / 1000.0),
            total.aborted,
            if aborted { " (second signal)" } else { "" }
        )
    });
    let out_of_files = out_of_files(run.connections(), &total);
    if !quiet {
        eprintln!("{}", human_summary(&measured, answered_qps, &accounting, kept_up, busy));
        if let Some(each) = memory.rss_per_connection_bytes {
            eprintln!(
                "engine memory: {:.1} MiB resident with {} connections open, {:.1} KiB each above the {:.1} MiB it started with",
                memory.rss_bytes as f64 / 1048576.0,
                memory.connections,
                each as f64 / 1024.0,
                memory.rss_start_bytes as f64 / 1048576.0
            );
        }
        if let Some(note) = &interrupt_note {
            eprintln!("{note}");
        }
        if let Some(why) = &nothing_answered {
            eprintln!("{why}");
        }
        if let Some(why) = &out_of_files {
            eprintln!("{why}");
        }
    }
    let classes: Vec<ClassSummary> = run
        .classes
        .iter()
        .zip(&sums)
        .map(|((name, s), sum)| {
            let measured = sum.measured.totals(seconds);
            let answered_qps =
                if seconds > 0.0 { (measured.queries.answered as f64 / seconds * 10.0).round() / 10.0 } else { 0.0 };
            let c = &sum.total.counters;
            ClassSummary {
                name: name.clone().unwrap_or_default(),
                transport: s.config.transport.to_string(),
                answered_qps,
                measured,
                total: sum.total.totals(wall),
                accounting: Accounting {
                    offered: c.offered,
                    answered: c.answered,
                    timed_out: c.timed_out,
                    failed: c.failed_total(),
                    aborted: c.aborted,
                    balanced: c.offered == c.resolved(),
                },
            }
        })
        .collect();
    if !quiet {
        for c in &classes {
            let q = &c.measured.queries;
            eprintln!(
                "class {} ({}): answered {} of {} sent ({:.1} qps), p50 {} p99 {}, connections opened {}, handshakes full {} resumed {}",
                c.name,
                c.transport,
                q.answered,
                q.sent,
                c.answered_qps,
                ms(c.measured.latency.p50_us),
                ms(c.measured.latency.p99_us),
                c.measured.connections.opened,
                c.measured.handshakes.full,
                c.measured.handshakes.resumed,
            );
        }
    }
    out.write(&Record::Summary(SummaryRecord {
        measure_start_ms: measure_from,
        measure_end_ms: measure_to,
        opened_ms: run.opened_ns().map(|ns| ns / 1_000_000),
        interrupted,
        aborted,
        answered_qps,
        generator_kept_up: kept_up,
        measured,
        total: total_t,
        accounting,
        classes,
        memory,
    }))?;
    Ok(Outcome { interrupted, aborted, abandoned, nothing_answered, interrupt_note, out_of_files })
}

/// When sockets could not be opened for want of file descriptors (EMFILE, ENFILE): how many,
/// the open-files limit the engine ran with, and the two ways out. A run short of its
/// connections measured the generator's limit, not the target.
fn out_of_files(connections: u64, total: &Counters) -> Option<String> {
    use dnscost_stats::ErrorKind;
    let n = total.conn_failed[ErrorKind::OpenFiles as usize] + total.failed[ErrorKind::OpenFiles as usize];
    if n == 0 {
        return None;
    }
    let show = |v: Option<u64>| v.map_or("unlimited".to_string(), |v| v.to_string());
    let limit = match dnscost_transport::socket::open_files_limit() {
        Ok((soft, hard)) => format!("open-files limit {} (hard {})", show(soft), show(hard)),
        Err(_) => "open-files limit unknown".into(),
    };
    // One line of at most 200 characters, as dnscost quotes it.
    Some(format!(
        "{n} connection attempts failed (open_files): no file descriptor left for {connections} connections: {limit}; \
         raise ulimit -n or use several engines (--cluster netns:N)"
    ))
}

/// The most frequent reason queries went unanswered, with an example message: the line a user
/// needs when a run answered nothing (e.g. a wrong CA, a closed port, a mute server).
fn why_nothing_answered(run: &Run, total: &Counters) -> String {
    use dnscost_stats::ErrorKind;
    let mut worst: (u64, String) = (0, "no query was answered".into());
    for (kind, &n) in ErrorKind::ALL.iter().zip(&total.conn_failed) {
        if n > worst.0 {
            let example = run.error_example(kind.as_str()).map(|e| format!(": {e}")).unwrap_or_default();
            worst = (n, format!("{n} connection attempts failed ({}){example}", kind.as_str()));
        }
    }
    for (kind, &n) in ErrorKind::ALL.iter().zip(&total.failed) {
        // Unsent queries are a consequence; the connection failures above are the cause, and
        // so are queries sent that timed out (they held the places the unsent ones waited for).
        if n > worst.0 && (*kind != ErrorKind::Unsent || (worst.0 == 0 && total.timed_out == 0)) {
            let example = match kind {
                ErrorKind::Rejected => Some(refusals(total)),
                _ => run.error_example(kind.as_str()),
            };
            let example = example.map(|e| format!(": {e}")).unwrap_or_default();
            worst = (n, format!("{n} queries failed ({}){example}", kind.as_str()));
        }
    }
    if total.timed_out > worst.0 {
        // A server that does not read PROXY v2 headers takes one for a query: what it replies
        // (to the header's bytes) matches no query sent.
        let proxied = run.classes.iter().any(|(_, s)| s.proxy.is_some());
        let junk = if total.unmatched > 0 && !proxied {
            format!(" ({} replies matched no query)", total.unmatched)
        } else {
            String::new()
        };
        let limit = "QUIC MAX_STREAMS, HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS";
        let why = if total.unmatched > 0 && proxied {
            format!(
                "the target's {} replies matched no query: does it read the PROXY v2 headers sent (proxy_v2)?",
                total.unmatched
            )
        } else if total.answered == 0 && total.stream_waits >= total.timed_out {
            format!("the target allowed no stream for them ({limit})")
        } else if total.stream_waits > 0 {
            format!(
                "the target did not answer ({} queries waited for it to allow a stream: {limit})",
                total.stream_waits
            )
        } else {
            "the target did not answer".into()
        };
        worst = (total.timed_out, format!("{} queries timed out: {why}{junk}", total.timed_out));
    }
    if worst.0 == 0 && total.offered == 0 {
        return "no query was answered: none was sent".into();
    }
    format!("no query was answered: {}", worst.1)
}

/// How the target refused queries unprocessed: the connections it ended (GOAWAY, or a close in
/// order with queries outstanding), else its refused streams.
fn refusals(total: &Counters) -> String {
    use dnscost_stats::Close;
    let count = |c: Close| total.conn_closed[c as usize];
    let ends: Vec<String> = [
        (Close::Goaway, "GOAWAY"),
        (Close::Fin, "FIN"),
        (Close::CloseNotify, "close_notify"),
        (Close::ConnectionClose, "CONNECTION_CLOSE"),
    ]
    .into_iter()
    .filter(|&(c, _)| count(c) > 0)
    .map(|(c, name)| format!("{name} on {} connections", count(c)))
    .collect();
    let established = total.conn_established;
    if ends.is_empty() {
        return "the target refused their streams unprocessed (REFUSED_STREAM, H3_REQUEST_REJECTED) until their \
                timeout"
            .into();
    }
    format!(
        "the target refused them unprocessed until their timeout: it closed its connections before answering \
         ({} of {established} established)",
        ends.join(", ")
    )
}

async fn signal(a: &mut tokio::signal::unix::Signal, b: &mut tokio::signal::unix::Signal) {
    tokio::select! {
        _ = a.recv() => {}
        _ = b.recv() => {}
    }
}

fn ms(us: u64) -> String {
    format!("{:.2}ms", us as f64 / 1000.0)
}

fn progress_line(t: &Totals, phase: Phase, end_ms: u64, measure_end: u64, seconds: f64) -> String {
    format!(
        "[{:>5.1}s/{:.0}s {:?}] sent {:>8.0}/s answered {:>8.0}/s p50 {} p99 {} conns {} opened {} in flight {}   ",
        end_ms as f64 / 1000.0,
        measure_end as f64 / 1000.0,
        phase,
        t.engine.sent_qps,
        t.queries.answered as f64 / seconds.max(1e-3),
        ms(t.latency.p50_us),
        ms(t.latency.p99_us),
        t.connections.active,
        t.connections.opened,
        t.queries.in_flight,
    )
}

fn human_summary(m: &Totals, qps: f64, a: &Accounting, kept_up: bool, busy: f64) -> String {
    let q = &m.queries;
    let cpu_per_query = (m.engine.cpu_user_us + m.engine.cpu_system_us) as f64 / q.answered.max(1) as f64;
    format!(
        "answered {} of {} sent ({:.1} qps) of {} offered, timed out {}, failed {} {:?}{}\n\
         latency p50 {} p90 {} p99 {} max {}; set-up p50 {} p99 {}\n\
         connections opened {} established {}, handshakes full {} resumed {}, closed by client {:?} by server {:?}\n\
         generator {:.2} CPU-µs per answer, {:.0} % busy, kept up: {}; accounting balanced: {}",
        q.answered,
        q.sent,
        qps,
        q.offered,
        q.timed_out,
        q.failed_total,
        q.failed,
        if q.aborted > 0 { format!(", aborted {}", q.aborted) } else { String::new() },
        ms(m.latency.p50_us),
        ms(m.latency.p90_us),
        ms(m.latency.p99_us),
        ms(m.latency.max_us),
        ms(m.setup_latency.p50_us),
        ms(m.setup_latency.p99_us),
        m.connections.opened,
        m.connections.established,
        m.handshakes.full,
        m.handshakes.resumed,
        m.connections.closed_by_client,
        m.connections.closed_by_server,
        cpu_per_query,
        busy * 100.0,
        kept_up,
        a.balanced,
    )
}
