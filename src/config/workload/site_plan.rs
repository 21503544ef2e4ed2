//! What a replayed site's run needs to know of it: its origins (`SiteOrigin`: host, address,
//! recorded protocol and distance), the plan of a site (`SitePlan`), the options a run replays it
//! with (`SiteOptions`), and how its requests are keyed.

use crate::config::profile::Profile;
use crate::config::site_archive::distances::{self, AppliedDistance, Distances, RecordedRtt};
use crate::config::site_archive::origins::AddressMode;
use crate::config::site_archive::replay::ThinkTime;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How site workloads are replayed (`--origin-addresses`, `--think-time`, `--deterministic`,
/// `--max-misses`), the same for every site of a run or matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SiteOptions {
    pub addresses: AddressMode,
    pub think: ThinkTime,
    pub deterministic: bool,
    /// Requests not in the archive a run may make and still count.
    pub max_misses: u32,
    /// Each origin at the profile's round trip, or at the recording's.
    #[serde(default)]
    pub distances: Distances,
}

/// One recorded origin on replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiteOrigin {
    /// `https://host[:port]`.
    pub origin: String,
    pub host: String,
    pub port: u16,
    /// Which server address serves it (0: the server namespace's own).
    pub address: usize,
    /// The protocol most of its responses used in the recording.
    pub recorded_protocol: Option<String>,
    /// Recorded responses and their bytes on the wire.
    pub responses: usize,
    pub bytes: u64,
    /// Its round trip as the recording's timings tell it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_rtt: Option<RecordedRtt>,
    /// Its host's name lookup as the recording timed it, ms (None: the recording looked
    /// nothing up, or does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_lookup_ms: Option<f64>,
    /// The connections the recording browser opened to it, if the recording names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_connections: Option<usize>,
}

/// What the replay of a site needs beside the manifest's files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SitePlan {
    pub dir: PathBuf,
    pub page_url: String,
    pub origins: Vec<SiteOrigin>,
    /// Server addresses the origins need.
    pub addresses: usize,
    pub options: SiteOptions,
    /// When the recording started (unix ms): `--deterministic`'s clock starts there.
    pub recorded_start_ms: f64,
    /// The recorded page's load event (ms from its navigation), if the recording says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_load_ms: Option<f64>,
    /// The connections the recording browser used, if the recording names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_connections: Option<usize>,
    /// The recorded load's critical path: the URLs of the chain of requests that ended last
    /// before its load event, the page first (`support::critical_path`; empty: recorded before
    /// it was kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded_critical_path: Vec<String>,
    /// How many times the recording asked for each URL, by [`request_key`] (a page may ask
    /// twice: an icon and an image of one file; empty: recorded before it was kept).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub recorded_requests: BTreeMap<String, usize>,
}

/// A request's URL without its query and fragment: what a replay's request of a recorded one
/// has in common with it (the archive answers another query string from the same path).
pub fn request_key(url: &str) -> String {
    url.split(['?', '#']).next().unwrap_or(url).to_string()
}

#[cfg(test)]
impl SiteOrigin {
    /// `https://host` on address 0, recorded over h2 on one connection: the base of unit
    /// tests' sites.
    pub(crate) fn fixture(host: &str, responses: usize, bytes: u64) -> SiteOrigin {
        SiteOrigin {
            origin: format!("https://{host}"),
            host: host.into(),
            port: 443,
            address: 0,
            recorded_protocol: Some("h2".into()),
            responses,
            bytes,
            recorded_rtt: None,
            recorded_lookup_ms: None,
            recorded_connections: Some(1),
        }
    }
}

impl SiteOrigin {
    /// Whether the page reached it over TLS (`https://`): plain-http origins are served
    /// HTTP/1.1 without TLS, whichever protocol the run is on.
    pub fn is_tls(&self) -> bool {
        !self.origin.starts_with("http://")
    }
}

impl SitePlan {
    /// Every port its origins are on (443 for most sites; 80 for plain http), once.
    pub fn ports(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self.origins.iter().map(|o| o.port).collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// The origins reached over TLS, as host and port: the ones HTTP/2 and HTTP/3 apply to.
    pub fn tls_origins(&self) -> Vec<(String, u16)> {
        self.origins
            .iter()
            .filter(|o| o.is_tls())
            .map(|o| (o.host.to_ascii_lowercase(), o.port))
            .collect()
    }

    /// The origin `url` is of.
    pub fn origin_of_url(&self, url: &str) -> Option<&SiteOrigin> {
        let origin = crate::config::site_archive::har_import::origin(url)?;
        self.origins.iter().find(|o| o.origin == origin)
    }

    /// The protocol the page's own origin used when recorded.
    pub fn page_protocol(&self) -> Option<crate::config::protocol::Protocol> {
        let host = self.page_url.split('/').nth(2)?;
        self.origin_of_host(host)?
            .recorded_protocol
            .as_deref()?
            .parse()
            .ok()
    }

    /// Each origin's host and recorded protocol (for the `as-recorded` arm; an origin without
    /// one is refused by [`SitePlan::check_as_recorded`]).
    pub fn recorded_protocols(&self) -> Vec<(String, crate::config::protocol::Protocol)> {
        self.origins
            .iter()
            .filter_map(|o| {
                Some((
                    o.host.clone(),
                    o.recorded_protocol.as_deref()?.parse().ok()?,
                ))
            })
            .collect()
    }

    /// The profile a replay of this site runs on: `profile` itself, or with `--distances
    /// recorded` each server address delayed so its origins sit at their recorded round trip
    /// instead of the profile's. Errors when the profile delays addresses itself.
    pub fn profile_for(&self, profile: &Profile) -> Result<Profile> {
        if self.options.distances == Distances::Profile {
            return Ok(profile.clone());
        }
        if self.options.addresses == AddressMode::Single && self.origins.len() > 1 {
            bail!(
                "--distances recorded puts each origin at its own distance, but --origin-addresses single serves them all from one address: use recorded or per-origin"
            );
        }
        if !profile.origin_delay_ms.is_empty() {
            bail!(
                "--distances recorded: profile {} sets origin_delay_ms itself; give one or the other",
                profile.name
            );
        }
        let origins: Vec<(usize, Option<f64>)> = self
            .origins
            .iter()
            .map(|o| (o.address, o.recorded_rtt.map(|r| r.rtt_ms)))
            .collect();
        let delays = distances::address_delays(self.addresses, &origins, profile.rtt_ms);
        Ok(Profile {
            origin_delay_ms: delays,
            ..profile.clone()
        })
    }

    /// The origins recorded nearer than `profile`'s round trip: at the recorded distances they
    /// stay at the profile's (the link cannot take delay away).
    pub fn nearer_than(&self, profile: &Profile) -> Vec<&str> {
        if self.options.distances == Distances::Profile {
            return Vec::new();
        }
        self.origins
            .iter()
            .filter(|o| o.recorded_rtt.is_some_and(|r| r.rtt_ms < profile.rtt_ms))
            .map(|o| o.origin.as_str())
            .collect()
    }

    /// Says (once, before the runs of workload `w`) which origins stay at `profile`'s round
    /// trip though recorded nearer.
    pub fn warn_nearer(&self, w: &str, profile: &Profile) {
        let near = self.nearer_than(profile);
        if !near.is_empty() {
            tracing::warn!(
                "--distances recorded: {w}'s {} recorded nearer than profile {}'s {} ms round trip; they stay at it",
                near.join(", "),
                profile.name,
                profile.rtt_ms
            );
        }
    }

    /// Each origin's recorded and replayed round trip on `profile` (as [`SitePlan::profile_for`]
    /// made it), and with `looked_up` (a resolver was asked) its host's lookup, when the replay
    /// runs at the recorded distances.
    pub fn applied_distances(
        &self,
        profile: &Profile,
        looked_up: bool,
    ) -> Option<Vec<AppliedDistance>> {
        if self.options.distances == Distances::Profile {
            return None;
        }
        let extra = |a: usize| profile.origin_delay_ms.get(a).copied().unwrap_or(0.0);
        let holds = self.lookup_holds(profile);
        let lookup = |o: &SiteOrigin| {
            let hold = holds.iter().find(|(h, _)| h.eq_ignore_ascii_case(&o.host));
            Some(profile.resolver_rtt() + hold?.1).filter(|_| looked_up)
        };
        Some(
            self.origins
                .iter()
                .map(|o| AppliedDistance {
                    origin: o.origin.clone(),
                    recorded: o.recorded_rtt,
                    replay_rtt_ms: profile.rtt_ms + 2.0 * extra(o.address),
                    recorded_lookup_ms: o.recorded_lookup_ms,
                    replay_lookup_ms: lookup(o),
                })
                .collect(),
        )
    }

    /// With `--distances recorded`, how long a resolver at `profile`'s round trip holds each
    /// host's answer so its lookup takes the recorded time (ms; empty: at the profile's
    /// distances, or nothing recorded).
    pub fn lookup_holds(&self, profile: &Profile) -> Vec<(String, f64)> {
        if self.options.distances == Distances::Profile {
            return Vec::new();
        }
        let origins: Vec<(&str, Option<f64>)> = self
            .origins
            .iter()
            .map(|o| (o.host.as_str(), o.recorded_lookup_ms))
            .collect();
        distances::lookup_holds(&origins, profile.resolver_rtt())
    }

    /// Whether every origin has a recorded protocol (the `as-recorded` arm needs them).
    pub fn check_as_recorded(&self, workload: &str) -> anyhow::Result<()> {
        let lacking: Vec<&str> = self
            .origins
            .iter()
            .filter(|o| {
                o.recorded_protocol
                    .as_deref()
                    .and_then(|p| p.parse::<crate::config::protocol::Protocol>().ok())
                    .is_none()
            })
            .map(|o| o.origin.as_str())
            .collect();
        if !lacking.is_empty() {
            bail!(
                "as-recorded: workload {workload}: the recording does not say which protocol {} used; record it with `pagebench record` (or a HAR with httpVersion), or leave as-recorded out",
                lacking.join(", ")
            );
        }
        Ok(())
    }

    /// The origin of `host`, if the site has it.
    pub fn origin_of_host(&self, host: &str) -> Option<&SiteOrigin> {
        self.origins
            .iter()
            .find(|o| o.host.eq_ignore_ascii_case(host))
    }
}

/// A recorded URL as validation keys it: without its fragment.
pub fn url_key(url: &str) -> String {
    url.split('#').next().unwrap_or(url).to_string()
}
