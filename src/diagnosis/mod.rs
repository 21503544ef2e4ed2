//! Why: what limited a slow transfer, and where each significant difference comes from.

pub mod explain;
pub mod slow_transfers;
