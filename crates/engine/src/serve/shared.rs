//! What the listeners and connections of a server share ([`Shared`]): the responder, the
//! server's [`Policy`], the registry of open connections and the logs; and the one way a query
//! is answered and logged ([`Shared::respond`]) and a closed connection recorded.

use super::record::{Conn, Ending, LogSender, Origin};
use super::registry::Registry;
use super::zone::{self, Responder};
use std::time::Duration;
use tokio::time::Instant;

/// What the server enforces on connections.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Policy {
    /// 0: unlimited.
    pub max_queries: u64,
    pub idle: Option<Duration>,
    pub max_age: Option<Duration>,
    /// Whether any octet received, not only a query, keeps a connection from `idle`.
    pub idle_on_bytes: bool,
    /// doh: the streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub h2_max_streams: u32,
}

/// Everything the listeners and connections share.
pub(crate) struct Shared {
    pub responder: Responder,
    pub policy: Policy,
    pub registry: Registry,
    pub log: Option<LogSender>,
    pub queries: Option<LogSender>,
    pub start: Instant,
}

impl Shared {
    /// Microseconds since the server started.
    pub fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// Appends the answer to the query `msg` to `out` (see [`Responder::respond`]), and logs
    /// the query when a queries log is kept. `method`: doh's and doh3's.
    pub fn respond(
        &self,
        msg: &[u8],
        out: &mut Vec<u8>,
        framing: dnscost_wire::Framing,
        origin: &Origin,
        method: Option<&'static str>,
    ) -> Option<zone::Reply> {
        let reply = self.responder.respond(msg, out, framing);
        if let Some(log) = &self.queries {
            let question = dnscost_wire::parse_query(msg).ok();
            log.write(dnscost_stats::Record::Query(dnscost_stats::QueryRecord {
                t_us: self.now_us(),
                transport: origin.transport.into(),
                connection: origin.connection,
                peer_address: origin.peer.to_string(),
                qname: question.as_ref().map(|q| dnscost_wire::name_to_string(&msg[q.qname.clone()])),
                qtype: question.as_ref().map(|q| dnscost_wire::type_to_str(q.qtype)),
                rcode: reply.map(|r| dnscost_wire::Rcode::name(r.rcode).into()),
                method: method.map(Into::into),
            }));
        }
        reply
    }

    /// Writes the record of a closed connection and forgets it.
    pub fn closed(&self, conn: &Conn, ending: Ending, bytes: (u64, u64), registered: bool) {
        if let Some(log) = &self.log {
            log.write(dnscost_stats::Record::Connection(conn.record(ending, self.now_us(), bytes)));
        }
        if registered {
            self.registry.unregister(conn.id);
        }
    }
}
