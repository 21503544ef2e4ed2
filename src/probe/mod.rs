//! One measured load and what it proves about itself: the browser, the testbed and the run
//! protocol, the packets, the metrics derived from what the browser saw, the run's validation
//! and its record.

pub mod browser;
pub mod capture;
pub mod disruption;
pub mod fault;
pub mod fidelity;
pub mod har;
pub mod metrics;
pub mod record;
pub mod recording;
pub mod registry;
pub mod round_trips;
pub mod runner;
pub mod testbed;
pub mod validate;
pub mod visual;
