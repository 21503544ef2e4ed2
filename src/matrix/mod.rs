//! The matrix: profiles × workloads × protocols (× servers), interleaved, persisted run by run
//! into a results directory, resumable, summarised with statistics.

pub mod execute;
pub mod link_bench;
pub mod resume;
pub mod series;
pub mod visual_bench;
