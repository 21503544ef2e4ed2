//! `--dns`: how the browser finds its hosts' addresses.

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_modes_parse_and_anything_else_says_which_exist() {
        assert_eq!("resolver".parse::<DnsMode>().unwrap(), DnsMode::Resolver);
        assert_eq!("none".parse::<DnsMode>().unwrap(), DnsMode::None);
        let e = "doh".parse::<DnsMode>().unwrap_err().to_string();
        assert!(e.contains("--dns") && e.contains("resolver"), "{e}");
    }
}
