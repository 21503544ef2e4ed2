//! The report's answer in a few sentences (pure): for each kind of comparison (`h3 vs h2`, a
//! server or an engine against another), where one side was faster or slower and by how much
//! at most; what the largest differences come from (their round-trip accounting) and what
//! limited slow transfers; and what to read with care. It opens the report, beside the
//! overview chart, before the details.

use crate::diagnosis::slow_transfers::Diagnosis;
use crate::results::comparison::CellComparison;
use crate::support::stats::Verdict;

use super::report_data::{ratio_text, ReportData};

/// How many kinds of comparison the answer details, how many it names of those with no
/// difference, how many differences it explains, and how many slow-transfer findings it names.
const DETAILED: usize = 5;
const NAMED_ALIKE: usize = 3;
const EXPLAINED: usize = 2;
const TRANSFER_FINDINGS: usize = 1;

/// The findings, one sentence each, in reading order.
pub fn findings(data: &ReportData, diagnosis: Option<&Diagnosis>, warnings: usize) -> Vec<String> {
    let comparisons = &data.summary.comparisons;
    let (called, alike): (Vec<String>, Vec<String>) = labels(comparisons)
        .into_iter()
        .partition(|label| called_in(label, comparisons));
    let mut out: Vec<String> = called
        .iter()
        .take(DETAILED)
        .map(|label| verdicts(label, comparisons))
        .collect();
    if called.len() > DETAILED {
        out.push(format!(
            "{} more kinds of comparison found a difference: see \"Every series\".",
            called.len() - DETAILED
        ));
    }
    out.extend(no_difference(&alike, !called.is_empty()));
    if comparisons.is_empty() {
        out.push("No comparison was made: each cell has one series.".into());
    }
    out.extend(reasons(diagnosis));
    out.extend(cautions(comparisons, warnings));
    out
}

/// Each kind of comparison once, in the order the summary first makes it.
fn labels(comparisons: &[CellComparison]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in comparisons {
        let label = c.label();
        if !out.contains(&label) {
            out.push(label);
        }
    }
    out
}

/// Whether any comparison of the kind `label` went one way (or found a side failing more).
fn called_in(label: &str, comparisons: &[CellComparison]) -> bool {
    comparisons.iter().any(|c| {
        c.label() == label
            && matches!(
                c.comparison.verdict,
                Verdict::Faster | Verdict::Slower | Verdict::FailsMore { .. }
            )
    })
}

/// The kinds of comparison that found no difference anywhere, in one sentence.
fn no_difference(alike: &[String], others: bool) -> Option<String> {
    let named: Vec<String> = alike
        .iter()
        .take(NAMED_ALIKE)
        .map(|l| format!("`{l}`"))
        .collect();
    let more = alike.len().saturating_sub(NAMED_ALIKE);
    let list = match more {
        0 => named.join(", "),
        n => format!("{} and {n} more", named.join(", ")),
    };
    match alike.len() {
        0 => None,
        1 if !others => Some(format!("{list}: no significant difference in any cell.")),
        _ => Some(format!("No significant difference in any cell: {list}.")),
    }
}

/// Where one kind of comparison went each way, with the largest effect of each direction.
fn verdicts(label: &str, comparisons: &[CellComparison]) -> String {
    let these: Vec<&CellComparison> = comparisons.iter().filter(|c| c.label() == label).collect();
    let (a, _) = label.split_once(" vs ").unwrap_or((label, ""));
    let faster = with_verdict(&these, |v| *v == Verdict::Faster);
    let slower = with_verdict(&these, |v| *v == Verdict::Slower);
    let fails = with_verdict(&these, |v| matches!(v, Verdict::FailsMore { .. }));
    let unsure = with_verdict(&these, |v| matches!(v, Verdict::Undetermined(_)));
    let alike = these.len() - faster.len() - slower.len() - fails.len() - unsure.len();
    let n = these.len();
    if faster.is_empty() && slower.is_empty() {
        let where_ = if alike == n {
            format!("any of the {n} cells")
        } else {
            cells(alike, n)
        };
        return format!(
            "`{label}`: no significant difference in {where_}{}.",
            rest(fails.len(), unsure.len())
        );
    }
    let mut parts = Vec::new();
    if !faster.is_empty() {
        let best = extreme(&faster, |x, y| x < y);
        parts.push(format!("{a} faster in {}{best}", cells(faster.len(), n)));
    }
    if !slower.is_empty() {
        let worst = extreme(&slower, |x, y| x > y);
        let subject = if faster.is_empty() {
            format!("{a} slower")
        } else {
            "slower".into()
        };
        parts.push(format!("{subject} in {}{worst}", cells(slower.len(), n)));
    }
    let mut s = format!("`{label}`: {}", parts.join("; "));
    if alike > 0 {
        s.push_str(&format!("; no significant difference in {alike}"));
    }
    s.push_str(&rest(fails.len(), unsure.len()));
    s.push('.');
    s
}

fn with_verdict<'c>(
    these: &[&'c CellComparison],
    pick: impl Fn(&Verdict) -> bool,
) -> Vec<&'c CellComparison> {
    these
        .iter()
        .copied()
        .filter(|c| pick(&c.comparison.verdict))
        .collect()
}

/// `2 of 6 cells`, `all 6 cells`, `the one cell`.
fn cells(k: usize, n: usize) -> String {
    match (k, n) {
        (1, 1) => "its one cell".into(),
        (k, n) if k == n => format!("all {n} cells"),
        (k, n) => format!("{k} of {n} cells"),
    }
}

/// The comparisons that could not be called either way, said after the rest.
fn rest(fails: usize, unsure: usize) -> String {
    let mut s = String::new();
    if fails > 0 {
        s.push_str(&format!("; a side fails more often in {fails}"));
    }
    if unsure > 0 {
        s.push_str(&format!("; undetermined in {unsure}"));
    }
    s
}

/// The comparison whose ratio goes furthest (`further(x, y)`: x is further than y), as
/// ` — most on `cell`, ratio [low–high]` (` — on …` when it is the only one).
fn extreme(these: &[&CellComparison], further: impl Fn(f64, f64) -> bool) -> String {
    let mut best = these[0];
    for c in &these[1..] {
        if let (Some(x), Some(y)) = (c.comparison.ratio, best.comparison.ratio) {
            if further(x, y) {
                best = c;
            }
        }
    }
    let x = &best.comparison;
    let ratio = match (x.ratio, x.ratio_ci_low, x.ratio_ci_high) {
        (Some(r), Some(lo), Some(hi)) => {
            format!("{}× [{lo:.2}–{hi:.2}]", ratio_text(r, x.ratio_bound))
        }
        (Some(r), _, _) => format!("{}×", ratio_text(r, x.ratio_bound)),
        _ => "a bound".into(),
    };
    let most = if these.len() == 1 { "" } else { "most " };
    format!(" — {most}on `{}/{}`, {ratio}", best.profile, best.workload)
}

/// What the largest differences come from, and what limited slow transfers.
fn reasons(diagnosis: Option<&Diagnosis>) -> Vec<String> {
    let Some(d) = diagnosis else {
        return Vec::new();
    };
    let mut explained: Vec<&crate::diagnosis::explain::Explanation> =
        d.differences.iter().collect();
    explained.sort_by(|x, y| {
        let gap =
            |e: &crate::diagnosis::explain::Explanation| (e.headline_a_ms - e.headline_b_ms).abs();
        gap(y).total_cmp(&gap(x))
    });
    let mut seen: Vec<(&str, &str, &str)> = Vec::new();
    explained.retain(|e| {
        let key = (e.label.as_str(), e.a.as_str(), e.b.as_str());
        let new = !seen.contains(&key);
        seen.push(key);
        new
    });
    let mut out: Vec<String> = explained
        .iter()
        .take(EXPLAINED)
        .map(|e| format!("Why `{}` {} vs {}: {}.", e.label, e.a, e.b, e.sentence))
        .collect();
    out.extend(
        d.findings
            .iter()
            .take(TRANSFER_FINDINGS)
            .map(|f| format!("Why a transfer was slow: {}", f.sentence)),
    );
    out
}

/// What to read with care before trusting the answer.
fn cautions(comparisons: &[CellComparison], warnings: usize) -> Vec<String> {
    let mut out = Vec::new();
    let marked = comparisons
        .iter()
        .filter(|c| c.attrition.as_ref().is_some_and(|a| !a.marks.is_empty()))
        .count();
    if marked > 0 {
        out.push(format!(
            "`†` marks {marked} comparison{} whose counted runs leave something out: see \"What \
the counted runs leave out\".",
            if marked == 1 { "" } else { "s" }
        ));
    }
    if warnings > 0 {
        out.push(format!(
            "Read with care: {warnings} warning{} under \"Warnings\".",
            if warnings == 1 { "" } else { "s" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::stats::UndeterminedReason;

    /// `h3 vs h2` on `profile/page50` at `ratio` [±5 %] with `verdict`.
    fn h3_vs_h2(profile: &str, ratio: f64, verdict: Verdict) -> CellComparison {
        CellComparison::fixture(profile, "page50", ratio, verdict)
    }

    #[test]
    fn each_direction_names_its_count_and_its_furthest_cell() {
        let c = [
            h3_vs_h2("wired", 1.20, Verdict::Slower),
            h3_vs_h2("mobile", 0.90, Verdict::Faster),
            h3_vs_h2("lte", 0.70, Verdict::Faster),
            h3_vs_h2("dc", 1.01, Verdict::NoSignificantDifference),
            h3_vs_h2("3g", 1.0, Verdict::Undetermined(UndeterminedReason::AllDnf)),
        ];
        assert_eq!(
            verdicts("h3 vs h2", &c),
            "`h3 vs h2`: h3 faster in 2 of 5 cells — most on `lte/page50`, 0.70× [0.66–0.73]; \
slower in 1 of 5 cells — on `wired/page50`, 1.20× [1.14–1.26]; no significant difference in 1; \
undetermined in 1."
        );
    }

    #[test]
    fn kinds_without_a_difference_are_said_together() {
        let alike = [
            h3_vs_h2("wired", 1.01, Verdict::NoSignificantDifference),
            h3_vs_h2("mobile", 0.98, Verdict::NoSignificantDifference),
        ];
        assert_eq!(
            verdicts("h3 vs h2", &alike),
            "`h3 vs h2`: no significant difference in any of the 2 cells."
        );
        assert!(!called_in("h3 vs h2", &alike));
        let names: Vec<String> = ["a vs b", "c vs d", "e vs f", "g vs h"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            no_difference(&names, true).unwrap(),
            "No significant difference in any cell: `a vs b`, `c vs d`, `e vs f` and 1 more."
        );
        assert_eq!(no_difference(&[], true), None);
    }

    #[test]
    fn daggers_and_warnings_are_counted_for_the_reader() {
        let c = [h3_vs_h2("wired", 1.2, Verdict::Slower)];
        assert!(cautions(&c, 0).is_empty());
        assert_eq!(
            cautions(&c, 2),
            ["Read with care: 2 warnings under \"Warnings\"."]
        );
    }
}
