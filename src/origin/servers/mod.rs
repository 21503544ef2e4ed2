//! The servers under test: one trait ([`ServerUnderTest`]), one file per implementation
//! (the embedded server, Caddy, nginx, a user's `--server-cmd`), and one registry
//! ([`REGISTRY`]) that `--servers NAME` is parsed through.
//!
//! Adding a server: a file here with a [`Registration`] and an implementation of the trait
//! (reference servers that run as a child process use [`reference::process::ReferenceServer`]),
//! and one line in [`REGISTRY`].

pub mod evidence;
pub use evidence::{ServerView, TransportSummary};
pub mod aioquic;
pub mod apache;
pub mod arm;
pub mod caddy;
pub mod custom;
pub mod embedded;
pub mod h2o;
pub mod nginx;
pub mod quiche;
pub mod reference;
pub mod split;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::identity::ServerId;
use crate::config::protocol::Protocol;
use crate::config::site::replay::Replay;
use crate::link::netem::Namespace;
use crate::origin::server::{AppliedKnobs, Certificate, ConnectionStats, ServerKnobs};
use crate::origin::servers::reference::access_log::LogFormat;

pub use custom::{CustomLog, CustomServer};

/// A server running in the server namespace for the testbed's life.
pub trait ServerUnderTest {
    /// Its name in the plan, the records and `--servers` (`embedded`, `caddy`, `custom`…).
    fn name(&self) -> ServerId;
    fn port(&self) -> u16;
    /// Whether it offers `p` here (it speaks it and no knob switched it off).
    fn offers(&self, p: Protocol) -> bool;
    /// Marks the start of a run: [`ServerUnderTest::collect`] reports what came after.
    fn mark(&mut self);
    /// The server's view of the run since the mark.
    fn collect(&mut self) -> ServerEvidence;
    /// Why the server is not running any more, if it is not.
    fn exited(&mut self) -> Option<String>;
    /// The process group of a server pagebench started as a child (the fault hook's target).
    fn process_group(&self) -> Option<i32>;
    /// The threads that serve, whose CPU time and run-queue wait a run records (a child
    /// server: its process group).
    fn tasks(&self) -> Vec<crate::support::contention::Tasks> {
        self.process_group()
            .map(crate::support::contention::Tasks::Group)
            .into_iter()
            .collect()
    }
    /// What it runs and what it applied, for the metadata.
    fn describe(&self) -> ServerDescription;
    /// Keeps a qlog of each QUIC connection from now on (`on`), or stops. Returns whether this
    /// server can: only the embedded one does.
    fn set_qlog(&mut self, _on: bool) -> bool {
        false
    }
    /// Answers every request from `site` from now on (`None`: the workload tree again). Only
    /// a server that can replay a site archive takes one.
    fn replay(&mut self, replay: Option<Replay>) -> Result<()> {
        match replay {
            None => Ok(()),
            Some(r) => bail!(
                "server {} cannot replay the site archive {}: site workloads are served by --servers embedded",
                self.name(),
                r.site.dir().display()
            ),
        }
    }
}

/// The server's side of one run.
#[derive(Debug, Clone, Default)]
pub struct ServerEvidence {
    /// The requests as the server saw them (None: the server keeps no log we can read).
    pub views: Option<Vec<ServerView>>,
    /// The server's own log lines of the run, verbatim, for a human reader (each server's own
    /// format: the typed reading of them is `views`).
    pub log: Value,
    /// Per-connection transport statistics (None: the server gives none, as reference servers).
    pub transport: Option<Vec<ConnectionStats>>,
    pub summary: Option<TransportSummary>,
    /// The server's TLS secrets of the run (NSS key log; empty: it gives none).
    pub key_log: String,
    /// The server's qlog per QUIC connection of the run (name, JSON-SEQ).
    pub qlogs: Vec<(String, Vec<u8>)>,
}

/// What the metadata records about one server (`meta.json` `servers_applied.<name>`). Fields
/// are in alphabetical order so the file reads as it did when this was an untyped map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerDescription {
    /// A reference server's access log (None: it keeps none pagebench can read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_log: Option<AccessLogDescription>,
    /// What the embedded server really runs with (knobs with defaults, the kernel's answers).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "keys_sorted"
    )]
    pub applied: Option<AppliedKnobs>,
    /// A `--server-cmd` server's command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Knobs a reference server takes from pagebench, and those it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knobs_applied: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knobs_not_applicable: Option<Vec<String>>,
    /// The embedded server's knobs as asked.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "keys_sorted"
    )]
    pub knobs_requested: Option<ServerKnobs>,
    /// What a reader of the results must know about how it serves (e.g. which program serves
    /// which protocol).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The protocols a reference server was configured to offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocols: Option<OfferedProtocols>,
    pub server: ServerId,
    /// A reference server's TCP congestion control: the namespace default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_congestion: Option<String>,
    /// Why the namespace default is not the knob's, when it could not be set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_congestion_note: Option<String>,
    pub version: String,
    /// Windows its configuration sets that bound one transfer's bytes in flight (what
    /// `diagnose` names when a transfer is window-limited).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<ConfiguredWindow>,
}

/// A window a server under test was configured with: how many bytes one stream of `protocol`
/// may have in flight towards the server (`upload`) or from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfiguredWindow {
    pub protocol: Protocol,
    pub upload: bool,
    pub bytes: u64,
    /// The pagebench knob that sets it (`--h2-initial-stream-window`).
    pub knob: String,
    /// The server's own name for it (`H2WindowSize`), and how it bounds the transfer.
    pub setting: String,
}

/// Writes `v` with its keys in alphabetical order, as the metadata had them when it was an
/// untyped map (so a regenerated `meta.json` reads byte for byte as before).
fn keys_sorted<T: Serialize, S: serde::Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    let sorted = v
        .as_ref()
        .map(serde_json::to_value)
        .transpose()
        .map_err(serde::ser::Error::custom)?
        .map(sort_keys);
    sorted.serialize(s)
}

/// `v` with every object's keys in alphabetical order. (serde_json keeps insertion order in
/// this build: a dependency, qlog, turns on its `preserve_order`.)
pub fn sort_keys(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, x)| (k, sort_keys(x)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

/// The servers' descriptions by name (`meta.json` `servers_applied`).
pub type ServerDescriptions = std::collections::BTreeMap<ServerId, ServerDescription>;

/// `servers_applied` as the metadata holds it: null before any server started.
pub mod descriptions_or_null {
    use super::ServerDescriptions;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(d: &ServerDescriptions, s: S) -> Result<S::Ok, S::Error> {
        (!d.is_empty()).then_some(d).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ServerDescriptions, D::Error> {
        Ok(Option::<ServerDescriptions>::deserialize(d)?.unwrap_or_default())
    }
}

/// Where a reference server logs, and in which format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccessLogDescription {
    pub format: String,
    pub path: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfferedProtocols {
    pub h1: bool,
    pub h2: bool,
    pub h3: bool,
}

impl OfferedProtocols {
    pub fn offers(&self, p: Protocol) -> bool {
        match p {
            Protocol::H1 => self.h1,
            Protocol::H2 => self.h2,
            Protocol::H3 => self.h3,
        }
    }
}

impl ServerDescription {
    /// The knobs the embedded server runs with (None for a reference server, which takes
    /// only what [`ServerDescription::knobs_applied`] lists).
    pub fn applied_knobs(&self) -> Option<&crate::origin::server::EffectiveKnobs> {
        self.applied.as_ref().map(|a| &a.knobs)
    }
}

/// The TCP congestion control of the server namespace, which reference servers (that do not
/// set it per socket) use.
#[derive(Debug, Clone, Default)]
pub struct NamespaceTcp {
    pub congestion: String,
    /// Why the knob's algorithm could not be made the namespace default, if it could not.
    pub note: Option<String>,
}

/// What a server gets to start.
pub struct StartContext<'a> {
    /// The server namespace.
    pub ns: &'a Namespace,
    pub ip: IpAddr,
    pub port: u16,
    /// The pages tree (canonical).
    pub root: &'a Path,
    pub cert: &'a Certificate,
    pub knobs: &'a ServerKnobs,
    /// The server's own scratch directory (created by the server).
    pub work: PathBuf,
    /// Where the embedded server keeps its JSON-lines request log, if anywhere.
    pub log_dir: Option<&'a Path>,
    pub namespace_tcp: &'a NamespaceTcp,
    /// The ports of replayed sites' origins beyond 443 (the embedded server serves them too).
    pub site_ports: &'a [u16],
}

/// A server `--servers` can select: its name, the protocols it can speak at all, and how it
/// starts.
pub struct Registration {
    pub name: &'static str,
    pub speaks: &'static [Protocol],
    /// Completes "--servers NAME cannot serve PROTOCOL …" for a protocol it does not speak.
    pub cannot_serve: &'static str,
    pub start: fn(&StartContext) -> Result<Box<dyn ServerUnderTest>>,
}

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
fn registry_names() -> String {
    let names: Vec<&str> = REGISTRY.iter().map(|r| r.name).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// Which server to test.
#[derive(Clone)]
pub enum ServerChoice {
    /// A server of the [`REGISTRY`], by `--servers`.
    Registered(&'static Registration),
    /// `--server-cmd`: a user's command line with placeholders (and its log, if named).
    Command(CustomServer),
    /// A server of the registry with knobs of its own (`embedded:priorities=rfc9218`).
    Arm(arm::Arm),
}

impl std::fmt::Debug for ServerChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerChoice::Registered(r) => write!(f, "Registered({})", r.name),
            ServerChoice::Command(c) => f.debug_tuple("Command").field(c).finish(),
            ServerChoice::Arm(a) => a.fmt(f),
        }
    }
}

impl PartialEq for ServerChoice {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ServerChoice::Registered(a), ServerChoice::Registered(b)) => a.name == b.name,
            (ServerChoice::Command(a), ServerChoice::Command(b)) => a == b,
            (ServerChoice::Arm(a), ServerChoice::Arm(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for ServerChoice {}

impl ServerChoice {
    /// The embedded server (the default).
    pub fn embedded() -> ServerChoice {
        ServerChoice::Registered(&embedded::SERVER)
    }

    /// The id the plan, the records and the report know it by.
    pub fn name(&self) -> ServerId {
        ServerId::new(match self {
            ServerChoice::Registered(r) => r.name,
            ServerChoice::Command(_) => custom::NAME,
            ServerChoice::Arm(a) => a.spec.as_str(),
        })
    }

    /// The server of the registry it runs (None: a `--server-cmd`).
    fn registration(&self) -> Option<&'static Registration> {
        match self {
            ServerChoice::Registered(r) => Some(r),
            ServerChoice::Arm(a) => Some(a.base),
            ServerChoice::Command(_) => None,
        }
    }

    /// Refuses a protocol the server cannot speak at all (as opposed to one switched off by a
    /// knob, which a forced browser is then caught failing on).
    pub fn check_protocol(&self, p: Protocol) -> Result<()> {
        match self.registration() {
            Some(r) if !r.speaks.contains(&p) => {
                bail!(
                    "--servers {} cannot serve {p} {}",
                    self.name(),
                    r.cannot_serve
                )
            }
            _ => Ok(()),
        }
    }

    /// Refuses knobs that cannot work on protocol `p` with this server: Early Hints over
    /// HTTP/1.1 (Chromium ignores a 103 there, and hyper, the embedded server's HTTP/1.1, cannot
    /// send one). `knobs` are the matrix's; an arm's own are laid over them.
    pub fn check_knobs(&self, knobs: &ServerKnobs, p: Protocol) -> Result<()> {
        let knobs = match self {
            ServerChoice::Arm(a) => knobs.overlay(&a.knobs),
            ServerChoice::Registered(r) if r.name == embedded::SERVER.name => knobs.clone(),
            _ => return Ok(()),
        };
        if knobs.early_hints == Some(true) && p == Protocol::H1 {
            bail!(
                "--servers {}: Early Hints are not sent over HTTP/1.1 (Chromium ignores a 103 there, and the embedded server's HTTP/1.1 cannot send one): measure h2 and h3, or leave --early-hints out",
                self.name()
            );
        }
        Ok(())
    }

    /// Refuses a site workload (a recorded site or a sharded page, served from its archive) on
    /// a server that cannot replay one: only the embedded server does.
    pub fn check_replay(&self, workload: &str) -> Result<()> {
        if self
            .registration()
            .is_some_and(|r| r.name == embedded::SERVER.name)
        {
            return Ok(());
        }
        bail!(
            "workload {workload} is replayed from its site archive, which only --servers embedded serves; leave {} out for it",
            self.name()
        )
    }

    /// Whether the server can speak `p` at all.
    pub fn speaks(&self, p: Protocol) -> bool {
        self.registration().is_none_or(|r| r.speaks.contains(&p))
    }

    /// How the matrix identity names this server (a custom one with its command and log).
    pub fn identity(&self) -> String {
        match self {
            ServerChoice::Registered(r) => r.name.to_string(),
            ServerChoice::Command(c) => c.identity(),
            ServerChoice::Arm(a) => a.spec.clone(),
        }
    }

    /// Starts the server.
    pub fn start(&self, ctx: &StartContext) -> Result<Box<dyn ServerUnderTest>> {
        match self {
            ServerChoice::Registered(r) => (r.start)(ctx),
            ServerChoice::Command(c) => custom::start(c, ctx),
            ServerChoice::Arm(a) => a.start(ctx),
        }
    }
}

impl FromStr for ServerChoice {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let spec = s.trim();
        let (name, knobs) = match spec.split_once(':') {
            Some((name, knobs)) => (name.trim(), Some(knobs)),
            None => (spec, None),
        };
        match REGISTRY.iter().find(|r| r.name == name) {
            Some(r) => match knobs {
                None => Ok(ServerChoice::Registered(r)),
                Some(knobs) => Ok(ServerChoice::Arm(arm::Arm::parse(r, spec, knobs)?)),
            },
            None => bail!(
                "unknown server {name:?}: use {} (or --server-cmd for your own)",
                registry_names()
            ),
        }
    }
}

/// Parses `--servers a,b` (with `--server-cmd` adding `custom`, whose access log
/// `--server-log-format` / `--server-log` name).
pub fn parse_servers(
    spec: &str,
    command: Option<&str>,
    log_format: Option<&str>,
    log_path: Option<&str>,
) -> Result<Vec<ServerChoice>> {
    let mut out: Vec<ServerChoice> = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let s: ServerChoice = item.parse()?;
        if out.contains(&s) {
            bail!("server {item:?} is listed twice in --servers");
        }
        out.push(s);
    }
    if let Some(c) = command {
        if c.trim().is_empty() {
            bail!("--server-cmd is empty");
        }
        let log = match (log_format, log_path) {
            (Some(f), path) => Some(CustomLog {
                format: f.parse().map_err(anyhow::Error::msg)?,
                path: path.map(str::to_string),
            }),
            (None, Some(p)) => bail!(
                "--server-log {p:?} needs --server-log-format ({}) so its lines can be read",
                LogFormat::NAMES
            ),
            (None, None) => None,
        };
        out.push(ServerChoice::Command(CustomServer {
            command: c.to_string(),
            log,
        }));
    } else if log_format.is_some() || log_path.is_some() {
        bail!("--server-log and --server-log-format describe the log of --server-cmd: give --server-cmd too");
    }
    if out.is_empty() {
        let names: Vec<String> = REGISTRY
            .iter()
            .enumerate()
            .map(|(i, r)| {
                if i == 0 {
                    format!("{} (the default)", r.name)
                } else {
                    r.name.to_string()
                }
            })
            .collect();
        bail!(
            "no server selected: give --servers {} or --server-cmd",
            names.join(", ")
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_parse_through_the_registry() {
        let s = parse_servers("embedded, caddy", None, None, None).unwrap();
        assert_eq!(
            s.iter().map(ServerChoice::name).collect::<Vec<_>>(),
            ["embedded", "caddy"]
        );
        assert_eq!(s[0], ServerChoice::embedded());
        let e = "lighttpd".parse::<ServerChoice>().unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown server \"lighttpd\": use embedded, caddy, nginx, quiche, aioquic, apache or h2o (or --server-cmd for your own)"
        );
        let e = parse_servers("caddy,caddy", None, None, None).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        let e = parse_servers("", None, None, None).unwrap_err().to_string();
        assert_eq!(
            e,
            "no server selected: give --servers embedded (the default), caddy, nginx, quiche, aioquic, apache, h2o or --server-cmd"
        );
    }

    #[test]
    fn an_arm_is_a_server_with_knobs_of_its_own() {
        let s = parse_servers(
            "embedded, embedded:priorities=rfc9218:h2-stream-buffer=64KiB",
            None,
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            s.iter().map(ServerChoice::name).collect::<Vec<_>>(),
            [
                "embedded",
                "embedded:priorities=rfc9218:h2-stream-buffer=64KiB"
            ]
        );
        let ServerChoice::Arm(arm) = &s[1] else {
            panic!("{:?}", s[1])
        };
        assert_eq!(
            arm.knobs.priorities,
            Some(crate::origin::server::priority::Priorities::Rfc9218)
        );
        assert_eq!(arm.knobs.h2_stream_buffer.map(|b| b.0), Some(65536));
        assert_eq!(
            s[1].name().file_name(),
            "embedded_priorities_rfc9218_h2-stream-buffer_64KiB"
        );
        assert!(s[1].check_replay("site-x").is_ok());
        let lists: ServerChoice = "embedded:server-protocols=h2+h3".parse().unwrap();
        let ServerChoice::Arm(lists) = lists else {
            panic!()
        };
        assert_eq!(
            lists.knobs.protocols,
            Some(vec![Protocol::H2, Protocol::H3])
        );
        // Bad arms say which, and how to write one.
        for (bad, says) in [
            ("embedded:priorities", "not knob=value"),
            ("embedded:priorities=sometimes", "sometimes"),
            ("embedded:colour=blue", "colour"),
        ] {
            let e = bad.parse::<ServerChoice>().unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--servers {bad}: ")) && e.contains(says),
                "{e}"
            );
        }
        let e =
            parse_servers("embedded:gso=false,embedded:gso=false", None, None, None).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        let nginx: ServerChoice = "nginx:tcp-congestion=reno".parse().unwrap();
        assert!(nginx
            .check_protocol(Protocol::H3)
            .unwrap_err()
            .to_string()
            .starts_with("--servers nginx:tcp-congestion=reno cannot serve h3"));
    }

    #[test]
    fn a_custom_server_comes_with_its_log() {
        let s = parse_servers(
            "",
            Some("srv {port}"),
            Some("combined"),
            Some("{work}/a.log"),
        )
        .unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].name(), "custom");
        assert_eq!(
            s[0].identity(),
            "custom: srv {port} (log combined {work}/a.log)"
        );
        let e = parse_servers("", Some("srv"), None, Some("a.log")).unwrap_err();
        assert!(e.to_string().contains("--server-log-format"), "{e}");
        let e = parse_servers("embedded", None, Some("combined"), None).unwrap_err();
        assert!(e.to_string().contains("give --server-cmd too"), "{e}");
        assert!(parse_servers("", Some("  "), None, None).is_err());
    }

    #[test]
    fn protocols_a_server_cannot_speak_are_refused_by_name() {
        let nginx: ServerChoice = "nginx".parse().unwrap();
        let e = nginx.check_protocol(Protocol::H3).unwrap_err().to_string();
        assert_eq!(e, "--servers nginx cannot serve h3 (Debian's nginx 1.22 has no HTTP/3): drop h3 from --protocols, or use caddy / --server-cmd with an nginx built with QUIC");
        assert!(ServerChoice::embedded().check_replay("site-x").is_ok());
        let e = nginx.check_replay("page50s2").unwrap_err().to_string();
        assert!(
            e.contains("page50s2") && e.contains("--servers embedded"),
            "{e}"
        );
        assert!(nginx.check_protocol(Protocol::H2).is_ok());
        for p in Protocol::ALL {
            assert!(ServerChoice::embedded().check_protocol(p).is_ok());
            for s in ["caddy", "quiche", "aioquic"] {
                assert!(s.parse::<ServerChoice>().unwrap().speaks(p), "{s} {p}");
            }
        }
        // Apache and h2o: h1 and h2 only, refused by name before any run.
        for s in ["apache", "h2o"] {
            let c: ServerChoice = s.parse().unwrap();
            assert!(c.check_protocol(Protocol::H2).is_ok());
            let e = c.check_protocol(Protocol::H3).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--servers {s} cannot serve h3 (")),
                "{e}"
            );
        }
    }

    #[test]
    fn a_description_keeps_the_shape_of_the_metadata() {
        // A reference server's description as the metadata held it before it was typed.
        let v = serde_json::json!({
            "server": "caddy", "version": "v2.6.2", "command": "custom cmd",
            "access_log": {"path": "/w/access.log", "format": "caddy-json"},
            "port": 8443, "protocols": {"h1": true, "h2": true, "h3": true},
            "knobs_applied": ["protocols"], "knobs_not_applicable": ["gso"],
            "tcp_congestion": "cubic",
        });
        let d: ServerDescription = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(d.port, Some(8443));
        assert!(d.protocols.unwrap().offers(Protocol::H3));
        assert_eq!(serde_json::to_value(&d).unwrap(), v);
        // The embedded server's, from results/example.
        let meta: Value = serde_json::from_str(
            &std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("results/example/meta.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let v = meta["servers_applied"]["embedded"].clone();
        let d: ServerDescription = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(
            d.applied_knobs().unwrap().h3_stream_receive_window,
            1_250_000
        );
        // Knobs added since read as what the server did then: resumption on, no 0-RTT.
        let mut again = serde_json::to_value(&d).unwrap();
        let knobs = again["applied"]["knobs"].as_object_mut().unwrap();
        assert_eq!(knobs.remove("tls_resumption"), Some(Value::Bool(true)));
        assert_eq!(knobs.remove("quic_0rtt"), Some(Value::Bool(false)));
        assert_eq!(again, v);
    }
}
