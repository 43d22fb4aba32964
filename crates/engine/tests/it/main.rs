//! The engine's integration tests, one binary: each module starts the built `dnscost-engine`
//! (and, where said, real resolvers, `kdig` or network namespaces) and observes it from outside.
//! One binary links once, where one per file linked eleven times.

mod common;

mod faults;
mod hostile;
mod interop;
mod lifecycle;
mod link;
mod open_phase;
mod options;
mod population;
mod schema;
mod serve;
mod stream_limits;
mod udp_retry;
mod udp_wire;
