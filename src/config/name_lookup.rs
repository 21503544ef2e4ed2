//! `--dns`: how the browser finds its hosts' addresses.

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::config::site_archive::distances::Distances;
use crate::config::workload::WorkloadKind;

/// How names are resolved in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DnsMode {
    /// No lookup: the browser finds every host in a hosts file (the study's way, and the
    /// default: its figures keep their meaning).
    #[default]
    None,
    /// Every name is asked of pagebench's own resolver in the server namespace, through the
    /// link, as a first visit does (and `h3-dns` reads its HTTPS records).
    Resolver,
}

impl DnsMode {
    pub fn name(self) -> &'static str {
        match self {
            DnsMode::None => "none",
            DnsMode::Resolver => "resolver",
        }
    }

    pub fn is_none(&self) -> bool {
        *self == DnsMode::None
    }
}

/// A lookup shorter than this was answered on the machine (hosts file, rules, cache), not
/// asked of a resolver across a link.
pub const LOOKUP_FLOOR_MS: f64 = 1.0;

/// `--dns` as given, or its default: `resolver` for a replay at the recorded distances
/// (`distances`) of a site among `workloads` whose recording timed a lookup (its names then
/// cost what they cost when recorded: replays of `tests/site_record.rs`'s three-origin site
/// loaded in 0.99–1.03 of the recording with them, 0.79–0.81 without), else `none`.
pub fn effective(given: Option<DnsMode>, workloads: &str, distances: Distances) -> Result<DnsMode> {
    if let Some(mode) = given {
        return Ok(mode);
    }
    if distances != Distances::Recorded {
        return Ok(DnsMode::None);
    }
    for w in crate::config::workload::parse_list(workloads)? {
        let WorkloadKind::Site { dir } = &w.kind else {
            continue;
        };
        let archive = crate::config::site_archive::read(dir)?;
        let timed = archive
            .entries
            .iter()
            .any(|e| e.timings.dns_ms.is_some_and(|d| d >= LOOKUP_FLOOR_MS));
        if timed {
            tracing::info!(
                "--dns resolver: {}'s recording timed its lookups and --distances recorded puts them back (--dns none leaves them out)",
                w.name
            );
            return Ok(DnsMode::Resolver);
        }
    }
    Ok(DnsMode::None)
}

impl fmt::Display for DnsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DnsMode {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<DnsMode> {
        match s.trim() {
            "none" => Ok(DnsMode::None),
            "resolver" => Ok(DnsMode::Resolver),
            other => bail!("unknown --dns {other:?}: use none (names from a hosts file) or resolver (every lookup through the link)"),
        }
    }
}

/// Whether `host` can be asked of a resolver: dot-separated labels of 1–63 letters, digits and
/// hyphens (not at a label's ends; underscores too, as browsers take them), 253 characters in
/// all. An error says what is wrong.
pub fn check_dns_name(host: &str) -> Result<()> {
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.is_empty() || name.len() > 253 {
        bail!("{host:?} is not a DNS name: it must have 1 to 253 characters");
    }
    for label in name.split('.') {
        let ok_chars = label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if label.is_empty() || label.len() > 63 || !ok_chars {
            bail!(
                "{host:?} is not a DNS name: label {label:?} must be 1 to 63 letters, digits, hyphens or underscores"
            );
        }
        if label.starts_with('-') || label.ends_with('-') {
            bail!("{host:?} is not a DNS name: label {label:?} starts or ends with a hyphen");
        }
    }
    Ok(())
}

/// Every host of `manifests`' replayed sites, checked as a resolver will be asked for it.
pub fn check_site_names<'a>(
    manifests: impl IntoIterator<Item = &'a crate::config::workload::Manifest>,
) -> Result<()> {
    for m in manifests {
        let Some(site) = &m.site else { continue };
        for o in &site.origins {
            check_dns_name(&o.host).map_err(|e| {
                anyhow::anyhow!(
                    "site archive {}: origin {}: {e}; --dns resolver can only answer for DNS names (use --dns none for this archive)",
                    site.dir.display(),
                    o.origin
                )
            })?;
        }
    }
    Ok(())
}

/// One `--dns-name HOST=N[@MS]`.
#[derive(Debug, Clone, PartialEq)]
pub struct DnsName {
    pub host: String,
    /// The server address it is answered with (0: the namespace's own).
    pub address: usize,
    /// How much longer than the resolver's round trip its lookup takes, ms.
    pub hold_ms: f64,
}

/// `--dns-name HOST=N[@MS]`.
pub fn parse_dns_name(s: &str) -> Result<DnsName> {
    let usage = "give HOST=N[@MS], e.g. www.site.test=1 or static.site.test=2@30 (N: the server address, 1 the namespace's own; MS: a hold in ms)";
    let Some((host, rest)) = s.trim().split_once('=') else {
        bail!("--dns-name {s:?}: {usage}");
    };
    if let Err(e) = check_dns_name(host) {
        bail!("--dns-name {s:?}: {e}");
    }
    let (n, hold) = rest.split_once('@').unwrap_or((rest, "0"));
    let address = match n.parse::<usize>() {
        Ok(n) if n >= 1 => n - 1,
        _ => bail!("--dns-name {s:?}: {n:?} is not a server address number; {usage}"),
    };
    let hold_ms = match hold.parse::<f64>() {
        Ok(h) if h.is_finite() && (0.0..=60_000.0).contains(&h) => h,
        _ => bail!("--dns-name {s:?}: {hold:?} is not a hold of 0 to 60000 ms; {usage}"),
    };
    Ok(DnsName {
        host: host.to_ascii_lowercase(),
        address,
        hold_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-request site archive in `dir` whose page's lookup was timed `dns` (None: not).
    fn site(dir: &std::path::Path, dns: Option<f64>) -> String {
        let mut e = crate::config::site_archive::tests::entry("https://www.a.test/", 200);
        e.timings.dns_ms = dns;
        let mut b = crate::config::site_archive::Builder::default();
        b.push(e, Some(b"<html>".to_vec()));
        let source = crate::config::site_archive::Source {
            kind: "import".into(),
            from: "test.har".into(),
            creator: "test".into(),
            started: None,
            browser_confinement: None,
            load_ms: None,
        };
        b.write(dir, source, "https://www.a.test/".into()).unwrap();
        format!("page10,site:{}", dir.display())
    }

    #[test]
    fn a_replay_at_recorded_distances_of_timed_lookups_asks_the_resolver_unless_told() {
        let (timed, untimed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let timed = site(timed.path(), Some(31.5));
        let untimed = site(untimed.path(), Some(0.2));
        let e = |given, w: &str, d| effective(given, w, d).unwrap();
        assert_eq!(e(None, &timed, Distances::Recorded), DnsMode::Resolver);
        assert_eq!(e(None, &timed, Distances::Profile), DnsMode::None);
        assert_eq!(e(None, &untimed, Distances::Recorded), DnsMode::None);
        assert_eq!(e(None, "page10", Distances::Recorded), DnsMode::None);
        let none = Some(DnsMode::None);
        assert_eq!(e(none, &timed, Distances::Recorded), DnsMode::None);
        let resolver = Some(DnsMode::Resolver);
        assert_eq!(e(resolver, "page10", Distances::Profile), DnsMode::Resolver);
    }

    #[test]
    fn both_modes_parse_and_anything_else_says_which_exist() {
        assert_eq!("resolver".parse::<DnsMode>().unwrap(), DnsMode::Resolver);
        assert_eq!("none".parse::<DnsMode>().unwrap(), DnsMode::None);
        let e = "doh".parse::<DnsMode>().unwrap_err().to_string();
        assert!(e.contains("--dns") && e.contains("resolver"), "{e}");
    }
}
