//! What to run, before anything runs: the protocols and their variants, the ids a run carries,
//! network profiles and their capacity traces, where inputs are found, workloads and replayed
//! sites, and the plan (pure but for reading the input files).

pub mod capacity;
pub mod device;
pub mod identity;
pub mod locations;
pub mod name_lookup;
pub mod plan;
pub mod priority;
pub mod profile;
pub mod protocol;
pub mod site_archive;
pub mod trace_file;
pub mod workload;
