//! "Machine during the run": whether the machine was quiet before the matrix, how many
//! attempts met a busy machine (per protocol, and among the rejected), and per series what
//! each side cost in CPU and how long it waited for one (`contention`, the registry's
//! contention metrics).

use std::collections::BTreeMap;

use super::doc::{Block, Cell, Document, Table};
use super::report_data::ReportData;
use crate::evidence::metric_registry::{self, Scope};
use crate::results::summary::SeriesStats;

/// The section.
pub fn section(doc: &mut Document, data: &ReportData, tables: &mut Vec<Table>) {
    doc.heading(2, "Machine during the run", "machine");
    let checks = &data.meta.machine_checks;
    let mut items: Vec<String> = checks
        .iter()
        .map(|c| {
            let verdict = if c.quiet() {
                "quiet".to_string()
            } else {
                format!("**not quiet** ({})", c.problems.join("; "))
            };
            format!("Machine check at {}: {verdict} — {}.", c.at, c.describe())
        })
        .collect();
    if checks.is_empty() {
        items.push("No machine check was made before the runs.".into());
    }
    items.extend(disturbed(data));
    items.extend(lanes(data));
    doc.blocks.push(Block::List(items));
    if let Some(t) = table(data) {
        tables.push(t.clone());
        doc.blocks.push(Block::Table(t));
    }
}

/// Which series shared the machine with other lanes (`--jobs`): their runs' other lanes' CPU
/// is in the table, apart from others'.
fn lanes(data: &ReportData) -> Option<String> {
    let shared: Vec<String> = data
        .summary
        .series
        .iter()
        .filter(|s| {
            s.breakdown
                .get(metric_registry::SIBLINGS_CPU_MS.name)
                .and_then(|b| b.median)
                .and_then(|m| m.ms())
                .is_some_and(|ms| ms > 0.0)
        })
        .map(|s| s.key.label())
        .collect();
    (!shared.is_empty()).then(|| {
        format!(
            "Walked on concurrent lanes (`--jobs`): {} of {} series ran most of their rounds beside other lanes' (rounds whose runs measured light enough to share: they wait on the network; the others, and every cell's first round, had the machine alone). Other lanes' browsers and servers are counted apart from other processes, every process of theirs (each launch runs in a CPU accounting group of its own, cgroup v2, which keeps the CPU of helpers that outlive their browser); on a machine without cgroup2, said by a warning at the start, a closing browser's helpers count as others, and a shared run called busy may have met only its siblings. Its own run-queue waits are in the table.",
            shared.len(),
            data.summary.series.len(),
        )
    })
}

/// How many measured attempts met a busy machine, per protocol and among the rejected.
fn disturbed(data: &ReportData) -> Option<String> {
    let series = &data.summary.series;
    if series
        .iter()
        .all(|s| !s.breakdown.contains_key("browser_cpu_ms"))
    {
        return Some(
            "Contention was not measured (results from before pagebench recorded it).".into(),
        );
    }
    let mut by_variant: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let (mut disturbed, mut attempts, mut rejected, mut disturbed_rejected) = (0, 0, 0, 0);
    for s in series {
        let a = &s.attempts;
        let e = by_variant.entry(s.key.variant.name()).or_default();
        e.0 += a.disturbed;
        e.1 += a.attempts;
        disturbed += a.disturbed;
        attempts += a.attempts;
        rejected += a.rejected;
        disturbed_rejected += a.disturbed_rejected;
    }
    let per: Vec<String> = by_variant
        .iter()
        .map(|(v, (d, n))| format!("{v} {d} of {n}"))
        .collect();
    Some(format!(
        "{disturbed} of {attempts} measured attempts met a busy machine — other processes used more than {:.0} % of its CPU time during the load, or the hypervisor stole more than {:.0} % ({}); {disturbed_rejected} of the {rejected} rejected attempts were among them.",
        crate::support::contention::DISTURBED_OTHERS_PCT,
        crate::support::contention::DISTURBED_STEAL_PCT,
        per.join(", ")
    ))
}

fn median(s: &SeriesStats, metric: &str) -> Cell {
    match s
        .breakdown
        .get(metric)
        .and_then(|b| b.median)
        .and_then(|m| m.ms())
    {
        Some(v) => Cell::text(format!("{v:.0}")),
        None => Cell::missing(),
    }
}

/// Per series: attempts that met a busy machine, then the median of each contention metric
/// over its valid runs.
pub fn table(data: &ReportData) -> Option<Table> {
    let metrics: Vec<&metric_registry::Metric> =
        metric_registry::breakdown_for(Scope::Contention).collect();
    let series: Vec<&SeriesStats> = data
        .summary
        .series
        .iter()
        .filter(|s| s.breakdown.contains_key("browser_cpu_ms"))
        .collect();
    if series.is_empty() {
        return None;
    }
    let rows = series
        .iter()
        .map(|s| {
            let mut row = vec![
                Cell::label(&s.key.profile),
                Cell::label(&s.key.workload),
                Cell::label(s.key.setup().slug()),
                Cell::label(s.key.variant.name()),
                Cell::text(format!(
                    "{} of {}",
                    s.attempts.disturbed, s.attempts.attempts
                )),
            ];
            row.extend(metrics.iter().map(|m| median(s, m.name)));
            row
        })
        .collect();
    let mut header: Vec<String> = [
        "profile",
        "workload",
        "setup",
        "protocol",
        "met a busy machine",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(metrics.iter().map(|m| m.label.to_string()));
    Some(Table {
        id: "contention".into(),
        title: "CPU per side, per series".into(),
        intro: vec!["From the run's mark to the end of its load: the CPU time the browser's processes, the server and the link emulator used and how long their threads were runnable but waited for a CPU (summed over threads, from the kernel's schedstat), and the CPU time everything else on the machine used. Medians over the valid runs; `met a busy machine` counts every measured attempt.".into()],
        header,
        rows,
        notes: vec![],
    })
}
