//! What every layer may use: OS helpers (`/proc`, temporary directories, atomic writes,
//! signals, machine facts, CPU accounting and the quiet-machine check) and pure libraries
//! (statistics, terminal text, the bundled font).

pub mod atomic;
pub mod cgroup;
pub mod contention;
pub mod cpu_cap;
pub mod critical_path;
pub mod digest;
pub mod font;
pub mod machine_check;
pub mod native_benchmark;
pub mod process_kind;
pub mod procfs;
pub mod public_suffix;
pub mod signals;
pub mod snmp;
pub mod stats;
pub mod sysinfo;
pub mod tempdir;
pub mod textfmt;
pub mod unprivileged;
