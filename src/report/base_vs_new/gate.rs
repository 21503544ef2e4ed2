//! The gate of `compare --fail-if-slower PCT [--allow-missing]`: whether NEW may pass for
//! BASE, decided from the comparison alone (pure) so that CI gets the same answer as the page.
//!
//! A series of BASE fails the gate when
//! - **it could not be judged** (exit [`MISSING_EXIT`]): it is missing from NEW, NEW has no
//!   counted run of it that is valid or DNF (every run failed or was rejected), or the
//!   comparison is undetermined (too few runs on a side, nothing finished on either). With
//!   `--allow-missing` these are warnings instead;
//! - **it is slower by more than PCT %** (exit [`SLOWER_EXIT`]): its verdict is slower *and*
//!   the lower bound of the ratio's 95 % CI is above `1 + PCT/100` — the slowdown is more than
//!   PCT % even at the CI's most favourable end, so noise around a small change does not fail;
//! - **it fails more often** (exit [`SLOWER_EXIT`], a regression like a slowdown): its NEW
//!   counted runs failed as loads of the protocol (fell back, a failed request, a short body)
//!   significantly more often than BASE's — Fisher's exact test, Holm over the series
//!   compared (a family of its own), at alpha 0.05. `--allow-missing` does not excuse it.
//!
//! Attempts rejected as measurements significantly more often in NEW (the link or the
//! machine, not the change) and slowdowns within PCT % are warnings. When the gate fails for
//! both kinds of reason, the exit code is [`MISSING_EXIT`]: an incomplete comparison is
//! fixed first.

use serde::Serialize;

use super::changes::{SeriesChange, ALPHA};
use crate::results::attempts::Attempts;
use crate::results::summary::{fmt_p, fmt_ratio, SeriesKey};
use crate::support::stats::{Comparison, RateTest, Side, UndeterminedReason, Verdict};

/// The exit code when a series is slower by more than PCT %, or fails more often.
pub const SLOWER_EXIT: u8 = 3;
/// The exit code when a series of BASE could not be judged (without `--allow-missing`).
pub const MISSING_EXIT: u8 = 4;

/// The gate's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gate {
    /// `--fail-if-slower PCT`.
    pub slower_pct: f64,
    /// `--allow-missing`: series that could not be judged warn instead of failing.
    pub allow_missing: bool,
    /// The significance level of the failure and rejection tests (after Holm).
    pub alpha: f64,
}

/// What the gate found about one series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    /// In BASE, not in NEW.
    Missing,
    /// In NEW, but none of its counted runs is valid or DNF.
    NoValidRun,
    /// No verdict (too few runs on a side, nothing finished).
    Undetermined,
    /// Slower by the verdict (failing: by more than PCT % at the CI's lower bound).
    Slower,
    /// NEW fails significantly more often as a load of its protocol.
    FailsMore,
    /// NEW's attempts were rejected significantly more often (a warning only).
    RejectedMore,
}

impl Finding {
    /// Whether the series could not be judged.
    pub fn unjudged(self) -> bool {
        matches!(
            self,
            Finding::Missing | Finding::NoValidRun | Finding::Undetermined
        )
    }
}

/// A finding about a series, in words.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesFinding {
    pub series: SeriesKey,
    pub finding: Finding,
    pub words: String,
}

impl SeriesFinding {
    /// `mobile/download/embedded/h3: …`
    pub fn line(&self) -> String {
        format!("{}: {}", self.series.label(), self.words)
    }
}

/// The gate's decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateOutcome {
    pub slower_pct: f64,
    pub allow_missing: bool,
    /// 0 (passed), [`SLOWER_EXIT`] or [`MISSING_EXIT`].
    pub exit_code: u8,
    /// Why it failed (empty: passed).
    pub failures: Vec<SeriesFinding>,
    /// What it did not fail on but should be read.
    pub warnings: Vec<SeriesFinding>,
}

impl GateOutcome {
    pub fn passed(&self) -> bool {
        self.exit_code == 0
    }
}

impl Gate {
    /// `--fail-if-slower pct [--allow-missing]`, its tests at the comparison's alpha.
    pub fn new(slower_pct: f64, allow_missing: bool) -> Gate {
        Gate {
            slower_pct,
            allow_missing,
            alpha: ALPHA,
        }
    }

    /// The gate's decision on the series compared and those of BASE missing in NEW (see the
    /// module docs).
    pub fn decide(&self, changes: &[SeriesChange], only_base: &[SeriesKey]) -> GateOutcome {
        let mut unjudged: Vec<SeriesFinding> = only_base
            .iter()
            .map(|k| finding(k, Finding::Missing, "in base, missing in new".into()))
            .collect();
        let (mut failures, mut warnings) = (Vec::new(), Vec::new());
        for c in changes {
            unjudged.extend(self.unjudged(c));
            let x = &c.comparison;
            if x.verdict == Verdict::Slower {
                let f = finding(&c.key, Finding::Slower, self.slower_words(x));
                if self.slower_beyond(x) {
                    failures.push(f);
                } else {
                    warnings.push(f);
                }
            }
            if c.failures.higher(self.alpha) == Some(Side::A) {
                let words = fails_more_words(&c.failures, &c.attempts_new);
                failures.push(finding(&c.key, Finding::FailsMore, words));
            }
            if c.rejections.higher(self.alpha) == Some(Side::A) {
                let words = rejected_more_words(&c.rejections);
                warnings.push(finding(&c.key, Finding::RejectedMore, words));
            }
        }
        let exit_code = if !unjudged.is_empty() && !self.allow_missing {
            MISSING_EXIT
        } else if !failures.is_empty() {
            SLOWER_EXIT
        } else {
            0
        };
        if self.allow_missing {
            warnings.splice(0..0, unjudged);
        } else {
            failures.splice(0..0, unjudged);
        }
        GateOutcome {
            slower_pct: self.slower_pct,
            allow_missing: self.allow_missing,
            exit_code,
            failures,
            warnings,
        }
    }

    /// Slower, and by more than PCT % at the lower bound of the ratio's CI.
    pub fn slower_beyond(&self, c: &Comparison) -> bool {
        c.verdict == Verdict::Slower
            && c.ratio_ci_low
                .is_some_and(|low| low > 1.0 + self.slower_pct / 100.0)
    }

    fn slower_words(&self, c: &Comparison) -> String {
        let limit = 1.0 + self.slower_pct / 100.0;
        let low = c.ratio_ci_low.unwrap_or(f64::NAN);
        let (ratio, high) = (
            c.ratio.map_or("—".into(), |r| fmt_ratio(r, c.ratio_bound)),
            c.ratio_ci_high.unwrap_or(f64::NAN),
        );
        let side = if self.slower_beyond(c) {
            "above"
        } else {
            "not above"
        };
        format!(
            "slower: ratio {ratio} [{low:.3}–{high:.3}], the lower bound of the ratio's 95 % CI {side} {limit:.3} (slower by more than {} %)",
            self.slower_pct
        )
    }

    /// Why `c` could not be judged (None: it could).
    fn unjudged(&self, c: &SeriesChange) -> Option<SeriesFinding> {
        if c.new.n_valid + c.new.n_dnf == 0 {
            let words = no_valid_run_words(&c.attempts_new);
            return Some(finding(&c.key, Finding::NoValidRun, words));
        }
        match &c.comparison.verdict {
            Verdict::Undetermined(r) => Some(finding(
                &c.key,
                Finding::Undetermined,
                format!("undetermined: {}", undetermined_words(r)),
            )),
            _ => None,
        }
    }
}

fn finding(key: &SeriesKey, finding: Finding, words: String) -> SeriesFinding {
    SeriesFinding {
        series: key.clone(),
        finding,
        words,
    }
}

/// The reason with the comparison's sides named (a is NEW, b is BASE).
pub fn undetermined_words(r: &UndeterminedReason) -> String {
    let name = |s: &Side| match s {
        Side::A => "new",
        Side::B => "base",
    };
    match r {
        UndeterminedReason::NoRuns { side } => format!("{} has no valid or DNF run", name(side)),
        UndeterminedReason::AllDnf => "no run of either finished".into(),
        UndeterminedReason::TooFewRuns {
            side,
            n_runs,
            needed,
        } => format!(
            "{} has {n_runs} valid or DNF runs, {needed} needed",
            name(side)
        ),
    }
}

fn no_valid_run_words(a: &Attempts) -> String {
    let mut why = Vec::new();
    if a.failed > 0 {
        why.push(format!(
            "{} failed as loads of the protocol ({})",
            a.failed,
            a.failure_words()
        ));
    }
    if a.unmeasured > 0 {
        why.push(format!(
            "{} were still rejected as measurements after every retry",
            a.unmeasured
        ));
    }
    if why.is_empty() {
        return "no counted run of it in new is valid or DNF".into();
    }
    format!(
        "no counted run of it in new is valid or DNF: of {} runs, {}",
        a.runs,
        why.join(", ")
    )
}

/// `5 of 10 … in new (5 fell back) against 0 of 10 in base (Fisher p 0.033, Holm 0.033)`
fn fails_more_words(t: &RateTest, new: &Attempts) -> String {
    format!(
        "fails more often as a load of its protocol: {} of {} counted runs in new ({}) against {} of {} in base (Fisher p {}, after Holm {})",
        t.events_a,
        t.trials_a,
        new.failure_words(),
        t.events_b,
        t.trials_b,
        fmt_p(t.p),
        fmt_p(t.p_holm)
    )
}

fn rejected_more_words(t: &RateTest) -> String {
    format!(
        "attempts rejected as measurements more often in new: {} of {} against {} of {} in base (Fisher p {}, after Holm {}) — the link or the machine rather than the change, but its counted runs are a selection",
        t.events_a,
        t.trials_a,
        t.events_b,
        t.trials_b,
        fmt_p(t.p),
        fmt_p(t.p_holm)
    )
}

#[cfg(test)]
mod tests;
