//! Reference servers beside the embedded one: Debian's Caddy (quic-go: h1, h2, h3), Debian's
//! nginx (h1, h2) and a user's own command, each started inside the server namespace with the
//! same pages, certificate and port.

pub mod access_log;
pub mod config;
pub mod process;
pub mod sink;
