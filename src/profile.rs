//! Network profiles: what a link looks like (RTT, jitter, loss, optional rate and queue),
//! from the shipped `profiles/*.toml` (compiled into the binary, so it works from any
//! directory), a `--profiles-dir` or user files, validated with errors that name the file.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The six profiles of the published study, in its order. `--profiles all` means exactly these.
pub const STUDY_PROFILES: [&str; 6] = [
    "datacenter",
    "wired",
    "intercontinental",
    "mobile",
    "bad-mobile",
    "cell-edge",
];

/// One network profile as written in a TOML file. All delays are per the whole round trip
/// (`rtt_ms`) or per direction (`jitter_ms`, `loss_pct`), as in the study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Round-trip time; each direction gets half of it.
    pub rtt_ms: f64,
    /// One-way delay varies within ±jitter_ms (per direction), as `jitter_model` says.
    #[serde(default)]
    pub jitter_ms: f64,
    /// How the delay varies: `varying` (default: a delay that changes smoothly over time, keeps
    /// order and the mean), `fifo` (an independent draw per packet, held behind the packet
    /// before it: raises the mean at high packet rates) or `reorder` (independent draws that
    /// may overtake each other, as Linux netem).
    #[serde(default)]
    pub jitter_model: JitterModel,
    /// Coherence time of the `varying` model: how long the delay takes to move from one random
    /// level to the next (default: one RTT, at least π × jitter_ms so packets never reorder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_coherence_ms: Option<f64>,
    /// Independent random loss per direction, in percent.
    #[serde(default)]
    pub loss_pct: f64,
    /// Server → client rate limit in Mbit/s (absent: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_mbit: Option<f64>,
    /// Client → server rate limit in Mbit/s (absent: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_mbit: Option<f64>,
    /// Drop-tail queue in front of a rate limit, in packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_packets: Option<u32>,
    /// Drop-tail queue in front of a rate limit, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_bytes: Option<u64>,
}

/// How jitter turns into per-packet delays (see `netem::jitter` and `netem::model`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JitterModel {
    /// The delay varies smoothly over time: packets close together see nearly the same delay,
    /// never reorder, and the mean delay is the profile's at any packet rate.
    #[default]
    Varying,
    /// An independent uniform draw per packet, held back behind the packet before it (the
    /// emulator's behaviour before `varying`): the mean delay grows with the packet rate.
    Fifo,
    /// An independent uniform draw per packet that may overtake others (Linux netem).
    Reorder,
}

impl JitterModel {
    pub fn name(self) -> &'static str {
        match self {
            JitterModel::Varying => "varying",
            JitterModel::Fifo => "fifo",
            JitterModel::Reorder => "reorder",
        }
    }
}

/// Which queue limit applies in front of a rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueLimit {
    Packets(u32),
    Bytes(u64),
}

impl Profile {
    /// A plain profile without rate limit, for tests and the API.
    pub fn simple(name: &str, rtt_ms: f64, jitter_ms: f64, loss_pct: f64) -> Profile {
        Profile {
            name: name.to_string(),
            description: String::new(),
            rtt_ms,
            jitter_ms,
            loss_pct,
            down_mbit: None,
            up_mbit: None,
            queue_packets: None,
            queue_bytes: None,
            jitter_model: JitterModel::Varying,
            jitter_coherence_ms: None,
        }
    }

    /// Knot interval of the `varying` jitter model, ms: `jitter_coherence_ms`, or one RTT but
    /// at least π × jitter (the slope bound that keeps packets in order).
    pub fn jitter_interval_ms(&self) -> f64 {
        self.jitter_coherence_ms
            .unwrap_or_else(|| self.rtt_ms.max(std::f64::consts::PI * self.jitter_ms))
    }

    /// One-way delay of each direction, in milliseconds.
    pub fn one_way_ms(&self) -> f64 {
        self.rtt_ms / 2.0
    }

    /// The smallest round trip the link can produce (`RTT − 2 × jitter`), in milliseconds.
    pub fn min_rtt_ms(&self) -> f64 {
        (self.rtt_ms - 2.0 * self.jitter_ms).max(0.0)
    }

    /// The drop-tail queue in front of the rate limits (validation requires one with a rate).
    pub fn queue_limit(&self) -> Option<QueueLimit> {
        if let Some(p) = self.queue_packets {
            return Some(QueueLimit::Packets(p));
        }
        if let Some(b) = self.queue_bytes {
            return Some(QueueLimit::Bytes(b));
        }
        None
    }

    /// Checks every field; the error names the field and the allowed range.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.trim().is_empty() {
            return Err("field `name` is empty: give the profile a name".into());
        }
        if !self
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "field `name` = {:?}: use only letters, digits, '-' and '_'",
                self.name
            ));
        }
        check_finite("rtt_ms", self.rtt_ms)?;
        check_finite("jitter_ms", self.jitter_ms)?;
        check_finite("loss_pct", self.loss_pct)?;
        if self.rtt_ms < 0.0 {
            return Err(format!(
                "field `rtt_ms` = {}: a round-trip time cannot be negative",
                self.rtt_ms
            ));
        }
        if self.rtt_ms > 60_000.0 {
            return Err(format!(
                "field `rtt_ms` = {}: at most 60000 ms",
                self.rtt_ms
            ));
        }
        if self.jitter_ms < 0.0 {
            return Err(format!(
                "field `jitter_ms` = {}: jitter cannot be negative",
                self.jitter_ms
            ));
        }
        if self.jitter_ms > self.one_way_ms() {
            return Err(format!(
                "field `jitter_ms` = {}: at most half of rtt_ms ({}), or one-way delays would be negative",
                self.jitter_ms,
                self.one_way_ms()
            ));
        }
        if let Some(c) = self.jitter_coherence_ms {
            check_finite("jitter_coherence_ms", c)?;
            if self.jitter_model != JitterModel::Varying {
                return Err(format!(
                    "field `jitter_coherence_ms` applies to jitter_model = \"varying\" only, not {:?}: remove it",
                    self.jitter_model.name()
                ));
            }
            let min = std::f64::consts::PI * self.jitter_ms;
            if c <= 0.0 || c < min {
                return Err(format!(
                    "field `jitter_coherence_ms` = {c}: at least π × jitter_ms = {min:.1} ms, or a falling delay would let packets overtake each other"
                ));
            }
        }
        if !(0.0..=100.0).contains(&self.loss_pct) {
            return Err(format!(
                "field `loss_pct` = {}: loss is a percentage between 0 and 100",
                self.loss_pct
            ));
        }
        for (field, rate) in [("down_mbit", self.down_mbit), ("up_mbit", self.up_mbit)] {
            if let Some(r) = rate {
                check_finite(field, r)?;
                if r <= 0.0 {
                    return Err(format!(
                        "field `{field}` = {r}: a rate must be above 0 Mbit/s (leave it out for no limit)"
                    ));
                }
            }
        }
        if self.queue_packets.is_some() && self.queue_bytes.is_some() {
            return Err("fields `queue_packets` and `queue_bytes` both set: choose one".into());
        }
        if self.queue_packets == Some(0) || self.queue_bytes == Some(0) {
            return Err("queue size 0 would drop every packet: give at least 1".into());
        }
        let has_rate = self.down_mbit.is_some() || self.up_mbit.is_some();
        let has_queue = self.queue_packets.is_some() || self.queue_bytes.is_some();
        if has_rate && !has_queue {
            return Err(
                "a rate (`down_mbit`/`up_mbit`) needs a drop-tail queue: set `queue_packets` or `queue_bytes`"
                    .into(),
            );
        }
        if has_queue && !has_rate {
            return Err(
                "a queue size without `down_mbit` or `up_mbit` has no effect: set a rate or remove the queue"
                    .into(),
            );
        }
        Ok(())
    }

    /// Short one-line form for logs and tables.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "RTT {} ms ±{} ms, loss {} %",
            fmt_num(self.rtt_ms),
            fmt_num(self.jitter_ms),
            fmt_num(self.loss_pct)
        );
        if self.jitter_ms > 0.0 && self.jitter_model != JitterModel::Varying {
            s.push_str(&format!(" ({} jitter)", self.jitter_model.name()));
        }
        if self.down_mbit.is_some() || self.up_mbit.is_some() {
            s.push_str(&format!(
                ", {}/{} Mbit/s",
                self.down_mbit.map(fmt_num).unwrap_or_else(|| "∞".into()),
                self.up_mbit.map(fmt_num).unwrap_or_else(|| "∞".into())
            ));
        }
        s
    }
}

fn check_finite(field: &str, v: f64) -> Result<(), String> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(format!("field `{field}` = {v}: must be a finite number"))
    }
}

/// Formats a number without a trailing `.0`.
pub fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// An error about a profile, always naming where it came from.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read profile file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("profile file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("profile file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("profile name {name:?} is defined twice: in {first} and in {second}; rename one")]
    Duplicate {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("unknown profile {name:?}: known profiles are {known} (or `all`, `extended`, `every`, or a path to a .toml file)")]
    Unknown { name: String, known: String },
    #[error(
        "{source_name} is missing profile {name:?}, which `all` needs (the six study profiles)"
    )]
    MissingStudy { source_name: String, name: String },
    #[error(
        "no profiles selected: give --profiles a name, a set (all, extended, every) or a path"
    )]
    Empty,
}

/// A profile together with the file it came from.
#[derive(Debug, Clone)]
pub struct LoadedProfile {
    pub profile: Profile,
    pub path: PathBuf,
}

/// Parses one TOML profile file's text; `path` only names the file in errors.
pub fn parse_profile(text: &str, path: &Path) -> Result<Profile, ProfileError> {
    let profile: Profile = toml::from_str(text).map_err(|e| ProfileError::Parse {
        path: path.to_path_buf(),
        message: toml_error_message(text, &e),
    })?;
    profile
        .validate()
        .map_err(|message| ProfileError::Invalid {
            path: path.to_path_buf(),
            message,
        })?;
    Ok(profile)
}

/// Renders a TOML error as "line L, column C: message".
fn toml_error_message(text: &str, e: &toml::de::Error) -> String {
    let mut msg = e.message().trim().to_string();
    if msg.contains("unknown field `reorder`") {
        msg.push_str(
            " (`reorder = true` was replaced by `jitter_model = \"reorder\"`; the default is now \"varying\")",
        );
    }
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before
                .rsplit('\n')
                .next()
                .map(|l| l.chars().count())
                .unwrap_or(0)
                + 1;
            format!("line {line}, column {col}: {msg}")
        }
        None => msg,
    }
}

/// Reads and validates one profile file.
pub fn load_profile_file(path: &Path) -> Result<LoadedProfile, ProfileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let profile = parse_profile(&text, path)?;
    Ok(LoadedProfile {
        profile,
        path: path.to_path_buf(),
    })
}

/// The shipped profiles as compiled in: (file name below `profiles/`, TOML text). A unit test
/// checks that this table is exactly the repository's `profiles/` directory.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("3g.toml", include_str!("../profiles/3g.toml")),
    (
        "bad-mobile.toml",
        include_str!("../profiles/bad-mobile.toml"),
    ),
    ("cable.toml", include_str!("../profiles/cable.toml")),
    ("cell-edge.toml", include_str!("../profiles/cell-edge.toml")),
    (
        "datacenter.toml",
        include_str!("../profiles/datacenter.toml"),
    ),
    (
        "intercontinental.toml",
        include_str!("../profiles/intercontinental.toml"),
    ),
    ("lte.toml", include_str!("../profiles/lte.toml")),
    ("mobile.toml", include_str!("../profiles/mobile.toml")),
    ("wired.toml", include_str!("../profiles/wired.toml")),
];

/// Where profile names (and the sets `all`, `extended`, `every`) are looked up.
#[derive(Debug, Clone, PartialEq)]
pub enum ProfileSource {
    /// The `*.toml` files of a directory (`--profiles-dir`, or `profiles/` in a checkout).
    Dir(PathBuf),
    /// The shipped profiles compiled into the binary ([`BUILT_IN`]).
    BuiltIn,
    /// A fixed set of values, e.g. the profiles a results directory was made with.
    Listed(Vec<Profile>),
}

impl ProfileSource {
    /// What errors call this source.
    pub fn describe(&self) -> String {
        match self {
            ProfileSource::Dir(d) => format!("profile directory {}", d.display()),
            ProfileSource::BuiltIn => "the built-in profiles".into(),
            ProfileSource::Listed(_) => "the stored profile set".into(),
        }
    }

    /// Every profile of the source, by name; duplicate names are an error.
    pub fn load(&self) -> Result<BTreeMap<String, LoadedProfile>, ProfileError> {
        match self {
            ProfileSource::Dir(d) => load_dir(d),
            ProfileSource::BuiltIn => {
                let mut out = BTreeMap::new();
                for (file, text) in BUILT_IN {
                    // The built-in name keeps errors pointing at the file it was compiled from.
                    let path = Path::new("profiles").join(file);
                    let profile = parse_profile(text, &path)?;
                    insert_unique(&mut out, LoadedProfile { profile, path })?;
                }
                Ok(out)
            }
            ProfileSource::Listed(list) => {
                let mut out = BTreeMap::new();
                for p in list {
                    let loaded = LoadedProfile {
                        profile: p.clone(),
                        path: PathBuf::from(format!("stored profile {}", p.name)),
                    };
                    insert_unique(&mut out, loaded)?;
                }
                Ok(out)
            }
        }
    }
}

/// All profiles of a directory (`*.toml`), by name; duplicate names are an error.
pub fn load_dir(dir: &Path) -> Result<BTreeMap<String, LoadedProfile>, ProfileError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ProfileError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    let mut out: BTreeMap<String, LoadedProfile> = BTreeMap::new();
    for path in paths {
        let loaded = load_profile_file(&path)?;
        insert_unique(&mut out, loaded)?;
    }
    Ok(out)
}

fn insert_unique(
    map: &mut BTreeMap<String, LoadedProfile>,
    loaded: LoadedProfile,
) -> Result<(), ProfileError> {
    if let Some(first) = map.get(&loaded.profile.name) {
        return Err(ProfileError::Duplicate {
            name: loaded.profile.name.clone(),
            first: first.path.clone(),
            second: loaded.path,
        });
    }
    map.insert(loaded.profile.name.clone(), loaded);
    Ok(())
}

/// Resolves a `--profiles` selection: comma-separated names, the sets `all` (the six study
/// profiles, in study order), `extended` (the rest of the directory), `every` (all of it), and
/// paths to TOML files. Order is kept; a profile named twice is an error.
pub fn select(spec: &str, dir: &Path) -> Result<Vec<Profile>, ProfileError> {
    select_from(spec, &ProfileSource::Dir(dir.to_path_buf()))
}

/// [`select`] with names looked up in `source`.
pub fn select_from(spec: &str, source: &ProfileSource) -> Result<Vec<Profile>, ProfileError> {
    let mut known: Option<BTreeMap<String, LoadedProfile>> = None;
    let mut chosen: Vec<LoadedProfile> = Vec::new();
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let picked: Vec<LoadedProfile> = if item.ends_with(".toml") || item.contains('/') {
            vec![load_profile_file(Path::new(item))?]
        } else {
            if known.is_none() {
                known = Some(source.load()?);
            }
            let known = known.as_ref().expect("loaded above");
            match item {
                "all" | "study" => STUDY_PROFILES
                    .iter()
                    .map(|n| {
                        known
                            .get(*n)
                            .cloned()
                            .ok_or_else(|| ProfileError::MissingStudy {
                                source_name: source.describe(),
                                name: n.to_string(),
                            })
                    })
                    .collect::<Result<_, _>>()?,
                "extended" => known
                    .values()
                    .filter(|p| !STUDY_PROFILES.contains(&p.profile.name.as_str()))
                    .cloned()
                    .collect(),
                "every" => {
                    let mut v: Vec<LoadedProfile> = STUDY_PROFILES
                        .iter()
                        .filter_map(|n| known.get(*n).cloned())
                        .collect();
                    v.extend(
                        known
                            .values()
                            .filter(|p| !STUDY_PROFILES.contains(&p.profile.name.as_str()))
                            .cloned(),
                    );
                    v
                }
                name => vec![known
                    .get(name)
                    .cloned()
                    .ok_or_else(|| ProfileError::Unknown {
                        name: name.to_string(),
                        known: known.keys().cloned().collect::<Vec<_>>().join(", "),
                    })?],
            }
        };
        for p in picked {
            if let Some(first) = seen.get(&p.profile.name) {
                return Err(ProfileError::Duplicate {
                    name: p.profile.name.clone(),
                    first: first.clone(),
                    second: p.path,
                });
            }
            seen.insert(p.profile.name.clone(), p.path.clone());
            chosen.push(p);
        }
    }
    if chosen.is_empty() {
        return Err(ProfileError::Empty);
    }
    Ok(chosen.into_iter().map(|p| p.profile).collect())
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.summary())
    }
}

/// The profiles table printed by `pagebench profiles`.
pub fn table(profiles: &[Profile]) -> String {
    let mut rows = vec![[
        "name".to_string(),
        "RTT ms".into(),
        "jitter ms".into(),
        "loss %".into(),
        "down Mbit/s".into(),
        "up Mbit/s".into(),
        "queue".into(),
        "set".into(),
        "description".into(),
    ]];
    for p in profiles {
        let queue = match p.queue_limit() {
            Some(QueueLimit::Packets(n)) => format!("{n} pkt"),
            Some(QueueLimit::Bytes(n)) => format!("{n} B"),
            None => "-".into(),
        };
        rows.push([
            p.name.clone(),
            fmt_num(p.rtt_ms),
            fmt_num(p.jitter_ms),
            fmt_num(p.loss_pct),
            p.down_mbit.map(fmt_num).unwrap_or_else(|| "-".into()),
            p.up_mbit.map(fmt_num).unwrap_or_else(|| "-".into()),
            queue,
            if STUDY_PROFILES.contains(&p.name.as_str()) {
                "all".into()
            } else {
                "extended".into()
            },
            p.description.clone(),
        ]);
    }
    crate::textfmt::table(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Profile, String> {
        parse_profile(text, Path::new("x.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn parses_a_full_profile() {
        let p = parse(
            "name = \"lte\"\nrtt_ms = 70\njitter_ms = 5\nloss_pct = 0.5\ndown_mbit = 12\nup_mbit = 12\nqueue_packets = 100\n",
        )
        .unwrap();
        assert_eq!(p.name, "lte");
        assert_eq!(p.queue_limit(), Some(QueueLimit::Packets(100)));
        assert_eq!(p.min_rtt_ms(), 60.0);
    }

    #[test]
    fn unknown_field_names_file_line_and_field() {
        let e = parse("name = \"a\"\nrtt_ms = 1\nrtt = 5\n").unwrap_err();
        assert!(e.contains("x.toml"), "{e}");
        assert!(e.contains("line 3"), "{e}");
        assert!(e.contains("rtt"), "{e}");
    }

    #[test]
    fn not_toml_names_line() {
        let e = parse("name = \"a\"\nthis is not toml\n").unwrap_err();
        assert!(e.contains("x.toml") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn range_errors_name_the_field() {
        for (text, field) in [
            ("name=\"a\"\nrtt_ms=-1\n", "rtt_ms"),
            ("name=\"a\"\nrtt_ms=10\nloss_pct=101\n", "loss_pct"),
            ("name=\"a\"\nrtt_ms=10\nloss_pct=-0.1\n", "loss_pct"),
            ("name=\"a\"\nrtt_ms=10\ndown_mbit=0\n", "down_mbit"),
            ("name=\"a\"\nrtt_ms=10\nup_mbit=-3\n", "up_mbit"),
            ("name=\"a\"\nrtt_ms=10\njitter_ms=6\n", "jitter_ms"),
            ("name=\"a b\"\nrtt_ms=10\n", "name"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(field), "{text}: {e}");
        }
    }

    #[test]
    fn missing_required_field_is_named() {
        let e = parse("name = \"a\"\n").unwrap_err();
        assert!(e.contains("rtt_ms"), "{e}");
    }

    #[test]
    fn shipped_profiles_load_and_all_is_the_study() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
        let all = select("all", &dir).unwrap();
        let names: Vec<_> = all.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, STUDY_PROFILES);
        let wired = &all[1];
        assert_eq!(
            (wired.rtt_ms, wired.jitter_ms, wired.loss_pct),
            (40.0, 5.0, 0.0)
        );
        let cell = &all[5];
        assert_eq!(
            (cell.rtt_ms, cell.jitter_ms, cell.loss_pct),
            (100.0, 25.0, 5.0)
        );
        let ext = select("extended", &dir).unwrap();
        assert!(ext.len() >= 2);
        assert!(ext
            .iter()
            .all(|p| p.down_mbit.is_some() && p.queue_limit().is_some()));
        let e = select("wired,wired", &dir).unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
        let e = select("nosuch", &dir).unwrap_err().to_string();
        assert!(e.contains("nosuch") && e.contains("wired"), "{e}");
    }

    #[test]
    fn built_in_profiles_are_exactly_the_shipped_files() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
        let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .map(|p| {
                let name = p.file_name().unwrap().to_str().unwrap().to_string();
                (name, std::fs::read_to_string(&p).unwrap())
            })
            .collect();
        files.sort();
        let built_in: Vec<(String, String)> = BUILT_IN
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        assert_eq!(
            built_in, files,
            "profiles/ changed: update profile::BUILT_IN to match"
        );
        let from_files = ProfileSource::Dir(dir).load().unwrap();
        let compiled = ProfileSource::BuiltIn.load().unwrap();
        let values = |m: &BTreeMap<String, LoadedProfile>| -> Vec<Profile> {
            m.values().map(|l| l.profile.clone()).collect()
        };
        assert_eq!(values(&compiled), values(&from_files));
        let all = select_from("all", &ProfileSource::BuiltIn).unwrap();
        let names: Vec<_> = all.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, STUDY_PROFILES);
    }

    #[test]
    fn a_listed_source_resolves_names_and_sets_from_its_values() {
        let wired = Profile::simple("wired", 40.0, 5.0, 0.0);
        let odd = Profile::simple("odd", 10.0, 0.0, 0.0);
        let src = ProfileSource::Listed(vec![wired.clone(), odd.clone()]);
        assert_eq!(
            select_from("odd,wired", &src).unwrap(),
            vec![odd.clone(), wired]
        );
        assert_eq!(select_from("extended", &src).unwrap(), vec![odd]);
        let e = select_from("all", &src).unwrap_err().to_string();
        assert!(
            e.contains("the stored profile set") && e.contains("datacenter"),
            "{e}"
        );
    }
}
