//! What one run observed and what follows from it (pure): the metrics derived from the
//! browser's observation, the run's validation, its round-trip accounting, visual metrics, what
//! disruptions did, a replay's fidelity, HAR, the run record and the metric registry.

pub mod cpu_benchmarks;
pub mod cpu_pace;
pub mod disruption;
pub mod engine_tells;
pub mod fidelity;
pub mod har_document;
pub mod lookups;
pub mod metric;
pub mod metric_registry;
pub mod metrics;
pub mod paint_round_trips;
pub mod render_path;
pub mod round_trips;
pub mod run_record;
pub mod validate;
pub mod visual;
