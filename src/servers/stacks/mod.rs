//! The registry of servers under test: one file per stack, and [`REGISTRY`], which
//! `--servers NAME` is parsed through. Adding a server: its file here and its two lines in this
//! file (`pub mod NAME;` and its entry in [`REGISTRY`]).

pub mod aioquic;
pub mod apache;
pub mod caddy;
pub mod custom;
pub mod embedded;
pub mod h2o;
pub mod nginx;
pub mod quiche;

use crate::servers::server_contract::Registration;

/// The default server: the embedded one (the only one that replays a site archive, and the one
/// every server knob applies to).
pub const DEFAULT: &Registration = &embedded::SERVER;

/// Every server `--servers` knows, the default first.
pub const REGISTRY: &[&Registration] = &[
    &embedded::SERVER,
    &caddy::SERVER,
    &nginx::SERVER,
    &quiche::SERVER,
    &aioquic::SERVER,
    &apache::SERVER,
    &h2o::SERVER,
];

/// `embedded, caddy, …, apache or h2o`.
pub fn registry_names() -> String {
    let names: Vec<&str> = REGISTRY.iter().map(|r| r.name).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}
