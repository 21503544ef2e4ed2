//! Which server address each recorded origin gets on replay (pure). By default origins that
//! shared a server address in the recording share one in the server namespace (`recorded`), so
//! HTTP/2 and HTTP/3 connection coalescing and the browser's per-address limits behave as they
//! did; `per-origin` gives every origin its own, `single` puts them all on one (what Web Page
//! Replay does). The testbed turns slots into addresses; certificates and resolver rules are
//! per host whatever the mode.

use std::collections::BTreeMap;
use std::str::FromStr;

use anyhow::{bail, Result};

use super::har_import::origin;
use super::Entry;

/// `--origin-addresses`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AddressMode {
    /// One address per server address of the recording (origins without one get their own).
    #[default]
    Recorded,
    PerOrigin,
    Single,
}

impl FromStr for AddressMode {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<AddressMode> {
        Ok(match s.trim() {
            "recorded" => AddressMode::Recorded,
            "per-origin" => AddressMode::PerOrigin,
            "single" => AddressMode::Single,
            other => {
                bail!("unknown --origin-addresses {other:?}: use recorded, per-origin or single")
            }
        })
    }
}

/// One recorded origin on replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginSlot {
    /// `https://host[:port]`.
    pub origin: String,
    pub host: String,
    /// The port the page used (443 or 80 when the URL names none).
    pub port: u16,
    /// Which replay address serves it (0-based; the first origin of the page gets 0).
    pub address: usize,
}

/// The origins of `entries` in the order the page first used them, each with its address slot,
/// and the number of addresses needed.
pub fn plan(entries: &[Entry], mode: AddressMode) -> Result<(Vec<OriginSlot>, usize)> {
    let mut slots: Vec<OriginSlot> = Vec::new();
    let mut by_server: BTreeMap<String, usize> = BTreeMap::new();
    let mut addresses = 0usize;
    for e in entries {
        let Some(o) = origin(&e.url) else { continue };
        if slots.iter().any(|s| s.origin == o) {
            continue;
        }
        let (scheme, authority) = o.split_once("://").unwrap_or(("https", &o));
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => match p.parse() {
                Ok(port) => (h.to_string(), port),
                Err(_) => bail!("{}: the port of {o:?} is not a number", e.url),
            },
            _ => (
                authority.to_string(),
                if scheme == "http" { 80 } else { 443 },
            ),
        };
        // The recorded server, without its port: two ports of one host share an address.
        let server = e.server_address.as_deref().map(|a| {
            if a.starts_with('[') {
                a.split(']')
                    .next()
                    .unwrap_or(a)
                    .trim_start_matches('[')
                    .to_string()
            } else if a.matches(':').count() == 1 {
                a.split(':').next().unwrap_or(a).to_string()
            } else {
                a.to_string()
            }
        });
        let address = match (mode, server) {
            (AddressMode::Single, _) => {
                addresses = 1;
                0
            }
            (AddressMode::Recorded, Some(s)) if by_server.contains_key(&s) => by_server[&s],
            (AddressMode::Recorded, Some(s)) => {
                by_server.insert(s, addresses);
                addresses += 1;
                addresses - 1
            }
            (AddressMode::Recorded, None) | (AddressMode::PerOrigin, _) => {
                addresses += 1;
                addresses - 1
            }
        };
        slots.push(OriginSlot {
            origin: o,
            host,
            port,
            address,
        });
    }
    if slots.is_empty() {
        bail!("the archive has no http(s) origin to serve");
    }
    Ok((slots, addresses))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::site_archive::tests::entry;

    fn entries() -> Vec<Entry> {
        let at = |url: &str, server: Option<&str>| {
            let mut e = entry(url, 200);
            e.server_address = server.map(String::from);
            e
        };
        vec![
            at("https://www.a.test/", Some("192.0.2.1:443")),
            at("https://static.a.test/x.css", Some("192.0.2.2")),
            at("https://img.a.test/y.png", Some("192.0.2.2:443")),
            at("https://www.a.test/z.js", Some("192.0.2.1:443")),
            at(
                "https://fonts.b.test:8443/f.woff2",
                Some("[2001:db8::1]:8443"),
            ),
            at("http://plain.c.test/beacon", None),
        ]
    }

    #[test]
    fn recorded_mode_shares_an_address_where_the_recording_did() {
        let (slots, n) = plan(&entries(), AddressMode::Recorded).unwrap();
        let got: Vec<(&str, u16, usize)> = slots
            .iter()
            .map(|s| (s.host.as_str(), s.port, s.address))
            .collect();
        assert_eq!(
            got,
            [
                ("www.a.test", 443, 0),
                ("static.a.test", 443, 1),
                ("img.a.test", 443, 1),
                ("fonts.b.test", 8443, 2),
                ("plain.c.test", 80, 3),
            ]
        );
        assert_eq!(n, 4);
    }

    #[test]
    fn per_origin_and_single_modes() {
        let (slots, n) = plan(&entries(), AddressMode::PerOrigin).unwrap();
        assert_eq!(n, 5);
        assert_eq!(
            slots.iter().map(|s| s.address).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        let (slots, n) = plan(&entries(), AddressMode::Single).unwrap();
        assert_eq!(n, 1);
        assert!(slots.iter().all(|s| s.address == 0));
        assert!("per-origin".parse::<AddressMode>().is_ok());
        let e = "shared".parse::<AddressMode>().unwrap_err().to_string();
        assert!(e.contains("recorded, per-origin or single"), "{e}");
        assert!(plan(&[], AddressMode::Recorded).is_err());
    }
}
