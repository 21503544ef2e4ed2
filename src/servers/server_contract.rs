//! What every server under test is to pagebench: the [`ServerUnderTest`] trait, what starting
//! one gets ([`StartContext`]), what it tells of a run ([`ServerEvidence`]) and of itself
//! ([`ServerDescription`]), and its entry in the registry ([`Registration`]). Each stack
//! (`stacks/`) implements it; nothing here names a stack.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::identity::ServerId;
use crate::config::protocol::Protocol;
use crate::config::site_archive::replay::Replay;
use crate::embedded_server::{AppliedKnobs, Certificate, ConnectionStats, ServerKnobs};
use crate::link::Namespace;
use crate::servers::server_view::{ServerView, TransportSummary};

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
    pub fn applied_knobs(&self) -> Option<&crate::embedded_server::EffectiveKnobs> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

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
