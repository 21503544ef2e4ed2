//! One measured load: the browsers, the testbed and the run protocol, a run's retries, test
//! faults, and recording a real site.

pub mod accounting;
pub mod browser;
pub mod fault;
pub mod runner;
pub mod site_recorder;
pub mod testbed;
