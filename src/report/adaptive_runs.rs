//! How many runs each series got, for a matrix made with `--runs auto`: per cell the rounds it
//! ran, each series' counted runs, the widest 95 % CI half-width of its ratios (what the
//! stopping rule held to `--precision`) and why it stopped.

use super::doc::{Cell, CellClass, Table};
use super::report_data::ReportData;
use crate::results::summary::{widest_ci_pct, CellComparison, SeriesStats};

/// The table, when the matrix ran with `--runs auto`.
pub fn table(data: &ReportData) -> Option<Table> {
    let a = data.meta.plan.adaptive?;
    let s = &data.summary;
    let mut rows = Vec::new();
    for cell in data.meta.plan.cells() {
        let series: Vec<&SeriesStats> = s
            .series
            .iter()
            .filter(|x| x.key.profile == cell.profile && x.key.workload == cell.workload)
            .collect();
        if series.is_empty() {
            continue;
        }
        let comparisons: Vec<&CellComparison> = s
            .comparisons
            .iter()
            .filter(|c| c.profile == cell.profile && c.workload == cell.workload)
            .collect();
        let summaries: Vec<&crate::support::stats::SeriesSummary> =
            series.iter().map(|x| &x.completion).collect();
        let widest = widest_ci_pct(&comparisons, &summaries);
        let rounds = series.iter().map(|x| x.counted_runs()).max().unwrap_or(0);
        let precise = widest.is_some_and(|w| w <= a.precision_pct);
        let why = if precise && rounds < a.max_runs as usize {
            Cell::new(format!("precise after {rounds} rounds"), CellClass::Faster)
        } else if precise {
            Cell::new("precise at the maximum", CellClass::Faster)
        } else {
            Cell::new(
                format!("maximum of {} rounds reached", a.max_runs),
                CellClass::Undetermined,
            )
        };
        rows.push(vec![
            Cell::label(&cell.profile),
            Cell::label(&cell.workload),
            Cell::text(rounds.to_string()),
            Cell::text(
                series
                    .iter()
                    .map(|x| {
                        let name = if data.setups.len() > 1 {
                            format!("{} {} {}", x.key.server, x.key.browser, x.key.variant)
                        } else {
                            x.key.variant.name()
                        };
                        format!("{name} {}", x.counted_runs())
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            Cell::text(widest.map_or("—".into(), |w| format!("±{w:.1} %"))),
            why,
        ]);
    }
    Some(Table {
        id: "runs-per-series".into(),
        title: "Runs per series (--runs auto)".into(),
        intro: vec![format!(
            "Each cell ran {} to {} interleaved rounds: after each round from the {}th on, it stopped once the 95 % CI of every ratio in it (and, in a cell without comparisons, of every median) was within ±{} % of the estimate. The rule looks at the intervals' width only, never at p-values or at which way a ratio points. Counted runs per series are the last attempts of measured rounds (valid, invalid and DNF).",
            a.min_runs, a.max_runs, a.min_runs, a.precision_pct
        )],
        header: [
            "profile",
            "workload",
            "rounds",
            "runs per series",
            "widest CI of a ratio",
            "stopped",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows,
        notes: vec![],
    })
}
