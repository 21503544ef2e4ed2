//! `runs.csv` read back: one typed row per attempt ([`RunRow`]), the attempts that count
//! ([`final_attempts`]) and the series a row belongs to ([`SeriesKey`]). Below the summary and
//! the attempt and attrition accounts, which all read rows.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::row_identity::RowIdentity;
use super::store::RUNS_CSV;
use crate::config::device::DeviceId;
use crate::config::identity::{BrowserId, Phase, ServerId, Setup, View};
use crate::config::protocol::Variant;
use crate::evidence::metric_registry::{self, Metric};
use crate::evidence::validate::{Outcome, ReasonKind};

/// One row of `runs.csv`: identity, outcome, and the value of every metric of the
/// [registry](crate::evidence::metric_registry) (read by the registry's column names).
#[derive(Debug, Clone)]
pub struct RunRow {
    pub run_id: String,
    pub plan_id: String,
    pub attempt: u32,
    pub profile: String,
    pub workload: String,
    pub server: ServerId,
    pub browser: BrowserId,
    pub view: View,
    pub device: DeviceId,
    pub phase: Phase,
    pub round: u32,
    pub position: u32,
    pub variant: Variant,
    pub outcome: Outcome,
    /// The kinds of an invalid run's reasons.
    pub invalid_kinds: Vec<ReasonKind>,
    pub measurement_failure: bool,
    /// 3 (Resource Timing, CDP, the server's log) or 2 (no readable server log).
    pub viewpoints: u8,
    /// Per metric of [`metric_registry::ALL`], in its order.
    values: Vec<Option<f64>>,
}

impl RunRow {
    /// The value of `metric` in this run (`None`: the run has no such figure).
    pub fn value(&self, metric: &Metric) -> Option<f64> {
        metric_registry::ALL
            .iter()
            .position(|m| std::ptr::eq(*m, metric))
            .and_then(|i| self.values[i])
    }

    /// Sets `metric` (rows built by tests and fixtures).
    pub fn set(&mut self, metric: &Metric, value: Option<f64>) {
        if let Some(i) = metric_registry::ALL
            .iter()
            .position(|m| std::ptr::eq(*m, metric))
        {
            self.values[i] = value;
        }
    }

    /// `self` with `metric` set to `value`.
    pub fn with_value(mut self, metric: &Metric, value: Option<f64>) -> RunRow {
        self.set(metric, value);
        self
    }

    /// The headline time.
    pub fn completion_ms(&self) -> Option<f64> {
        self.value(&metric_registry::COMPLETION_MS)
    }

    /// A valid measured first attempt `id` with no figures: the base rows of tests build on.
    pub fn measured(
        id: &str,
        profile: &str,
        workload: &str,
        server: &str,
        variant: &str,
        round: u32,
    ) -> RunRow {
        RunRow {
            run_id: id.into(),
            plan_id: id.into(),
            attempt: 1,
            profile: profile.into(),
            workload: workload.into(),
            server: server.into(),
            browser: BrowserId::default(),
            view: View::First,
            device: DeviceId::default(),
            phase: Phase::Measure,
            round,
            position: 1,
            variant: variant
                .parse()
                .unwrap_or_else(|e| panic!("test row {id}: {e}")),
            outcome: Outcome::Valid,
            invalid_kinds: vec![],
            measurement_failure: false,
            viewpoints: 3,
            values: vec![None; metric_registry::ALL.len()],
        }
    }
}

/// `link server` → the typed kinds.
/// The rows of `runs.csv`, one per attempt id (a duplicated id keeps its last row).
pub fn read_runs(dir: &Path) -> Result<Vec<RunRow>> {
    let path = dir.join(RUNS_CSV);
    let mut r =
        csv::Reader::from_path(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let headers = r
        .headers()
        .with_context(|| format!("cannot read {}", path.display()))?
        .clone();
    // Where each metric's column is (a results directory older than a metric lacks it).
    let columns: Vec<Option<usize>> = metric_registry::ALL
        .iter()
        .map(|m| headers.iter().position(|h| h == m.name))
        .collect();
    let mut out: Vec<RunRow> = Vec::new();
    let mut at: BTreeMap<String, usize> = BTreeMap::new();
    for (i, record) in r.records().enumerate() {
        let malformed = || {
            format!(
                "{} row {}: malformed (a results directory of another pagebench version? `pagebench report` reads only its own)",
                path.display(),
                i + 2
            )
        };
        let record = record.with_context(malformed)?;
        let id: RowIdentity = record.deserialize(Some(&headers)).with_context(malformed)?;
        let mut values = Vec::with_capacity(columns.len());
        for (m, col) in metric_registry::ALL.iter().zip(&columns) {
            let field = col.and_then(|c| record.get(c)).unwrap_or("");
            values.push(if field.is_empty() {
                None
            } else {
                Some(field.parse::<f64>().with_context(|| {
                    format!(
                        "{} row {}, column {}: {field:?} is not a number",
                        path.display(),
                        i + 2,
                        m.name
                    )
                })?)
            });
        }
        let row = RunRow {
            run_id: id.run_id,
            plan_id: id.plan_id,
            attempt: id.attempt,
            profile: id.profile,
            workload: id.workload,
            server: id.server,
            browser: id.browser,
            view: id.view,
            device: id.device,
            phase: id.phase,
            round: id.round,
            position: id.position,
            variant: id.variant,
            outcome: id.outcome,
            invalid_kinds: id.invalid_kinds,
            measurement_failure: id.measurement_failure,
            viewpoints: id.viewpoints,
            values,
        };
        match at.get(&row.run_id) {
            Some(&j) => out[j] = row,
            None => {
                at.insert(row.run_id.clone(), out.len());
                out.push(row);
            }
        }
    }
    Ok(out)
}

/// The attempts that count: the last attempt of every planned run.
pub fn final_attempts(rows: &[RunRow]) -> Vec<&RunRow> {
    let mut last: BTreeMap<&str, u32> = BTreeMap::new();
    for r in rows {
        let e = last.entry(r.plan_id.as_str()).or_insert(r.attempt);
        *e = (*e).max(r.attempt);
    }
    rows.iter()
        .filter(|r| last.get(r.plan_id.as_str()) == Some(&r.attempt))
        .collect()
}

/// Identifies a series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SeriesKey {
    pub profile: String,
    pub workload: String,
    pub server: ServerId,
    /// Absent in summaries from before there was a choice: Chromium.
    #[serde(default)]
    pub browser: BrowserId,
    /// Absent in summaries from before there was a choice: first.
    #[serde(default)]
    pub view: View,
    /// Absent in summaries from before there was a choice: desktop.
    #[serde(default)]
    pub device: DeviceId,
    #[serde(with = "crate::config::protocol::variant_name")]
    pub variant: Variant,
}

impl SeriesKey {
    /// `profile/workload/server/variant`, the engine after the server when it is not Chromium
    /// and `repeat` for a repeat view (the bootstrap's seeds derive from it: first-view
    /// Chromium series keep theirs).
    pub fn label(&self) -> String {
        let mut who = self.server.to_string();
        if self.browser != BrowserId::default() {
            who.push_str(&format!("/{}", self.browser));
        }
        if !self.device.is_desktop() {
            who.push_str(&format!("/{}", self.device));
        }
        if self.view != View::First {
            who.push_str(&format!("/{}", self.view));
        }
        format!("{}/{}/{who}/{}", self.profile, self.workload, self.variant)
    }

    /// The series a run belongs to.
    pub fn of(r: &RunRow) -> SeriesKey {
        SeriesKey {
            profile: r.profile.clone(),
            workload: r.workload.clone(),
            server: r.server.clone(),
            browser: r.browser,
            view: r.view,
            device: r.device.clone(),
            variant: r.variant,
        }
    }

    /// Who served and who loaded this series, on which visit.
    pub fn setup(&self) -> Setup {
        Setup::new(self.server.clone(), self.browser)
            .on(self.view)
            .with_device(self.device.clone())
    }

    /// Whether this series is `setup`'s.
    pub fn is(&self, setup: &Setup) -> bool {
        self.server == setup.server
            && self.browser == setup.browser
            && self.view == setup.view
            && self.device == setup.device
    }
}
