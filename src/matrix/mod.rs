//! The matrix: profiles × workloads × protocols (× servers), interleaved, persisted run by run,
//! resumable, summarised with statistics.

pub mod execute;
pub mod link_bench;
pub mod plan;
pub mod resume;
pub mod store;
pub mod summary;
