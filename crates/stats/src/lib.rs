//! Counters, latency histograms and the engine's output records.
//!
//! Each generator thread counts into its own [`Counters`] (no sharing on the hot path); once a
//! second they are merged and turned into an [`IntervalRecord`]. Errors and connection ends are
//! counted by typed kind ([`ErrorKind`], [`Close`]), never by message.

#![forbid(unsafe_code)]

mod counters;
mod records;

pub use counters::{Close, Counters, ErrorKind, Handshake, Histogram, Side};
pub use records::{
    Accounting, ClassStart, ClassSummary, ClassTotals, ConnectionCounts, ConnectionRecord, EngineMemory, EngineUsage,
    HandshakeCounts, HistogramSummary, IntervalRecord, Phase, QueryCounts, QueryRecord, Record, StartRecord,
    SummaryRecord, Totals, TrafficCounts,
};
