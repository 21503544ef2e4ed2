//! The results directory: `meta.json`, `runs.csv`, `resources.csv` and `runs/<id>.json`.
//! Each finished run is on disk (synced) before the next starts: the raw record first, then its
//! resource rows, then its `runs.csv` row — the row is the commit mark. Resuming drops whatever a
//! crash left half-written after the last mark.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::plan::PlanSpec;
use crate::profile::Profile;
use crate::record::{RunRecord, RESOURCE_COLUMNS, RUN_COLUMNS};
use crate::sysinfo::MachineInfo;

pub const META: &str = "meta.json";
pub const RUNS_CSV: &str = "runs.csv";
pub const RESOURCES_CSV: &str = "resources.csv";
pub const RUNS_DIR: &str = "runs";

/// What a results directory was made with. The fields under "matrix identity" must match for
/// `--resume` to continue it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    pub pagebench_version: String,
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
    /// What the servers really applied (versions, knobs with the kernel's answers), by server;
    /// informative, not part of the identity (a kernel may answer differently on resume).
    #[serde(default)]
    pub servers_applied: Value,
    /// Per resumed session: when it started (the first is `started_at`).
    #[serde(default)]
    pub resumed_at: Vec<String>,
}

impl Meta {
    /// Why `other` (the requested matrix) is not the same matrix as `self` (on disk), if not.
    pub fn mismatch(&self, other: &Meta) -> Option<String> {
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
            let n = |v: &[super::plan::Variant]| v.iter().map(|x| x.name()).collect::<Vec<_>>();
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

/// Writes a file atomically (temporary sibling, sync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f =
            File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(bytes)?;
        f.sync_data()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("cannot rename to {}", path.display()))?;
    Ok(())
}

pub fn write_meta(dir: &Path, meta: &Meta) -> Result<()> {
    write_atomic(
        &dir.join(META),
        (serde_json::to_string_pretty(meta)? + "\n").as_bytes(),
    )
}

/// An open results directory that runs are appended to.
pub struct Store {
    dir: PathBuf,
    runs: csv::Writer<File>,
    resources: csv::Writer<File>,
    done: BTreeSet<String>,
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

/// The run ids already committed in `runs.csv`.
pub fn committed_ids(dir: &Path) -> Result<BTreeSet<String>> {
    let path = dir.join(RUNS_CSV);
    if !path.exists() {
        return Ok(BTreeSet::new());
    }
    let mut r =
        csv::Reader::from_path(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut ids = BTreeSet::new();
    for row in r.records() {
        let row = row.with_context(|| format!("{} has a malformed row", path.display()))?;
        if let Some(id) = row.get(0) {
            ids.insert(id.to_string());
        }
    }
    Ok(ids)
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
        Self::open(dir, BTreeSet::new())
    }

    /// Reopens a results directory to finish its plan. `requested` must be the same matrix.
    pub fn resume(dir: &Path, requested: &Meta) -> Result<(Store, Meta)> {
        let mut meta = read_meta(dir)?;
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
        let done = committed_ids(dir)?;
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
            write_atomic(&res_path, &buf.into_inner()?)?;
        }
        meta.status = "running".into();
        meta.ended_at = None;
        meta.resumed_at.push(chrono::Utc::now().to_rfc3339());
        write_meta(dir, &meta)?;
        Ok((Self::open(dir, done)?, meta))
    }

    fn open(dir: &Path, done: BTreeSet<String>) -> Result<Store> {
        Ok(Store {
            dir: dir.to_path_buf(),
            runs: open_append(&dir.join(RUNS_CSV), RUN_COLUMNS)?,
            resources: open_append(&dir.join(RESOURCES_CSV), RESOURCE_COLUMNS)?,
            done,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn is_done(&self, id: &str) -> bool {
        self.done.contains(id)
    }

    pub fn done_count(&self) -> usize {
        self.done.len()
    }

    /// Persists one finished run: raw record, resource rows, then the commit row; each synced.
    pub fn append(&mut self, rec: &RunRecord) -> Result<()> {
        let raw = serde_json::to_vec(rec)?;
        write_atomic(
            &self.dir.join(RUNS_DIR).join(format!("{}.json", rec.id)),
            &raw,
        )?;
        for row in rec.resource_rows() {
            self.resources.write_record(&row)?;
        }
        self.resources.flush()?;
        self.resources.get_ref().sync_data()?;
        self.runs.write_record(rec.csv_row())?;
        self.runs.flush()?;
        self.runs.get_ref().sync_data()?;
        self.done.insert(rec.id.clone());
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
    fn partial_line_is_cut() {
        let dir = crate::browser::launch::make_temp_dir("pagebench-store-test").unwrap();
        let p = dir.join("x.csv");
        std::fs::write(&p, "a,b\n1,2\n3,").unwrap();
        truncate_partial_line(&p).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a,b\n1,2\n");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
