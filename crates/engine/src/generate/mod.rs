//! `dnscost-engine generate`: the load generator.
//!
//! The configuration (a JSON file and/or flags) is resolved once into a [`ctx::Setup`]. Each
//! thread runs its own single-threaded runtime, pinned, with its share of the connection slots
//! and of the rate, and counts into its own counters. At every interval boundary each thread
//! hands its counts to the main thread, which merges them and writes one `interval` record;
//! the main thread also owns the phases (warm-up, measure, drain), the signals and the summary.

mod carrier;
mod ctx;
mod doh;
mod events;
mod h3conn;
mod output;
mod quic;
mod session;
mod slot;
mod tcp;
#[allow(unsafe_code)]
mod timer;
mod udp;
mod window;

use crate::EngineError;
use ctx::{Connectors, Ctx, Schedule, Setup, Stop};
use dnscost_load::{
    parse_cpus, parse_duration_ms, parse_lifetime, parse_udp_retry, EngineConfig, Pacer, QuerySet, Rate, Rng, TlsGroup,
    TlsVersion, TokenBucket, Transport,
};
use dnscost_stats::Counters;
use dnscost_transport::tls;
use dnscost_wire::QueryOptions;
use serde::de::DeserializeOwned;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;

fn token<T: DeserializeOwned>(s: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string())).map_err(|e| e.to_string())
}

/// Flags override the fields of `--config`; both end up in one validated configuration.
#[derive(clap::Args, Debug, Default)]
pub struct GenerateArgs {
    /// JSON engine configuration (see `dnscost-engine schema`); flags override its fields.
    #[arg(long)]
    config: Option<PathBuf>,
    /// A client profile (JSON, see `dnscost-engine schema`; `dnscost observe` writes them):
    /// replays --clients such clients (connections, rate, idle timeout, lifetime, close),
    /// over --config; flags override it.
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// How many clients the profile stands for (--profile's, or the one in --config; default 1).
    #[arg(long, value_name = "N")]
    clients: Option<u32>,
    /// udp, tcp, dot, doh, doq or doh3.
    #[arg(long, value_parser = token::<Transport>)]
    transport: Option<Transport>,
    /// Target address:port.
    #[arg(long)]
    target: Option<String>,
    /// DoH request method: post or get.
    #[arg(long, value_parser = token::<dnscost_load::DohMethod>)]
    doh_method: Option<dnscost_load::DohMethod>,
    /// DoH request path.
    #[arg(long)]
    doh_path: Option<String>,
    /// DoH request header fields: minimal or browser.
    #[arg(long, value_parser = token::<dnscost_load::DohHeaders>)]
    doh_headers: Option<dnscost_load::DohHeaders>,
    /// PEM file of the CA that signed the target's certificate.
    #[arg(long)]
    ca: Option<PathBuf>,
    /// Accept any certificate.
    #[arg(long)]
    insecure: bool,
    /// Server name to send and verify.
    #[arg(long)]
    sni: Option<String>,
    /// TLS version: 1.2 or 1.3.
    #[arg(long, value_parser = token::<TlsVersion>)]
    tls_version: Option<TlsVersion>,
    /// Key-exchange group: x25519, secp256r1, secp384r1 or x25519mlkem768.
    #[arg(long, value_parser = token::<TlsGroup>)]
    tls_group: Option<TlsGroup>,
    /// Write TLS secrets in NSS key-log format to this file.
    #[arg(long)]
    keylog: Option<PathBuf>,
    /// Concurrent connections (udp: sockets).
    #[arg(long)]
    connections: Option<u32>,
    /// forever, a duration (30s), a query count (100q) or both (30s,100q).
    #[arg(long, value_parser = parse_lifetime)]
    lifetime: Option<dnscost_load::Lifetime>,
    /// Close a connection left without outstanding queries this long (e.g. 10s).
    #[arg(long, value_parser = parse_duration_ms)]
    idle_timeout: Option<u64>,
    /// Ceiling on new connections per second.
    #[arg(long)]
    open_rate: Option<f64>,
    /// Open every first connection before sending any query (until the warm-up ends at most).
    #[arg(long)]
    open_first: bool,
    /// Share of reconnections that resume the TLS session (0 to 1).
    #[arg(long)]
    resumption: Option<f64>,
    /// doq: share of resumed connections that send their first queries as 0-RTT data (0 to 1).
    #[arg(long)]
    early_data: Option<f64>,
    /// Outstanding queries per connection.
    #[arg(long)]
    in_flight: Option<u32>,
    /// How the client closes: graceful, fin or rst; doq: graceful (CONNECTION_CLOSE) or silent
    /// (the idle timeout).
    #[arg(long, value_parser = token::<dnscost_load::CloseMode>)]
    close: Option<dnscost_load::CloseMode>,
    /// Queries per second (open loop), max (closed loop), or once (one query per connection).
    #[arg(long, value_parser = parse_rate)]
    rate: Option<Rate>,
    /// Pacing resolution in µs (10 to 10000; default 50 up to 2000 qps per thread, else 1000).
    #[arg(long)]
    pacing_resolution_us: Option<u32>,
    /// Arrival process of the open loop: constant or poisson.
    #[arg(long, value_parser = token::<dnscost_load::Arrival>)]
    arrival: Option<dnscost_load::Arrival>,
    /// Measured duration (e.g. 10s).
    #[arg(long, value_parser = parse_duration_ms)]
    duration: Option<u64>,
    /// Load before the measured period.
    #[arg(long, value_parser = parse_duration_ms)]
    warmup: Option<u64>,
    /// Query timeout, counted from the intended send time (with --udp-retry: its attempts ×
    /// its timeout instead).
    #[arg(long, value_parser = parse_duration_ms)]
    timeout: Option<u64>,
    /// udp: send a query unanswered TIMEOUT after its last send again (same ID, same octets),
    /// ATTEMPTS sends in all, as a stub resolver does (e.g. 5s,2 or 500ms,3; TIMEOUT 1 ms to
    /// 60 s, ATTEMPTS 1 to 10), or glibc (5s,2: glibc's defaults, resolv.conf timeout:5
    /// attempts:2, one nameserver). The query's timeout becomes ATTEMPTS × TIMEOUT from its
    /// intended time, replacing --timeout (the start record shows it). Default: never.
    #[arg(long, value_parser = parse_udp_retry, value_name = "TIMEOUT,ATTEMPTS|glibc")]
    udp_retry: Option<dnscost_load::UdpRetry>,
    /// Query file in dnsperf's format (name type per line).
    #[arg(long)]
    queries: Option<PathBuf>,
    /// Number of synthetic names of equal length under --tld.
    #[arg(long)]
    synthetic: Option<u64>,
    #[arg(long)]
    tld: Option<String>,
    /// Record type of synthetic queries.
    #[arg(long)]
    qtype: Option<String>,
    /// EDNS(0) UDP payload size; 0 for no EDNS.
    #[arg(long)]
    edns_size: Option<u16>,
    /// Set the DNSSEC OK bit.
    #[arg(long)]
    dnssec_ok: bool,
    /// Pad queries to 128-octet blocks (RFC 8467).
    #[arg(long)]
    padding: bool,
    /// Clear the RD bit.
    #[arg(long)]
    no_recursion: bool,
    /// Generator threads.
    #[arg(long)]
    threads: Option<u32>,
    /// CPUs to pin the threads to (e.g. 1 or 2-3).
    #[arg(long)]
    cpus: Option<String>,
    /// Local addresses to spread connections over (comma-separated).
    #[arg(long, value_delimiter = ',')]
    source: Option<Vec<String>>,
    /// Send a PROXY protocol v2 header claiming clients of this network (10.0.0.0/16): one
    /// address per socket or connection slot.
    #[arg(long, value_name = "NETWORK")]
    proxy_v2: Option<String>,
    /// An EDNS Client Subnet option in every query, for this network (e.g. 198.51.100.0/24).
    #[arg(long, value_name = "NETWORK")]
    client_subnet: Option<String>,
    /// A DNS cookie option in every query, in hexadecimal: a client cookie (16 digits), or a
    /// client cookie and the server's (32 to 80).
    #[arg(long, value_name = "HEX")]
    cookie: Option<String>,
    #[arg(long)]
    seed: Option<u64>,
    /// JSON-lines output file (default: standard output).
    #[arg(long)]
    output: Option<PathBuf>,
    /// One JSON line per closed connection.
    #[arg(long)]
    connections_log: Option<PathBuf>,
    /// Print nothing on standard error but errors.
    #[arg(long)]
    quiet: bool,
    /// Validate the configuration and exit: nothing is resolved, opened or sent.
    #[arg(long)]
    check: bool,
}

fn parse_rate(s: &str) -> Result<Rate, String> {
    match s {
        "max" => return Ok(Rate::Max),
        "once" => return Ok(Rate::Once),
        _ => {}
    }
    s.parse::<f64>()
        .map(Rate::Qps)
        .map_err(|_| format!("{s:?} is neither max, once nor a number of queries per second"))
}

impl GenerateArgs {
    /// The configuration: `--config` (or the defaults), then every flag given.
    pub fn resolve(self) -> Result<EngineConfig, EngineError> {
        let mut c = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| EngineError::file(path, e))?;
                serde_json::from_str(&text).map_err(|e| EngineError::file(path, e))?
            }
            None => EngineConfig::default(),
        };
        if let Some(path) = &self.profile {
            let text = std::fs::read_to_string(path).map_err(|e| EngineError::file(path, e))?;
            c.profile = Some(serde_json::from_str(&text).map_err(|e| EngineError::file(path, e))?);
        }
        if self.clients.is_some() {
            c.clients = self.clients;
        }
        c.apply_profile()?;
        macro_rules! set {
            ($($field:ident <- $arg:expr),* $(,)?) => { $( if let Some(v) = $arg { c.$field = v; } )* };
        }
        macro_rules! set_some {
            ($($field:ident <- $arg:expr),* $(,)?) => { $( if let Some(v) = $arg { c.$field = Some(v); } )* };
        }
        set!(transport <- self.transport, target <- self.target, tls_version <- self.tls_version,
             tls_group <- self.tls_group, connections <- self.connections, lifetime <- self.lifetime,
             in_flight <- self.in_flight, rate <- self.rate, arrival <- self.arrival,
             duration_ms <- self.duration, warmup_ms <- self.warmup, timeout_ms <- self.timeout,
             tld <- self.tld, qtype <- self.qtype, edns_udp_size <- self.edns_size, threads <- self.threads,
             sources <- self.source, seed <- self.seed);
        set_some!(doh_method <- self.doh_method, doh_path <- self.doh_path, doh_headers <- self.doh_headers,
                  ca_file <- self.ca,
                  sni <- self.sni, keylog_file <- self.keylog, idle_timeout_ms <- self.idle_timeout,
                  open_rate <- self.open_rate, resumption <- self.resumption, early_data <- self.early_data,
                  close <- self.close, udp_retry <- self.udp_retry, proxy_v2 <- self.proxy_v2,
                  client_subnet <- self.client_subnet, cookie <- self.cookie,
                  queries_file <- self.queries, pacing_resolution_us <- self.pacing_resolution_us, synthetic <- self.synthetic, output <- self.output,
                  connections_log <- self.connections_log);
        if let Some(list) = &self.cpus {
            c.cpus = parse_cpus(list)
                .map_err(|reason| EngineError::Config(dnscost_load::ConfigError::Invalid { field: "cpus", reason }))?;
        }
        c.insecure |= self.insecure;
        c.open_first |= self.open_first;
        c.dnssec_ok |= self.dnssec_ok;
        c.padding |= self.padding;
        c.recursion_desired &= !self.no_recursion;
        c.validate()?;
        Ok(c)
    }
}

/// Every CPU to pin to must be one this process may run on: pinning is part of the
/// measurement, so a run must not go on unpinned.
pub fn check_cpus(cpus: &[u32]) -> Result<(), EngineError> {
    if cpus.is_empty() {
        return Ok(());
    }
    let allowed = dnscost_transport::socket::allowed_cpus()?;
    match cpus.iter().find(|c| !allowed.contains(c)) {
        Some(cpu) => Err(EngineError::Config(dnscost_load::ConfigError::Invalid {
            field: "cpus",
            reason: format!("CPU {cpu} does not exist or is not available to this process (available: {allowed:?})"),
        })),
        None => Ok(()),
    }
}

/// Resolves names and files once, before any thread starts.
fn setup(mut config: EngineConfig) -> Result<Setup, EngineError> {
    // Resolved once and recorded: the start record shows the values used.
    config.pacing_resolution_us = Some(config.pacing_resolution_us());
    config.timeout_ms = config.query_timeout_ms();
    let target: SocketAddr = config
        .target
        .to_socket_addrs()
        .map_err(|e| EngineError::Address(format!("target {}: {e}", config.target)))?
        .next()
        .ok_or_else(|| EngineError::Address(format!("target {}: no address", config.target)))?;
    let opts = QueryOptions {
        recursion_desired: config.recursion_desired,
        edns_udp_size: (config.edns_udp_size != 0).then_some(config.edns_udp_size),
        dnssec_ok: config.dnssec_ok,
        padding: config.padding,
        client_subnet: config
            .client_subnet
            .as_deref()
            .map(|n| dnscost_load::ClientNetwork::parse(n).expect("validated").client_subnet()),
        cookie: config.cookie.as_deref().map(|c| dnscost_load::parse_cookie(c).expect("validated")),
    };
    let queries = match &config.queries_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| EngineError::file(path, e))?;
            let set =
                QuerySet::parse(&text, &opts).map_err(|error| EngineError::Queries { path: path.clone(), error })?;
            if set.is_empty() {
                return Err(EngineError::file(path, "no queries in the file"));
            }
            set
        }
        None => {
            let qtype = dnscost_wire::type_from_str(&config.qtype).expect("validated");
            QuerySet::synthetic(config.synthetic_count(), &config.tld, qtype, &opts)
                .map_err(|e| EngineError::Address(format!("synthetic names: {e}")))?
        }
    };
    let sources: Vec<IpAddr> = config.sources.iter().map(|s| s.parse().expect("validated")).collect();
    let proxy = match &config.proxy_v2 {
        Some(network) => {
            let net = dnscost_load::ClientNetwork::parse(network).expect("validated");
            if net.is_ipv4() != target.is_ipv4() {
                return Err(EngineError::Address(format!(
                    "proxy_v2: {network} is not of the target's address family ({target})"
                )));
            }
            Some(net)
        }
        None => None,
    };
    let (tls, server_name) = if config.transport.uses_tls() {
        let options = tls::ClientOptions {
            version: config.tls_version,
            group: config.tls_group,
            trust: match &config.ca_file {
                Some(path) => tls::Trust::CaFile(path.clone()),
                None if config.insecure => tls::Trust::Insecure,
                None => {
                    return Err(EngineError::Config(dnscost_load::ConfigError::Invalid {
                        field: "ca_file",
                        reason: "TLS needs --ca FILE or --insecure".into(),
                    }))
                }
            },
            keylog: config.keylog_file.clone(),
            alpn: vec![match config.transport {
                Transport::Doh => b"h2".to_vec(),
                Transport::Doq => dnscost_transport::quic::DOQ_ALPN.to_vec(),
                Transport::Doh3 => b"h3".to_vec(),
                _ => b"dot".to_vec(),
            }],
        };
        // Fail now, with the file's name, rather than in every connection.
        let fresh = tls::client_config(&options, false, 0)?;
        if config.transport.uses_quic() {
            dnscost_transport::quic::client_config(fresh)?;
        }
        (Some(options), Some(tls::server_name(config.sni.as_deref(), target.ip())?))
    } else {
        (None, None)
    };
    let authority = match (&config.sni, target) {
        (Some(name), t) => format!("{name}:{}", t.port()),
        (None, t) => t.to_string(),
    };
    let doh = if config.transport == Transport::Doh {
        use dnscost_wire::http2::{Headers, RequestTemplate};
        // Resolved once and recorded: the start record shows the header fields sent.
        let choice = *config.doh_headers.get_or_insert_default();
        let headers = match choice {
            dnscost_load::DohHeaders::Minimal => Headers::Minimal,
            dnscost_load::DohHeaders::Browser => Headers::Browser,
        };
        let path = config.doh_path();
        let uri = format!("https://{authority}{path}");
        uri.parse::<http::Uri>().map_err(|e| EngineError::Address(format!("DoH URI {uri}: {e}")))?;
        match config.doh_method.unwrap_or_default() {
            dnscost_load::DohMethod::Post => vec![RequestTemplate::post(headers, &authority, path)],
            dnscost_load::DohMethod::Get => (0..queries.len() as u64)
                .map(|i| {
                    let query = dnscost_wire::base64url(queries.get(i).bytes());
                    RequestTemplate::get(headers, &authority, &format!("{path}?dns={query}"))
                })
                .collect(),
        }
    } else {
        Vec::new()
    };
    let doh3 = (config.transport == Transport::Doh3)
        .then(|| format!("https://{authority}{}", config.doh_path()).parse::<http::Uri>())
        .transpose()
        .map_err(|e| EngineError::Address(format!("DoH URI: {e}")))?
        .map(|uri| quic::H3Target { uri, get: config.doh_method == Some(dnscost_load::DohMethod::Get) });
    let timeout_ns = config.timeout_ms * 1_000_000;
    let gate =
        (config.open_first && config.transport.has_connections()).then(|| ctx::Gate::new(config.connections as u64));
    let order = config_order(&config);
    Ok(Setup {
        config,
        target,
        queries,
        sources,
        proxy,
        tls,
        quic_server_name: server_name.as_ref().map(|n| n.to_str().into_owned()),
        server_name,
        doh,
        doh3,
        start: std::time::Instant::now(),
        timeout_ns,
        gate,
        errors: Default::default(),
        order,
    })
}

/// A queries file's one order (see [`Setup::order`]).
fn config_order(config: &EngineConfig) -> Option<Arc<std::sync::atomic::AtomicU64>> {
    config.queries_file.as_ref().map(|_| Arc::new(std::sync::atomic::AtomicU64::new(0)))
}

/// Interval boundaries: every second, plus the ends of warm-up and of the measured period.
pub fn next_boundary(after_ms: u64, warmup_ms: u64, duration_ms: u64) -> u64 {
    let mut b = (after_ms / 1000 + 1) * 1000;
    for edge in [warmup_ms, warmup_ms + duration_ms] {
        if edge > after_ms {
            b = b.min(edge);
        }
    }
    b
}

/// What a thread hands the main thread at an interval boundary.
pub struct Report {
    /// The thread's index in the run (over every class).
    pub thread: usize,
    /// Its class's index in [`Run::classes`].
    pub class: usize,
    pub index: u32,
    pub end_ms: u64,
    pub counters: Counters,
    pub in_flight: u64,
    pub active: u64,
    /// The thread's own CPU time since its previous report: (user, system) µs.
    pub cpu_us: (u64, u64),
    /// The thread has finished; no report follows.
    pub last: bool,
}

/// What runs: one class (the configuration itself) or a population's classes, each set up,
/// all started at one instant and sharing the run's phases.
pub struct Run {
    /// The configuration as given (with a population's classes).
    pub config: EngineConfig,
    /// Each class's name (none for a run of one class) and its set-up.
    pub classes: Vec<(Option<String>, Arc<Setup>)>,
}

impl Run {
    fn new(config: EngineConfig, classes: Vec<(String, EngineConfig)>) -> Result<Self, EngineError> {
        if classes.is_empty() {
            let one = Arc::new(setup(config.clone())?);
            let config = one.config.clone();
            return Ok(Run { config, classes: vec![(None, one)] });
        }
        let mut set = Vec::with_capacity(classes.len());
        for (name, c) in classes {
            set.push((Some(name), setup(c)?));
        }
        let start = std::time::Instant::now();
        // Classes asking from one file take their queries from one order.
        let mut orders = std::collections::HashMap::new();
        let classes = set
            .into_iter()
            .map(|(name, mut s)| {
                if let Some(path) = s.config.queries_file.clone() {
                    s.order =
                        Some(orders.entry(path).or_insert_with(|| config_order(&s.config).expect("a file")).clone());
                }
                s.start = start;
                (name, Arc::new(s))
            })
            .collect();
        Ok(Run { config, classes })
    }

    /// When the run started (every class's clock).
    pub fn start(&self) -> std::time::Instant {
        self.classes[0].1.start
    }

    /// Generator threads over every class.
    pub fn threads(&self) -> usize {
        self.classes.iter().map(|(_, s)| s.config.threads as usize).sum()
    }

    /// The longest query timeout of any class: the drain waits this long.
    pub fn timeout_ns(&self) -> u64 {
        self.classes.iter().map(|(_, s)| s.timeout_ns).max().unwrap_or(0)
    }

    /// Connection slots over every class.
    pub fn connections(&self) -> u64 {
        self.classes.iter().map(|(_, s)| u64::from(s.config.connections)).sum()
    }

    /// With `open_first`: when every class's slots had all settled their first connection.
    pub fn opened_ns(&self) -> Option<u64> {
        let gates: Vec<_> = self.classes.iter().filter_map(|(_, s)| s.gate.as_ref()).collect();
        if gates.is_empty() {
            return None;
        }
        gates.iter().map(|g| g.opened()).collect::<Option<Vec<u64>>>().and_then(|v| v.into_iter().max())
    }

    /// The first example message of `kind` any class saw.
    pub fn error_example(&self, kind: &str) -> Option<String> {
        self.classes.iter().find_map(|(_, s)| s.error_example(kind))
    }
}

pub fn main(args: GenerateArgs) -> Result<ExitCode, EngineError> {
    let quiet = args.quiet;
    let check = args.check;
    let config = args.resolve()?;
    check_cpus(&config.cpus)?;
    let classes = config.resolve_classes()?;
    if check {
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = output::Output::open(&config)?;
    let log_thread = output::connections_log(&config)?;
    let run = Run::new(config, classes)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(Stop::Running);
    let (report_tx, report_rx) = tokio::sync::mpsc::unbounded_channel::<Report>();
    // Every thread's TLS configurations, made before any starts (a bad CA fails here).
    let mut threads = Vec::with_capacity(run.threads());
    for (c, (_, setup)) in run.classes.iter().enumerate() {
        let n = setup.config.threads as usize;
        for t in 0..n {
            let tls = match &setup.tls {
                Some(o) => Some((tls::client_config(o, true, TICKETS_PER_CLIENT)?, tls::client_config(o, false, 0)?)),
                None => None,
            };
            threads.push((c, t, setup.clone(), tls));
        }
    }
    out.start(&run)?;
    let memory = dnscost_stats::EngineMemory::starting(dnscost_transport::socket::resident_bytes());
    let mut handles = Vec::with_capacity(threads.len());
    for (g, (class, t, setup, tls_configs)) in threads.into_iter().enumerate() {
        let stop = stop_rx.clone();
        let reports = report_tx.clone();
        let log = log_thread.as_ref().map(|(tx, _)| tx.clone());
        let place = Place { thread: g, class, local: t };
        let handle = std::thread::Builder::new()
            .name(format!("gen-{g}"))
            .spawn(move || worker(place, setup, stop, reports, log, tls_configs))
            .map_err(EngineError::Io)?;
        handles.push(handle);
    }
    drop(report_tx);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = runtime.block_on(output::collect(&run, &mut out, report_rx, stop_tx, quiet, memory));
    if result.as_ref().is_ok_and(|o| o.abandoned) {
        // Threads that ignored the abort are left to the process exit.
        eprintln!("dnscost-engine: generator threads did not stop after the abort; summary written without them");
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    for h in handles {
        let _ = h.join();
    }
    let log = match log_thread {
        Some((tx, writer)) => {
            drop(tx);
            writer.join().unwrap_or(Ok(()))
        }
        None => Ok(()),
    };
    let outcome = result?;
    log?;
    // The human summary said it already; with --quiet, stderr still says why.
    if quiet {
        if let Some(note) = &outcome.interrupt_note {
            eprintln!("dnscost-engine: {note}");
        }
        if let Some(why) = &outcome.nothing_answered {
            eprintln!("dnscost-engine: {why}");
        }
        if let Some(why) = &outcome.out_of_files {
            eprintln!("dnscost-engine: {why}");
        }
    }
    Ok(if outcome.interrupted || outcome.aborted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else if outcome.out_of_files.is_some() {
        ExitCode::from(EXIT_OUT_OF_FILES)
    } else if outcome.nothing_answered.is_some() {
        ExitCode::from(EXIT_NOTHING_ANSWERED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Where a generator thread stands: its index in the run, its class, and its index in the
/// class (which slots it runs).
#[derive(Clone, Copy)]
struct Place {
    thread: usize,
    class: usize,
    local: usize,
}

/// Exit code of a run stopped by SIGINT or SIGTERM (drained or aborted): 128 + SIGINT.
pub const EXIT_INTERRUPTED: u8 = 130;
/// Exit code of a run that ended normally without a single answer.
pub const EXIT_NOTHING_ANSWERED: u8 = 4;
/// Exit code of a run that could not open all its connections for want of file descriptors
/// (the open-files limit): it measured the engine's limit, not the target.
pub const EXIT_OUT_OF_FILES: u8 = 5;

/// TLS 1.3 tickets a slot (a client) keeps, the newest: the two an OpenSSL or rustls server
/// sends after a full handshake. A slot resumes with its own tickets only.
const TICKETS_PER_CLIENT: usize = 2;

type TlsPair = (Arc<rustls::ClientConfig>, Arc<rustls::ClientConfig>);

/// A thread's client configurations from its TLS pair (with a session store, without).
fn connectors(
    setup: &Setup,
    resume: Arc<rustls::ClientConfig>,
    fresh: Arc<rustls::ClientConfig>,
) -> Result<Connectors, dnscost_transport::TransportError> {
    if !setup.config.transport.uses_quic() {
        return Ok(Connectors::Tls { resume, fresh });
    }
    use dnscost_transport::quic::client_config;
    // The same verifier and store as `resume` (a clone shares them), so tickets serve both.
    let mut early = (*resume).clone();
    early.enable_early_data = true;
    Ok(Connectors::Quic {
        resume: client_config(resume)?,
        fresh: client_config(fresh)?,
        early: client_config(Arc::new(early))?,
    })
}

/// One generator thread: its runtime, its slots, and its reports.
fn worker(
    place: Place,
    setup: Arc<Setup>,
    stop: tokio::sync::watch::Receiver<Stop>,
    reports: tokio::sync::mpsc::UnboundedSender<Report>,
    log: Option<std::sync::mpsc::Sender<dnscost_stats::ConnectionRecord>>,
    tls_configs: Option<TlsPair>,
) {
    let cfg = &setup.config;
    let t = place.local;
    // Pinned by the thread's index in the run, so that a population's classes spread.
    if !cfg.cpus.is_empty() {
        let cpu = cfg.cpus[place.thread % cfg.cpus.len()];
        if let Err(e) = dnscost_transport::socket::pin_thread(cpu) {
            eprintln!("dnscost-engine: cannot pin thread {} to CPU {cpu}: {e}", place.thread);
        }
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("dnscost-engine: thread {}: {e}", place.thread);
            return;
        }
    };
    let threads = cfg.threads as u64;
    let bucket = cfg.open_rate.map(|r| TokenBucket::new(r / threads as f64, (r / threads as f64 / 100.0).max(1.0)));
    // The first random draw seeds aws-lc's generator (its jitter entropy source takes tens of
    // milliseconds): taken here, so that it does not land in the measured window.
    if let Some((resume, _)) = &tls_configs {
        let _ = resume.crypto_provider().secure_random.fill(&mut [0u8; 1]);
    }
    let connectors = match tls_configs.map(|(resume, fresh)| connectors(&setup, resume, fresh)).transpose() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("dnscost-engine: thread {}: {e}", place.thread);
            return;
        }
    };
    let timer = {
        let _runtime = runtime.enter();
        match timer::Timer::new(setup.start, cfg.pacing_resolution_us() as u64 * 1000) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("dnscost-engine: thread {}: timer: {e}", place.thread);
                return;
            }
        }
    };
    let ctx = Rc::new(Ctx::new(setup.clone(), t as u64, threads, stop, bucket, connectors, log, timer.clone()));
    let local = tokio::task::LocalSet::new();
    local.spawn_local(timer.clone().drive());
    // Whoever waits on the timer wakes when the run's state changes, and looks at it: so no
    // task holds a watch of its own (it would size every connection's task).
    local.spawn_local({
        let mut stop = ctx.stop.clone();
        async move {
            while stop.changed().await.is_ok() {
                timer.wake_all();
            }
        }
    });
    local.block_on(&runtime, async move {
        let mut slots = Vec::new();
        let total = cfg.connections as u64;
        for slot in (t as u64..total).step_by(threads as usize) {
            let mut rng = Rng::new(cfg.seed, slot);
            let end_ns = (cfg.warmup_ms + cfg.duration_ms) * 1_000_000;
            let sched = match cfg.rate {
                Rate::Qps(q) => Schedule::new(
                    Some(Pacer::new(cfg.arrival, q, total, slot, 0, Rng::new(cfg.seed ^ 0x5EED, slot))),
                    end_ns,
                ),
                Rate::Max => Schedule::closed(cfg.in_flight as u64, end_ns),
                Rate::Once => Schedule::once(end_ns),
            };
            let sched = if ctx.setup.gate.is_some() { sched.hold() } else { sched };
            let ctx = ctx.clone();
            // Each kind of slot is a task of its own size: a connection slot's task holds what an
            // open connection needs, no more (the engine's memory per connection).
            if ctx.setup.config.transport != Transport::Udp {
                slots.push(tokio::task::spawn_local(slot::run_slot(ctx, sched, slot, rng)));
                continue;
            }
            slots.push(tokio::task::spawn_local(async move {
                let source =
                    (!ctx.setup.sources.is_empty()).then(|| ctx.setup.sources[slot as usize % ctx.setup.sources.len()]);
                match dnscost_transport::socket::udp_connect(ctx.setup.target, source, 4 << 20) {
                    Ok(sock) => {
                        let proxy = ctx.setup.proxy_header(slot, false, sock.local_addr().ok());
                        udp::run_slot(ctx, sched, sock, proxy, rng.next_u64() as u16).await
                    }
                    Err(e) => {
                        let kind = carrier::classify(&e);
                        ctx.counters.borrow_mut().conn_fail(kind);
                        ctx.setup.note_error(kind, &format!("UDP socket: {e}"));
                        eprintln!("dnscost-engine: UDP socket: {e}");
                    }
                }
            }));
        }
        let done = Rc::new(tokio::sync::Notify::new());
        let finished = Rc::new(std::cell::Cell::new(false));
        {
            let (done, finished, ctx) = (done.clone(), finished.clone(), ctx.clone());
            tokio::task::spawn_local(async move {
                for s in slots {
                    let _ = s.await;
                }
                // The last closes are counted (each bounded, and ended by an abort).
                while ctx.lingering.get() > 0 {
                    ctx.lingered.notified().await;
                }
                finished.set(true);
                done.notify_one();
            });
        }
        let (warmup, duration) = (cfg.warmup_ms, cfg.duration_ms);
        let mut index = 0u32;
        let mut from = 0u64;
        let mut cpu_mark = dnscost_transport::socket::thread_cpu_us();
        loop {
            let boundary = next_boundary(from, warmup, duration);
            if !finished.get() {
                tokio::select! {
                    _ = tokio::time::sleep_until(ctx.instant(boundary * 1_000_000)) => {}
                    _ = done.notified() => {}
                }
            }
            let last = finished.get();
            let end_ms = if last { (ctx.now() / 1_000_000).min(boundary) } else { boundary };
            let cpu = dnscost_transport::socket::thread_cpu_us();
            let report = Report {
                thread: place.thread,
                class: place.class,
                index,
                end_ms,
                counters: ctx.counters.borrow_mut().take(),
                in_flight: ctx.in_flight.get(),
                active: ctx.active.get(),
                cpu_us: (cpu.0.saturating_sub(cpu_mark.0), cpu.1.saturating_sub(cpu_mark.1)),
                last,
            };
            cpu_mark = cpu;
            if reports.send(report).is_err() || last {
                break;
            }
            from = boundary;
            index += 1;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_split_phases() {
        let b: Vec<u64> = std::iter::successors(Some(0), |&t| Some(next_boundary(t, 1500, 2000))).take(6).collect();
        assert_eq!(b, vec![0, 1000, 1500, 2000, 3000, 3500]);
        assert_eq!(next_boundary(0, 0, 10_000), 1000);
    }

    #[test]
    fn flags_override_the_config_file() {
        let dir = std::env::temp_dir().join(format!("dnscost-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.json");
        std::fs::write(&file, r#"{"transport":"tcp","target":"127.0.0.1:53","connections":7,"in_flight":3}"#).unwrap();
        let args = GenerateArgs { config: Some(file.clone()), connections: Some(9), ..Default::default() };
        let c = args.resolve().unwrap();
        assert_eq!((c.connections, c.in_flight, c.transport), (9, 3, Transport::Tcp));
        std::fs::write(&file, r#"{"transport":"tcp","target":"127.0.0.1:53","bogus":1}"#).unwrap();
        let e = GenerateArgs { config: Some(file), ..Default::default() }.resolve().unwrap_err();
        assert!(e.to_string().contains("unknown field `bogus`"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn udp_retry_takes_a_timeout_and_attempts_or_glibc() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: GenerateArgs,
        }
        let resolve = |retry: &str| {
            let argv = ["generate", "--transport", "udp", "--target", "127.0.0.1:53", "--udp-retry", retry];
            <Cli as clap::Parser>::try_parse_from(argv)
                .map_err(|e| e.to_string())?
                .args
                .resolve()
                .map_err(|e| e.to_string())
        };
        let glibc = resolve("glibc").unwrap();
        assert_eq!(glibc.udp_retry, Some(dnscost_load::UdpRetry { timeout_ms: 5_000, attempts: 2 }));
        assert_eq!(glibc.query_timeout_ms(), 10_000);
        assert_eq!(
            resolve("500ms,3").unwrap().udp_retry,
            Some(dnscost_load::UdpRetry { timeout_ms: 500, attempts: 3 })
        );
        assert!(resolve("2").unwrap_err().contains("TIMEOUT,ATTEMPTS"));
        assert!(resolve("5s,0").unwrap_err().contains("udp_retry.attempts: 0 is out of range 1..=10"));
    }
}
