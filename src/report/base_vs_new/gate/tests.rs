use super::*;
use crate::evidence::metric_registry;
use crate::evidence::validate::{Outcome, ReasonKind};
use crate::report::base_vs_new::{assemble, compare_rows, document, terminal, Baseline};
use crate::report::doc;
use crate::results::summary::RunRow;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const H3_PAGE: &str = "wired/page10/embedded/h3";

/// 10 rounds of h2 and h3 on wired page10 (280 ms, ±1 % noise), h3 at `h3_factor` times.
fn rows(seed: u64, h3_factor: f64) -> Vec<RunRow> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::new();
    for round in 1..=10 {
        for v in ["h2", "h3"] {
            let factor = if v == "h3" { h3_factor } else { 1.0 };
            let noise = 1.0 + 0.02 * (rng.random::<f64>() - 0.5);
            let id = format!("wired-page10-r{round:02}-{v}");
            out.push(
                RunRow::measured(&id, "wired", "page10", "embedded", v, round).with_value(
                    &metric_registry::COMPLETION_MS,
                    Some(280.0 * factor * noise),
                ),
            );
        }
    }
    out
}

/// The first `n` h3 runs invalid with `kind` (a measurement failure when it is one).
fn invalid_h3(mut rows: Vec<RunRow>, n: u32, kind: ReasonKind) -> Vec<RunRow> {
    let measurement = kind == ReasonKind::Link;
    for r in rows
        .iter_mut()
        .filter(|r| r.variant.name() == "h3" && r.round <= n)
    {
        r.outcome = Outcome::Invalid;
        r.invalid_kinds = vec![kind];
        r.measurement_failure = measurement;
        r.set(&metric_registry::COMPLETION_MS, None);
    }
    rows
}

/// Before each h3 run, `per_run` attempts rejected by the link gate (retried).
fn rejected_first(rows: Vec<RunRow>, per_run: u32) -> Vec<RunRow> {
    let mut out = Vec::new();
    for mut r in rows {
        if r.variant.name() == "h3" {
            for attempt in 1..=per_run {
                let mut x = r.clone();
                x.run_id = format!("{}.a{attempt}", r.plan_id);
                x.attempt = attempt;
                x.outcome = Outcome::Invalid;
                x.invalid_kinds = vec![ReasonKind::Link];
                x.measurement_failure = true;
                out.push(x);
            }
            r.attempt = per_run + 1;
        }
        out.push(r);
    }
    out
}

fn gate(pct: f64, allow_missing: bool) -> Gate {
    Gate::new(pct, allow_missing)
}

fn baseline(base: &[RunRow], new: &[RunRow]) -> Baseline {
    let c = compare_rows(base, new, 120e3, 120e3, 7, 1_000).unwrap();
    assemble("base", "new", c, None)
}

fn named(g: &GateOutcome, finding: Finding) -> Vec<String> {
    g.failures
        .iter()
        .filter(|f| f.finding == finding)
        .map(|f| f.series.label())
        .collect()
}

#[test]
fn an_all_invalid_series_in_new_cannot_pass_unless_missing_is_allowed() {
    // The link rejected every h3 run of NEW, even after its retries.
    let b = baseline(
        &rows(1, 1.0),
        &invalid_h3(rows(2, 1.0), 10, ReasonKind::Link),
    );
    let g = gate(5.0, false).decide(&b.changes, &b.only_base);
    assert_eq!(g.exit_code, MISSING_EXIT, "{g:?}");
    assert_eq!(named(&g, Finding::NoValidRun), [H3_PAGE]);
    assert!(
        g.failures[0].words.contains("10 were still rejected"),
        "{g:?}"
    );
    let out = terminal(&Baseline {
        gate: Some(g.clone()),
        ..b.clone()
    });
    assert!(
        out.contains("FAILED (exit 4)") && out.contains(H3_PAGE),
        "{out}"
    );
    let md = doc::to_markdown(&document(&Baseline {
        gate: Some(g),
        ..b.clone()
    }));
    assert!(
        md.contains("**failed** (exit 4)") && md.contains(H3_PAGE),
        "{md}"
    );

    let g = gate(5.0, true).decide(&b.changes, &b.only_base);
    assert!(g.passed(), "{g:?}");
    let warned: Vec<Finding> = g.warnings.iter().map(|f| f.finding).collect();
    // Its rejected attempts are tested too (a warning at most).
    assert_eq!(warned, [Finding::NoValidRun, Finding::RejectedMore]);
}

#[test]
fn every_h3_run_falling_back_fails_as_missing_and_as_failing_more() {
    // The case: every h3 run of NEW is a protocol_mismatch.
    let b = baseline(
        &rows(1, 1.0),
        &invalid_h3(rows(2, 1.0), 10, ReasonKind::ProtocolMismatch),
    );
    let g = gate(5.0, false).decide(&b.changes, &b.only_base);
    assert_eq!(g.exit_code, MISSING_EXIT);
    assert_eq!(named(&g, Finding::NoValidRun), [H3_PAGE]);
    assert_eq!(named(&g, Finding::FailsMore), [H3_PAGE]);
    // --allow-missing does not excuse a protocol that stopped working.
    let g = gate(5.0, true).decide(&b.changes, &b.only_base);
    assert_eq!(g.exit_code, SLOWER_EXIT, "{g:?}");
    assert!(g.failures[0]
        .words
        .contains("10 of 10 counted runs in new (10 fell back)"));
}

#[test]
fn a_series_missing_from_new_or_undetermined_cannot_pass() {
    let new: Vec<RunRow> = rows(2, 1.0)
        .into_iter()
        .filter(|r| r.variant.name() == "h2")
        .collect();
    let g = gate(5.0, false).decide(
        &baseline(&rows(1, 1.0), &new).changes,
        &baseline(&rows(1, 1.0), &new).only_base,
    );
    assert_eq!(g.exit_code, MISSING_EXIT);
    assert_eq!(named(&g, Finding::Missing), [H3_PAGE]);
    // Two valid runs are too few for a verdict (the rest were rejected).
    let b = baseline(
        &rows(1, 1.0),
        &invalid_h3(rows(2, 1.0), 8, ReasonKind::Link),
    );
    let g = gate(5.0, false).decide(&b.changes, &b.only_base);
    assert_eq!(g.exit_code, MISSING_EXIT);
    assert_eq!(named(&g, Finding::Undetermined), [H3_PAGE]);
    assert!(
        g.failures[0].words.contains("new has 2 valid or DNF runs"),
        "{g:?}"
    );
}

#[test]
fn a_slowdown_whose_ci_reaches_below_the_limit_passes_with_a_warning() {
    let mut b = baseline(&rows(1, 1.0), &rows(2, 1.0));
    let c = &mut b.changes[1].comparison;
    c.verdict = Verdict::Slower;
    (c.ratio, c.ratio_ci_low, c.ratio_ci_high) = (Some(1.06), Some(1.01), Some(1.11));
    let g = gate(5.0, false).decide(&b.changes, &b.only_base);
    assert!(g.passed(), "{g:?}");
    assert_eq!(g.warnings[0].finding, Finding::Slower);
    assert!(
        g.warnings[0].words.contains("not above 1.050"),
        "{}",
        g.warnings[0].words
    );
    // The same CI entirely above the limit fails.
    b.changes[1].comparison.ratio_ci_low = Some(1.051);
    assert_eq!(
        gate(5.0, false).decide(&b.changes, &b.only_base).exit_code,
        SLOWER_EXIT
    );
}

#[test]
fn a_20_pct_slowdown_with_a_tight_ci_fails_as_slower() {
    let b = baseline(&rows(1, 1.0), &rows(2, 1.2));
    let h3 = &b.changes[1].comparison;
    assert!(h3.ratio_ci_low.unwrap() > 1.1, "{h3:?}");
    let g = gate(5.0, false).decide(&b.changes, &b.only_base);
    assert_eq!(g.exit_code, SLOWER_EXIT);
    assert_eq!(named(&g, Finding::Slower), [H3_PAGE]);
    assert!(g.failures[0].words.contains("above 1.050"));
    // The shift says it in ms: 56 ms.
    let s = b.changes[1].shift.unwrap();
    assert!((s.estimate - 56.0).abs() < 5.0, "{s:?}");
}

#[test]
fn failing_5_of_10_against_0_of_10_fails_the_gate() {
    let b = baseline(
        &rows(1, 1.0),
        &invalid_h3(rows(2, 1.0), 5, ReasonKind::ProtocolMismatch),
    );
    let f = &b.changes[1].failures;
    assert_eq!(
        (f.events_a, f.trials_a, f.events_b, f.trials_b),
        (5, 10, 0, 10)
    );
    let g = gate(5.0, false).decide(&b.changes, &b.only_base);
    assert_eq!(g.exit_code, SLOWER_EXIT, "{g:?}");
    assert_eq!(named(&g, Finding::FailsMore), [H3_PAGE]);
    assert!(gate(5.0, true).decide(&b.changes, &b.only_base).exit_code == SLOWER_EXIT);
}

#[test]
fn more_rejections_in_new_only_warn() {
    let b = baseline(&rows(1, 1.0), &rejected_first(rows(2, 1.0), 1));
    let r = &b.changes[1].rejections;
    assert_eq!(
        (r.events_a, r.trials_a, r.events_b, r.trials_b),
        (10, 20, 0, 10)
    );
    let g = gate(5.0, false).decide(&b.changes, &b.only_base);
    assert!(g.passed(), "{g:?}");
    assert_eq!(g.warnings[0].finding, Finding::RejectedMore);
    assert_eq!(g.warnings[0].series.label(), H3_PAGE);
}

#[test]
fn an_unjudged_series_decides_the_exit_code_over_a_slower_one() {
    // h3 slower by 20 %, h2 missing from NEW.
    let new: Vec<RunRow> = rows(2, 1.2)
        .into_iter()
        .filter(|r| r.variant.name() == "h3")
        .collect();
    let g = gate(5.0, false).decide(
        &baseline(&rows(1, 1.0), &new).changes,
        &baseline(&rows(1, 1.0), &new).only_base,
    );
    assert_eq!(g.exit_code, MISSING_EXIT);
    assert_eq!(named(&g, Finding::Missing), ["wired/page10/embedded/h2"]);
    assert_eq!(named(&g, Finding::Slower), [H3_PAGE]);
}
