//! What a metric is (`Metric`: name, unit, which way is better, where it comes from, how the
//! statistics summarise it, how it is written, its derivation from a run's record) and the
//! common defaults; the entries themselves are `metric_registry`'s.

use crate::evidence::run_record::RunRecord;

/// What a metric counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Ms,
    Us,
    /// Round trips of the profile.
    Rtts,
    Count,
    Bytes,
    MbitPerS,
    Percent,
    /// The 1-minute load average.
    Load,
    /// A unitless score (Cumulative Layout Shift).
    Score,
}

/// Which way is better (for verdict wording and charts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    /// A description, not a goal (e.g. on-wire concurrency, bytes moved).
    Neither,
}

/// Where a metric comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// What the browser saw (Resource/Navigation Timing, CDP).
    Browser,
    /// The link emulator's counters.
    Link,
    /// The server's transport stats (TCP_INFO, QUIC).
    Transport,
    /// The machine and the browser's launch/settle/teardown.
    Machine,
}

/// How a value is written to `runs.csv` (a missing value is an empty field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsvFormat {
    /// An integer.
    Int,
    /// Fixed decimals.
    Fixed(usize),
}

/// How the report prints a median of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Milliseconds, counts: a few significant digits.
    Plain,
    /// Two decimals (handshake round trips).
    Fine,
}

/// Which workloads a summarised metric describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Pages (the report's breakdown table).
    Pages,
    /// Pages, what the user saw (the report's paint table).
    Paint,
    /// Downloads and uploads (the transfer tables).
    Transfers,
    /// Every workload: head-of-line blocking measured from the link's packets.
    HeadOfLine,
    /// Every workload: the connections' TLS handshakes read from the link's packets (what a
    /// repeat view saves).
    Handshakes,
    /// Every workload: what each side cost in CPU during the load and how long it waited for
    /// one, and what else the machine ran (the report's "Machine during the run").
    Contention,
    /// Trace profiles: what the capacity trace offered each load (the report's trace table).
    Trace,
    /// h2 and h3: the server's response order read off the wire (`packets::order`;
    /// the report's "The servers' response order").
    ResponseOrder,
    /// Replayed sites: how close each replay came to its recording (`evidence::fidelity`; the
    /// report's "How faithful each replay was").
    Replay,
    /// Every workload: the headline in round trips along its critical path
    /// (`evidence::round_trips`; the report's "Where the time went" and the diagnosis of each
    /// difference).
    RoundTrips,
    /// Pages that painted: FCP and LCP in round trips along their render paths (the diagnosis
    /// of each difference in `report --metric fcp|lcp`).
    PaintRoundTrips,
}

/// One per-run metric.
#[derive(Debug)]
pub struct Metric {
    /// The `runs.csv` column and the key in the summary's breakdown.
    pub name: &'static str,
    /// The report's column header.
    pub label: &'static str,
    pub unit: Unit,
    pub better: Better,
    pub source: Source,
    /// May be the statistics' headline (the time a comparison decides on).
    pub headline: bool,
    /// Summarised per series beside the headline (`Some`: for which workloads).
    pub breakdown: Option<Scope>,
    pub csv: CsvFormat,
    pub precision: Precision,
    /// Derivation from the record; `None` when the run has no such figure.
    pub derive: fn(&RunRecord) -> Option<f64>,
}

impl Metric {
    /// The `runs.csv` field of `rec`.
    pub fn csv_field(&self, rec: &RunRecord) -> String {
        match ((self.derive)(rec), self.csv) {
            (None, _) => String::new(),
            (Some(v), CsvFormat::Int) => format!("{}", v.round() as i64),
            (Some(v), CsvFormat::Fixed(d)) => format!("{v:.d$}"),
        }
    }
}

impl PartialEq for Metric {
    fn eq(&self, other: &Metric) -> bool {
        self.name == other.name
    }
}

/// Builds a metric with the common defaults (lower is better, from the browser, not
/// summarised, three decimals).
pub(crate) const fn metric(
    name: &'static str,
    label: &'static str,
    unit: Unit,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        name,
        label,
        unit,
        better: Better::Lower,
        source: Source::Browser,
        headline: false,
        breakdown: None,
        csv: CsvFormat::Fixed(3),
        precision: Precision::Plain,
        derive,
    }
}
