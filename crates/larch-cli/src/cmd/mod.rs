//! One file per command. Each `run` takes the arguments after the command name and returns
//! the exit status, or a failure to report.

pub mod check;
pub mod compact;
pub mod copy;
pub mod dump;
pub mod load;
pub mod recover;
pub mod stat;
