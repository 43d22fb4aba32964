//! The record of a served connection: what it did ([`Conn`]), who ended it and how
//! ([`Ending`]), and the log that writes one JSON line per closed connection or per query from
//! its own thread ([`RecordLog`]).

use dnscost_stats::{Close, ConnectionRecord, Handshake, Record, Side};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

/// What one connection did, filled in as it lives.
#[derive(Debug, Clone)]
pub struct Conn {
    pub id: u64,
    pub transport: &'static str,
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub opened_us: u64,
    pub established_us: Option<u64>,
    /// `none`, `full` or `resumed`.
    pub handshake: Handshake,
    pub tls_version: Option<&'static str>,
    pub queries: u64,
    pub answers: u64,
}

/// Who ended a connection and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The client did: `fin`, `close_notify`, `rst`, `goaway`, `tls_alert` or `error`, with
    /// the error for the last two.
    Client(Close, Option<String>),
    /// The server's policy: `max_queries`, `idle`, `max_age` or `end`.
    Server(Close),
}

impl Ending {
    /// Classifies a read or handshake error.
    pub fn from_io(e: &std::io::Error) -> Ending {
        use std::io::ErrorKind::*;
        match e.kind() {
            ConnectionReset | ConnectionAborted => Ending::Client(Close::Rst, None),
            UnexpectedEof | BrokenPipe => Ending::Client(Close::Fin, None),
            // tokio-rustls reports TLS failures (alerts received or sent) as InvalidData.
            InvalidData => Ending::Client(Close::TlsAlert, Some(e.to_string())),
            _ => Ending::Client(Close::Error, Some(e.to_string())),
        }
    }

    /// How a QUIC connection error reads from the server's side: the client's doing, but for
    /// the idle timeout when the server has an idle policy (its own then).
    pub fn from_quic(e: &quinn::ConnectionError, idle_policy: bool) -> Ending {
        match crate::quic::close_kind(e) {
            Close::IdleExpired if idle_policy => Ending::Server(Close::Idle),
            close @ (Close::TlsAlert | Close::Error) => Ending::Client(close, Some(e.to_string())),
            close => Ending::Client(close, None),
        }
    }

    /// How the client ended a QUIC connection, as the server saw it: from the connection's close
    /// reason when it is closed, else the protocol's `error`.
    pub fn quic_client(connection: &quinn::Connection, error: Option<String>, idle_policy: bool) -> Ending {
        match connection.close_reason() {
            Some(e) => Ending::from_quic(&e, idle_policy),
            None => Ending::Client(Close::Error, error),
        }
    }
}

enum Msg {
    Record(Box<Record>),
    Stop,
}

/// Writes one JSON line per record (a closed connection, a query) from its own thread;
/// flushes at least once a second and at the end.
pub struct RecordLog {
    tx: mpsc::Sender<Msg>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RecordLog {
    pub fn create(path: PathBuf) -> std::io::Result<Self> {
        let file = std::fs::File::create(&path)?;
        let (tx, rx) = mpsc::channel::<Msg>();
        let thread = std::thread::Builder::new().name("record-log".into()).spawn(move || {
            let mut w = std::io::BufWriter::with_capacity(64 * 1024, file);
            let mut dirty = false;
            let mut last_flush = std::time::Instant::now();
            let mut failed = false;
            let report = |e: std::io::Error, failed: &mut bool| {
                if !*failed {
                    eprintln!("dnscost-engine: {}: {e}", path.display());
                    *failed = true;
                }
            };
            loop {
                let wait = Duration::from_secs(1).saturating_sub(last_flush.elapsed());
                match rx.recv_timeout(wait) {
                    Ok(Msg::Record(r)) => {
                        let line = serde_json::to_vec(&*r).expect("records serialise");
                        if let Err(e) = w.write_all(&line).and_then(|_| w.write_all(b"\n")) {
                            report(e, &mut failed);
                        }
                        dirty = true;
                    }
                    Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                }
                if dirty && last_flush.elapsed() >= Duration::from_secs(1) {
                    if let Err(e) = w.flush() {
                        report(e, &mut failed);
                    }
                    dirty = false;
                    last_flush = std::time::Instant::now();
                } else if !dirty {
                    last_flush = std::time::Instant::now();
                }
            }
            if let Err(e) = w.flush() {
                report(e, &mut failed);
            }
        })?;
        Ok(Self { tx, thread: Some(thread) })
    }

    /// A handle for connections to send their records through.
    pub fn sender(&self) -> LogSender {
        LogSender(self.tx.clone())
    }

    /// Writes what was sent and flushes.
    pub fn finish(mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sends records to the [`RecordLog`] thread.
#[derive(Clone)]
pub struct LogSender(mpsc::Sender<Msg>);

impl LogSender {
    pub fn write(&self, r: Record) {
        let _ = self.0.send(Msg::Record(Box::new(r)));
    }
}

/// Where a query came from, for the queries log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    pub transport: &'static str,
    /// The connection's id; none over udp.
    pub connection: Option<u64>,
    pub peer: SocketAddr,
}

impl Conn {
    /// Where this connection's queries come from, for the queries log.
    pub fn origin(&self) -> Origin {
        Origin { transport: self.transport, connection: Some(self.id), peer: self.peer }
    }

    /// The record of this connection, closed at `closed_us` with `bytes` (sent, received).
    pub fn record(&self, ending: Ending, closed_us: u64, bytes: (u64, u64)) -> ConnectionRecord {
        let (closed_by, close, error) = match ending {
            Ending::Client(how, error) => (Side::Client, how, error),
            Ending::Server(why) => (Side::Server, why, None),
        };
        ConnectionRecord {
            role: Side::Server,
            transport: self.transport.into(),
            id: self.id,
            local_address: self.local.to_string(),
            peer_address: self.peer.to_string(),
            opened_us: self.opened_us,
            established_us: self.established_us,
            closed_us,
            handshake: self.handshake,
            tls_version: self.tls_version.map(Into::into),
            queries: self.queries,
            answers: self.answers,
            bytes_sent: bytes.0,
            bytes_received: bytes.1,
            closed_by,
            close,
            error,
        }
    }
}

/// How long a connection the server closes may take to close from the client's side.
pub const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// A failed TLS handshake: what the client did, with the error always set.
pub fn handshake_failure(e: &std::io::Error) -> Ending {
    match Ending::from_io(e) {
        Ending::Client(how, None) => Ending::Client(how, Some(format!("TLS handshake: {e}"))),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_writes_one_line_per_connection() {
        let path = std::env::temp_dir().join(format!("dnscost-serve-log-{}.jsonl", std::process::id()));
        let log = RecordLog::create(path.clone()).unwrap();
        let conn = Conn {
            id: 3,
            transport: "dot",
            local: "127.0.0.1:853".parse().unwrap(),
            peer: "127.0.0.1:40000".parse().unwrap(),
            opened_us: 10,
            established_us: Some(20),
            handshake: Handshake::Resumed,
            tls_version: Some("1.3"),
            queries: 5,
            answers: 5,
        };
        let tx = log.sender();
        tx.write(Record::Connection(conn.record(Ending::Client(Close::CloseNotify, None), 30, (100, 200))));
        tx.write(Record::Connection(conn.record(Ending::Server(Close::Idle), 40, (0, 0))));
        log.finish();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["type"], "connection");
        assert_eq!(lines[0]["role"], "server");
        assert_eq!(lines[0]["closed_by"], "client");
        assert_eq!(lines[0]["close"], "close_notify");
        assert_eq!(lines[0]["handshake"], "resumed");
        assert_eq!(lines[0]["bytes_sent"], 100);
        assert_eq!(lines[1]["closed_by"], "server");
        assert_eq!(lines[1]["close"], "idle");
        assert!(serde_json::from_str::<Record>(text.lines().next().unwrap()).is_ok());
    }
}
