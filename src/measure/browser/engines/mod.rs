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
    (e.installed)()?;
    match (e.cannot)(asked) {
        Some(what) => anyhow::bail!(
            "--browsers {id}: {what}; run it with --browsers {}",
            BrowserId::default()
        ),
        None => Ok(()),
    }
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
