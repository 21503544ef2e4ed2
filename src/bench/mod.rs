//! How precise and how fast pagebench is on this machine: the embedded server, the link gate, visual metrics, the stopping rule and lanes against the serial walk.

pub mod concurrency_bench;
pub mod device_bench;
pub mod link_bench;
pub mod server_bench;
pub mod stopping_bench;
pub mod visual_bench;
