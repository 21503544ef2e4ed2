//! What the runs prove together: the results directory (every attempt on disk), the
//! statistics per series and comparison, what the counted runs leave out, and the diagnosis of
//! why a transfer was slow.

pub mod diagnose;
pub mod explain;
pub mod results;
