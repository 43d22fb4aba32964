//! The engine's errors: each one becomes a single line on stderr and an exit code.

use std::path::PathBuf;

#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The configuration is invalid (exit code 2).
    #[error("invalid configuration: {0}")]
    Config(#[from] dnscost_load::ConfigError),
    /// A file named in the configuration cannot be read or written (exit code 2).
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
    /// The query file has a bad line (exit code 2).
    #[error("{path}: {error}")]
    Queries { path: PathBuf, error: dnscost_load::QuerySpecError },
    /// The target address cannot be resolved or a listener cannot bind (exit code 3).
    #[error("{0}")]
    Address(String),
    /// TLS material cannot be loaded or generated (exit code 2).
    #[error(transparent)]
    Transport(#[from] dnscost_transport::TransportError),
    /// `link`: a bad argument (exit code 2), a namespace or device it cannot use (3), a
    /// direction that failed while forwarding (1).
    #[error(transparent)]
    Link(#[from] crate::link::LinkError),
    /// Anything else that stopped the run (exit code 1).
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl EngineError {
    pub fn file(path: impl Into<PathBuf>, e: impl std::fmt::Display) -> Self {
        EngineError::File { path: path.into(), reason: e.to_string() }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            EngineError::Config(_)
            | EngineError::File { .. }
            | EngineError::Queries { .. }
            | EngineError::Transport(_) => 2,
            EngineError::Address(_) => 3,
            EngineError::Link(e) => e.exit_code(),
            EngineError::Io(_) => 1,
        }
    }
}
