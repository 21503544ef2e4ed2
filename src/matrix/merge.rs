//! `pagebench merge OUT DIR…`: the shards of one matrix (`matrix --shard K/N`, run on several
//! machines) back into one results directory, with the statistics as if the matrix had run on
//! one machine (the command adds the diagnosis and the report).
//!
//! It refuses, naming the directories and what to do: directories that are not shards, shards
//! of another plan (the plan hash and each difference), of another shard count, two shards
//! that overlap (the same index, a cell or a run in both), runs outside their shard's cells,
//! missing or unfinished shards (which to run or resume; `--allow-incomplete` merges what
//! there is), and shards from unlike machines (every difference of their fingerprints;
//! `--allow-mixed-machines` merges anyway). The merged directory is built beside OUT and
//! published in one step.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::config::plan::{self, Cell};
use crate::results::shards::{read_machine, MachineFile, MergedShard};
use crate::results::store::{
    self, read_meta, Meta, CAPTURES_DIR, FRAMES_DIR, RESOURCES_CSV, RUNS_CSV, RUNS_DIR,
};
use crate::results::summary;
use crate::support::atomic;

/// The embedded server's request log (appended by every run of a directory).
const SERVER_LOG: &str = "server-requests.jsonl";

/// What `pagebench merge` was asked.
#[derive(Debug, Clone)]
pub struct MergeRequest {
    pub out: PathBuf,
    pub dirs: Vec<PathBuf>,
    pub allow_mixed_machines: bool,
    pub allow_incomplete: bool,
    pub quiet: bool,
}

/// What the merge wrote.
#[derive(Debug, Clone)]
pub struct MergeOutcome {
    pub out: PathBuf,
    pub shards: usize,
    pub attempts: usize,
    pub complete: bool,
    /// What was allowed through (machine differences, missing or unfinished shards) and what
    /// the calibrations say about the machines.
    pub notes: Vec<String>,
    /// The statistics were written: the diagnosis and the report can follow.
    pub summarized: bool,
}

/// One shard directory as read for the checks.
#[derive(Debug, Clone)]
pub struct ShardDir {
    pub dir: PathBuf,
    pub meta: Meta,
    pub machine: Option<MachineFile>,
    /// Its committed attempts: (run id, plan id).
    pub attempts: Vec<(String, String)>,
}

impl ShardDir {
    pub fn read(dir: &Path) -> Result<ShardDir> {
        let meta = read_meta(dir)?;
        let machine = read_machine(dir)?;
        let rows = if dir.join(RUNS_CSV).exists() {
            summary::read_runs(dir)?
        } else {
            Vec::new()
        };
        Ok(ShardDir {
            dir: dir.to_path_buf(),
            meta,
            machine,
            attempts: rows.into_iter().map(|r| (r.run_id, r.plan_id)).collect(),
        })
    }

    fn name(&self) -> String {
        match &self.meta.shard {
            Some(s) => format!("shard {} ({})", s.spec, self.dir.display()),
            None => self.dir.display().to_string(),
        }
    }
}

/// Checks that `shards` are the shards of one plan, each whole and alike enough to be merged;
/// returns them in shard order with what was allowed through. Pure.
pub fn check(
    shards: Vec<ShardDir>,
    allow_mixed_machines: bool,
    allow_incomplete: bool,
) -> Result<(Vec<ShardDir>, Vec<String>)> {
    let shards = one_plan(shards)?;
    check_overlaps(&shards)?;
    let mut notes = missing_or_unfinished(&shards, allow_incomplete)?;
    notes.extend(machine_differences(&shards, allow_mixed_machines)?);
    notes.extend(calibration_notes(&shards));
    Ok((shards, notes))
}

/// Shards (in shard order) of one plan, run by this pagebench, with one split.
fn one_plan(mut shards: Vec<ShardDir>) -> Result<Vec<ShardDir>> {
    if shards.is_empty() {
        bail!("give the shard directories to merge");
    }
    for s in &shards {
        if s.meta.shard.is_none() {
            bail!(
                "{} was not run with --shard: it is a whole matrix, not a shard to merge",
                s.dir.display()
            );
        }
        if let Some(why) = s.meta.incompatible() {
            bail!(
                "{}: {why}; merge it with the pagebench that ran it",
                s.dir.display()
            );
        }
    }
    shards.sort_by_key(|s| s.meta.shard.as_ref().map(|x| x.spec.index));
    let first = shards[0].clone();
    let hash = first.meta.plan_hash();
    for s in &shards[1..] {
        if s.meta.plan_hash() != hash {
            let why = first.meta.plan_mismatch(&s.meta).unwrap_or_else(|| {
                "their stored options differ (settle wait, receive steering, --visual, --capture or site replay)".into()
            });
            bail!(
                "not shards of one plan: {} has plan {hash}, {} has plan {} ({why}); merge only the shards of one `pagebench matrix` command",
                first.name(),
                s.name(),
                s.meta.plan_hash()
            );
        }
        if s.meta.run_columns != first.meta.run_columns {
            bail!(
                "{} and {} have other runs.csv columns",
                first.name(),
                s.name()
            );
        }
    }
    let count = first.meta.shard.as_ref().expect("checked").spec.count;
    for s in &shards {
        let n = s.meta.shard.as_ref().expect("checked").spec.count;
        if n != count {
            bail!(
                "{} is one of {n} shards, {} one of {count}: merge the shards of one --shard K/N split",
                s.name(),
                first.name()
            );
        }
    }
    Ok(shards)
}

/// The same shard twice, a cell or a run in two shards, or a run outside its shard's cells.
fn check_overlaps(shards: &[ShardDir]) -> Result<()> {
    let first = &shards[0];
    // Overlaps: the same shard twice, a cell or a run in two shards.
    let mut by_index: BTreeMap<u32, &ShardDir> = BTreeMap::new();
    let mut owner: BTreeMap<&Cell, &ShardDir> = BTreeMap::new();
    let mut run_owner: BTreeMap<&str, &ShardDir> = BTreeMap::new();
    for s in shards {
        let info = s.meta.shard.as_ref().expect("checked");
        if let Some(other) = by_index.insert(info.spec.index, s) {
            bail!(
                "overlapping shards: {} and {} are both shard {}; give each shard once",
                other.dir.display(),
                s.dir.display(),
                info.spec
            );
        }
        for c in &info.cells {
            if let Some(other) = owner.insert(c, s) {
                bail!(
                    "overlapping shards: cell {c} is in {} and in {}",
                    other.name(),
                    s.name()
                );
            }
        }
    }
    let planned = plan::plan(&first.meta.plan);
    let plan_cell: BTreeMap<&str, Cell> =
        planned.iter().map(|p| (p.id.as_str(), p.cell())).collect();
    for s in shards {
        let info = s.meta.shard.as_ref().expect("checked");
        for (run, plan_id) in &s.attempts {
            if let Some(other) = run_owner.insert(run.as_str(), s) {
                bail!(
                    "overlapping shards: run {run} is in {} and in {}",
                    other.name(),
                    s.name()
                );
            }
            match plan_cell.get(plan_id.as_str()) {
                Some(c) if info.cells.contains(c) => {}
                Some(c) => bail!(
                    "{} holds run {run} of cell {c}, which is not one of its cells ({})",
                    s.name(),
                    info.cells
                        .iter()
                        .map(|c| c.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => bail!("{} holds run {run}, which is not in the plan", s.name()),
            }
        }
    }
    Ok(())
}

/// Missing shards, cells no shard covers, and unfinished shards: refused, or notes with
/// `allow_incomplete`.
fn missing_or_unfinished(shards: &[ShardDir], allow_incomplete: bool) -> Result<Vec<String>> {
    let first = &shards[0];
    let count = first.meta.shard.as_ref().expect("checked").spec.count;
    let indices: BTreeSet<u32> = shards
        .iter()
        .filter_map(|s| s.meta.shard.as_ref().map(|x| x.spec.index))
        .collect();
    let covered: BTreeSet<&Cell> = shards
        .iter()
        .filter_map(|s| s.meta.shard.as_ref())
        .flat_map(|x| x.cells.iter())
        .collect();
    let mut notes = Vec::new();
    // Missing shards and unfinished ones.
    let missing: Vec<u32> = (1..=count).filter(|k| !indices.contains(k)).collect();
    let uncovered: Vec<String> = first
        .meta
        .plan
        .cells()
        .iter()
        .filter(|c| !covered.contains(c))
        .map(|c| c.to_string())
        .collect();
    if !missing.is_empty() || !uncovered.is_empty() {
        let what = format!(
            "missing shard{} {} of {count} (cells not covered: {}): run `pagebench matrix` with the same options and {}, and give its directory too",
            if missing.len() == 1 { "" } else { "s" },
            missing.iter().map(|k| format!("{k}/{count}")).collect::<Vec<_>>().join(", "),
            if uncovered.is_empty() { "none".to_string() } else { uncovered.join(", ") },
            missing.iter().map(|k| format!("--shard {k}/{count}")).collect::<Vec<_>>().join(", ")
        );
        if !allow_incomplete {
            bail!("{what} (or merge what there is with --allow-incomplete)");
        }
        notes.push(what);
    }
    for s in shards {
        if s.meta.status != "complete" {
            let finished: BTreeSet<&str> = s.attempts.iter().map(|(_, p)| p.as_str()).collect();
            let what = format!(
                "{} is {}: {} of its {} planned runs have attempts; finish it with `pagebench matrix --resume {}`",
                s.name(),
                s.meta.status,
                finished.len(),
                s.meta.planned_runs,
                s.dir.display()
            );
            if !allow_incomplete {
                bail!("{what} (or merge what there is with --allow-incomplete)");
            }
            notes.push(what);
        }
    }
    Ok(notes)
}

/// How the shards' machines differ: refused, or a note with `allow_mixed_machines`.
fn machine_differences(shards: &[ShardDir], allow_mixed_machines: bool) -> Result<Vec<String>> {
    let first = &shards[0];
    let mut notes = Vec::new();
    // Machines.
    let base = first.meta.fingerprint();
    let mut differences = Vec::new();
    for s in &shards[1..] {
        for (field, a, b) in base.differences(&s.meta.fingerprint()) {
            differences.push(format!(
                "{field}: {a} ({}) vs {b} ({})",
                first.name(),
                s.name()
            ));
        }
    }
    if !differences.is_empty() {
        if !allow_mixed_machines {
            bail!(
                "the shards ran on unlike machines — {}; one set of statistics needs alike machines: run those shards again on matching ones, or merge anyway with --allow-mixed-machines (the report then lists each shard's machine and calibration)",
                differences.join("; ")
            );
        }
        notes.push(format!(
            "merged across unlike machines (--allow-mixed-machines): {}",
            differences.join("; ")
        ));
    }
    Ok(notes)
}

/// Where the calibrations of the shards' machines disagree by more than 10 % (the reference
/// series' median, the emulator's rate) — said, not refused: the fingerprints decide that.
fn calibration_notes(shards: &[ShardDir]) -> Vec<String> {
    let mut notes = Vec::new();
    let cal: Vec<(&ShardDir, &crate::results::shards::Calibration)> = shards
        .iter()
        .filter_map(|s| s.machine.as_ref()?.calibration.as_ref().map(|c| (s, c)))
        .collect();
    let spread = |values: Vec<(String, f64)>, what: &str, unit: &str| -> Option<String> {
        let lo = values.iter().map(|v| v.1).fold(f64::INFINITY, f64::min);
        let hi = values.iter().map(|v| v.1).fold(0.0, f64::max);
        (values.len() > 1 && lo > 0.0 && hi / lo > 1.10).then(|| {
            format!(
                "the machines' {what} differ by {:.0} %: {}",
                (hi / lo - 1.0) * 100.0,
                values
                    .iter()
                    .map(|(n, v)| format!("{n} {v:.0} {unit}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    };
    let label = |s: &ShardDir| {
        s.meta
            .shard
            .as_ref()
            .map_or(String::new(), |x| format!("shard {}", x.spec))
    };
    notes.extend(spread(
        cal.iter()
            .filter_map(|(s, c)| Some((label(s), c.reference.as_ref()?.median_ms?)))
            .collect(),
        "reference page10 h2 medians",
        "ms",
    ));
    notes.extend(spread(
        cal.iter()
            .filter_map(|(s, c)| Some((label(s), c.netem.as_ref()?.udp_packets_per_s)))
            .collect(),
        "emulator forwarding rates",
        "packets/s",
    ));
    notes
}

/// The merged `meta.json`: the first shard's, without its shard, with every shard listed.
fn merged_meta(shards: &[ShardDir], complete: bool) -> Meta {
    let mut meta = shards[0].meta.clone();
    meta.shard = None;
    meta.planned_runs = plan::plan(&meta.plan).len();
    meta.status = if complete { "complete" } else { "incomplete" }.into();
    meta.started_at = shards
        .iter()
        .map(|s| s.meta.started_at.clone())
        .min()
        .unwrap_or_default();
    meta.ended_at = shards.iter().filter_map(|s| s.meta.ended_at.clone()).max();
    meta.resumed_at = vec![];
    meta.machine_checks = shards
        .iter()
        .flat_map(|s| s.meta.machine_checks.iter().cloned())
        .collect();
    meta.plan_hash = meta.plan_hash();
    meta.merged_from = shards
        .iter()
        .map(|s| MergedShard {
            dir: s.dir.display().to_string(),
            spec: s.meta.shard.as_ref().expect("checked").spec,
            status: s.meta.status.clone(),
            attempts: s.attempts.len(),
            started_at: s.meta.started_at.clone(),
            ended_at: s.meta.ended_at.clone(),
            hostname: s.meta.machine.hostname.clone(),
            fingerprint: s.meta.fingerprint(),
            calibration: s.machine.as_ref().and_then(|m| m.calibration.clone()),
        })
        .collect();
    meta
}

/// Hard-links `from` to `to` (a copy across file systems).
fn link_or_copy(from: &Path, to: &Path) -> Result<()> {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to)
            .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    }
    Ok(())
}

/// Links every file below `from` into `to`, keeping the tree.
fn link_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for e in std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            link_tree(&e.path(), &target)?;
        } else if target.exists() {
            bail!(
                "{} is in two shards (overlapping shards)",
                target.strip_prefix(to).unwrap_or(&target).display()
            );
        } else {
            link_or_copy(&e.path(), &target)?;
        }
    }
    Ok(())
}

/// The rows of a CSV file (header, records).
fn read_csv(path: &Path) -> Result<(csv::StringRecord, Vec<csv::StringRecord>)> {
    let mut r =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let header = r.headers()?.clone();
    let rows = r
        .records()
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{} is malformed", path.display()))?;
    Ok((header, rows))
}

/// Writes the union of the shards into `staged` (runs in plan order).
fn write_union(staged: &Path, shards: &[ShardDir], meta: &Meta) -> Result<usize> {
    let order: BTreeMap<String, usize> = plan::plan(&meta.plan)
        .into_iter()
        .map(|p| (p.id, p.index))
        .collect();
    let mut header: Option<csv::StringRecord> = None;
    let mut runs: Vec<(usize, u32, csv::StringRecord)> = Vec::new();
    let mut resources: BTreeMap<String, Vec<csv::StringRecord>> = BTreeMap::new();
    let mut resource_header: Option<csv::StringRecord> = None;
    let mut server_log: Vec<u8> = Vec::new();
    for s in shards {
        let runs_csv = s.dir.join(RUNS_CSV);
        if runs_csv.exists() {
            let (h, rows) = read_csv(&runs_csv)?;
            let col = |name: &str| {
                h.iter()
                    .position(|c| c == name)
                    .with_context(|| format!("{} has no column {name}", runs_csv.display()))
            };
            let (c_plan, c_attempt) = (col("plan_id")?, col("attempt")?);
            if header.as_ref().is_some_and(|x| *x != h) {
                bail!(
                    "{} has other runs.csv columns than the first shard",
                    s.name()
                );
            }
            header = Some(h);
            for row in rows {
                let plan_id = row.get(c_plan).unwrap_or("");
                let index = *order
                    .get(plan_id)
                    .with_context(|| format!("{}: run {plan_id} is not in the plan", s.name()))?;
                let attempt: u32 = row.get(c_attempt).unwrap_or("1").parse().unwrap_or(1);
                runs.push((index, attempt, row));
            }
        }
        let res_csv = s.dir.join(RESOURCES_CSV);
        if res_csv.exists() {
            let (h, rows) = read_csv(&res_csv)?;
            resource_header.get_or_insert(h);
            for row in rows {
                resources
                    .entry(row.get(0).unwrap_or("").to_string())
                    .or_default()
                    .push(row);
            }
        }
        for sub in [RUNS_DIR, FRAMES_DIR, CAPTURES_DIR] {
            let from = s.dir.join(sub);
            if from.is_dir() {
                link_tree(&from, &staged.join(sub))?;
            }
        }
        if let Ok(log) = std::fs::read(s.dir.join(SERVER_LOG)) {
            server_log.extend(log);
        }
    }
    runs.sort_by_key(|(i, a, _)| (*i, *a));
    let mut w = csv::Writer::from_writer(Vec::new());
    let header = match header {
        Some(h) => h,
        None => csv::StringRecord::from(
            crate::results::csv::RUN_COLUMNS
                .iter()
                .copied()
                .collect::<Vec<_>>(),
        ),
    };
    w.write_record(&header)?;
    let c_run = header.iter().position(|c| c == "run_id").unwrap_or(0);
    let mut res = csv::Writer::from_writer(Vec::new());
    match &resource_header {
        Some(h) => res.write_record(h)?,
        None => res.write_record(crate::results::csv::RESOURCE_COLUMNS)?,
    }
    for (_, _, row) in &runs {
        w.write_record(row)?;
        for r in resources
            .get(row.get(c_run).unwrap_or(""))
            .into_iter()
            .flatten()
        {
            res.write_record(r)?;
        }
    }
    std::fs::create_dir_all(staged.join(RUNS_DIR))?;
    atomic::write_file(&staged.join(RUNS_CSV), &w.into_inner()?)?;
    atomic::write_file(&staged.join(RESOURCES_CSV), &res.into_inner()?)?;
    if !server_log.is_empty() {
        atomic::write_file(&staged.join(SERVER_LOG), &server_log)?;
    }
    store::write_meta(staged, meta)?;
    Ok(runs.len())
}

/// Merges the shards of `req.dirs` into `req.out` (see the module docs).
pub fn merge(req: &MergeRequest) -> Result<MergeOutcome> {
    if req.out.exists()
        && std::fs::read_dir(&req.out)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        bail!(
            "{} already exists: give merge a new directory to write",
            req.out.display()
        );
    }
    let mut dirs = Vec::new();
    for d in &req.dirs {
        dirs.push(ShardDir::read(d)?);
    }
    let (shards, notes) = check(dirs, req.allow_mixed_machines, req.allow_incomplete)?;
    let complete = notes.iter().all(|n| !n.starts_with("missing"))
        && shards.iter().all(|s| s.meta.status == "complete");
    let meta = merged_meta(&shards, complete);
    if let Some(parent) = req.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    if req.out.exists() {
        // An empty directory given as OUT: the staged one takes its place.
        std::fs::remove_dir(&req.out)
            .with_context(|| format!("cannot replace {}", req.out.display()))?;
    }
    let staged = atomic::StagedDir::new(&req.out)?;
    let attempts = write_union(staged.path(), &shards, &meta)?;
    staged.publish()?;
    let rows = summary::read_runs(&req.out)?;
    if rows
        .iter()
        .any(|r| r.phase == crate::config::identity::Phase::Measure)
    {
        let s = summary::summarize_runs(
            &rows,
            meta.plan.seed,
            crate::support::stats::DEFAULT_RESAMPLES,
            &meta.plan.servers,
            meta.timeout_s * 1e3,
        )?;
        summary::write(&req.out, &s)?;
        if !req.quiet {
            println!("{}", summary::terminal(&s));
        }
    }
    Ok(MergeOutcome {
        out: req.out.clone(),
        shards: shards.len(),
        attempts,
        complete,
        notes,
        summarized: rows
            .iter()
            .any(|r| r.phase == crate::config::identity::Phase::Measure),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::identity::BrowserId;
    use crate::config::plan::PlanSpec;
    use crate::config::protocol::{parse_variants, H3Mode};
    use crate::results::shards::{ShardInfo, ShardSpec};

    fn spec() -> PlanSpec {
        PlanSpec {
            profiles: vec!["wired".into(), "mobile".into()],
            workloads: vec!["page10".into()],
            servers: vec!["embedded".into()],
            browsers: vec![BrowserId::default()],
            views: vec![crate::config::identity::View::First],
            devices: vec![Default::default()],
            variants: parse_variants("h2,h3", H3Mode::Forced).unwrap(),
            runs: 3,
            warmup: 0,
            seed: 1,
            adaptive: None,
        }
    }

    fn meta_for(k: u32, n: u32, cells: &[&str]) -> Meta {
        let mut m = Meta::fixture(spec(), 6, 120.0);
        m.pagebench_version = env!("CARGO_PKG_VERSION").into();
        m.run_columns = Meta::new(spec(), 6).run_columns;
        m.machine.cpu_model = "EPYC".into();
        m.machine.cpus = 2;
        m.shard = Some(ShardInfo {
            spec: ShardSpec { index: k, count: n },
            cells: cells
                .iter()
                .map(|p| Cell {
                    profile: p.to_string(),
                    workload: "page10".into(),
                })
                .collect(),
        });
        m
    }

    /// A shard with every planned run of its cells attempted once.
    fn shard(k: u32, n: u32, cells: &[&str]) -> ShardDir {
        let meta = meta_for(k, n, cells);
        let attempts = plan::plan(&meta.plan)
            .into_iter()
            .filter(|p| cells.contains(&p.profile.as_str()))
            .map(|p| (p.id.clone(), p.id))
            .collect();
        ShardDir {
            dir: PathBuf::from(format!("/r/s{k}")),
            meta,
            machine: None,
            attempts,
        }
    }

    fn refusal(shards: Vec<ShardDir>) -> String {
        format!("{:#}", check(shards, false, false).unwrap_err())
    }

    #[test]
    fn two_whole_shards_of_one_plan_pass_in_shard_order() {
        let (ok, notes) = check(
            vec![shard(2, 2, &["mobile"]), shard(1, 2, &["wired"])],
            false,
            false,
        )
        .unwrap();
        assert_eq!(ok[0].dir, Path::new("/r/s1"));
        assert!(notes.is_empty(), "{notes:?}");
        let m = merged_meta(&ok, true);
        assert_eq!(m.planned_runs, 12);
        assert!(m.shard.is_none());
        assert_eq!(m.merged_from.len(), 2);
        assert_eq!(m.plan_hash, ok[0].meta.plan_hash());
    }

    #[test]
    fn foreign_and_overlapping_shards_are_refused_naming_them() {
        let mut foreign = shard(2, 2, &["mobile"]);
        foreign.meta.plan.seed = 9;
        let e = refusal(vec![shard(1, 2, &["wired"]), foreign]);
        assert!(
            e.contains("not shards of one plan")
                && e.contains("--seed 1 vs 9")
                && e.contains("/r/s2"),
            "{e}"
        );
        let mut other_timeout = shard(2, 2, &["mobile"]);
        other_timeout.meta.timeout_s = 60.0;
        assert!(refusal(vec![shard(1, 2, &["wired"]), other_timeout]).contains("--timeout"));
        let e = refusal(vec![shard(1, 2, &["wired"]), shard(1, 2, &["wired"])]);
        assert!(
            e.contains("overlapping shards") && e.contains("both shard 1/2"),
            "{e}"
        );
        let e = refusal(vec![
            shard(1, 2, &["wired"]),
            shard(2, 2, &["wired", "mobile"]),
        ]);
        assert!(e.contains("overlapping shards: cell wired/page10"), "{e}");
        let e = refusal(vec![shard(1, 2, &["wired"]), shard(2, 3, &["mobile"])]);
        assert!(
            e.contains("one of 3 shards") && e.contains("one of 2"),
            "{e}"
        );
        // A run outside its shard's cells.
        let mut stray = shard(2, 2, &["mobile"]);
        stray.attempts.push((
            "wired-page10-r01-h2.a2".into(),
            "wired-page10-r01-h2".into(),
        ));
        let e = refusal(vec![shard(1, 2, &["wired"]), stray]);
        assert!(
            e.contains("holds run wired-page10-r01-h2.a2 of cell wired/page10"),
            "{e}"
        );
        let mut whole = shard(1, 2, &["wired"]);
        whole.meta.shard = None;
        assert!(refusal(vec![whole]).contains("was not run with --shard"));
    }

    #[test]
    fn missing_and_unfinished_shards_are_named_unless_allowed() {
        let e = refusal(vec![shard(1, 2, &["wired"])]);
        assert!(
            e.contains("missing shard 2/2")
                && e.contains("mobile/page10")
                && e.contains("--shard 2/2")
                && e.contains("--allow-incomplete"),
            "{e}"
        );
        let (_, notes) = check(vec![shard(1, 2, &["wired"])], false, true).unwrap();
        assert!(notes[0].starts_with("missing shard 2/2"), "{notes:?}");
        let mut stopped = shard(2, 2, &["mobile"]);
        stopped.meta.status = "interrupted".into();
        stopped.attempts.truncate(2);
        let e = refusal(vec![shard(1, 2, &["wired"]), stopped]);
        assert!(
            e.contains("is interrupted: 2 of its 6 planned runs")
                && e.contains("pagebench matrix --resume /r/s2"),
            "{e}"
        );
    }

    #[test]
    fn unlike_machines_are_listed_and_refused_unless_allowed() {
        let mut other = shard(2, 2, &["mobile"]);
        other.meta.machine.cpus = 4;
        other.meta.machine.kernel = "6.1".into();
        let e = refusal(vec![shard(1, 2, &["wired"]), other.clone()]);
        assert!(
            e.contains("unlike machines")
                && e.contains("CPUs: 2")
                && e.contains("vs 4")
                && e.contains("kernel")
                && e.contains("--allow-mixed-machines"),
            "{e}"
        );
        let (_, notes) = check(vec![shard(1, 2, &["wired"]), other], true, false).unwrap();
        assert!(notes[0].contains("CPUs"), "{notes:?}");
    }
}
