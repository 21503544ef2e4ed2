use super::*;
use crate::evidence::metric_registry::COMPLETION_MS;
use crate::evidence::validate::ReasonKind;
use crate::results::summary::summarize_runs;

/// One measured attempt of `variant` in round `round` on wired/page10/embedded.
fn attempt(variant: &str, round: u32, attempt: u32, outcome: Outcome, ms: Option<f64>) -> RunRow {
    let plan_id = format!("wired-page10-r{round:02}-embedded-{variant}");
    let id = if attempt == 1 {
        plan_id.clone()
    } else {
        format!("{plan_id}.a{attempt}")
    };
    let mut r = RunRow::measured(&id, "wired", "page10", "embedded", variant, round)
        .with_value(&COMPLETION_MS, ms);
    r.plan_id = plan_id;
    r.attempt = attempt;
    r.outcome = outcome;
    r
}

fn rejected(mut r: RunRow) -> RunRow {
    r.invalid_kinds = vec![ReasonKind::Link];
    r.measurement_failure = true;
    r
}

fn fell_back(mut r: RunRow) -> RunRow {
    r.invalid_kinds = vec![ReasonKind::ProtocolMismatch];
    r
}

/// `n` rounds of h2 and h3 with times drawn around the same median (`h3_scale` × for h3).
fn rounds(n: u32, h3_scale: f64) -> Vec<RunRow> {
    let mut rows = Vec::new();
    for round in 1..=n {
        let jitter = ((round * 37) % 23) as f64;
        rows.push(attempt(
            "h2",
            round,
            1,
            Outcome::Valid,
            Some(400.0 + jitter),
        ));
        rows.push(attempt(
            "h3",
            round,
            1,
            Outcome::Valid,
            Some((400.0 + jitter) * h3_scale),
        ));
    }
    rows
}

fn the_comparison(rows: &[RunRow]) -> CellComparison {
    let s = summarize_runs(rows, 7, 2_000, &["embedded".into()], 120_000.0).unwrap();
    s.comparisons
        .into_iter()
        .find(|c| c.a.name() == "h3" && c.b.name() == "h2")
        .unwrap()
}

/// Makes the first attempt of `share_pct` % of h3's rounds rejected and `slow_ms` slower,
/// with a clean retry — what a busy machine does to one protocol.
fn reject_h3(rows: &mut Vec<RunRow>, n: u32, every: u32, slow_ms: f64) {
    for round in (1..=n).filter(|r| r % every == 0) {
        let i = rows
            .iter()
            .position(|r| r.variant.name() == "h3" && r.round == round)
            .unwrap();
        let clean = rows[i].clone();
        let slow = clean.completion_ms().unwrap() + slow_ms;
        rows[i] = rejected(clean.clone().with_value(&COMPLETION_MS, Some(slow)));
        rows[i].outcome = Outcome::Invalid;
        let mut retry = clean;
        retry.run_id = format!("{}.a2", retry.plan_id);
        retry.attempt = 2;
        rows.push(retry);
    }
}

#[test]
fn without_rejections_the_first_attempts_are_the_counted_runs_and_nothing_is_marked() {
    let rows = rounds(12, 0.8);
    let c = the_comparison(&rows);
    let a = c.attrition.as_ref().unwrap();
    assert_eq!(c.comparison.verdict, Verdict::Faster);
    assert_eq!(a.first_attempts.ratio, c.comparison.ratio);
    assert_eq!(a.first_attempts.ratio_ci_low, c.comparison.ratio_ci_low);
    assert_eq!(a.first_attempts.verdict, Verdict::Faster);
    assert_eq!((a.rejections.trials_a, a.rejections.events_a), (12, 0));
    assert!(a.marks.is_empty(), "{:?}", a.marks);
}

#[test]
fn one_protocol_rejected_and_slowed_more_often_is_marked_with_its_first_attempt_verdict() {
    // h3 is 6 % faster on the counted runs; a third of its first attempts were rejected and
    // 300 ms slower: the first attempts say h3 is slower, and h3 was rejected more often.
    let n = 30;
    let mut rows = rounds(n, 0.94);
    reject_h3(&mut rows, n, 3, 300.0);
    let c = the_comparison(&rows);
    let a = c.attrition.as_ref().unwrap();
    assert_eq!((a.rejections.events_a, a.rejections.trials_a), (10, 40));
    assert_eq!((a.rejections.events_b, a.rejections.trials_b), (0, 30));
    assert_eq!(c.comparison.verdict, Verdict::Faster);
    assert_ne!(a.first_attempts.verdict, Verdict::Faster);
    assert!(
        a.marks.contains(&Mark::Selection {
            more_rejected: Side::A
        }),
        "{:?}",
        a.marks
    );
    assert!(
        a.marks.iter().any(|m| matches!(
            m,
            Mark::FirstAttempts {
                counted: Verdict::Faster,
                ..
            }
        )),
        "{:?}",
        a.marks
    );
    // Seen from h2's side, the same marks point at h3.
    let inverted = a.inverted();
    assert!(inverted.marks.contains(&Mark::Selection {
        more_rejected: Side::B
    }));
}

#[test]
fn a_side_that_fails_significantly_more_often_is_never_called_faster() {
    // h3 is 20 % faster where it loads, but 9 of its 30 counted runs fell back.
    let n = 30;
    let mut rows = rounds(n, 0.8);
    for r in rows
        .iter_mut()
        .filter(|r| r.variant.name() == "h3" && r.round % 10 < 3)
    {
        *r = fell_back(r.clone());
        r.outcome = Outcome::Invalid;
    }
    let c = the_comparison(&rows);
    let a = c.attrition.as_ref().unwrap();
    assert_eq!(a.counted, Verdict::Faster);
    assert_eq!(c.comparison.verdict, Verdict::FailsMore { side: Side::A });
    assert_eq!((a.failures.events_a, a.failures.trials_a), (9, 30));
    assert_eq!(a.failure_words(Side::A), "9 fell back");
    assert!(a.marks.contains(&Mark::FailsMore { side: Side::A }));
    // The first attempts leave the failures out too: they are counted, not timed.
    assert_eq!(a.first_attempts.n_valid_a, 21);
}

#[test]
fn three_of_ten_fell_back_is_shown_but_not_significant() {
    let mut rows = rounds(10, 0.8);
    for r in rows
        .iter_mut()
        .filter(|r| r.variant.name() == "h3" && r.round <= 3)
    {
        *r = fell_back(r.clone());
        r.outcome = Outcome::Invalid;
    }
    let c = the_comparison(&rows);
    let a = c.attrition.as_ref().unwrap();
    assert_eq!((a.failures.events_a, a.failures.trials_a), (3, 10));
    assert!(
        a.failures.p > 0.05,
        "Fisher 3/10 vs 0/10: p = {}",
        a.failures.p
    );
    assert_eq!(c.comparison.verdict, a.counted);
    assert!(a.marks.is_empty());
}

#[test]
fn first_attempt_inputs_keep_rejected_loads_and_leave_out_failures() {
    let rows = vec![
        rejected(attempt("h3", 1, 1, Outcome::Invalid, Some(900.0))),
        attempt("h3", 1, 2, Outcome::Valid, Some(500.0)),
        fell_back(attempt("h3", 2, 1, Outcome::Invalid, Some(450.0))),
        rejected(attempt("h3", 3, 1, Outcome::Invalid, None)),
        attempt("h3", 3, 2, Outcome::Valid, Some(520.0)),
        attempt("h3", 4, 1, Outcome::Dnf, None),
    ];
    let inputs = first_attempt_inputs(&rows, &COMPLETION_MS, 120_000.0);
    let h3 = inputs.values().next().unwrap();
    assert_eq!(h3.values, vec![900.0]);
    assert_eq!((h3.dnf, h3.invalid), (1, 2));
}
