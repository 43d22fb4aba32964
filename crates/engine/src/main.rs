//! The `dnscost-engine` binary: the library's command line (see `lib.rs`).

/// mimalloc: its size classes keep a connection's transient allocations (its connect future,
/// its TLS handshake) apart from what the connection keeps, and it returns pages left empty to
/// the system, so that the engine's resident memory follows the connections it holds (glibc's
/// heap kept the holes the open phase left: 4.4 KiB per idle TCP connection).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    dnscost_engine::run()
}
