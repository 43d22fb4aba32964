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
    /// With --names: Do53 queries whose question does not read as a name (none, cut short, a
    /// compression pointer, longer than 255 octets), so not written.
    names_left_out: u64,
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
    let mut do53_queries = 0u64;
    let mut failed: Option<std::io::Error> = None;
    let mut write = |out: &mut BufWriter<_>, f: &Flow| {
        if matches!(f.transport, "udp" | "tcp") {
            do53_queries += f.queries;
        }
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
        names_left_out: if args.names.is_some() { do53_queries.saturating_sub(names) } else { 0 },
        unsupported_link: counts.unsupported_link,
        read_s: started.elapsed().as_secs_f64(),
    };
    serde_json::to_writer(&mut out, &summary).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dnscost_capture::packet::{Packet, Segment};

    /// A Do53 query over UDP for the wire name `name`, type A.
    fn query(name: &[u8]) -> Vec<u8> {
        let mut m = vec![0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(name);
        m.extend_from_slice(&[0, 1, 0, 1]);
        m
    }

    #[test]
    fn every_query_name_is_written_as_the_query_file_reads_it_back() {
        let names: [&[u8]; 8] = [
            b"\x03www\x07example\x04test\x00",
            b"\x03a\x00b\x04test\x00",
            b"\x02\xff\xfe\x04test\x00",
            b"\x07has one\x04test\x00",
            b"\x03a.b\x04test\x00",
            b"\x08comment#\x04test\x00",
            b"\x08#comment\x04test\x00",
            "\x0a\u{fc}berpr\u{fc}f\x04test\x00".as_bytes(),
        ];
        let mut flows = Flows::new([]).keep_names();
        let (client, server) = ("192.0.2.1".parse().unwrap(), "192.0.2.53".parse().unwrap());
        let mut written = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let msg = query(name);
            let p = Packet {
                src: client,
                dst: server,
                sport: 40000,
                dport: 53,
                segment: Segment::Udp,
                payload: &msg,
                payload_len: msg.len(),
            };
            flows.push(i as u64, &p);
            written.extend(flows.take_names());
        }
        assert_eq!(written.len(), names.len(), "{written:?}");
        let file: String = written.iter().map(|(n, t)| format!("{n} {}\n", dnscost_wire::type_to_str(*t))).collect();
        assert!(file.contains("\\035comment.test. A") && file.contains("a\\000b.test."), "{file}");
        let set = dnscost_load::QuerySet::parse(&file, &dnscost_wire::QueryOptions::default()).unwrap();
        assert_eq!(set.len(), names.len());
        for (i, name) in names.iter().enumerate() {
            let mut wire = Vec::new();
            dnscost_wire::encode_name(&written[i].0, &mut wire).unwrap();
            assert_eq!(wire, name.to_ascii_lowercase(), "{}", written[i].0);
        }
    }
}
