//! `dnscost-engine`: generate DNS load, serve DNS, emulate a network link, print the JSON
//! Schemas. The binary (`main.rs`) only calls [`run`]; everything else is this library, so that
//! tests and tools can reach the engine's parts without a process.
//!
//! No unsafe code but the generator's timer (a timerfd: microsecond wake-ups without a
//! busy loop) and the link's system calls (`link/sys.rs`: TUN devices, namespaces, ppoll).
#![deny(unsafe_code)]

use clap::{Parser, Subcommand};
use std::process::ExitCode;

pub mod capture;
mod error;
pub mod generate;
pub mod link;
mod quic;
pub mod schema;
pub mod serve;

pub use error::EngineError;

#[derive(Parser)]
#[command(name = "dnscost-engine", version, about = "DNS load generator and reference responder for every transport")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Send DNS load over udp, tcp, dot, doh, doq or doh3 with explicit control of connection life.
    Generate(Box<generate::GenerateArgs>),
    /// Answer DNS over udp, tcp, dot, doh, doq and doh3, logging every connection's life.
    Serve(Box<serve::ServeArgs>),
    /// Join two network namespaces by an emulated link (TUN devices): delay, jitter, loss and
    /// rate per direction.
    Link(Box<link::LinkArgs>),
    /// Print the JSON Schemas of the configuration and of the output records.
    Schema(schema::SchemaArgs),
    /// Read a packet capture's DNS flows (connections, queries, TLS hellos per client) as
    /// JSON lines.
    Capture(Box<capture::CaptureArgs>),
}

/// Parses the command line and runs the command: what `dnscost-engine` does.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Generate(args) => generate::main(*args),
        Command::Serve(args) => serve::main(*args),
        Command::Link(args) => link::main(*args),
        Command::Schema(args) => schema::main(args),
        Command::Capture(args) => capture::main(*args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("dnscost-engine: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_generate_flag_parses() {
        let argv = "dnscost-engine generate --transport doh --target 127.0.0.1:443 --doh-method get \
            --doh-path /q --insecure --sni localhost --tls-version 1.2 --tls-group secp256r1 --keylog k \
            --connections 8 --lifetime 30s,100q --idle-timeout 2s --open-rate 50 --resumption 0.5 \
            --in-flight 4 --close rst --rate 1000 --arrival poisson --duration 3s --warmup 1s \
            --timeout 500ms --synthetic 100 --tld example --qtype AAAA --edns-size 4096 --dnssec-ok \
            --padding --no-recursion --threads 2 --cpus 0-1 --source 127.0.0.1,127.0.0.2 --seed 7 \
            --output o --connections-log c --quiet";
        let cli = Cli::try_parse_from(argv.split_whitespace()).unwrap();
        let Command::Generate(args) = cli.command else { panic!("not generate") };
        let c = args.resolve().unwrap();
        assert_eq!(c.cpus, vec![0, 1]);
        assert_eq!(c.sources.len(), 2);
        assert_eq!(c.lifetime.queries, Some(100));
        assert_eq!(c.rate, dnscost_load::Rate::Qps(1000.0));
        assert!(c.padding && c.dnssec_ok && !c.recursion_desired);
        let bad = Cli::try_parse_from(["dnscost-engine", "generate", "--transport", "quic"]);
        assert!(bad.is_err());
    }
}
