//! What the reference servers (Caddy, nginx, a user's own command; see `crate::servers`) share:
//! each runs as a child process inside the server namespace ([`child_process`]) serving the same
//! pages, certificate and port as the embedded server ([`config_file`]), with its access log read
//! into the common server view ([`access_log`]) and uploads counted by pagebench's sink
//! ([`sink`]); the HTTP/3 helpers' transport statistics are read by [`transport_log`].

pub mod access_log;
pub mod child_process;
pub mod config_file;
pub mod sink;
pub mod transport_log;
