//! "What the counted runs leave out": every measured attempt per series (rejected as a
//! measurement, failed as a load of the protocol), and each marked comparison with why, in
//! words (`results::attrition`).

use super::doc::{Block, Cell, CellClass, Document, Table};
use super::report_data::{fmt_p, ReportData};
use crate::results::attrition::words;

/// `3 of 13 rejected · 1 fell back` for one series (empty cell without one).
fn series_cell(data: &ReportData, profile: &str, workload: &str, key: &SeriesRef) -> Cell {
    let Some(s) = data.series(profile, workload, key.setup, key.variant) else {
        return Cell::missing();
    };
    let a = &s.attempts;
    if a.attempts == 0 {
        return Cell::missing();
    }
    let mut text = format!("{} of {} rejected", a.rejected, a.attempts);
    if a.failed > 0 {
        text.push_str(&format!(" · {}", a.failure_words()));
    }
    if a.unmeasured > 0 {
        text.push_str(&format!(" · {} never measured", a.unmeasured));
    }
    let class = if a.rejected > 0 || a.failed > 0 {
        CellClass::Undetermined
    } else {
        CellClass::Text
    };
    Cell::new(text, class)
}

struct SeriesRef<'a> {
    setup: &'a crate::config::identity::Setup,
    variant: crate::config::protocol::Variant,
}

/// Attempts per series: one row per cell and setup, one column per protocol.
pub fn table(data: &ReportData) -> Option<Table> {
    if data.summary.series.iter().all(|s| s.attempts.attempts == 0) {
        return None;
    }
    let variants = &data.variants;
    let mut rows = Vec::new();
    for workload in &data.workloads {
        for setup in &data.setups {
            for profile in data.profiles_in(workload, setup) {
                let mut row = vec![
                    Cell::label(&profile),
                    Cell::label(workload),
                    Cell::label(
                        std::iter::once(setup.server.to_string())
                            .chain(data.engine_and_view(setup))
                            .collect::<Vec<_>>()
                            .join(", "),
                    ),
                ];
                row.extend(variants.iter().map(|v| {
                    series_cell(data, &profile, workload, &SeriesRef { setup, variant: *v })
                }));
                rows.push(row);
            }
        }
    }
    let mut header: Vec<String> = ["profile", "workload", "setup"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    header.extend(variants.iter().map(|v| v.to_string()));
    let (rejected, attempts) = data.summary.series.iter().fold((0, 0), |acc, s| {
        (acc.0 + s.attempts.rejected, acc.1 + s.attempts.attempts)
    });
    Some(Table {
        id: "attempts".into(),
        title: "Every measured attempt".into(),
        intro: vec![format!(
            "{rejected} of {attempts} measured attempts were rejected as measurements (the link did not deliver the profile, the server exited, the browser crashed) and made again; a counted run that fell back, had a failed request or a short body is a failure of its protocol, not a time."
        )],
        header,
        rows,
        notes: vec![],
    })
}

/// The section: the attempts table, then each comparison with a mark or protocol failures.
pub fn section(doc: &mut Document, data: &ReportData, tables: &mut Vec<Table>) {
    doc.heading(2, "What the counted runs leave out", "attrition");
    let f = &data.summary.attrition_families;
    doc.para(format!(
        "Each comparison is also made on what its counted runs leave out: the rejection rates of its two sides' attempts and their protocol-failure rates (Fisher's exact test, Holm-adjusted over the {} comparisons with a rejection and, separately, the {} with a failure), and the same comparison on every planned run's first attempt, rejected ones included ({} tested, Holm on their own). A comparison is marked † when its rejection rates differ, when its first attempts give another verdict, or when a side fails more often — and a side that fails significantly more often is never called faster.",
        f.rejections, f.failures, f.first_attempts
    ));
    if let Some(t) = table(data) {
        tables.push(t.clone());
        doc.blocks.push(Block::Table(t));
    }
    let items = marked(data);
    if items.is_empty() {
        doc.para("No comparison is marked: no side was rejected or failed significantly more often, and every first-attempt verdict is the counted one.");
    } else {
        doc.blocks.push(Block::List(items));
    }
}

/// One item per comparison with a mark or a failure: its label, the failures, the reasons.
fn marked(data: &ReportData) -> Vec<String> {
    data.summary
        .comparisons
        .iter()
        .filter_map(|c| {
            let failures = words::failures(c);
            let why = words::explain(c);
            if failures.is_none() && why.is_empty() {
                return None;
            }
            let x = &c.comparison;
            let mut text = format!(
                "`{}/{}` {}{} — counted runs: {}{}",
                c.profile,
                c.workload,
                c.label(),
                if why.is_empty() { "" } else { " †" },
                words::verdict_with_ratio(c, &x.verdict, x),
                p_text(x)
            );
            if let Some(a) = c.attrition.as_ref().filter(|_| !why.is_empty()) {
                let first = &a.first_attempts;
                text.push_str(&format!(
                    "; first attempts: {}{}",
                    words::verdict_with_ratio(c, &first.verdict, first),
                    p_text(first)
                ));
            }
            if let Some(f) = failures {
                text.push_str(&format!("; {f}"));
            }
            for w in why {
                text.push_str(&format!(". {w}"));
            }
            text.push('.');
            Some(text)
        })
        .collect()
}

/// `, p = 0.012` (empty without a test).
fn p_text(x: &crate::support::stats::Comparison) -> String {
    x.p_holm
        .map(|p| format!(", p = {}", fmt_p(p)))
        .unwrap_or_default()
}
