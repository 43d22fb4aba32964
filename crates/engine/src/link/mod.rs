//! `dnscost-engine link`: an emulated network link between two network namespaces, in user
//! space (the kernels dnscost runs on have no netem).
//!
//! Each end is a TUN device (layer 3, no ARP) created in its namespace; addresses, routes and
//! `up` are the caller's. One thread per direction reads what the kernel sends into one device
//! and writes it into the other after the direction's loss, bottleneck (rate and queue), delay
//! and jitter (`shaper.rs`, pure, in virtual time; `forward.rs`, the thread). Packets from or to
//! the `--split` address take a path of their own in each direction. The main thread prints a
//! ready line, waits for SIGINT or SIGTERM, stops both threads and prints their counts. The
//! devices go with the process.
//!
//! Module graph: mod → {spec, forward → {shaper → spec, sys}}; `sys` holds the unsafe system
//! calls.

mod forward;
mod shaper;
mod spec;
#[allow(unsafe_code)]
mod sys;

pub use spec::{End, Impairment, SpecError};

use crate::EngineError;
use forward::{CountsReport, Direction, Outcome, Path};
use serde::Serialize;
use shaper::Shaper;
use std::fs::File;
use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Both ends, each direction's impairment and the split path.
#[derive(clap::Args, Debug)]
pub struct LinkArgs {
    /// One end: NETNS:DEVICE, a TUN device to create in network namespace NETNS (a name under
    /// /run/netns, an absolute path such as /proc/PID/ns/net, or empty for the link's own).
    #[arg(long, value_name = "NETNS:DEVICE")]
    a: String,
    /// The other end, as --a.
    #[arg(long, value_name = "NETNS:DEVICE")]
    b: String,
    /// What packets from a to b meet: delay=35ms,jitter=1ms,loss=1%,rate=12000kbit,queue=1000
    /// (any of them; default: nothing).
    #[arg(long, value_name = "SPEC", default_value = "")]
    a_to_b: String,
    /// What packets from b to a meet, as --a-to-b.
    #[arg(long, value_name = "SPEC", default_value = "")]
    b_to_a: String,
    /// An IPv4 address whose packets (from or to it) take the split path instead.
    #[arg(long, value_name = "ADDRESS")]
    split: Option<String>,
    /// The split path from a to b, as --a-to-b (default: nothing).
    #[arg(long, value_name = "SPEC")]
    split_a_to_b: Option<String>,
    /// The split path from b to a, as --a-to-b (default: nothing).
    #[arg(long, value_name = "SPEC")]
    split_b_to_a: Option<String>,
    /// Run the link's threads under SCHED_FIFO (priority 1), so that they wake on time on a
    /// busy machine (the kernel's real-time throttling still leaves other threads 5 % of each
    /// CPU).
    #[arg(long)]
    realtime: bool,
    /// Seed of the loss and jitter draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also write the stats line to FILE.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
}

/// Why `link` could not run.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// An argument is invalid (exit code 2).
    #[error("{flag}: {error}")]
    Argument { flag: &'static str, error: SpecError },
    /// A namespace cannot be opened or entered (exit code 3): `ip netns add NAME` makes one;
    /// entering it takes root (CAP_SYS_ADMIN).
    #[error("{end}: network namespace {}: {error}", path.display())]
    Namespace { end: String, path: PathBuf, error: io::Error },
    /// The namespace already has a device of that name (exit code 3).
    #[error("{end}: the namespace already has a device {device}")]
    DeviceExists { end: String, device: String },
    /// The TUN device cannot be created (exit code 3): no /dev/net/tun, or no CAP_NET_ADMIN.
    #[error("{end}: cannot create TUN device {device}: {error}")]
    Device { end: String, device: String, error: io::Error },
    /// SCHED_FIFO refused (exit code 3): it takes root (CAP_SYS_NICE), and a cgroup with no
    /// real-time budget refuses it too.
    #[error("--realtime: {0}")]
    Realtime(io::Error),
    /// A direction stopped on an error while forwarding (exit code 1), for example a device
    /// deleted under it.
    #[error("{direction}: {error}")]
    Forward { direction: &'static str, error: io::Error },
}

impl LinkError {
    pub fn exit_code(&self) -> u8 {
        match self {
            LinkError::Argument { .. } => 2,
            LinkError::Namespace { .. }
            | LinkError::DeviceExists { .. }
            | LinkError::Device { .. }
            | LinkError::Realtime(_) => 3,
            LinkError::Forward { .. } => 1,
        }
    }
}

/// The split path: its address and both directions.
#[derive(Debug)]
struct Split {
    address: Ipv4Addr,
    a_to_b: Impairment,
    b_to_a: Impairment,
}

/// The link's set-up: its arguments, validated.
#[derive(Debug)]
struct Setup {
    a: End,
    b: End,
    a_to_b: Impairment,
    b_to_a: Impairment,
    split: Option<Split>,
    seed: u64,
}

impl Setup {
    fn resolve(args: &LinkArgs) -> Result<Setup, LinkError> {
        fn arg<T: std::str::FromStr<Err = SpecError>>(flag: &'static str, value: &str) -> Result<T, LinkError> {
            value.parse().map_err(|error| LinkError::Argument { flag, error })
        }
        let a: End = arg("--a", &args.a)?;
        let b: End = arg("--b", &args.b)?;
        if a.netns == b.netns && a.device == b.device {
            return Err(LinkError::Argument { flag: "--b", error: SpecError::SameDevice });
        }
        let a_to_b = arg("--a-to-b", &args.a_to_b)?;
        let b_to_a = arg("--b-to-a", &args.b_to_a)?;
        let split_a_to_b = args.split_a_to_b.as_deref().map(|s| arg("--split-a-to-b", s)).transpose()?;
        let split_b_to_a = args.split_b_to_a.as_deref().map(|s| arg("--split-b-to-a", s)).transpose()?;
        let split = match &args.split {
            Some(address) => Some(Split {
                address: spec::parse_split(address).map_err(|error| LinkError::Argument { flag: "--split", error })?,
                a_to_b: split_a_to_b.unwrap_or_default(),
                b_to_a: split_b_to_a.unwrap_or_default(),
            }),
            None => {
                for (flag, given) in
                    [("--split-a-to-b", split_a_to_b.is_some()), ("--split-b-to-a", split_b_to_a.is_some())]
                {
                    if given {
                        return Err(LinkError::Argument { flag, error: SpecError::SplitWithoutAddress(flag) });
                    }
                }
                None
            }
        };
        Ok(Setup { a, b, a_to_b, b_to_a, split, seed: args.seed })
    }

    /// A direction's paths; each path draws from a stream of its own.
    fn direction(&self, main: Impairment, split: Option<Impairment>, stream: u64) -> Direction {
        let path = |imp, stream| Path::new(Shaper::new(imp), dnscost_load::Rng::new(self.seed, stream));
        Direction {
            main: path(main, stream),
            split: self.split.as_ref().zip(split).map(|(s, imp)| (s.address, path(imp, stream + 2))),
        }
    }
}

/// The line printed once both devices exist.
#[derive(Serialize)]
struct Ready<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    ready: bool,
    a: &'a str,
    b: &'a str,
}

/// The line printed at the end.
#[derive(Serialize)]
struct Stats {
    #[serde(rename = "type")]
    kind: &'static str,
    seed: u64,
    a_to_b: DirectionReport,
    b_to_a: DirectionReport,
}

/// A direction's counts (both paths), and the split path's alone.
#[derive(Serialize)]
struct DirectionReport {
    #[serde(flatten)]
    total: CountsReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    split: Option<CountsReport>,
}

impl DirectionReport {
    fn of(outcome: &Outcome) -> DirectionReport {
        let total = match &outcome.split {
            Some(split) => outcome.main.merge(split),
            None => outcome.main,
        };
        DirectionReport { total: total.report(), split: outcome.split.map(|s| s.report()) }
    }
}

/// Opens an end's namespace file, so that a missing namespace is reported before anything
/// is made.
fn open_netns(end: &End) -> Result<Option<File>, LinkError> {
    let Some(path) = &end.netns else { return Ok(None) };
    File::open(path).map(Some).map_err(|error| LinkError::Namespace {
        end: end.label.clone(),
        path: path.clone(),
        error,
    })
}

/// Creates an end's TUN device in its namespace, from a thread of its own that enters the
/// namespace and ends there: the descriptor works from any namespace.
fn create_device(end: &End, netns: Option<File>) -> Result<File, LinkError> {
    let make = || {
        if let (Some(file), Some(path)) = (&netns, &end.netns) {
            sys::enter_netns(file).map_err(|error| LinkError::Namespace {
                end: end.label.clone(),
                path: path.clone(),
                error,
            })?;
        }
        if sys::device_exists(&end.device) {
            return Err(LinkError::DeviceExists { end: end.label.clone(), device: end.device.clone() });
        }
        sys::create_tun(&end.device).map_err(|error| LinkError::Device {
            end: end.label.clone(),
            device: end.device.clone(),
            error,
        })
    };
    std::thread::scope(|s| s.spawn(make).join().expect("creating a TUN device does not panic"))
}

/// Writes the stop event when dropped, so that the forwarding threads end whatever way the
/// main thread leaves their scope.
struct StopOnDrop<'a>(&'a File);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = (&*self.0).write_all(&1u64.to_ne_bytes());
    }
}

fn print_line(value: &impl Serialize) -> io::Result<()> {
    let mut out = io::stdout().lock();
    serde_json::to_writer(&mut out, value)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Runs the link until SIGINT or SIGTERM.
pub fn main(args: LinkArgs) -> Result<ExitCode, EngineError> {
    let setup = Setup::resolve(&args)?;
    let mut stats_file = match &args.stats {
        Some(path) => Some(File::create(path).map_err(|e| EngineError::file(path, e))?),
        None => None,
    };
    let (netns_a, netns_b) = (open_netns(&setup.a)?, open_netns(&setup.b)?);
    // Before any thread starts, so that every thread inherits them.
    let signals = sys::Signals::block()?;
    if args.realtime {
        sys::realtime().map_err(LinkError::Realtime)?;
    }
    let tun_a = create_device(&setup.a, netns_a)?;
    let tun_b = create_device(&setup.b, netns_b)?;
    let stop = sys::eventfd()?;
    let a_to_b = setup.direction(setup.a_to_b, setup.split.as_ref().map(|s| s.a_to_b), 0);
    let b_to_a = setup.direction(setup.b_to_a, setup.split.as_ref().map(|s| s.b_to_a), 1);
    let (forward_a, forward_b, ready) = std::thread::scope(|scope| -> io::Result<_> {
        let guard = StopOnDrop(&stop);
        let (stop, tun_a, tun_b) = (&stop, &tun_a, &tun_b);
        let spawn = |name: &str, direction, from_a: bool| {
            let (input, output) = if from_a { (tun_a, tun_b) } else { (tun_b, tun_a) };
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn_scoped(scope, move || forward::run(direction, input, output, stop))
        };
        let forward_a = spawn("link a-to-b", a_to_b, true)?;
        let forward_b = spawn("link b-to-a", b_to_a, false)?;
        let ready = print_line(&Ready { kind: "ready", ready: true, a: &setup.a.label, b: &setup.b.label });
        if ready.is_ok() {
            while !signals.wait(Duration::from_millis(100)) && !forward_a.is_finished() && !forward_b.is_finished() {}
        }
        drop(guard);
        let join = |h: std::thread::ScopedJoinHandle<Outcome>| h.join().expect("a direction does not panic");
        Ok((join(forward_a), join(forward_b), ready))
    })?;
    let stats = Stats {
        kind: "stats",
        seed: setup.seed,
        a_to_b: DirectionReport::of(&forward_a),
        b_to_a: DirectionReport::of(&forward_b),
    };
    // The file first: it is written even when stdout is gone.
    if let (Some(file), Some(path)) = (&mut stats_file, &args.stats) {
        let line = serde_json::to_string(&stats).map_err(io::Error::from)? + "\n";
        file.write_all(line.as_bytes()).map_err(|e| EngineError::file(path, e))?;
    }
    ready?;
    print_line(&stats)?;
    for (direction, outcome) in [("a to b", forward_a), ("b to a", forward_b)] {
        if let Some(error) = outcome.error {
            return Err(LinkError::Forward { direction, error }.into());
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LinkArgs,
    }

    fn setup(argv: &str) -> Result<Setup, LinkError> {
        let cli = Cli::try_parse_from(std::iter::once("link").chain(argv.split_whitespace())).unwrap();
        Setup::resolve(&cli.args)
    }

    #[test]
    fn arguments_resolve_into_a_plan() {
        let p = setup(
            "--a x:ta --b y:tb --a-to-b delay=35ms,loss=1% --b-to-a rate=12mbit --split 198.18.1.1 \
             --split-b-to-a delay=10ms --seed 9",
        )
        .unwrap();
        assert_eq!(p.a.device, "ta");
        assert_eq!(p.a_to_b.delay_ns, 35_000_000);
        assert_eq!(p.b_to_a.rate_bps, Some(12_000_000));
        let split = p.split.as_ref().unwrap();
        assert_eq!(
            (split.address, split.a_to_b, split.b_to_a.delay_ns),
            (Ipv4Addr::new(198, 18, 1, 1), Impairment::default(), 10_000_000)
        );
        assert_eq!(p.seed, 9);
        let p = setup("--a x:t --b y:t").unwrap();
        assert_eq!((p.a_to_b, p.b_to_a), (Impairment::default(), Impairment::default()));
    }

    #[test]
    fn bad_arguments_name_their_flag() {
        let err = |argv| setup(argv).unwrap_err().to_string();
        assert_eq!(err("--a x:t --b x:t"), "--b: --a and --b are the same device");
        assert!(err("--a x:t --b y:t --b-to-a loss=2").starts_with("--b-to-a: loss: \"2\""));
        assert_eq!(
            err("--a x:t --b y:t --split-a-to-b delay=1ms"),
            "--split-a-to-b: --split-a-to-b needs --split ADDRESS"
        );
        assert_eq!(err("--a x:t --b y:t --split ::1"), "--split: \"::1\" is not an IPv4 address");
        assert!(matches!(setup("--a x --b y:t"), Err(LinkError::Argument { flag: "--a", .. })));
    }
}
