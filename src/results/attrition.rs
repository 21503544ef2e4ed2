//! What a comparison's counted runs leave out, and whether it could have changed the verdict.
//!
//! A comparison of two series decides on their counted runs: the last attempt of each planned
//! run, valid or DNF. Three things stay outside that sample, and each can bias it:
//! - **rejected attempts**: an attempt that failed as a measurement was run again; if one side
//!   is rejected more often (a busy machine starves one protocol's loads more), the survivors
//!   are a selection. Tested per comparison: rejections of attempts, Fisher's exact test;
//! - **protocol failures**: a counted run that fell back, had a failed request or a short body
//!   is data about the protocol, not a time. Tested the same way (failed of measured runs); a
//!   side that fails significantly more often is never called faster
//!   ([`Verdict::FailsMore`]);
//! - **the first attempts** (intention to treat): the same comparison on the first attempt of
//!   every planned run, rejected or not (a rejected attempt that loaded has its time; protocol
//!   failures and attempts without a time stay out, counted above).
//!
//! Each of the three is its own Holm family over the matrix's comparisons. A comparison gets a
//! [`Mark`] when its rejection rates differ significantly, when its first attempts' verdict
//! differs from the counted one, or when a side fails significantly more often; the report says
//! why in words.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::attempts::{self, Attempts};
use super::rows::{RunRow, SeriesKey};
// The attrition a comparison carries is defined with the comparison; most users name it here.
use super::comparison::CellComparison;
pub use super::comparison::{Attrition, Mark};
use crate::config::identity::Phase;
use crate::evidence::metric_registry::Metric;
use crate::evidence::validate::Outcome;
use crate::support::stats::{
    apply_holm, apply_holm_rates, compare, derive_seed, BootstrapConfig, CompareConfig, Comparison,
    RateTest, SeriesInput, Side, Verdict,
};

/// The size of each of the three families (comparisons in which anything could be tested).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Families {
    pub rejections: usize,
    pub failures: usize,
    pub first_attempts: usize,
}

/// What the statistics settings of the counted comparisons were, so the first attempts are
/// compared alike.
pub struct Settings<'a> {
    pub headline: &'a Metric,
    pub timeout_ms: f64,
    pub seed: u64,
    pub resamples: usize,
    pub alpha: f64,
}

/// The headline inputs of every planned run's first measured attempt: valid → its time, DNF →
/// censored, rejected as a measurement but loaded → its time; a protocol failure or a rejected
/// attempt without a time is left out (and counted as invalid).
pub fn first_attempt_inputs(
    rows: &[RunRow],
    headline: &Metric,
    timeout_ms: f64,
) -> BTreeMap<SeriesKey, SeriesInput> {
    let mut out: BTreeMap<SeriesKey, SeriesInput> = BTreeMap::new();
    for r in attempts::first_attempts(rows)
        .into_iter()
        .filter(|r| r.phase == Phase::Measure)
    {
        let input = out.entry(SeriesKey::of(r)).or_insert_with(|| SeriesInput {
            censor_at: timeout_ms,
            ..SeriesInput::default()
        });
        let value = r
            .value(headline)
            .filter(|v| v.is_finite() && *v > 0.0 && *v < timeout_ms);
        match (r.outcome, value) {
            (Outcome::Dnf, _) => input.dnf += 1,
            (Outcome::Valid, Some(v)) => input.values.push(v),
            (Outcome::Invalid, Some(v)) if r.measurement_failure => input.values.push(v),
            _ => input.invalid += 1,
        }
    }
    out
}

/// The series keys of a comparison's two sides.
pub fn sides(c: &CellComparison) -> (SeriesKey, SeriesKey) {
    let key = |setup: crate::config::identity::Setup, variant| SeriesKey {
        profile: c.profile.clone(),
        workload: c.workload.clone(),
        server: setup.server,
        browser: setup.browser,
        view: setup.view,
        device: setup.device,
        variant,
    };
    (key(c.setup_a(), c.a), key(c.setup_b(), c.b))
}

/// Adds each comparison's attrition (its tests Holm-adjusted in their three families), marks
/// what needs a second look, and takes "faster" from a side that fails significantly more
/// often. `comparisons` carry their counted, Holm-adjusted verdicts.
pub fn annotate(
    comparisons: &mut [CellComparison],
    rows: &[RunRow],
    settings: &Settings,
) -> Result<Families> {
    let accounts = attempts::per_series(rows);
    let firsts = first_attempt_inputs(rows, settings.headline, settings.timeout_ms);
    let none = Attempts::default();
    let mut annotated: Vec<Attrition> = Vec::with_capacity(comparisons.len());
    for c in comparisons.iter() {
        let (ka, kb) = sides(c);
        let (aa, ab) = (
            accounts.get(&ka).unwrap_or(&none),
            accounts.get(&kb).unwrap_or(&none),
        );
        let empty = SeriesInput::default();
        let label = format!("{} vs {}", ka.label(), kb.label());
        let cfg = CompareConfig {
            alpha: settings.alpha,
            bootstrap: BootstrapConfig {
                resamples: settings.resamples,
                ..BootstrapConfig::default()
            }
            // The counted comparison's seed: without rejections both give the same numbers.
            .with_seed(derive_seed(settings.seed, &label)),
        };
        let first_attempts = compare(
            firsts.get(&ka).unwrap_or(&empty),
            firsts.get(&kb).unwrap_or(&empty),
            &cfg,
        )
        .with_context(|| format!("first attempts of {label}"))?;
        annotated.push(Attrition {
            rejections: rate(aa.rejected, aa.attempts, ab.rejected, ab.attempts)?,
            failures: rate(aa.failed, aa.measured_runs(), ab.failed, ab.measured_runs())?,
            failed_a: aa.failed_by.clone(),
            failed_b: ab.failed_by.clone(),
            first_attempts,
            counted: c.comparison.verdict.clone(),
            marks: Vec::new(),
        });
    }
    let families = Families {
        rejections: apply_holm_rates(annotated.iter_mut().map(|a| &mut a.rejections)),
        failures: apply_holm_rates(annotated.iter_mut().map(|a| &mut a.failures)),
        first_attempts: holm_first_attempts(&mut annotated)?,
    };
    for (c, mut a) in comparisons.iter_mut().zip(annotated) {
        a.marks = marks(&a, settings.alpha);
        c.comparison.verdict = verdict(&a, settings.alpha);
        c.attrition = Some(a);
    }
    Ok(families)
}

fn rate(ea: usize, ta: usize, eb: usize, tb: usize) -> Result<RateTest> {
    Ok(RateTest::new(ea as u64, ta as u64, eb as u64, tb as u64)?)
}

fn holm_first_attempts(annotated: &mut [Attrition]) -> Result<usize> {
    let mut firsts: Vec<Comparison> = annotated.iter().map(|a| a.first_attempts.clone()).collect();
    apply_holm(&mut firsts)?;
    let family = firsts.iter().filter(|c| c.p.is_some()).count();
    for (a, f) in annotated.iter_mut().zip(firsts) {
        a.first_attempts = f;
    }
    Ok(family)
}

/// The marks of one comparison (pure).
pub fn marks(a: &Attrition, alpha: f64) -> Vec<Mark> {
    let mut out = Vec::new();
    if let Some(more_rejected) = a.rejections.higher(alpha) {
        out.push(Mark::Selection { more_rejected });
    }
    let first = &a.first_attempts.verdict;
    let determined = |v: &Verdict| !matches!(v, Verdict::Undetermined(_));
    if determined(first) && determined(&a.counted) && *first != a.counted {
        out.push(Mark::FirstAttempts {
            counted: a.counted.clone(),
            first: first.clone(),
        });
    }
    if let Some(side) = a.failures.higher(alpha) {
        out.push(Mark::FailsMore { side });
    }
    out
}

/// The counted verdict, unless it calls faster the side that fails significantly more often.
pub fn verdict(a: &Attrition, alpha: f64) -> Verdict {
    let faster_side = match a.counted {
        Verdict::Faster => Some(Side::A),
        Verdict::Slower => Some(Side::B),
        _ => None,
    };
    match a.failures.higher(alpha) {
        Some(side) if Some(side) == faster_side => Verdict::FailsMore { side },
        _ => a.counted.clone(),
    }
}

pub mod words;

#[cfg(test)]
mod tests;
