//! The matrix: profiles × workloads × protocols (× servers), interleaved, persisted run by run
//! into a results directory, resumable, summarised with statistics.

pub mod adaptive;
pub mod calibration;
pub mod command;
pub mod concurrency_bench;
pub mod concurrent;
pub mod execute;
pub mod lanes;
pub mod link_bench;
pub mod merge;
pub mod resume;
pub mod series;
pub mod shard;
pub mod stopping_sim;
pub mod visual_bench;

#[cfg(test)]
mod engine_tests;
#[cfg(test)]
mod selection_tests;
#[cfg(test)]
mod test_matrix;
