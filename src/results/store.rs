//! The results directory: `meta.json`, `runs.csv`, `resources.csv` and `runs/<id>.json`.
//! Each finished run is on disk (synced) before the next starts: the raw record first, then its
//! resource rows, then its `runs.csv` row — the row is the commit mark. Resuming drops whatever a
//! crash left half-written after the last mark, and refuses a directory whose records another
//! pagebench version or column layout wrote.
//!
//! A planned run may take several attempts: one that failed as a measurement (link, server,
//! browser crash) is run again, up to `--retry-invalid` times, and every attempt stays on disk
//! (`<plan id>`, `<plan id>.a2`, …). [`Attempts`] says from the committed rows what comes next.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::csv::{resource_rows, run_row, RESOURCE_COLUMNS, RUN_COLUMNS};
use super::shards::Fingerprint;
use crate::config::plan::{PlanSpec, PlannedRun};
use crate::config::profile::Profile;
use crate::evidence::run_record::{RunRecord, RECORD_FORMAT};
use crate::servers::ServerDescriptions;
use crate::support::atomic;
use crate::support::sysinfo::MachineInfo;

pub const META: &str = "meta.json";
pub const RUNS_CSV: &str = "runs.csv";
pub const RESOURCES_CSV: &str = "resources.csv";
pub const RUNS_DIR: &str = "runs";
/// Where `--visual` runs keep their screencast frames: `frames/<run id>/NNNN.jpg`.
pub const FRAMES_DIR: &str = "frames";
/// Where `--capture` runs keep their files: `captures/<run id>/`.
pub const CAPTURES_DIR: &str = "captures";

/// Writes a run's capture files into `dir` (created whole, in one step: a crash leaves no
/// half directory).
pub fn write_captures(dir: &Path, files: &[crate::packets::CaptureFile]) -> Result<()> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let staged = atomic::StagedDir::new(dir)?;
    for f in files {
        atomic::write_file(&staged.path().join(&f.name), &f.data)?;
    }
    staged.publish()
}

/// What a results directory was made with. The fields under "matrix identity" must match for
/// `--resume` to continue it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub pagebench_version: String,
    /// Layout of the run records and `runs.csv` ([`RECORD_FORMAT`], [`RUN_COLUMNS`]).
    #[serde(default)]
    pub record_format: u32,
    #[serde(default)]
    pub run_columns: Vec<String>,
    pub git_revision: String,
    pub machine: MachineInfo,
    pub started_at: String,
    pub ended_at: Option<String>,
    /// running, complete, interrupted, failed.
    pub status: String,
    pub planned_runs: usize,
    // --- matrix identity ---
    pub plan: PlanSpec,
    /// The profiles as applied (full values, not just names).
    pub profiles: Vec<Profile>,
    /// Server configurations by server name (knobs as requested and as applied).
    pub servers: Value,
    pub timeout_s: f64,
    pub pages_seed: u64,
    /// Retries of a run that failed as a measurement (`--retry-invalid`).
    #[serde(default)]
    pub retry_invalid: u32,
    /// What the servers really applied (versions, knobs with the kernel's answers), by server;
    /// informative, not part of the identity (a kernel may answer differently on resume).
    #[serde(default, with = "crate::servers::descriptions_or_null")]
    pub servers_applied: ServerDescriptions,
    /// Per resumed session: when it started (the first is `started_at`).
    #[serde(default)]
    pub resumed_at: Vec<String>,
    /// The rest of the options the matrix was started with, so `--resume DIR` alone continues
    /// it (absent in directories written before pagebench stored them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<crate::results::resume_options::StoredOptions>,
    /// The replayed sites (recorded archives and sharded pages), by workload: their origins,
    /// addresses and how they were replayed.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sites: std::collections::BTreeMap<String, crate::config::workload::site_plan::SitePlan>,
    /// What identifies the matrix's plan across machines ([`Meta::plan_hash`]), for
    /// information: `pagebench merge` recomputes it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plan_hash: String,
    /// `--shard K/N`: the part of the plan this directory runs (its cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::results::shards::ShardInfo>,
    /// `pagebench merge`: the shard directories this one was merged from, with their machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<crate::results::shards::MergedShard>,
    /// Was the machine quiet? The check made before the matrix started and before each
    /// resume (`machine_check`).
    /// What each engine of the plan can tell of a run (its DevTools view, the metrics it
    /// cannot measure, how it reaches HTTP/3), by name; the report reads it from here
    /// (directories from before it was kept: not said).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub engines: std::collections::BTreeMap<String, crate::evidence::engine_tells::EngineTells>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_checks: Vec<crate::support::machine_check::MachineCheck>,
}

impl Meta {
    /// The one place a `Meta` is built: `plan` with `planned_runs`, written by this build (its
    /// version, record format and columns), status `running`, and the options' defaults
    /// (`--timeout 120s`, `--pages-seed 1`, `--retry-invalid 2`); what a matrix learns as it
    /// starts — the machine, the revision, the clock, the profiles and servers as applied — the
    /// caller sets.
    pub fn new(plan: PlanSpec, planned_runs: usize) -> Meta {
        Meta {
            pagebench_version: env!("CARGO_PKG_VERSION").into(),
            record_format: crate::evidence::run_record::RECORD_FORMAT,
            run_columns: crate::results::csv::RUN_COLUMNS
                .iter()
                .map(|c| c.to_string())
                .collect(),
            git_revision: String::new(),
            machine: MachineInfo::default(),
            started_at: String::new(),
            ended_at: None,
            status: "running".into(),
            planned_runs,
            plan,
            profiles: vec![],
            servers: Value::Null,
            timeout_s: 120.0,
            pages_seed: 1,
            retry_invalid: 2,
            servers_applied: Default::default(),
            resumed_at: vec![],
            options: None,
            sites: Default::default(),
            plan_hash: String::new(),
            shard: None,
            merged_from: vec![],
            engines: Default::default(),
            machine_checks: vec![],
        }
    }

    /// A complete matrix's metadata with `plan`, `planned_runs` and the timeout, and nothing
    /// else of note: the base of report unit tests.
    #[cfg(test)]
    pub fn fixture(plan: PlanSpec, planned_runs: usize, timeout_s: f64) -> Meta {
        Meta {
            pagebench_version: "0".into(),
            run_columns: vec![],
            git_revision: "x".into(),
            started_at: "t".into(),
            status: "complete".into(),
            timeout_s,
            ..Meta::new(plan, planned_runs)
        }
    }
}

impl Meta {
    /// What must be the same on every machine of a merged matrix, read from this matrix's
    /// machine and build.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint {
            cpu_model: self.machine.cpu_model.clone(),
            cpus: self.machine.cpus,
            kernel: self.machine.kernel.clone(),
            browsers: self.machine.browsers.clone(),
            pagebench_version: self.pagebench_version.clone(),
            git_revision: self.git_revision.clone(),
        }
    }

    /// What identifies the matrix's plan across machines: a hash (16 hex digits) of the plan and
    /// of everything that shapes its runs — the profiles as applied, the servers and their
    /// knobs, the timeout, the pages seed, the retries and the stored options (settle wait,
    /// receive steering, `--visual`, `--capture`, site replay) — but not where its files are.
    /// The shards of one matrix share it (the shard itself is not part of it).
    pub fn plan_hash(&self) -> String {
        let options = self.options.as_ref().map(|o| {
            let mut options = serde_json::json!({
                "servers": o.servers,
                "knobs": o.knobs,
                "settle_max_ms": o.settle_max_ms,
                "steer_receive": o.steer_receive,
                "visual": o.visual,
                "capture": o.capture,
                "sites": o.sites,
            });
            // Named only when it is not the screencast, so plans from before video keep their hash.
            if o.visual && o.visual_source != crate::evidence::visual::VisualSource::before_video()
            {
                options["visual_source"] = o.visual_source.name().into();
            }
            options
        });
        let identity = serde_json::json!({
            "plan": self.plan,
            "profiles": self.profiles,
            "servers": self.servers,
            "timeout_s": self.timeout_s,
            "pages_seed": self.pages_seed,
            "retry_invalid": self.retry_invalid,
            "options": options,
        });
        let bytes = serde_json::to_vec(&identity).unwrap_or_default();
        crate::support::digest::sha256_hex(&bytes)[..16].to_string()
    }

    /// Why records written as `self` describes cannot be continued by this build, if not.
    pub fn incompatible(&self) -> Option<String> {
        let here = env!("CARGO_PKG_VERSION");
        let columns: Vec<String> = RUN_COLUMNS.iter().map(|c| c.to_string()).collect();
        if self.pagebench_version != here || self.record_format != RECORD_FORMAT {
            return Some(format!(
                "it was written by pagebench {} (record format {}), this is {here} (record format {RECORD_FORMAT})",
                self.pagebench_version, self.record_format
            ));
        }
        if self.run_columns != columns {
            return Some("its runs.csv has another column layout".into());
        }
        None
    }

    /// Why `other` (the requested matrix) is not the same matrix as `self` (on disk), if not:
    /// another plan ([`Meta::plan_mismatch`]) or another shard of it.
    pub fn mismatch(&self, other: &Meta) -> Option<String> {
        let mut diffs: Vec<String> = self.plan_mismatch(other).into_iter().collect();
        let shard = |m: &Meta| m.shard.as_ref().map(|s| s.spec);
        if shard(self) != shard(other) {
            let show = |s: Option<crate::results::shards::ShardSpec>| {
                s.map_or("no shard".to_string(), |s| format!("--shard {s}"))
            };
            diffs.push(format!("{} vs {}", show(shard(self)), show(shard(other))));
        }
        (!diffs.is_empty()).then(|| diffs.join("; "))
    }

    /// How the plan of `other` differs from `self`'s, if it does (each difference named).
    pub fn plan_mismatch(&self, other: &Meta) -> Option<String> {
        let mut diffs = Vec::new();
        let p = (&self.plan, &other.plan);
        if p.0.profiles != p.1.profiles {
            diffs.push(format!("profiles {:?} vs {:?}", p.0.profiles, p.1.profiles));
        }
        if p.0.workloads != p.1.workloads {
            diffs.push(format!(
                "workloads {:?} vs {:?}",
                p.0.workloads, p.1.workloads
            ));
        }
        if p.0.servers != p.1.servers {
            diffs.push(format!("servers {:?} vs {:?}", p.0.servers, p.1.servers));
        }
        if p.0.variants != p.1.variants {
            let n = |v: &[crate::config::protocol::Variant]| {
                v.iter().map(|x| x.name()).collect::<Vec<_>>()
            };
            diffs.push(format!(
                "protocols {:?} vs {:?}",
                n(&p.0.variants),
                n(&p.1.variants)
            ));
        }
        if p.0.runs != p.1.runs {
            diffs.push(format!("--runs {} vs {}", p.0.runs, p.1.runs));
        }
        if p.0.warmup != p.1.warmup {
            diffs.push(format!("--warmup {} vs {}", p.0.warmup, p.1.warmup));
        }
        if p.0.seed != p.1.seed {
            diffs.push(format!("--seed {} vs {}", p.0.seed, p.1.seed));
        }
        if self.profiles != other.profiles {
            diffs.push("a profile's values changed since the matrix started".into());
        }
        if self.servers != other.servers {
            diffs.push("server configuration (server or knobs) differs".into());
        }
        if self.timeout_s != other.timeout_s {
            diffs.push(format!(
                "--timeout {} s vs {} s",
                self.timeout_s, other.timeout_s
            ));
        }
        if self.pages_seed != other.pages_seed {
            diffs.push(format!(
                "pages seed {} vs {}",
                self.pages_seed, other.pages_seed
            ));
        }
        if self.retry_invalid != other.retry_invalid {
            diffs.push(format!(
                "--retry-invalid {} vs {}",
                self.retry_invalid, other.retry_invalid
            ));
        }
        if p.0.adaptive != p.1.adaptive {
            let show = |a: &Option<crate::config::plan::Adaptive>| match a {
                Some(a) => format!(
                    "--runs auto (--min-runs {} --max-runs {} --precision {})",
                    a.min_runs, a.max_runs, a.precision_pct
                ),
                None => "fixed --runs".to_string(),
            };
            diffs.push(format!(
                "{} vs {}",
                show(&p.0.adaptive),
                show(&p.1.adaptive)
            ));
        }
        if p.0.browsers != p.1.browsers {
            let n = |b: &[crate::config::identity::BrowserId]| {
                b.iter().map(|x| x.name()).collect::<Vec<_>>().join(",")
            };
            diffs.push(format!(
                "--browsers {} vs {}",
                n(&p.0.browsers),
                n(&p.1.browsers)
            ));
        }
        (!diffs.is_empty()).then(|| diffs.join("; "))
    }
}

pub fn read_meta(dir: &Path) -> Result<Meta> {
    let path = dir.join(META);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {}: is {} a pagebench results directory?",
            path.display(),
            dir.display()
        )
    })?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a valid pagebench meta.json", path.display()))
}

/// What is on disk for one planned run: how many attempts, and whether the last one failed as
/// a measurement (and so may be run again).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attempts {
    pub count: u32,
    pub last_failed_measurement: bool,
}

impl Attempts {
    /// The attempt to run next (1-based), if any: the first, or a retry of a measurement
    /// failure while fewer than `retry_invalid` retries were made.
    pub fn next(&self, retry_invalid: u32) -> Option<u32> {
        if self.count == 0 {
            Some(1)
        } else if self.last_failed_measurement && self.count <= retry_invalid {
            Some(self.count + 1)
        } else {
            None
        }
    }

    /// Notes that attempt `attempt` finished (a measurement failure or not).
    pub fn record(&mut self, attempt: u32, failed_measurement: bool) {
        if attempt >= self.count {
            self.count = attempt;
            self.last_failed_measurement = failed_measurement;
        }
    }
}

pub fn write_meta(dir: &Path, meta: &Meta) -> Result<()> {
    atomic::write_file(
        &dir.join(META),
        (serde_json::to_string_pretty(meta)? + "\n").as_bytes(),
    )
}

/// An open results directory that runs are appended to.
pub struct Store {
    dir: PathBuf,
    runs: csv::Writer<File>,
    resources: csv::Writer<File>,
    /// Attempt ids committed.
    done: BTreeSet<String>,
    /// Attempts per planned run.
    attempts: BTreeMap<String, Attempts>,
}

/// Cuts a CSV file back to its last complete line (a crash may leave half a row).
fn truncate_partial_line(path: &Path) -> Result<()> {
    let mut f = OpenOptions::new().read(true).write(true).open(path)?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return Ok(());
    }
    let keep = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    f.set_len(keep as u64)?;
    f.seek(std::io::SeekFrom::End(0))?;
    Ok(())
}

/// The attempts committed in `runs.csv`: their ids, and per planned run what was attempted.
pub fn committed(dir: &Path) -> Result<(BTreeSet<String>, BTreeMap<String, Attempts>)> {
    let path = dir.join(RUNS_CSV);
    let mut ids = BTreeSet::new();
    let mut attempts: BTreeMap<String, Attempts> = BTreeMap::new();
    if !path.exists() {
        return Ok((ids, attempts));
    }
    let mut r =
        csv::Reader::from_path(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let headers = r.headers()?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .with_context(|| format!("{} has no column {name:?}", path.display()))
    };
    let (c_id, c_plan, c_attempt, c_failed) = (
        col("run_id")?,
        col("plan_id")?,
        col("attempt")?,
        col("measurement_failure")?,
    );
    for (i, row) in r.records().enumerate() {
        let row = row.with_context(|| format!("{} row {}: malformed", path.display(), i + 2))?;
        let field = |c: usize| row.get(c).unwrap_or("");
        let attempt: u32 = field(c_attempt).parse().with_context(|| {
            format!(
                "{} row {}: attempt {:?} is not a number",
                path.display(),
                i + 2,
                field(c_attempt)
            )
        })?;
        ids.insert(field(c_id).to_string());
        attempts
            .entry(field(c_plan).to_string())
            .or_default()
            .record(attempt, field(c_failed) == "true");
    }
    Ok((ids, attempts))
}

fn open_append(path: &Path, columns: &[&str]) -> Result<csv::Writer<File>> {
    let exists = path.exists() && std::fs::metadata(path)?.len() > 0;
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(f);
    if !exists {
        w.write_record(columns)?;
        w.flush()?;
    }
    Ok(w)
}

impl Store {
    /// Starts a new results directory. Refuses one that already holds runs.
    pub fn create(dir: &Path, meta: &Meta) -> Result<Store> {
        if dir.join(RUNS_CSV).exists() {
            bail!(
                "{} already holds a matrix: continue it with --resume {}, or choose another --out",
                dir.display(),
                dir.display()
            );
        }
        std::fs::create_dir_all(dir.join(RUNS_DIR))
            .with_context(|| format!("cannot create {}", dir.display()))?;
        write_meta(dir, meta)?;
        let store = Self::open(dir, BTreeSet::new(), BTreeMap::new())?;
        // The new directory entries themselves (runs/, the CSV files) must survive a crash.
        atomic::sync_dir(dir)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            atomic::sync_dir(parent)?;
        }
        Ok(store)
    }

    /// Reopens a results directory to finish its plan. `requested` must be the same matrix.
    pub fn resume(dir: &Path, requested: &Meta) -> Result<(Store, Meta)> {
        let mut meta = read_meta(dir)?;
        if !meta.merged_from.is_empty() {
            bail!(
                "--resume {}: it was merged from {} shards by `pagebench merge`; resume the shard that is missing runs, then merge again",
                dir.display(),
                meta.merged_from.len()
            );
        }
        if let Some(why) = meta.incompatible() {
            bail!(
                "--resume {}: {why}; finish it with the pagebench that started it, or start a new matrix with --out",
                dir.display()
            );
        }
        if let Some(why) = meta.mismatch(requested) {
            bail!(
                "--resume {}: the results there are from a different matrix ({why}); run the same command as before, or use a new --out",
                dir.display()
            );
        }
        std::fs::create_dir_all(dir.join(RUNS_DIR))?;
        let runs_path = dir.join(RUNS_CSV);
        if runs_path.exists() {
            truncate_partial_line(&runs_path)?;
        }
        let (done, attempts) = committed(dir)?;
        // Drop resource rows of runs that never got their runs.csv row.
        let res_path = dir.join(RESOURCES_CSV);
        if res_path.exists() {
            truncate_partial_line(&res_path)?;
            let mut r = csv::Reader::from_path(&res_path)?;
            let mut kept: Vec<csv::StringRecord> = Vec::new();
            for row in r.records() {
                let row = row?;
                if row.get(0).is_some_and(|id| done.contains(id)) {
                    kept.push(row);
                }
            }
            let mut buf = csv::Writer::from_writer(Vec::new());
            buf.write_record(RESOURCE_COLUMNS)?;
            for row in &kept {
                buf.write_record(row)?;
            }
            atomic::write_file(&res_path, &buf.into_inner()?)?;
        }
        meta.status = "running".into();
        meta.ended_at = None;
        meta.resumed_at.push(chrono::Utc::now().to_rfc3339());
        write_meta(dir, &meta)?;
        Ok((Self::open(dir, done, attempts)?, meta))
    }

    fn open(
        dir: &Path,
        done: BTreeSet<String>,
        attempts: BTreeMap<String, Attempts>,
    ) -> Result<Store> {
        Ok(Store {
            dir: dir.to_path_buf(),
            runs: open_append(&dir.join(RUNS_CSV), &RUN_COLUMNS)?,
            resources: open_append(&dir.join(RESOURCES_CSV), RESOURCE_COLUMNS)?,
            done,
            attempts,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What is on disk for planned run `plan_id`.
    pub fn attempts(&self, plan_id: &str) -> Attempts {
        self.attempts.get(plan_id).copied().unwrap_or_default()
    }

    /// Planned runs with nothing left to attempt.
    pub fn finished(&self, plan: &[PlannedRun], retry_invalid: u32) -> usize {
        plan.iter()
            .filter(|p| {
                self.attempts(&p.id)
                    .next(p.retries(retry_invalid))
                    .is_none()
            })
            .count()
    }

    /// Calls `f` with every committed attempt's raw record, read back one at a time.
    pub fn each_record(&self, mut f: impl FnMut(&RunRecord)) -> Result<()> {
        for id in &self.done {
            f(&read_record(&self.dir, id)?);
        }
        Ok(())
    }

    /// Attempts committed (every row of `runs.csv`).
    pub fn attempt_count(&self) -> usize {
        self.done.len()
    }

    /// Persists one finished run: its screencast frames, raw record, resource rows, then the
    /// commit row; each synced.
    pub fn append(&mut self, rec: &RunRecord) -> Result<()> {
        if let Some(v) = &rec.visual {
            let files: Vec<(&str, &[u8])> = v
                .frames
                .iter()
                .zip(&rec.frame_images)
                .map(|(f, img)| (f.file.as_str(), img.as_slice()))
                .collect();
            let target = self.dir.join(FRAMES_DIR).join(&rec.id);
            std::fs::create_dir_all(self.dir.join(FRAMES_DIR)).with_context(|| {
                format!("cannot create {}", self.dir.join(FRAMES_DIR).display())
            })?;
            let staged = atomic::StagedDir::new(&target)?;
            for (name, bytes) in files {
                atomic::write_file(&staged.path().join(name), bytes)?;
            }
            staged.publish()?;
        }
        if !rec.capture_files.is_empty() {
            write_captures(
                &self.dir.join(CAPTURES_DIR).join(&rec.id),
                &rec.capture_files,
            )?;
        }
        let raw = serde_json::to_vec(rec)?;
        atomic::write_file(
            &self.dir.join(RUNS_DIR).join(format!("{}.json", rec.id)),
            &raw,
        )?;
        for row in resource_rows(rec) {
            self.resources.write_record(&row)?;
        }
        self.resources.flush()?;
        self.resources.get_ref().sync_data()?;
        self.runs.write_record(run_row(rec))?;
        self.runs.flush()?;
        self.runs.get_ref().sync_data()?;
        self.done.insert(rec.id.clone());
        self.attempts
            .entry(rec.plan_id.clone())
            .or_default()
            .record(rec.attempt, rec.is_measurement_failure());
        Ok(())
    }
}

/// Reads a raw run record.
pub fn read_record(dir: &Path, id: &str) -> Result<RunRecord> {
    let path = dir.join(RUNS_DIR).join(format!("{id}.json"));
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a valid run record", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_say_what_runs_next() {
        let none = Attempts::default();
        assert_eq!(none.next(2), Some(1));
        let failed_once = Attempts {
            count: 1,
            last_failed_measurement: true,
        };
        assert_eq!(failed_once.next(2), Some(2));
        assert_eq!(failed_once.next(0), None, "no retries asked for");
        let failed_thrice = Attempts {
            count: 3,
            last_failed_measurement: true,
        };
        assert_eq!(failed_thrice.next(2), None, "two retries made");
        let counted = Attempts {
            count: 2,
            last_failed_measurement: false,
        };
        assert_eq!(counted.next(2), None);
        // Rows read back in any order keep the latest attempt's state.
        let mut a = Attempts::default();
        a.record(2, false);
        a.record(1, true);
        assert_eq!(a, counted);
    }

    fn meta() -> Meta {
        Meta::new(
            PlanSpec {
                profiles: vec!["wired".into()],
                workloads: vec!["page10".into()],
                servers: vec!["embedded".into()],
                browsers: vec![crate::config::identity::BrowserId::default()],
                views: vec![crate::config::identity::View::First],
                devices: vec![Default::default()],
                variants: vec![],
                runs: 1,
                warmup: 0,
                seed: 1,
                adaptive: None,
            },
            0,
        )
    }

    #[test]
    fn resume_refuses_records_of_another_version_or_layout() {
        let tmp = crate::support::tempdir::create("store-test").unwrap();
        let dir = tmp.path();
        let mut old = meta();
        old.pagebench_version = "0.1.0".into();
        old.record_format = 0;
        Store::create(dir, &old).unwrap();
        let e = format!("{:#}", Store::resume(dir, &meta()).err().unwrap());
        assert!(
            e.contains("written by pagebench 0.1.0 (record format 0)") && e.contains("--out"),
            "{e}"
        );
        let mut cols = meta();
        cols.run_columns.pop();
        write_meta(dir, &cols).unwrap();
        let e = format!("{:#}", Store::resume(dir, &meta()).err().unwrap());
        assert!(e.contains("column layout"), "{e}");
        write_meta(dir, &meta()).unwrap();
        let mut more_retries = meta();
        more_retries.retry_invalid = 5;
        let e = format!("{:#}", Store::resume(dir, &more_retries).err().unwrap());
        assert!(e.contains("--retry-invalid 2 vs 5"), "{e}");
        assert!(Store::resume(dir, &meta()).is_ok());
    }

    #[test]
    fn the_plan_hash_names_the_plan_not_the_machine_or_the_shard() {
        let a = meta();
        let mut b = meta();
        b.shard = Some(crate::results::shards::ShardInfo {
            spec: "2/3".parse().unwrap(),
            cells: vec![],
        });
        b.git_revision = "other".into();
        b.machine.hostname = "elsewhere".into();
        assert_eq!(a.plan_hash(), b.plan_hash());
        assert_eq!(a.plan_hash().len(), 16);
        let mut seed = meta();
        seed.plan.seed = 2;
        let mut timeout = meta();
        timeout.timeout_s = 60.0;
        let mut auto = meta();
        auto.plan.adaptive = Some(crate::config::plan::Adaptive::new(5, 30, 5.0).unwrap());
        for other in [seed, timeout, auto] {
            assert_ne!(a.plan_hash(), other.plan_hash());
        }
        // A merged directory cannot be resumed: its shards can.
        let tmp = crate::support::tempdir::create("store-test").unwrap();
        let mut merged = meta();
        merged.merged_from = vec![crate::results::shards::MergedShard {
            dir: "s1".into(),
            spec: "1/1".parse().unwrap(),
            status: "complete".into(),
            attempts: 0,
            started_at: String::new(),
            ended_at: None,
            hostname: String::new(),
            fingerprint: meta().fingerprint(),
            calibration: None,
        }];
        Store::create(tmp.path(), &merged).unwrap();
        let e = format!("{:#}", Store::resume(tmp.path(), &meta()).err().unwrap());
        assert!(e.contains("merged from 1 shards"), "{e}");
    }

    #[test]
    fn partial_line_is_cut() {
        let tmp = crate::support::tempdir::create("store-test").unwrap();
        let dir = tmp.path();
        let p = dir.join("x.csv");
        std::fs::write(&p, "a,b\n1,2\n3,").unwrap();
        truncate_partial_line(&p).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a,b\n1,2\n");
    }
}
