//! What the plan loop's end-to-end tests share: a whole plan on `wired` run to its end by a
//! stand-in executor into a fresh results directory, then summarised and reported as a matrix
//! is.

use std::path::Path;

use indicatif::ProgressBar;

use super::execute::{run_plan, Executor, PlanContext, PlanEnd};
use crate::config::plan::PlannedRun;
use crate::results::store::{Meta, Store};
use crate::results::summary::{self, Summary};

/// Runs `planned` (all on `wired`) with `exec` into a store at `dir` made with `meta`, then
/// writes its statistics and report: the summary and `report.md`.
pub(crate) fn run_and_report(
    exec: &mut dyn Executor,
    ctx: &PlanContext,
    planned: &[PlannedRun],
    meta: &Meta,
    dir: &Path,
) -> (Summary, String) {
    let mut store = Store::create(dir, meta).unwrap();
    let todo: Vec<&PlannedRun> = planned.iter().collect();
    let end = run_plan(
        exec,
        ctx,
        "wired",
        &todo,
        &mut store,
        &ProgressBar::hidden(),
    )
    .unwrap();
    assert!(matches!(end, PlanEnd::Done(_)));
    let rows = summary::read_runs(dir).unwrap();
    let s = summary::summarize_runs(&rows, 3, 2_000, &["embedded".into()], 60_000.0).unwrap();
    summary::write(dir, &s).unwrap();
    let out = crate::report::generate(dir).unwrap();
    let md = std::fs::read_to_string(out.markdown).unwrap();
    (s, md)
}
