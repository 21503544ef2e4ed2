//! What every engine is launched with and what its life cost a run: the options of one launch
//! (the protocol forced, the server's address and certificate, what to keep beside the load)
//! and the timings of the browser's life.

use std::time::Duration;

use crate::config::identity::RepeatCache;
use crate::config::protocol::{H3Mode, Protocol};

/// The host name every workload is served under (a sharded page's other hosts are its subdomains).
pub const HOST: &str = crate::config::workload::PAGE_HOST;

/// What to launch.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchOptions {
    pub protocol: Protocol,
    pub h3_mode: H3Mode,
    /// Address Chromium maps `pagebench.test` to.
    pub server_ip: std::net::IpAddr,
    pub port: u16,
    /// base64 SHA-256 of the server certificate's SPKI (Chromium pins it).
    pub spki: String,
    /// The server certificate, PEM (Firefox trusts it in its profile's NSS database).
    pub cert_pem: String,
    /// Where the browser writes its TLS secrets (NSS key log format); None: nowhere.
    pub key_log: Option<std::path::PathBuf>,
    /// Chromium's NetLog: the file and the capture mode (`--capture netlog`).
    pub net_log: Option<(std::path::PathBuf, crate::packets::NetLogMode)>,
    /// Upper bound of the settle wait.
    pub settle_max: Duration,
    /// Extra Chromium flags (given with their leading `--`).
    pub extra_args: Vec<String>,
    /// Keep every response body after the load (for a HAR with content; outside the measured
    /// load).
    pub keep_bodies: bool,
    /// Record a screencast of the load (`--visual`).
    pub visual: Option<crate::evidence::visual::VisualSource>,
    /// Every host the page may contact and its address (a replayed site's origins); empty:
    /// only `pagebench.test` at `server_ip`. All are forced onto h3 or primed for it alike.
    pub hosts: Vec<(String, std::net::IpAddr)>,
    /// A script run in every document before the page's own (`--deterministic`).
    pub init_script: Option<String>,
    /// A repeat view: navigate to this page once during the launch (outside the measured
    /// window), then close every connection but keep the TLS sessions and Alt-Svc knowledge.
    pub repeat: Option<RepeatView>,
    /// A replayed site's `as-recorded` arm: each host's recorded protocol. Nothing is then
    /// disabled; the hosts recorded over h3 are forced onto QUIC, the server offers the others
    /// their own (and no Alt-Svc).
    pub as_recorded: Vec<(String, Protocol)>,
    /// A replayed site's origins over TLS, host and port (its `http://` ones left out: they
    /// stay HTTP/1.1 without TLS); empty: every host of [`LaunchOptions::host_map`] on `port`.
    pub tls_origins: Vec<(String, u16)>,
    /// `--dns resolver`: the resolver every name is asked of (no host is mapped then: the
    /// hosts file names only localhost); None: names from [`LaunchOptions::host_map`] alone.
    pub resolver: Option<std::net::IpAddr>,
    /// The CPU the whole browser gets (`--devices`): a cgroup cap on every process, or
    /// Chromium's DevTools throttling of the page.
    pub device: crate::config::device::Device,
    /// Time the fixed JavaScript CPU benchmark in the page after the load (outside the measured
    /// window): a device's achieved slowdown in the engine itself.
    pub cpu_benchmark: bool,
}

impl LaunchOptions {
    /// The origins HTTP/3 is forced onto (or mapped for), host and port.
    pub fn quic_origins(&self) -> Vec<(String, u16)> {
        if self.tls_origins.is_empty() {
            self.host_map()
                .into_iter()
                .map(|(h, _)| (h, self.port))
                .collect()
        } else {
            self.tls_origins.clone()
        }
    }

    /// The `as-recorded` arm's origins recorded over h3, host and port (a host's port from
    /// `tls_origins`, else `port`).
    pub fn as_recorded_quic(&self) -> Vec<(String, u16)> {
        self.as_recorded
            .iter()
            .filter(|(_, p)| *p == Protocol::H3)
            .map(|(h, _)| {
                let port = self
                    .tls_origins
                    .iter()
                    .find(|(t, _)| t == h)
                    .map_or(self.port, |(_, p)| *p);
                (h.clone(), port)
            })
            .collect()
    }

    /// The hosts the browser may contact, each with its address.
    pub fn host_map(&self) -> Vec<(String, std::net::IpAddr)> {
        if self.hosts.is_empty() {
            vec![(HOST.to_string(), self.server_ip)]
        } else {
            self.hosts.clone()
        }
    }
}

impl LaunchOptions {
    /// Forced onto `protocol`, `pagebench.test` at 10.1.2.2:443, nothing else: the base of the
    /// browsers' tests.
    pub fn fixture(protocol: Protocol) -> LaunchOptions {
        LaunchOptions {
            protocol,
            h3_mode: H3Mode::Forced,
            server_ip: "10.1.2.2".parse().unwrap(),
            port: 443,
            spki: "abc=".into(),
            cert_pem: String::new(),
            key_log: None,
            net_log: None,
            settle_max: Duration::from_secs(1),
            extra_args: vec![],
            keep_bodies: false,
            visual: None,
            hosts: vec![],
            init_script: None,
            repeat: None,
            as_recorded: vec![],
            tls_origins: vec![],
            resolver: None,
            device: crate::config::device::Device::desktop(),
            cpu_benchmark: false,
        }
    }
}

/// A repeat view's first navigation, made during the launch (outside the measured window).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatView {
    pub url: String,
    pub cache: RepeatCache,
}
