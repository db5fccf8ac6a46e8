//! Typed errors: bad flags, unavailable engines, engine failures, and system set-up problems are
//! distinct so that the message can say what to do about each.

use std::fmt;

/// Every failure larch-bench reports. None of them panics.
#[derive(Debug)]
pub enum Error {
    /// A flag is unknown or its value is malformed or out of range.
    Usage(String),
    /// The engine's library cannot be loaded (or its adapter was not built).
    Unavailable {
        engine: String,
        reason: String,
        hint: String,
    },
    /// The engine returned an error for an operation.
    Engine {
        engine: String,
        op: &'static str,
        message: String,
    },
    /// A file-system or process operation failed.
    Io {
        context: String,
        source: std::io::Error,
    },
    /// cgroups, drop_caches and other privileged machine set-up.
    System(String),
    /// A child process failed or its results could not be read.
    Child(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub fn engine(engine: &str, op: &'static str, message: impl Into<String>) -> Self {
        Error::Engine {
            engine: engine.to_string(),
            op,
            message: message.into(),
        }
    }

    /// Exit codes: 2 for usage errors (as getopt tools do), 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            _ => 1,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) => write!(f, "{m} (see --help)"),
            Error::Unavailable {
                engine,
                reason,
                hint,
            } => write!(f, "engine {engine} unavailable: {reason}; install: {hint}"),
            Error::Engine {
                engine,
                op,
                message,
            } => write!(f, "{engine}: {op} failed: {message}"),
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::System(m) => write!(f, "{m}"),
            Error::Child(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {}
