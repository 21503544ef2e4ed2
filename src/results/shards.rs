//! What a shard's results directory records beside a normal one (`matrix --shard K/N`, then
//! `pagebench merge`): which part of the plan it ran (in `meta.json`), and in `machine.json` the
//! machine's fingerprint and a short calibration, so that the machines of a merged matrix can
//! be compared.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::config::identity::BrowserId;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::config::plan::Cell;
use crate::support::atomic;

pub const MACHINE_JSON: &str = "machine.json";

/// `--shard K/N`: the K-th of N parts (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ShardSpec {
    pub index: u32,
    pub count: u32,
}

impl FromStr for ShardSpec {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<ShardSpec> {
        let bad =
            || format!("--shard {s:?}: give K/N, the K-th of N shards counted from 1 (e.g. 2/4)");
        let (k, n) = s.split_once('/').with_context(bad)?;
        let index: u32 = k.trim().parse().with_context(bad)?;
        let count: u32 = n.trim().parse().with_context(bad)?;
        if count == 0 || index == 0 || index > count {
            bail!("{}: K must be between 1 and N", bad());
        }
        Ok(ShardSpec { index, count })
    }
}

impl fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What a shard's `meta.json` records: which part it is and the cells it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardInfo {
    #[serde(flatten)]
    pub spec: ShardSpec,
    /// Its cells, in plan order.
    pub cells: Vec<Cell>,
}

/// What must be the same on every machine of a merged matrix (else `merge` refuses unless
/// `--allow-mixed-machines`): the hardware, kernel, browsers and pagebench build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub cpu_model: String,
    pub cpus: usize,
    pub kernel: String,
    pub pagebench_version: String,
    pub git_revision: String,
    /// Each engine's version by its name (`meta.json`'s machine has them so too).
    #[serde(flatten)]
    pub browsers: std::collections::BTreeMap<String, String>,
}

impl Fingerprint {
    /// Each field that differs: (name, this, other).
    pub fn differences(&self, other: &Fingerprint) -> Vec<(String, String, String)> {
        let mut fields = vec![
            (
                "CPU model".to_string(),
                self.cpu_model.clone(),
                other.cpu_model.clone(),
            ),
            ("CPUs".into(), self.cpus.to_string(), other.cpus.to_string()),
            ("kernel".into(), self.kernel.clone(), other.kernel.clone()),
        ];
        let engines: std::collections::BTreeSet<&String> =
            self.browsers.keys().chain(other.browsers.keys()).collect();
        let version = |f: &Fingerprint, e: &String| {
            f.browsers
                .get(e)
                .cloned()
                .unwrap_or_else(|| "not installed".into())
        };
        for e in engines {
            let label = BrowserId::named(e).map_or_else(|_| e.clone(), |b| b.label());
            fields.push((label, version(self, e), version(other, e)));
        }
        fields.push((
            "pagebench".into(),
            self.pagebench_version.clone(),
            other.pagebench_version.clone(),
        ));
        fields.push((
            "git revision".into(),
            self.git_revision.clone(),
            other.git_revision.clone(),
        ));
        fields.into_iter().filter(|(_, a, b)| a != b).collect()
    }
}

/// The emulator on this machine: `bench netem`'s delay error and forwarding rate, short.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetemCalibration {
    pub one_way_ms: f64,
    /// Round-trip error of the probes, idle: median and p99 (ms).
    pub rtt_error_median_ms: f64,
    pub rtt_error_p99_ms: f64,
    /// The same beside a bulk TCP flow.
    pub bulk_rtt_error_median_ms: f64,
    pub bulk_rtt_error_p99_ms: f64,
    /// Forwarding rate at 0 ms: 1500-byte UDP packets per second, and bulk TCP Mbit/s.
    pub udp_packets_per_s: f64,
    pub tcp_mbit_per_s: f64,
    pub realtime: bool,
}

/// One reference series measured on this machine: the same on every machine of a merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceSeries {
    pub profile: String,
    pub workload: String,
    pub protocol: String,
    pub browser: String,
    pub runs: usize,
    pub valid: usize,
    /// loadEventEnd of the valid runs: median and quartiles (ms).
    pub median_ms: Option<f64>,
    pub q1_ms: Option<f64>,
    pub q3_ms: Option<f64>,
    /// The browser's launch + settle, median (ms): the machine's speed at starting it.
    pub launch_settle_median_ms: Option<f64>,
}

/// A short calibration of the machine, made once per shard directory before its first run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub at: String,
    pub seconds: f64,
    pub netem: Option<NetemCalibration>,
    pub reference: Option<ReferenceSeries>,
    /// What could not be measured, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// `machine.json` of a shard directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineFile {
    pub hostname: String,
    pub fingerprint: Fingerprint,
    pub calibration: Option<Calibration>,
}

pub fn read_machine(dir: &Path) -> Result<Option<MachineFile>> {
    let path = dir.join(MACHINE_JSON);
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text)
        .map(Some)
        .with_context(|| format!("{} is not a valid machine.json", path.display()))
}

pub fn write_machine(dir: &Path, m: &MachineFile) -> Result<()> {
    atomic::write_file(
        &dir.join(MACHINE_JSON),
        (serde_json::to_string_pretty(m)? + "\n").as_bytes(),
    )
}

/// One shard a merged directory was made of (its `meta.json` lists them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedShard {
    /// The shard directory as given to `merge`.
    pub dir: String,
    #[serde(flatten)]
    pub spec: ShardSpec,
    pub status: String,
    /// Attempts in its `runs.csv`.
    pub attempts: usize,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub hostname: String,
    pub fingerprint: Fingerprint,
    pub calibration: Option<Calibration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_specs_parse_and_refuse_nonsense() {
        assert_eq!(
            "2/4".parse::<ShardSpec>().unwrap(),
            ShardSpec { index: 2, count: 4 }
        );
        assert_eq!("1/1".parse::<ShardSpec>().unwrap().to_string(), "1/1");
        for bad in ["0/2", "3/2", "2", "a/b", "1/0", "-1/2"] {
            let e = format!("{:#}", bad.parse::<ShardSpec>().unwrap_err());
            assert!(e.contains("--shard") && e.contains("K/N"), "{bad}: {e}");
        }
    }

    #[test]
    fn fingerprints_name_their_differences() {
        let a = Fingerprint {
            cpu_model: "EPYC".into(),
            cpus: 2,
            kernel: "6.18".into(),
            pagebench_version: "0.2.0".into(),
            git_revision: "abc".into(),
            browsers: [("chromium".to_string(), "Chromium 156".to_string())].into(),
        };
        assert!(a.differences(&a).is_empty());
        let mut b = Fingerprint {
            cpus: 4,
            ..a.clone()
        };
        b.browsers.insert("firefox".into(), "153.8.0esr".into());
        let d = a.differences(&b);
        let s = |x: &str| x.to_string();
        assert_eq!(
            d,
            [
                (s("CPUs"), s("2"), s("4")),
                (s("Firefox"), s("not installed"), s("153.8.0esr"))
            ]
        );
        // On disk as it always was: each engine's version under its name.
        let json = serde_json::to_value(&b).unwrap();
        assert_eq!(json["chromium"], "Chromium 156");
        assert_eq!(json["firefox"], "153.8.0esr");
        let back: Fingerprint = serde_json::from_value(json).unwrap();
        assert_eq!(back, b);
        // ShardInfo flattens its spec.
        let info = ShardInfo {
            spec: ShardSpec { index: 1, count: 2 },
            cells: vec![Cell {
                profile: "wired".into(),
                workload: "page10".into(),
            }],
        };
        let json = serde_json::to_value(&info).unwrap();
        assert_eq!(json["index"], 1);
        assert_eq!(json["count"], 2);
        assert_eq!(serde_json::from_value::<ShardInfo>(json).unwrap(), info);
    }
}
