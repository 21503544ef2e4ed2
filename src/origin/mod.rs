//! The servers under test: pagebench's embedded h1/h2/h3 server and the reference servers
//! (Caddy, nginx, quiche, aioquic, Apache, h2o, your own) behind one trait.

pub mod server;
pub mod servers;
