//! `pagebench bench link`: does the emulated link deliver the profile, whatever the protocol?
//! A matrix over the study's profiles (h1, h2, h3 × page50 and the 3 MB download by default),
//! then per cell the mean RTT the link offered during the runs (its delay's time average,
//! whatever the traffic) against the profile's RTT, the mean RTT the packets really got, and per
//! run the achieved RTT against the RTT the link model intended for that run's packets. The
//! table is pure arithmetic over `runs.csv` ([`table`]), so `--from DIR` recomputes it for any
//! results directory, e.g. the full study matrix.
//!
//! Why two means: with jitter that varies over time a flow samples the delay at the moments it
//! sends, and a window-limited TCP or QUIC flow sends more while the delay is low, so its
//! packets' mean is a little below what the link offered on high-jitter profiles — the
//! endpoints' doing, the same for the link whatever the protocol. (With the old `fifo` model
//! the link itself raised the delay with the packet rate: both means rose.)

use std::collections::BTreeMap;

use serde::Serialize;

use crate::config::profile::Profile;
use crate::config::protocol::Variant;
use crate::evidence::validate::ReasonKind;
use crate::link::link_stats::rtt_tolerance_ms;
use crate::results::summary::{final_attempts, RunRow};

/// A cell's mean offered RTT (the achieved RTT for records without it) may be off the
/// profile's by at most max(this, [`CELL_FRACTION`]).
pub const CELL_TOLERANCE_MS: f64 = 1.0;
pub const CELL_FRACTION: f64 = 0.03;

/// One (profile, workload, protocol) cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub profile: String,
    pub workload: String,
    #[serde(with = "crate::config::protocol::variant_name")]
    pub variant: Variant,
    pub profile_rtt_ms: f64,
    /// Counted runs with link figures (the last attempt of each planned run).
    pub runs: usize,
    /// Mean over those runs of each run's mean achieved RTT, and of its model RTT.
    pub achieved_rtt_ms: f64,
    pub model_rtt_ms: f64,
    /// Mean over those runs of the RTT the link offered (`None` for records without it).
    pub offered_rtt_ms: Option<f64>,
    /// The largest |achieved − model| of a counted run, and how many counted runs were off
    /// their model by more than the run gate's max(0.5 ms, 1 %).
    pub worst_run_error_ms: f64,
    pub runs_off_model: usize,
    /// Attempts (retried ones included) the link gate rejected.
    pub gate_failures: usize,
}

impl Cell {
    pub fn tolerance_ms(&self) -> f64 {
        CELL_TOLERANCE_MS.max(CELL_FRACTION * self.profile_rtt_ms)
    }

    /// The RTT the link offered is the profile's (within tolerance); records without the
    /// offered figure are judged by the packets' mean.
    pub fn delivers_profile(&self) -> bool {
        let rtt = self.offered_rtt_ms.unwrap_or(self.achieved_rtt_ms);
        (rtt - self.profile_rtt_ms).abs() <= self.tolerance_ms()
    }

    /// Every counted run got the delay its model intended (within the run gate's tolerance).
    pub fn runs_match_model(&self) -> bool {
        self.runs_off_model == 0
    }
}

/// The cells of a results directory's runs, in plan order (profiles, then workloads, then
/// protocols as first seen). Runs without link figures (the emulator's counters unreadable)
/// are left out; warm-ups count too (they crossed the same link).
pub fn table(rows: &[RunRow], profiles: &[Profile]) -> Vec<Cell> {
    let mut order: Vec<(String, String, Variant)> = Vec::new();
    let mut counted: BTreeMap<(String, String, Variant), Vec<&RunRow>> = BTreeMap::new();
    let mut failures: BTreeMap<(String, String, Variant), usize> = BTreeMap::new();
    let key = |r: &RunRow| (r.profile.clone(), r.workload.clone(), r.variant);
    for r in rows {
        let k = key(r);
        if !order.contains(&k) {
            order.push(k.clone());
        }
        if r.invalid_kinds.contains(&ReasonKind::Link) {
            *failures.entry(k).or_default() += 1;
        }
    }
    for r in final_attempts(rows) {
        if r.value(&crate::evidence::metric_registry::ACHIEVED_RTT_MS)
            .is_some()
            && r.value(&crate::evidence::metric_registry::MODEL_RTT_MS)
                .is_some()
        {
            counted.entry(key(r)).or_default().push(r);
        }
    }
    order
        .into_iter()
        .filter_map(|k| {
            let runs = counted.get(&k)?;
            let profile_rtt_ms = profiles.iter().find(|p| p.name == k.0)?.rtt_ms;
            let mean = |f: &dyn Fn(&RunRow) -> f64| {
                runs.iter().map(|r| f(r)).sum::<f64>() / runs.len() as f64
            };
            let errors: Vec<(f64, f64)> = runs
                .iter()
                .map(|r| {
                    let (a, m) = (
                        r.value(&crate::evidence::metric_registry::ACHIEVED_RTT_MS)
                            .unwrap(),
                        r.value(&crate::evidence::metric_registry::MODEL_RTT_MS)
                            .unwrap(),
                    );
                    ((a - m).abs(), rtt_tolerance_ms(m))
                })
                .collect();
            let offered: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.value(&crate::evidence::metric_registry::OFFERED_RTT_MS))
                .collect();
            Some(Cell {
                runs: runs.len(),
                offered_rtt_ms: (offered.len() == runs.len())
                    .then(|| offered.iter().sum::<f64>() / offered.len() as f64),
                achieved_rtt_ms: mean(&|r| {
                    r.value(&crate::evidence::metric_registry::ACHIEVED_RTT_MS)
                        .unwrap()
                }),
                model_rtt_ms: mean(&|r| {
                    r.value(&crate::evidence::metric_registry::MODEL_RTT_MS)
                        .unwrap()
                }),
                worst_run_error_ms: errors.iter().map(|e| e.0).fold(0.0, f64::max),
                runs_off_model: errors.iter().filter(|(e, t)| e > t).count(),
                gate_failures: failures.get(&k).copied().unwrap_or(0),
                profile_rtt_ms,
                profile: k.0,
                workload: k.1,
                variant: k.2,
            })
        })
        .collect()
}

/// `+0.13 (+0.3 %)` against the profile's RTT.
fn off(rtt: f64, profile: f64) -> String {
    let d = rtt - profile;
    let pct = if profile > 0.0 {
        100.0 * d / profile
    } else {
        0.0
    };
    format!("{d:+.2} ({pct:+.1} %)")
}

/// The table for the terminal and the README (Markdown).
pub fn render(cells: &[Cell]) -> String {
    let mut out = String::from(
        "| profile | RTT (ms) | workload | protocol | runs | link offered RTT, mean (ms) | off the profile | packets' RTT, mean (ms) | off the profile | worst run: achieved − model | link-gate rejections |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in cells {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {}{} | {:.2} | {} | {:.3} ms{} | {} |\n",
            c.profile,
            crate::config::profile::fmt_num(c.profile_rtt_ms),
            c.workload,
            c.variant,
            c.runs,
            c.offered_rtt_ms
                .map_or("—".to_string(), |o| format!("{o:.2}")),
            c.offered_rtt_ms
                .map_or("—".to_string(), |o| off(o, c.profile_rtt_ms)),
            if c.delivers_profile() { "" } else { " ✗" },
            c.achieved_rtt_ms,
            off(c.achieved_rtt_ms, c.profile_rtt_ms),
            c.worst_run_error_ms,
            if c.runs_match_model() { "" } else { " ✗" },
            c.gate_failures
        ));
    }
    let cells_ok = cells.iter().filter(|c| c.delivers_profile()).count();
    let runs_ok = cells.iter().filter(|c| c.runs_match_model()).count();
    out.push_str(&format!(
        "\n{cells_ok} of {} cells: the link offered the profile's RTT within max({CELL_TOLERANCE_MS} ms, {} %); {runs_ok} of {} cells: every run within max(0.5 ms, 1 %) of its model (✗ marks the others)\n",
        cells.len(),
        CELL_FRACTION * 100.0,
        cells.len()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::validate::Outcome;

    fn row(profile: &str, variant: &str, round: u32, model: f64, achieved: f64) -> RunRow {
        let id = format!("{profile}-page50-r{round:02}-{variant}");
        RunRow::measured(&id, profile, "page50", "embedded", variant, round)
            .with_value(
                &crate::evidence::metric_registry::COMPLETION_MS,
                Some(500.0),
            )
            .with_value(&crate::evidence::metric_registry::MODEL_RTT_MS, Some(model))
            .with_value(
                &crate::evidence::metric_registry::ACHIEVED_RTT_MS,
                Some(achieved),
            )
            .with_value(
                &crate::evidence::metric_registry::OFFERED_RTT_MS,
                Some(60.0 + (model - 60.0) / 4.0),
            )
    }

    #[test]
    fn cells_compare_the_mean_with_the_profile_and_each_run_with_its_model() {
        let profiles = [Profile::simple("mobile", 60.0, 15.0, 1.0)];
        let mut rows = vec![
            row("mobile", "h2", 1, 58.0, 58.05),
            row("mobile", "h2", 2, 62.5, 62.52),
            row("mobile", "h3", 1, 75.0, 75.1),
            row("mobile", "h3", 2, 74.0, 74.9),
        ];
        // A rejected first attempt, retried: counted once, as a gate failure.
        let mut bad = row("mobile", "h2", 3, 60.0, 66.0);
        bad.outcome = Outcome::Invalid;
        bad.invalid_kinds = vec![ReasonKind::Link];
        let mut retry = row("mobile", "h2", 3, 61.0, 61.03);
        retry.run_id = format!("{}.a2", retry.plan_id);
        retry.attempt = 2;
        rows.push(bad);
        rows.push(retry);
        let cells = table(&rows, &profiles);
        assert_eq!(cells.len(), 2);
        let h2 = &cells[0];
        assert_eq!(
            (h2.variant.name().as_str(), h2.runs, h2.gate_failures),
            ("h2", 3, 1)
        );
        assert!((h2.achieved_rtt_ms - (58.05 + 62.52 + 61.03) / 3.0).abs() < 1e-9);
        assert!(h2.delivers_profile() && h2.runs_match_model());
        // h3: a FIFO-like skew, +14.5 ms: the link offered +3.6 ms, off the profile; one run
        // 0.9 ms off its model.
        let h3 = &cells[1];
        assert!((h3.offered_rtt_ms.unwrap() - 63.625).abs() < 1e-9);
        assert!(!h3.delivers_profile());
        assert!(!h3.runs_match_model());
        assert!((h3.worst_run_error_ms - 0.9).abs() < 1e-9);
        let text = render(&cells);
        assert!(text.contains("1 of 2 cells: the link offered"), "{text}");
        assert!(text.contains("✗"));
    }
}
