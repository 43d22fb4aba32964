//! The `dnscost-engine` binary: the library's command line (see `lib.rs`).

fn main() -> std::process::ExitCode {
    dnscost_engine::run()
}
