//! Identity types that travel from the plan to the report: which phase a run belongs to, which
//! server served it and which browser loaded it. Strings only at the parsers and the file formats.

use serde::{Deserialize, Serialize};

use crate::config::device::DeviceId;

/// Whether a run counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Warmup,
    Measure,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Warmup => "warmup",
            Phase::Measure => "measure",
        }
    }
}

impl std::str::FromStr for Phase {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Phase> {
        match s {
            "warmup" => Ok(Phase::Warmup),
            "measure" => Ok(Phase::Measure),
            other => anyhow::bail!("unknown phase {other:?}: warmup or measure"),
        }
    }
}

/// A server under test by name (`embedded`, `caddy`, `nginx`, `custom`): the server registry
/// makes it (`ServerChoice::name`); the plan, the records, the summary and the report carry it.
/// On disk it is the bare name, as it always was (also as a JSON map key).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ServerId(String);

impl ServerId {
    pub fn new(name: impl Into<String>) -> ServerId {
        ServerId(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its name in run ids and file names: anything but letters, digits, `.`, `-` and `_`
    /// becomes `_` (`embedded:priorities=rfc9218` → `embedded_priorities_rfc9218`; an arm's
    /// file path loses its slashes).
    pub fn file_name(&self) -> String {
        self.0
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' | '_' => c,
                _ => '_',
            })
            .collect()
    }
}

impl std::fmt::Display for ServerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for ServerId {
    fn from(name: &str) -> ServerId {
        ServerId::new(name)
    }
}

impl From<String> for ServerId {
    fn from(name: String) -> ServerId {
        ServerId(name)
    }
}

impl PartialEq<str> for ServerId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for ServerId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Which visit a run measures: a first visit (a fresh browser, nothing known), or a returning
/// visitor's repeat view (the same browser after a first navigation, its connections closed but
/// its TLS sessions and Alt-Svc knowledge kept). Records from before there was a choice were
/// first views.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum View {
    #[default]
    First,
    Repeat,
}

impl View {
    pub const ALL: [View; 2] = [View::First, View::Repeat];

    pub fn name(self) -> &'static str {
        match self {
            View::First => "first",
            View::Repeat => "repeat",
        }
    }
}

impl std::fmt::Display for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for View {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<View> {
        View::ALL
            .into_iter()
            .find(|v| v.name() == s.trim())
            .ok_or_else(|| anyhow::anyhow!("unknown view {s:?}: first or repeat"))
    }
}

/// `first,repeat` → the views, in the order given, each once.
pub fn parse_views(list: &str) -> anyhow::Result<Vec<View>> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let v: View = name.parse().map_err(|e| anyhow::anyhow!("--views: {e}"))?;
        anyhow::ensure!(!out.contains(&v), "--views: {name} is listed twice");
        out.push(v);
    }
    anyhow::ensure!(!out.is_empty(), "--views: give first, repeat or both");
    Ok(out)
}

/// Who served a series, who loaded it and on which visit: the server under test, the browser
/// engine and the view. The statistics compare protocols within one setup; the report groups
/// its tables by setup.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Setup {
    pub server: ServerId,
    #[serde(default)]
    pub browser: BrowserId,
    #[serde(default)]
    pub view: View,
    /// The CPU the browser got (desktop where a summary predates devices).
    #[serde(default, skip_serializing_if = "DeviceId::is_desktop")]
    pub device: DeviceId,
}

impl Setup {
    pub fn new(server: impl Into<ServerId>, browser: BrowserId) -> Setup {
        Setup {
            server: server.into(),
            browser,
            view: View::First,
            device: DeviceId::default(),
        }
    }

    /// The same setup on another device.
    pub fn with_device(mut self, device: DeviceId) -> Setup {
        self.device = device;
        self
    }

    /// The same setup on another visit.
    pub fn on(mut self, view: View) -> Setup {
        self.view = view;
        self
    }

    /// A name safe in ids and file names: the server, with the engine when it is not Chromium
    /// and `repeat` for a repeat view (`embedded`, `embedded-firefox`, `embedded-repeat`), so
    /// single-engine first-view matrices keep their names; an arm's `:` and `=` are spelled as in
    /// run ids.
    pub fn slug(&self) -> String {
        let mut s = self.server.file_name();
        if self.browser != BrowserId::default() {
            s.push_str(&format!("-{}", self.browser));
        }
        if !self.device.is_desktop() {
            s.push_str(&format!("-{}", self.device));
        }
        if self.view != View::First {
            s.push_str(&format!("-{}", self.view));
        }
        s
    }
}

/// A browser engine by its name in flags and files (`chromium`, `firefox`): the browser registry
/// (`measure::browser::ENGINES`) knows what each can do and makes it; the plan, the records, the
/// summary and the report carry it. Records written before there was a choice were all
/// Chromium's, so a record without the field reads as Chromium, the default engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrowserId(&'static str);

impl BrowserId {
    /// The id of the engine `name` (an engine's adapter names its own).
    pub const fn new(name: &'static str) -> BrowserId {
        BrowserId(name)
    }

    /// The id of an engine named in a file or a flag: a name of lowercase letters, digits and
    /// dashes (whether an engine of that name exists is the registry's to say).
    pub fn named(name: &str) -> anyhow::Result<BrowserId> {
        anyhow::ensure!(
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{name:?} is not a browser name (lowercase letters, digits and dashes)"
        );
        Ok(BrowserId(intern(name)))
    }

    pub fn name(self) -> &'static str {
        self.0
    }

    /// The engine's name for people (tables, titles): its name capitalised, `Chromium`.
    pub fn label(self) -> String {
        let mut c = self.0.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect())
            .unwrap_or_default()
    }
}

impl Default for BrowserId {
    fn default() -> BrowserId {
        BrowserId("chromium")
    }
}

/// Names read from files or flags, each kept once for the process's life (there are a few).
fn intern(name: &str) -> &'static str {
    use std::sync::Mutex;
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| **n == name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.push(n);
    n
}

impl Serialize for BrowserId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for BrowserId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<BrowserId, D::Error> {
        let name = String::deserialize(d)?;
        BrowserId::named(&name).map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for BrowserId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::str::FromStr for BrowserId {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<BrowserId> {
        BrowserId::named(s.trim())
    }
}

/// What a repeat view does with the HTTP cache between its two navigations.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum RepeatCache {
    /// Cleared: the measured navigation fetches every file again (connections and TLS state
    /// are what it saves).
    #[default]
    Clear,
    /// Kept: what the first navigation cached is served from the cache.
    Keep,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_id_is_its_bare_name_on_disk() {
        let id = ServerId::new("caddy");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"caddy\"");
        assert_eq!(serde_json::from_str::<ServerId>("\"caddy\"").unwrap(), id);
        assert_eq!(id.to_string(), "caddy");
        assert!(ServerId::new("caddy") < ServerId::new("embedded"));
        // As a map key (`summary.json` `viewpoints`, `meta.json` `servers_applied`).
        let map: std::collections::BTreeMap<ServerId, u8> =
            [(ServerId::new("embedded"), 3), (id, 2)].into();
        let json = serde_json::to_string(&map).unwrap();
        assert_eq!(json, r#"{"caddy":2,"embedded":3}"#);
        assert_eq!(
            serde_json::from_str::<std::collections::BTreeMap<ServerId, u8>>(&json).unwrap(),
            map
        );
    }

    #[test]
    fn browser_ids_read_back_by_name() {
        for b in [BrowserId::default(), BrowserId::new("firefox")] {
            assert_eq!(b.name().parse::<BrowserId>().unwrap(), b);
            let json = serde_json::to_string(&b).unwrap();
            assert_eq!(json, format!("\"{b}\""));
            assert_eq!(serde_json::from_str::<BrowserId>(&json).unwrap(), b);
        }
        assert_eq!(BrowserId::default().name(), "chromium");
        assert_eq!(BrowserId::new("firefox").label(), "Firefox");
        // A name read twice is one id, however it was made.
        let a: BrowserId = "lynx".parse().unwrap();
        assert_eq!(a, serde_json::from_str::<BrowserId>("\"lynx\"").unwrap());
        assert_eq!(a, BrowserId::new("lynx"));
        assert!(BrowserId::default() < BrowserId::new("firefox"));
        let e = "Lynx 2".parse::<BrowserId>().unwrap_err().to_string();
        assert_eq!(
            e,
            "\"Lynx 2\" is not a browser name (lowercase letters, digits and dashes)"
        );
        assert!(serde_json::from_str::<BrowserId>("\"\"").is_err());
    }
}
