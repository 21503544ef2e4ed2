//! The emulated network: two namespaces, two TUN devices and one emulator thread between
//! them (a pure link model in an IO shell).

pub mod netem;
