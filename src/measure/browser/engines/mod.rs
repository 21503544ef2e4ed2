//! The registry of browser engines: one folder per engine, and [`ENGINES`], which `--browsers
//! NAME` is parsed through. Adding an engine: its folder here and its two lines in this file
//! (`pub mod NAME;` and its entry in [`ENGINES`]).

pub mod chromium;
#[cfg(test)]
pub mod fake;
pub mod firefox;

use anyhow::Result;

use crate::config::identity::BrowserId;
use crate::evidence::engine_tells::EngineTells;
use crate::measure::browser::browser_contract::{Asked, Browser, Engine};

/// Every engine pagebench can drive, in the order reports list them.
pub static ENGINES: &[&Engine] = &[
    &chromium::ENGINE,
    &firefox::ENGINE,
    #[cfg(test)]
    &fake::ENGINE,
];

/// The registry's entry of `id`, or an error naming the engines there are.
pub fn engine(id: BrowserId) -> Result<&'static Engine> {
    ENGINES.iter().copied().find(|e| e.id == id).ok_or_else(|| {
        let names: Vec<&str> = ENGINES.iter().map(|e| e.id.name()).collect();
        anyhow::anyhow!("unknown browser {:?}: {}", id.name(), names.join(" or "))
    })
}

/// `chromium,firefox` → the engines, in the order given, each once.
pub fn parse_browsers(list: &str) -> Result<Vec<BrowserId>> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let b = name
            .parse::<BrowserId>()
            .and_then(|b| engine(b).map(|e| e.id))
            .map_err(|e| anyhow::anyhow!("--browsers: {e}"))?;
        anyhow::ensure!(!out.contains(&b), "--browsers: {name} is listed twice");
        out.push(b);
    }
    let names: Vec<&str> = ENGINES.iter().map(|e| e.id.name()).collect();
    anyhow::ensure!(
        !out.is_empty(),
        "--browsers: give at least one of {}",
        names.join(", ")
    );
    Ok(out)
}

/// A fresh browser of engine `id` (it may be launched on another thread: `prelaunch`).
pub fn make(id: BrowserId) -> Result<Box<dyn Browser + Send>> {
    Ok((engine(id)?.make)())
}

/// Refuses, before any run, an engine that is not installed or cannot do what is asked; the
/// error names the fix.
pub fn check_request(id: BrowserId, asked: &Asked) -> Result<()> {
    let e = engine(id)?;
    let version = (e.installed)()?;
    if asked.dns_h3 {
        check_https_records(e, &version)?;
    }
    match (e.cannot)(asked) {
        Some(what) => anyhow::bail!(
            "--browsers {id}: {what}; run it with --browsers {}",
            BrowserId::default()
        ),
        None => Ok(()),
    }
}

/// Refuses `h3-dns` for an engine, or a version of it, not known to act on HTTPS records.
fn check_https_records(e: &Engine, version: &str) -> Result<()> {
    let Some(since) = e.https_records_since else {
        anyhow::bail!(
            "--protocols h3-dns: {version} does not act on HTTPS records (h3 announced by DNS); leave h3-dns out or use --browsers {}",
            BrowserId::default()
        );
    };
    match major(version) {
        Some(m) if m >= since => Ok(()),
        _ => anyhow::bail!(
            "--protocols h3-dns: {version} is older than the {} {since} seen to act on HTTPS records (docs/dns.md); install a newer one (./setup.sh) or leave h3-dns out",
            e.id.name()
        ),
    }
}

/// The major version in an engine's version string (`Chromium 156.0.8078.129` → 156).
fn major(version: &str) -> Option<u32> {
    let number = version
        .split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))?;
    number.split('.').next()?.parse().ok()
}

/// Each installed engine's version by its name, as `meta.json` records it.
pub fn installed_versions() -> std::collections::BTreeMap<String, String> {
    ENGINES
        .iter()
        .filter_map(|e| (e.installed)().ok().map(|v| (e.id.name().to_string(), v)))
        .collect()
}

/// What each of `ids` can tell of a run, by name, as `meta.json` keeps it.
pub fn tells_of(ids: &[BrowserId]) -> std::collections::BTreeMap<String, EngineTells> {
    ids.iter()
        .filter_map(|id| engine(*id).ok())
        .map(|e| (e.id.name().to_string(), e.tells.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h3_dns_needs_an_engine_version_seen_to_act_on_https_records() {
        assert_eq!(major("Chromium 156.0.8078.129"), Some(156));
        assert_eq!(major("Mozilla Firefox 153.8.0esr"), Some(153));
        assert_eq!(major("Chromium"), None);
        assert!(check_https_records(&chromium::ENGINE, "Chromium 156.0.8078.129").is_ok());
        assert!(check_https_records(&firefox::ENGINE, "Firefox 160.0").is_ok());
        let e = check_https_records(&chromium::ENGINE, "Chromium 120.0.6099.1")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("h3-dns") && e.contains("Chromium 120.0.6099.1") && e.contains("156"),
            "{e}"
        );
        let e = check_https_records(&fake::ENGINE, fake::VERSION)
            .unwrap_err()
            .to_string();
        assert!(e.contains("Fake 1.0 does not act on HTTPS records"), "{e}");
    }
}
