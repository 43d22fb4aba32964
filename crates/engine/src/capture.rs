//! `dnscost-engine capture FILE`: a pcap or pcapng file's DNS flows as JSON lines (one
//! `dnscost_capture::flows::Flow` each, written as each ends), then one `capture` line with
//! what was read. A file that is not a capture, is cut short or holds no DNS is one line on
//! stderr and exit code 2; the flows read before a cut are written first.

use std::io::{BufWriter, Write};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use dnscost_capture::flows::{Flow, Flows};
use dnscost_capture::{packet, read};

#[derive(clap::Args, Debug)]
pub struct CaptureArgs {
    /// The capture (pcap or pcapng; Ethernet, Linux cooked, loopback or raw IP).
    file: PathBuf,
    /// Only flows with these server addresses (repeatable; default: any address on a DNS port).
    #[arg(long = "server")]
    servers: Vec<IpAddr>,
    /// Also write every Do53 query's name and type here, in capture order, one per line in
    /// the query file's format (`--queries`): the operator's names to replay.
    #[arg(long, value_name = "FILE")]
    names: Option<PathBuf>,
    /// An NSS key log (SSLKEYLOGFILE) of the capture's TLS connections: DoT and DoH clients'
    /// TLS 1.3 records it holds the secrets of are opened, and their queries counted exactly.
    #[arg(long, value_name = "FILE")]
    keylog: Option<PathBuf>,
}

#[derive(serde::Serialize)]
struct Summary {
    record: &'static str,
    packets: u64,
    dns_packets: u64,
    flows: u64,
    /// Do53 query names written to --names (0 without it).
    names: u64,
    unsupported_link: u64,
    read_s: f64,
}

pub fn main(args: CaptureArgs) -> Result<ExitCode, crate::EngineError> {
    let started = Instant::now();
    let file = std::fs::File::open(&args.file).map_err(|e| crate::EngineError::file(&args.file, e))?;
    let mut flows = Flows::new(args.servers.iter().copied());
    if let Some(path) = &args.keylog {
        let text = std::fs::read_to_string(path).map_err(|e| crate::EngineError::file(path, e))?;
        let log = dnscost_capture::decrypt::KeyLog::parse(&text);
        if log.is_empty() {
            return Err(crate::EngineError::file(path, "no CLIENT_TRAFFIC_SECRET_0 line: not an NSS key log"));
        }
        flows = flows.with_keylog(log);
    }
    let mut names_out = match &args.names {
        Some(path) => {
            flows = flows.keep_names();
            let f = std::fs::File::create(path).map_err(|e| crate::EngineError::file(path, e))?;
            Some(BufWriter::with_capacity(1 << 16, f))
        }
        None => None,
    };
    let mut names = 0u64;
    let mut names_failed: Option<std::io::Error> = None;
    let out = std::io::stdout().lock();
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let mut written = 0u64;
    let mut failed: Option<std::io::Error> = None;
    let mut write = |out: &mut BufWriter<_>, f: &Flow| {
        if failed.is_none() {
            if let Err(e) =
                serde_json::to_writer(&mut *out, f).map_err(std::io::Error::from).and_then(|()| out.write_all(b"\n"))
            {
                failed = Some(e);
            }
        }
    };
    let result = read::read(std::io::BufReader::with_capacity(1 << 20, file), |ts, link, data| {
        if let Some(p) = packet::parse(link, data) {
            flows.push(ts, &p);
            for f in flows.take_ended() {
                write(&mut out, &f);
                written += 1;
            }
            if let Some(w) = names_out.as_mut() {
                for (name, qtype) in flows.take_names() {
                    names += 1;
                    if names_failed.is_none() {
                        if let Err(e) = writeln!(w, "{name} {}", dnscost_wire::type_to_str(qtype)) {
                            names_failed = Some(e);
                        }
                    }
                }
            }
        }
    });
    let dns_packets = flows.dns_packets;
    for f in flows.finish() {
        write(&mut out, &f);
        written += 1;
    }
    if let Some(e) = failed {
        return Err(e.into());
    }
    if let (Some(path), Some(w)) = (&args.names, names_out.as_mut()) {
        if let Some(e) = names_failed.take().or_else(|| w.flush().err()) {
            return Err(crate::EngineError::file(path, e));
        }
    }
    let counts = result.map_err(|e| crate::EngineError::file(&args.file, e))?;
    if counts.packets > 0 && counts.unsupported_link == counts.packets {
        return Err(crate::EngineError::file(
            &args.file,
            "no packet of a link type read here (Ethernet, Linux cooked, loopback, raw IP)",
        ));
    }
    if dns_packets == 0 {
        return Err(crate::EngineError::file(
            &args.file,
            format!("no DNS in {} packets (none on ports 53, 853 or 443)", counts.packets),
        ));
    }
    let summary = Summary {
        record: "capture",
        packets: counts.packets,
        dns_packets,
        flows: written,
        names,
        unsupported_link: counts.unsupported_link,
        read_s: started.elapsed().as_secs_f64(),
    };
    serde_json::to_writer(&mut out, &summary).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
