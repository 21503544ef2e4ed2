//! The matrix: profiles × workloads × protocols (× servers), interleaved, persisted run by run
//! into a results directory, resumable, summarised with statistics.

pub mod calibration;
pub mod concurrent;
pub mod execute;
pub mod lanes;
pub mod merge;
pub mod one_cell;
pub mod request;
pub mod resume;
pub mod shard;
pub mod stopping_rule;

#[cfg(test)]
mod engine_tests;
#[cfg(test)]
mod selection_tests;
#[cfg(test)]
mod test_matrix;
