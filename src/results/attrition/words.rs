//! The attrition of a comparison in words: each side's failures beside its ratio, and why a
//! marked verdict needs a second look. Shared by the terminal summary and the report.

use crate::results::comparison::{fmt_p, fmt_ratio, Attrition, CellComparison, Mark};
use crate::support::stats::{Comparison, RateTest, Side, Verdict};

/// How a side of `c` is named: its protocol, with what differs between the sides.
pub fn side_name(c: &CellComparison, side: Side) -> String {
    let (server, browser, view, device, variant) = match side {
        Side::A => (&c.server_a, c.browser_a, c.view_a, &c.device_a, c.a),
        Side::B => (&c.server_b, c.browser_b, c.view_b, &c.device_b, c.b),
    };
    if c.device_a != c.device_b {
        format!("{device} {variant}")
    } else if c.view_a != c.view_b {
        format!("{view} {variant}")
    } else if c.browser_a != c.browser_b {
        format!("{browser} {variant}")
    } else if c.server_a != c.server_b {
        format!("{server} {variant}")
    } else {
        variant.to_string()
    }
}

/// `7 of 10 loaded over h3; 3 fell back` per side that had failures, joined (None: no side
/// failed).
pub fn failures(c: &CellComparison) -> Option<String> {
    let a = c.attrition.as_ref()?;
    let t = &a.failures;
    let parts: Vec<String> = [
        (Side::A, t.events_a, t.trials_a),
        (Side::B, t.events_b, t.trials_b),
    ]
    .into_iter()
    .filter(|(_, failed, _)| *failed > 0)
    .map(|(side, failed, trials)| {
        format!(
            "{} of {trials} loaded over {}; {}",
            trials - failed,
            side_name(c, side),
            a.failure_words(side)
        )
    })
    .collect();
    (!parts.is_empty()).then(|| parts.join(" · "))
}

/// `9 of 40 vs 0 of 30`
fn rates(t: &RateTest) -> String {
    format!(
        "{} of {} vs {} of {}",
        t.events_a, t.trials_a, t.events_b, t.trials_b
    )
}

/// A verdict with its ratio: `faster (0.93)`, `no significant difference (1.02)`.
pub fn verdict_with_ratio(c: &CellComparison, v: &Verdict, x: &Comparison) -> String {
    let verdict = match v {
        Verdict::FailsMore { side } => format!("{} fails more often", side_name(c, *side)),
        Verdict::Undetermined(_) => "undetermined".into(),
        v => v.to_string(),
    };
    match x.ratio {
        Some(r) => format!("{verdict} ({})", fmt_ratio(r, x.ratio_bound)),
        None => verdict,
    }
}

/// Why each mark of `c` was given, one sentence each (empty when it has none).
pub fn explain(c: &CellComparison) -> Vec<String> {
    let Some(a) = c.attrition.as_ref() else {
        return Vec::new();
    };
    a.marks.iter().map(|m| sentence(c, a, m)).collect()
}

fn sentence(c: &CellComparison, a: &Attrition, m: &Mark) -> String {
    match m {
        Mark::Selection { more_rejected } => format!(
            "Selection: {}'s attempts were rejected more often ({} {}, Fisher p = {} after Holm): the counted runs are a selection that depends on the protocol — what a busy machine rejects are mostly the slower loads",
            side_name(c, *more_rejected),
            side_name(c, Side::A),
            rates(&a.rejections),
            fmt_p(a.rejections.p_holm)
        ),
        Mark::FirstAttempts { counted, first } => format!(
            "First attempts: on every planned run's first attempt (rejected ones included) the verdict is {}, where the counted runs say {}",
            verdict_with_ratio(c, first, &a.first_attempts),
            verdict_with_ratio(c, counted, &c.comparison)
        ),
        Mark::FailsMore { side } => format!(
            "Failures: {} failed more often as a load of its protocol ({} {}: {}, Fisher p = {} after Holm){}",
            side_name(c, *side),
            side_name(c, Side::A),
            rates(&a.failures),
            a.failure_words(*side),
            fmt_p(a.failures.p_holm),
            if matches!(c.comparison.verdict, Verdict::FailsMore { .. }) {
                ": it is not called faster"
            } else {
                ""
            }
        ),
    }
}
