//! The protocol of one connection, without I/O and without a clock: a [`Session`] is handed the
//! time and the bytes that arrived, appends what to send, and says when it is over. The slot's
//! driver (`slot.rs`) owns everything sessions share (expiry, unsent accounting, writes bounded
//! by a deadline, wake-ups, the abort) once, for every transport and carrier; a session is
//! unit-tested by calling it with chosen times and bytes (virtual time). A leaf: `tcp.rs` and
//! `doh.rs` implement it, `slot.rs` drives it.

use super::ctx::{Ctx, Schedule, Stop};
use dnscost_load::{ConnPolicy, PolicyClose};
use dnscost_stats::Close;

/// What one connection carried, for the connections log.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub queries: u64,
    pub answers: u64,
}

/// How a session ended.
#[derive(Debug)]
pub struct SessionEnd {
    pub close: Close,
    pub error: Option<String>,
}

impl SessionEnd {
    pub fn client(close: Close) -> Self {
        SessionEnd { close, error: None }
    }
}

impl From<PolicyClose> for SessionEnd {
    fn from(p: PolicyClose) -> Self {
        SessionEnd::client(match p {
            PolicyClose::Lifetime => Close::Lifetime,
            PolicyClose::Idle => Close::Idle,
        })
    }
}

/// How the carrier's byte stream ended, as the driver hands it to the session (the carrier
/// makes it, `carrier.rs`).
#[derive(Debug)]
pub enum End {
    /// The server ended the stream in order (FIN; over TLS, close_notify).
    Closed,
    /// The QUIC connection ended, or the DoH/3 server said GOAWAY: what the server did, and
    /// what it said.
    Quic(Close, String),
    /// Reading or writing failed.
    Io(std::io::Error),
}

impl End {
    /// What the server did (`tls`: a stream that ends in order ended with close_notify, as
    /// tokio-rustls reports it).
    pub fn close(&self, tls: bool) -> Close {
        use std::io::ErrorKind as K;
        match self {
            End::Closed if tls => Close::CloseNotify,
            End::Closed => Close::Fin,
            End::Quic(close, _) => *close,
            End::Io(e) if e.kind() == K::UnexpectedEof => Close::Fin,
            End::Io(e) if e.kind() == K::ConnectionReset || e.kind() == K::BrokenPipe => Close::Rst,
            End::Io(e) if e.kind() == K::InvalidData => Close::TlsAlert,
            End::Io(_) => Close::Error,
        }
    }

    /// What the server said or the failure was (`None`: the stream ended in order).
    pub fn message(&self) -> Option<String> {
        match self {
            End::Closed => None,
            End::Quic(_, message) => Some(message.clone()),
            End::Io(e) => Some(e.to_string()),
        }
    }
}

/// What the driver lends a session for one step: the thread's shared state (set-up, counters,
/// query cursor, in-flight gauge; never its clock), the slot's schedule, the connection's
/// policy and tally, the time, the bytes to send, and whether the carrier takes a query now
/// (false while queries wait for the server to allow a QUIC stream).
pub struct Step<'a> {
    pub ctx: &'a Ctx,
    pub sched: &'a mut Schedule,
    pub policy: &'a mut ConnPolicy,
    pub tally: &'a mut Tally,
    pub out: &'a mut Vec<u8>,
    pub now: u64,
    pub carrier_room: bool,
}

/// What [`Session::send`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// Queries offered for the first time now (counted `sent` once `out` is written; a query
    /// sent again after a refusal was counted the first time).
    pub fresh: u64,
    /// Whether the connection could take one more query now if one were due.
    pub room: bool,
}

/// One transport's protocol on one connection.
pub trait Session {
    /// Where the next read goes.
    fn spare(&mut self) -> &mut [u8];
    /// Nothing arrived to read: the read buffer goes back to the thread if it holds no
    /// incomplete message, so that an idle connection holds none.
    fn release(&mut self) {}
    /// Queries outstanding on the connection.
    fn outstanding(&self) -> usize;
    /// The intended time of the oldest outstanding query.
    fn oldest(&self) -> Option<u64>;
    /// Outstanding queries intended before `deadline` time out; returns how many (HTTP/2
    /// cancels their streams into `step.out`). The driver counts them.
    fn expire(&mut self, step: &mut Step<'_>, deadline: u64) -> u64;
    /// Appends every query due that the connection can take now (the driver has already
    /// counted what could not go in time).
    fn send(&mut self, step: &mut Step<'_>) -> Sent;
    /// Appends the outstanding queries due to be sent again (udp with `udp_retry`: unanswered
    /// a try's timeout after their last send), also while the run drains; returns how many
    /// (counted `retransmitted` once `out` is written).
    fn retransmit(&mut self, _step: &mut Step<'_>) -> u64 {
        0
    }
    /// When [`Session::retransmit`] has something to send next.
    fn next_retransmit(&self) -> Option<u64> {
        None
    }
    /// `n` bytes were read into [`Session::spare`]. Returns the end of the session when the
    /// bytes end it (a protocol error; what to say to the server is in `step.out`).
    fn receive(&mut self, step: &mut Step<'_>, n: usize) -> Option<SessionEnd>;
    /// The carrier's byte stream ended ([`End::Closed`]: in order) or reading or writing
    /// failed: every outstanding query is resolved (sent again when the server refused it
    /// unprocessed, lost otherwise).
    fn ended(&mut self, step: &mut Step<'_>, end: &End) -> SessionEnd;
    /// With nothing outstanding, whether the session is over by itself (the run drains, the
    /// server went away, identifiers ran out).
    fn finished(&self, state: Stop) -> Option<SessionEnd>;
    /// The run is aborted: forgets every outstanding query and returns how many.
    fn clear(&mut self) -> u64;
    /// What the client says before a graceful close (HTTP/2: GOAWAY).
    fn goodbye(&mut self, out: &mut Vec<u8>);
    /// The query with DNS ID `id` will get no answer (the network refused its datagram, or the
    /// server reset or rejected its QUIC stream): forgets it and returns it if it was
    /// outstanding. Only sessions over datagram and QUIC carriers have such queries.
    fn forget(&mut self, _id: u16) -> Option<super::window::Outstanding> {
        None
    }
    /// The intended time of the outstanding query with DNS ID `id` (sessions over QUIC
    /// carriers, whose queries may wait there for a stream).
    fn intended(&self, _id: u16) -> Option<u64> {
        None
    }
    /// Whether the outstanding query `id` was last sent by [`Session::retransmit`].
    fn resent(&self, _id: u16) -> bool {
        false
    }
}

/// Sessions' unit tests: a thread context without a runtime's I/O, and frames to feed.
#[cfg(test)]
pub mod testing {
    use super::*;
    use dnscost_load::EngineConfig;
    use std::sync::Arc;

    pub const MS: u64 = 1_000_000;

    /// Runs `f` with a generator thread's context for `config` (JSON), inside a runtime that
    /// only the timer needs: the test drives the session's time itself.
    pub fn with_ctx<R>(config: &str, f: impl FnOnce(&Ctx) -> R) -> R {
        let config: EngineConfig = serde_json::from_str(config).expect("test config");
        config.validate().expect("valid test config");
        let setup = Arc::new(super::super::setup(config).expect("setup"));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let timer = super::super::timer::Timer::new(setup.start, 1000).unwrap();
            let (_tx, rx) = tokio::sync::watch::channel(Stop::Running);
            let ctx = Ctx::new(setup, 0, 1, rx, None, None, None, timer);
            f(&ctx)
        })
    }

    /// The answer to a query as sent (ID and question kept, QR set, no records).
    pub fn answer_to(query: &[u8]) -> Vec<u8> {
        let mut a = query.to_vec();
        a[2] |= 0x80;
        a
    }
}

#[cfg(test)]
mod tests {
    use super::End;
    use dnscost_stats::Close;
    use std::io::{Error, ErrorKind as K};

    #[test]
    fn an_end_says_what_the_server_did_and_why() {
        assert_eq!((End::Closed.close(false), End::Closed.message()), (Close::Fin, None));
        assert_eq!(End::Closed.close(true), Close::CloseNotify, "tokio-rustls ends at close_notify");
        let goaway = End::Quic(Close::Goaway, "request rejected".into());
        assert_eq!((goaway.close(false), goaway.message().as_deref()), (Close::Goaway, Some("request rejected")));
        for (kind, close) in [
            (K::UnexpectedEof, Close::Fin),
            (K::ConnectionReset, Close::Rst),
            (K::BrokenPipe, Close::Rst),
            (K::InvalidData, Close::TlsAlert),
            (K::Other, Close::Error),
        ] {
            let end = End::Io(Error::new(kind, "x"));
            assert_eq!((end.close(true), end.message().as_deref()), (close, Some("x")), "{kind:?}");
        }
    }
}
