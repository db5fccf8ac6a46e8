//! The benchmark child: opens one engine, runs the benchmark list for each thread count, and
//! measures each benchmark (throughput, latency histograms, rusage and /proc/self/io deltas,
//! size on disk). Results go to stdout as db_bench lines and to the parent as JSON lines.
//!
//! By concern: [`workload`] (what a benchmark name means), [`stats`] (per-thread counters,
//! latency and time series, combined), [`exec`] (how each family of workloads drives an
//! engine on its threads), [`ycsb`] (the YCSB core workloads and their key choosers) and
//! [`child`] (the process: engine open and reopen, the measurement around each benchmark,
//! its output).

pub mod child;
pub mod exec;
pub mod stats;
pub mod workload;
pub mod ycsb;

pub use child::child_main;
pub use exec::{mt_count_below, mt_index, MtState};
pub use stats::{Series, ThreadStats, SCAN_TIMING_GROUP, SERIES_POINTS_MAX};
pub use workload::{Kind, MtMode, Order, Workload, FILL_BATCH_DEFAULT};
