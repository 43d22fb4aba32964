//! The `h2` crate's HTTP/2 client on the workload of `dnscost-engine generate --transport doh
//! --rate max`, for `bench/doh-client`, which compares the two clients' CPU per answer.
//!
//! The same workload as the engine's: `--connections` TLS connections (the engine's rustls
//! configuration: TLS 1.3, x25519, ALPN h2, TCP_NODELAY), each with `--in-flight` requests
//! outstanding in a closed loop, the engine's synthetic queries (`--synthetic` names under
//! `test`, type A, RD, EDNS 1232) as DoH POSTs with the minimal header fields (accept,
//! content-type, content-length), the same SETTINGS and flow-control windows as
//! `http2::Settings::default()`, and every answer parsed and checked against its question. No
//! timer per request: the loop stops when `--duration` has passed, after the requests
//! outstanding then are answered. Prints one JSON line: answered, failed, load_ms.

use bytes::Bytes;
use clap::Parser;
use dnscost_load::{parse_duration_ms, QuerySet};
use dnscost_transport::{socket, tls};
use dnscost_wire::{parse_response, QueryOptions};
use std::cell::Cell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;

const DNS_MESSAGE: &str = "application/dns-message";
const TYPE_A: u16 = 1;

#[derive(Parser, Debug)]
struct Args {
    /// The DoH listener, address:port.
    #[arg(long)]
    target: SocketAddr,
    /// PEM file of the CA that signed the target's certificate (it must cover the address).
    #[arg(long)]
    ca: PathBuf,
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Outstanding requests per connection.
    #[arg(long, default_value_t = 16)]
    in_flight: usize,
    /// How long requests are sent (e.g. 5s).
    #[arg(long, default_value = "5s", value_parser = parse_duration_ms)]
    duration: u64,
    /// Synthetic names queried in turn.
    #[arg(long, default_value_t = 10_000)]
    synthetic: u64,
    #[arg(long, default_value = "/dns-query")]
    doh_path: String,
}

/// What the workers counted.
#[derive(Default)]
struct Counts {
    answered: Cell<u64>,
    failed: Cell<u64>,
}

/// Requests share these: the bodies (encoded once) and the stop flag.
struct Workload {
    uri: http::Uri,
    queries: QuerySet,
    bodies: Vec<Bytes>,
    stop: Cell<bool>,
    counts: Counts,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    match runtime.block_on(tokio::task::LocalSet::new().run_until(run(args))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("h2_doh_load: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let options = tls::ClientOptions {
        version: tls::Version::Tls13,
        group: tls::Group::X25519,
        trust: tls::Trust::CaFile(args.ca.clone()),
        keylog: None,
        alpn: vec![b"h2".to_vec()],
    };
    let config = tls::client_config(&options, false, 0)?;
    let opts = QueryOptions::default();
    let queries = QuerySet::synthetic(args.synthetic, "test", TYPE_A, &opts)?;
    let bodies = (0..queries.len() as u64).map(|i| Bytes::copy_from_slice(queries.get(i).bytes())).collect();
    let uri: http::Uri = format!("https://{}{}", args.target, args.doh_path).parse()?;
    let work = Rc::new(Workload { uri, queries, bodies, stop: Cell::new(false), counts: Counts::default() });

    let mut senders = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        senders.push(connect(&args, config.clone()).await?);
    }
    let start = std::time::Instant::now();
    let mut workers = Vec::new();
    for (c, send) in senders.into_iter().enumerate() {
        for w in 0..args.in_flight {
            let first = (c * args.in_flight + w) as u64;
            let stride = (args.connections * args.in_flight) as u64;
            workers.push(tokio::task::spawn_local(worker(send.clone(), work.clone(), first, stride)));
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(args.duration)).await;
    work.stop.set(true);
    for w in workers {
        w.await?;
    }
    let load_ms = start.elapsed().as_millis();
    let (answered, failed) = (work.counts.answered.get(), work.counts.failed.get());
    println!("{{\"answered\":{answered},\"failed\":{failed},\"load_ms\":{load_ms}}}");
    Ok(())
}

/// One TLS connection with the client's SETTINGS; its connection task runs on this thread.
async fn connect(
    args: &Args,
    config: Arc<rustls::ClientConfig>,
) -> Result<h2::client::SendRequest<Bytes>, Box<dyn std::error::Error>> {
    let tcp = socket::tcp_connect(args.target, None).await?;
    let name = tls::server_name(None, args.target.ip())?;
    let stream = tokio_rustls::TlsConnector::from(config).connect(name, tcp).await?;
    let settings = dnscost_wire::http2::Settings::default();
    let (send, connection) = h2::client::Builder::new()
        .header_table_size(settings.header_table_size)
        .enable_push(false)
        .initial_window_size(settings.initial_window_size)
        .initial_connection_window_size(settings.connection_window_size)
        .max_frame_size(settings.max_frame_size)
        .handshake::<_, Bytes>(stream)
        .await?;
    tokio::task::spawn_local(async move {
        if let Err(e) = connection.await {
            eprintln!("h2_doh_load: connection: {e}");
        }
    });
    Ok(send.ready().await?)
}

/// One outstanding request at a time, queries `first`, `first + stride`, ... in turn.
async fn worker(mut send: h2::client::SendRequest<Bytes>, work: Rc<Workload>, first: u64, stride: u64) {
    let mut q = first;
    while !work.stop.get() {
        let i = q % work.bodies.len() as u64;
        q += stride;
        send = match send.ready().await {
            Ok(ready) => ready,
            Err(e) => return lost(&work, &e),
        };
        let counter = match exchange(&mut send, &work, i).await {
            Ok(true) => &work.counts.answered,
            Ok(false) => &work.counts.failed,
            Err(e) => return lost(&work, &e),
        };
        counter.set(counter.get() + 1);
    }
}

/// A request that failed with the connection: counted, and its worker stops.
fn lost(work: &Workload, e: &h2::Error) {
    eprintln!("h2_doh_load: request: {e}");
    work.counts.failed.set(work.counts.failed.get() + 1);
}

/// Sends query `i` and reads its answer: true when it is a 200 whose DNS message answers it.
/// A body in one DATA frame is parsed where it is, as the engine's client does.
async fn exchange(send: &mut h2::client::SendRequest<Bytes>, work: &Workload, i: u64) -> Result<bool, h2::Error> {
    let body = &work.bodies[i as usize];
    let request = http::Request::post(work.uri.clone())
        .header(http::header::ACCEPT, DNS_MESSAGE)
        .header(http::header::CONTENT_TYPE, DNS_MESSAGE)
        .header(http::header::CONTENT_LENGTH, body.len())
        .body(())
        .expect("a valid request");
    let (response, mut stream) = send.send_request(request, false)?;
    stream.send_data(body.clone(), true)?;
    let response = response.await?;
    let status = response.status();
    let mut recv = response.into_body();
    let mut first: Option<Bytes> = None;
    let mut more = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk?;
        let _ = recv.flow_control().release_capacity(chunk.len());
        match &first {
            None => first = Some(chunk),
            Some(f) => {
                if more.is_empty() {
                    more.extend_from_slice(f);
                }
                more.extend_from_slice(&chunk);
            }
        }
    }
    let answer = if more.is_empty() { first.as_deref().unwrap_or_default() } else { &more[..] };
    Ok(status == http::StatusCode::OK && parse_response(answer, Some(work.queries.get(i).question())).is_ok())
}
