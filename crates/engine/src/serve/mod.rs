//! `serve`: a reference DNS responder over udp, tcp, dot, doh, doq and doh3 that logs every
//! connection's life and can enforce server policies (max queries per connection, idle timeout, max age).
//!
//! Answers come from [`zone::Responder`] (pure); each transport has its module ([`udp`],
//! [`stream`] for tcp and dot, [`doh`], [`quic`] for doq and doh3); what every connection shares
//! is beneath them: its [`record`] and the log that writes it, the [`registry`] that ends it at
//! shutdown, the policy's [`deadline`], and an accepted TCP socket's counts and TLS handshake
//! ([`accept`]).

mod accept;
mod deadline;
mod doh;
mod doh3;
mod doq;
mod listen;
mod quic;
mod record;
mod registry;
mod shared;
mod stream;
mod udp;
mod zone;

use crate::EngineError;
use dnscost_load::Transport;
use dnscost_transport::socket;
use listen::ListenUrl;
use record::RecordLog;
use registry::Registry;
use shared::{Policy, Shared};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use zone::{OutsideAnswer, Responder, Synthetic, Zone};

/// Answer DNS over udp, tcp, dot, doh, doq and doh3, logging every connection's life.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Where to listen: udp://ADDR:PORT, tcp://ADDR:PORT, dot://ADDR:PORT,
    /// doh://ADDR:PORT[/path] (default path /dns-query), doq://ADDR:PORT or
    /// doh3://ADDR:PORT[/path]. Port 0 picks a free
    /// port; IPv6 as udp://[::1]:0. Repeatable.
    #[arg(long = "listen", value_name = "URL", required = true)]
    pub listen: Vec<ListenUrl>,
    /// Server certificate chain (PEM) for dot and doh. Without it, a CA and a certificate for
    /// localhost, 127.0.0.1 and ::1 are generated.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// Private key (PEM) of --cert.
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Write the generated CA certificate (PEM) here, for clients to trust.
    #[arg(long, value_name = "FILE", conflicts_with = "cert")]
    pub ca_out: Option<PathBuf>,
    /// Number of synthetic names q<digits>.<tld>. answered (0: none).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub synthetic: u64,
    /// The TLD of the synthetic names.
    #[arg(long, value_name = "NAME", default_value = "test")]
    pub tld: String,
    /// TTL of synthetic answers, and default TTL of the zone file, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    pub ttl: u32,
    /// A master-file zone served authoritatively (with the synthetic names, which it overrides).
    #[arg(long, value_name = "FILE")]
    pub zone: Option<PathBuf>,
    /// Close a tcp/dot connection after answering its N-th query (doh: send GOAWAY; doq:
    /// CONNECTION_CLOSE). 0: never.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_queries_per_connection: u64,
    /// Close a connection that carried no query for this long (10s, 500ms; doq: QUIC's idle
    /// timeout, which ends it silently). 0: never.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub idle_timeout: Option<Duration>,
    /// Close a connection this long after it opened. 0: never.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub max_connection_age: Option<Duration>,
    /// Concurrent query streams a doq client may open on a connection (QUIC's
    /// MAX_STREAMS; 0: none).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub quic_max_streams: u32,
    /// Concurrent streams a doh client may open on a connection (HTTP/2's
    /// SETTINGS_MAX_CONCURRENT_STREAMS; 0: none).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub h2_max_streams: u32,
    /// Write one JSON line per closed tcp/dot/doh/doq/doh3 connection to this file.
    #[arg(long, value_name = "FILE")]
    pub connections_log: Option<PathBuf>,
    /// Write one JSON line per query to this file: time, transport, connection (the id in
    /// --connections-log), peer, name, type, rcode, and for doh/doh3 the method.
    #[arg(long, value_name = "FILE")]
    pub queries_log: Option<PathBuf>,
    /// Append the TLS secrets of every connection to this file (NSS key-log format), so that a
    /// packet capture of any client can be decrypted.
    #[arg(long, value_name = "FILE")]
    pub keylog: Option<PathBuf>,
    /// The answer to names outside the synthetic set and the zone.
    #[arg(long, value_name = "RCODE", value_enum, default_value_t = Outside::Refused)]
    pub outside: Outside,
    /// What keeps a tcp/dot/doh connection from the --idle-timeout (doq and doh3 use QUIC's
    /// idle timeout, which any packet resets).
    #[arg(long, value_name = "WHAT", value_enum, default_value_t = IdleActivity::Queries)]
    pub idle_activity: IdleActivity,
    /// Runtime worker threads (UDP: one socket per thread).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: u16,
    /// Pin the worker threads to these CPUs, in turn (0-3,8).
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<Cpus>,
    /// Share every listening port with other processes that also share it (SO_REUSEPORT on
    /// every listener; the kernel spreads connections and datagrams over them): several
    /// `serve` processes then stand for one server past one process's open files. Give every
    /// listener its port (not 0).
    #[arg(long)]
    pub share_ports: bool,
}

/// A list of CPU numbers.
/// The answer to names outside the synthetic set and the zone.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outside {
    /// REFUSED, an authoritative server's answer.
    Refused,
    /// NXDOMAIN, a resolver's, so that clients do not retry.
    Nxdomain,
    /// An answer: every name exists, with an address of its own (A, AAAA) and the --ttl, so
    /// that the names of a capture replayed through a resolver resolve (docs/population.md).
    Answer,
}

/// What keeps a connection from the idle timeout.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleActivity {
    /// Queries only.
    Queries,
    /// Any octet the client sends: an HTTP/2 PING does, a TCP keepalive does not.
    Bytes,
}

#[derive(Debug, Clone)]
pub struct Cpus(Vec<u32>);

fn parse_cpus(s: &str) -> Result<Cpus, String> {
    let cpus = dnscost_load::parse_cpus(s)?;
    if cpus.is_empty() {
        return Err("no CPU given".into());
    }
    Ok(Cpus(cpus))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    dnscost_load::parse_duration_ms(s).map(Duration::from_millis)
}

/// Runs `serve` to the end (SIGINT or SIGTERM).
pub fn main(args: ServeArgs) -> Result<ExitCode, EngineError> {
    let responder = responder(&args)?;
    let tls = tls_material(&args)?;
    let open_log = |path: &Option<PathBuf>| -> Result<Option<RecordLog>, EngineError> {
        match path {
            Some(path) => Ok(Some(RecordLog::create(path.clone()).map_err(|e| EngineError::file(path, e))?)),
            None => Ok(None),
        }
    };
    let log = open_log(&args.connections_log)?;
    let queries = open_log(&args.queries_log)?;
    if let Some(Cpus(cpus)) = &args.cpus {
        for &cpu in cpus {
            if cpu >= dnscost_load::CPU_SETSIZE {
                return Err(EngineError::Config(dnscost_load::ConfigError::OutOfRange {
                    field: "cpus",
                    value: cpu.to_string(),
                    range: "0..=1023",
                }));
            }
        }
        crate::generate::check_cpus(cpus)?;
    }
    let threads = usize::from(args.threads);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(threads).enable_all().thread_name("serve");
    if let Some(Cpus(cpus)) = args.cpus.clone() {
        let next = AtomicUsize::new(0);
        builder.on_thread_start(move || {
            let cpu = cpus[next.fetch_add(1, Ordering::Relaxed) % cpus.len()];
            if let Err(e) = socket::pin_thread(cpu) {
                eprintln!("dnscost-engine: cannot pin a thread to CPU {cpu}: {e}");
            }
        });
    }
    let rt = builder.build()?;
    let shared = Arc::new(Shared {
        responder,
        policy: Policy {
            max_queries: args.max_queries_per_connection,
            idle: args.idle_timeout.filter(|d| !d.is_zero()),
            max_age: args.max_connection_age.filter(|d| !d.is_zero()),
            idle_on_bytes: args.idle_activity == IdleActivity::Bytes,
            h2_max_streams: args.h2_max_streams,
        },
        registry: Registry::default(),
        log: log.as_ref().map(RecordLog::sender),
        queries: queries.as_ref().map(RecordLog::sender),
        start: Instant::now(),
    });
    let result = rt.block_on(run(&args.listen, threads, args.share_ports, tls, shared));
    rt.shutdown_timeout(Duration::from_secs(1));
    for log in [log, queries].into_iter().flatten() {
        log.finish();
    }
    result.map(|()| ExitCode::SUCCESS)
}

fn responder(args: &ServeArgs) -> Result<Responder, EngineError> {
    let synthetic = match args.synthetic {
        0 => None,
        n => Some(Synthetic::new(n, &args.tld, args.ttl).map_err(|e| EngineError::Address(format!("--tld: {e}")))?),
    };
    let zone = match &args.zone {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| EngineError::file(path, e))?;
            Some(Zone::parse(&text, args.ttl).map_err(|e| EngineError::file(path, e))?)
        }
        None => None,
    };
    let outside = match args.outside {
        Outside::Refused => OutsideAnswer::Rcode(zone::REFUSED),
        Outside::Nxdomain => OutsideAnswer::Rcode(zone::NXDOMAIN),
        Outside::Answer => OutsideAnswer::Any(args.ttl),
    };
    Ok(Responder { synthetic, zone, outside })
}

/// TLS server configurations for dot and doh (ALPN differs), and the QUIC one of doq, when a
/// listener needs them.
struct TlsConfigs {
    dot: Arc<rustls::ServerConfig>,
    doh: Arc<rustls::ServerConfig>,
    doq: quinn::ServerConfig,
    doh3: quinn::ServerConfig,
}

fn tls_material(args: &ServeArgs) -> Result<Option<TlsConfigs>, EngineError> {
    if !args.listen.iter().any(|l| l.transport.uses_tls()) {
        return Ok(None);
    }
    let (chain, key) = match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => (dnscost_transport::tls::read_certs(cert)?, dnscost_transport::tls::read_key(key)?),
        _ => {
            let names = ["localhost", "127.0.0.1", "::1"].map(String::from);
            let g = dnscost_transport::tls::generate(&names)?;
            if let Some(path) = &args.ca_out {
                std::fs::write(path, &g.ca_pem).map_err(|e| EngineError::file(path, e))?;
            }
            (g.chain, g.key)
        }
    };
    let key_log = args.keylog.as_deref().map(dnscost_transport::tls::key_log_to).transpose()?;
    let tcp_tls = |alpn: &[u8]| {
        dnscost_transport::tls::server_config(chain.clone(), key.clone_key(), vec![alpn.to_vec()], key_log.clone())
    };
    let dot = tcp_tls(b"dot")?;
    let doh = tcp_tls(b"h2")?;
    let idle = args.idle_timeout.filter(|d| !d.is_zero());
    let quic = |alpn: &[u8]| -> Result<quinn::ServerConfig, EngineError> {
        let tls = dnscost_transport::tls::quic_server_config(
            chain.clone(),
            key.clone_key(),
            vec![alpn.to_vec()],
            key_log.clone(),
        )?;
        Ok(dnscost_transport::quic::server_config(tls, args.quic_max_streams, idle)?)
    };
    let doq = quic(dnscost_transport::quic::DOQ_ALPN)?;
    let doh3 = quic(b"h3")?;
    Ok(Some(TlsConfigs { dot, doh, doq, doh3 }))
}

/// Socket buffers asked for on UDP listeners (the kernel caps them at rmem_max/wmem_max).
const UDP_BUFFER: usize = 4 << 20;
/// How long a shutdown waits for connections to end.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The line printed for each listener once it is bound.
#[derive(serde::Serialize)]
struct Listening<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    transport: &'static str,
    address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
    /// The wall-clock time of the logs' zero (`t_us`, `opened_us`), in µs since the Unix epoch.
    start_unix_us: u64,
}

enum Bound {
    Udp(Vec<tokio::net::UdpSocket>),
    Stream(tokio::net::TcpListener),
    Quic(std::net::UdpSocket),
}

async fn run(
    listen: &[ListenUrl],
    threads: usize,
    share_ports: bool,
    tls: Option<TlsConfigs>,
    shared: Arc<Shared>,
) -> Result<(), EngineError> {
    let cannot = |url: &ListenUrl, e: std::io::Error| EngineError::Address(format!("cannot listen on {url}: {e}"));
    let mut bound = Vec::with_capacity(listen.len());
    for url in listen {
        let b = match url.transport {
            Transport::Udp => {
                // Our sockets share the port (SO_REUSEPORT), so binding would also succeed next
                // to another process's sharing socket, which would then get part of the queries
                // (for port 0 the kernel may even choose such a port): the port is taken free.
                let addr =
                    if share_ports { url.addr } else { socket::free_udp_port(url.addr).map_err(|e| cannot(url, e))? };
                let mut sockets = Vec::with_capacity(threads);
                for _ in 0..threads.max(1) {
                    sockets.push(socket::udp_listen(addr, UDP_BUFFER, true).map_err(|e| cannot(url, e))?);
                }
                (addr, Bound::Udp(sockets))
            }
            Transport::Doq | Transport::Doh3 => {
                // One socket, the port its own: two tests' servers given one port by the kernel
                // mixed their QUIC packets (a DoH/3 client reached a DoQ server).
                let s =
                    socket::udp_listen(url.addr, UDP_BUFFER, share_ports).map_err(|e| cannot(url, e))?.into_std()?;
                (s.local_addr().map_err(|e| cannot(url, e))?, Bound::Quic(s))
            }
            _ => {
                let l = socket::tcp_listen(url.addr, 4096, share_ports).map_err(|e| cannot(url, e))?;
                (l.local_addr().map_err(|e| cannot(url, e))?, Bound::Stream(l))
            }
        };
        bound.push(b);
    }
    use tokio::signal::unix::{signal, SignalKind};
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;

    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let start_unix_us = (since_epoch.saturating_sub(shared.start.elapsed())).as_micros() as u64;
    let mut lines = String::new();
    for (url, (addr, _)) in listen.iter().zip(&bound) {
        let line = Listening {
            kind: "listening",
            transport: url.transport.as_str(),
            address: addr.to_string(),
            path: url.transport.is_doh().then_some(url.path.as_str()),
            start_unix_us,
        };
        lines.push_str(&serde_json::to_string(&line).expect("serialisable"));
        lines.push('\n');
    }
    {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(lines.as_bytes()).and_then(|_| out.flush());
    }

    let mut tasks = Vec::new();
    for (url, (_, b)) in listen.iter().zip(bound) {
        match b {
            Bound::Udp(sockets) => {
                for s in sockets {
                    tasks.push(tokio::spawn(udp::serve(s, shared.clone())));
                }
            }
            Bound::Quic(s) => {
                let tls = tls.as_ref().expect("QUIC listeners have TLS material");
                let config = if url.transport == Transport::Doh3 { tls.doh3.clone() } else { tls.doq.clone() };
                let endpoint = quinn::Endpoint::new(
                    quinn::EndpointConfig::default(),
                    Some(config),
                    s,
                    Arc::new(quinn::TokioRuntime),
                )?;
                let path: Arc<str> = url.path.as_str().into();
                tasks.push(tokio::spawn(quic::accept_loop(endpoint, shared.clone(), url.transport, path)));
            }
            Bound::Stream(l) => {
                let tls =
                    tls.as_ref().map(|t| if url.transport == Transport::Doh { t.doh.clone() } else { t.dot.clone() });
                let transport = url.transport;
                let path: Arc<str> = url.path.as_str().into();
                tasks.push(tokio::spawn(listen::accept_loop(l, transport, tls, path, shared.clone())));
            }
        }
    }

    tokio::select! {
        _ = sigint.recv() => {}
        _ = sigterm.recv() => {}
    }
    // Stop accepting, then end every open connection (each records "end").
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    shared.registry.close_all();
    let deadline = Instant::now() + SHUTDOWN_WAIT;
    while shared.registry.live() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::deadline::ConnDeadline;
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    #[test]
    fn arguments_parse() {
        let cli = Cli::try_parse_from([
            "serve",
            "--listen",
            "udp://127.0.0.1:0",
            "--listen",
            "doh://[::1]:0/q",
            "--idle-timeout",
            "500ms",
            "--max-connection-age",
            "2m",
            "--cpus",
            "0-2,5",
            "--threads",
            "2",
        ])
        .unwrap();
        let a = cli.serve;
        assert_eq!(a.listen.len(), 2);
        assert_eq!(a.listen[1].path, "/q");
        assert_eq!(a.idle_timeout, Some(Duration::from_millis(500)));
        assert_eq!(a.max_connection_age, Some(Duration::from_secs(120)));
        assert_eq!(a.cpus.unwrap().0, vec![0, 1, 2, 5]);
        assert_eq!((a.synthetic, a.tld.as_str(), a.ttl), (10_000, "test", 86_400));
        assert!(Cli::try_parse_from(["serve"]).is_err());
        assert!(Cli::try_parse_from(["serve", "--listen", "udp://x:1"]).is_err());
        assert!(Cli::try_parse_from(["serve", "--listen", "udp://127.0.0.1:0", "--cert", "c"]).is_err());
        assert!(Cli::try_parse_from(["serve", "--listen", "udp://127.0.0.1:0", "--idle-timeout", "soon"]).is_err());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn timer_fires_for_idle_and_age() {
        let ms = Duration::from_millis;
        let idle = Policy { idle: Some(ms(20)), max_age: Some(Duration::from_secs(3600)), ..Policy::default() };
        let mut t = ConnDeadline::new(&idle, Instant::now());
        t.touch(Instant::now());
        assert_eq!(t.expired().await, dnscost_stats::Close::Idle);
        let age = Policy { idle: Some(Duration::from_secs(3600)), max_age: Some(ms(20)), ..Policy::default() };
        let mut t = ConnDeadline::new(&age, Instant::now());
        assert_eq!(t.expired().await, dnscost_stats::Close::MaxAge);
        let mut none = ConnDeadline::new(&Policy::default(), Instant::now());
        assert!(tokio::time::timeout(ms(50), none.expired()).await.is_err());
    }
}
