//! Every measured attempt of a series and what became of it — not only the runs that count.
//!
//! A planned run is attempted once, and again while its attempt failed as a measurement (the
//! link did not deliver the profile, the server exited, the browser crashed) and retries were
//! left; only its last attempt counts. Which attempts were rejected is not luck-free: a busy
//! machine rejects the slower ones, and not equally for every protocol. So the statistics keep
//! the whole account per series ([`Attempts`]): attempts, rejections (by reason), and of the
//! counted runs those that failed as loads of the protocol (fell back, a failed request, a
//! short body: data about the protocol, never retried) — and the first attempts of every
//! planned run ([`first_attempts`]), what an intention-to-treat comparison is made of.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::rows::{final_attempts, RunRow, SeriesKey};
use crate::config::identity::Phase;
use crate::evidence::metric_registry;
use crate::evidence::validate::{Outcome, ReasonClass, ReasonKind};

/// The account of one series' measured attempts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempts {
    /// Planned (measured) runs that were attempted.
    pub runs: usize,
    /// Every measured attempt: first attempts and retries.
    pub attempts: usize,
    /// Attempts rejected as measurements (each run again while retries were left), and by
    /// the kind of their reasons.
    pub rejected: usize,
    #[serde(default)]
    pub rejected_by: BTreeMap<ReasonKind, usize>,
    /// Counted runs that failed as loads of the protocol, and by the kind of failure
    /// ([`failure_of`]).
    pub failed: usize,
    #[serde(default)]
    pub failed_by: BTreeMap<Failure, usize>,
    /// Counted runs that were still rejected after every retry: neither a time nor a failure
    /// of the protocol.
    pub unmeasured: usize,
    /// Attempts that met a busy machine (`contention::Contention::disturbance`), and of them
    /// those rejected.
    #[serde(default)]
    pub disturbed: usize,
    #[serde(default)]
    pub disturbed_rejected: usize,
}

impl Attempts {
    /// Counted runs that measured the protocol: loaded (valid), did not finish, or failed.
    pub fn measured_runs(&self) -> usize {
        self.runs - self.unmeasured
    }

    /// Counted runs that loaded (valid or did not finish in time).
    pub fn loaded(&self) -> usize {
        self.measured_runs() - self.failed
    }

    /// `3 fell back, 1 had a failed request` (empty without failures).
    pub fn failure_words(&self) -> String {
        self.failed_by
            .iter()
            .map(|(f, n)| format!("{n} {}", f.words()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// How a counted run failed as a load of its protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// Another protocol on the wire than the one asked (or h3-primed opened TCP first, or a
    /// repeat view did not discover h3).
    FellBack,
    /// A request failed, a file was missing, the navigation failed.
    FailedRequest,
    /// A body arrived short or corrupt.
    ShortBody,
    /// A file was fetched or served twice.
    Duplicate,
    /// Anything else the validation refused.
    Other,
}

impl Failure {
    pub fn words(self) -> &'static str {
        match self {
            Failure::FellBack => "fell back",
            Failure::FailedRequest => "had a failed request",
            Failure::ShortBody => "had a short body",
            Failure::Duplicate => "fetched a file twice",
            Failure::Other => "failed otherwise",
        }
    }
}

/// What failure an invalid run's reason kinds describe (the first that applies, in the order
/// of [`Failure`]); None when none is a protocol failure.
pub fn failure_of(kinds: &[ReasonKind]) -> Option<Failure> {
    use ReasonKind as K;
    let of = |k: &K| match k {
        K::ProtocolMismatch
        | K::CdpProtocolMismatch
        | K::ServerProtocolMismatch
        | K::NotPrimed
        | K::NotDiscovered
        | K::NotAnnounced => Failure::FellBack,
        K::HttpError | K::MissingResource | K::NavigationError | K::ReplayMiss => {
            Failure::FailedRequest
        }
        K::ShortResource | K::CorruptBody => Failure::ShortBody,
        K::DuplicateResource | K::DuplicateRequest => Failure::Duplicate,
        _ => Failure::Other,
    };
    kinds
        .iter()
        .filter(|k| k.class() == ReasonClass::Protocol)
        .map(of)
        .min()
}

/// The account of every series among `rows` (measured attempts only; warm-ups are not part of
/// a series).
pub fn per_series(rows: &[RunRow]) -> BTreeMap<SeriesKey, Attempts> {
    let mut out: BTreeMap<SeriesKey, Attempts> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.phase == Phase::Measure) {
        let a = out.entry(SeriesKey::of(r)).or_default();
        a.attempts += 1;
        if r.value(&metric_registry::DISTURBED) == Some(1.0) {
            a.disturbed += 1;
            a.disturbed_rejected += usize::from(r.measurement_failure);
        }
        if r.measurement_failure {
            a.rejected += 1;
            for k in r.invalid_kinds.iter().filter(|k| is_measurement(**k)) {
                *a.rejected_by.entry(*k).or_default() += 1;
            }
        }
    }
    for r in final_attempts(rows)
        .into_iter()
        .filter(|r| r.phase == Phase::Measure)
    {
        let a = out.entry(SeriesKey::of(r)).or_default();
        a.runs += 1;
        if r.outcome != Outcome::Invalid {
            continue;
        }
        if r.measurement_failure {
            a.unmeasured += 1;
        } else {
            a.failed += 1;
            let f = failure_of(&r.invalid_kinds).unwrap_or(Failure::Other);
            *a.failed_by.entry(f).or_default() += 1;
        }
    }
    out
}

/// A share of disturbed attempts from which the summary warns that the machine was busy.
pub const BUSY_WARNING_PCT: f64 = 5.0;

/// "12 of 80 measured attempts met a busy machine (h2 3 of 40, h3 9 of 40) …" when at least
/// [`BUSY_WARNING_PCT`] % did (None otherwise).
pub fn busy_warning(accounts: &BTreeMap<SeriesKey, Attempts>) -> Option<String> {
    let mut by_variant: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    for (k, a) in accounts {
        let e = by_variant.entry(k.variant.name()).or_default();
        e.0 += a.disturbed;
        e.1 += a.attempts;
        e.2 += a.disturbed_rejected;
    }
    let (disturbed, attempts, rejected) = by_variant
        .values()
        .fold((0, 0, 0), |s, v| (s.0 + v.0, s.1 + v.1, s.2 + v.2));
    if disturbed == 0 || (disturbed as f64) < BUSY_WARNING_PCT / 100.0 * attempts as f64 {
        return None;
    }
    let per: Vec<String> = by_variant
        .iter()
        .map(|(v, (d, n, _))| format!("{v} {d} of {n}"))
        .collect();
    Some(format!(
        "the machine was busy: {disturbed} of {attempts} measured attempts met other processes' CPU use or steal ({}); {rejected} of them were rejected by the link gate — their figures are in \"Machine during the run\"",
        per.join(", ")
    ))
}

fn is_measurement(k: ReasonKind) -> bool {
    k.class() == ReasonClass::Measurement
}

/// The first attempt of every planned run (warm-ups and measured): what an
/// intention-to-treat analysis counts, whatever became of the attempt.
pub fn first_attempts(rows: &[RunRow]) -> Vec<&RunRow> {
    let mut first: BTreeMap<&str, u32> = BTreeMap::new();
    for r in rows {
        let e = first.entry(r.plan_id.as_str()).or_insert(r.attempt);
        *e = (*e).min(r.attempt);
    }
    rows.iter()
        .filter(|r| first.get(r.plan_id.as_str()) == Some(&r.attempt))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        id: &str,
        variant: &str,
        attempt: u32,
        outcome: Outcome,
        kinds: &[ReasonKind],
    ) -> RunRow {
        let mut r = RunRow::measured(id, "wired", "page10", "embedded", variant, 1);
        r.plan_id = id.split(".a").next().unwrap_or(id).to_string();
        r.attempt = attempt;
        r.outcome = outcome;
        r.invalid_kinds = kinds.to_vec();
        r.measurement_failure = kinds.iter().any(|k| is_measurement(*k));
        r
    }

    #[test]
    fn counts_every_attempt_rejection_and_failure_of_a_series() {
        use ReasonKind as K;
        let rows = vec![
            row("r1-h3", "h3", 1, Outcome::Invalid, &[K::Link]),
            row("r1-h3.a2", "h3", 2, Outcome::Valid, &[]),
            row("r2-h3", "h3", 1, Outcome::Invalid, &[K::ProtocolMismatch]),
            row("r3-h3", "h3", 1, Outcome::Invalid, &[K::Link]),
            row(
                "r3-h3.a2",
                "h3",
                2,
                Outcome::Invalid,
                &[K::Link, K::BrowserCrash],
            ),
            row("r4-h3", "h3", 1, Outcome::Dnf, &[]),
            row(
                "r5-h3",
                "h3",
                1,
                Outcome::Invalid,
                &[K::ShortResource, K::HttpError],
            ),
            row("r1-h2", "h2", 1, Outcome::Valid, &[]),
        ];
        let all = per_series(&rows);
        let h3 = all.values().find(|a| a.runs == 5).unwrap();
        assert_eq!((h3.attempts, h3.rejected, h3.unmeasured), (7, 3, 1));
        assert_eq!(h3.rejected_by[&K::Link], 3);
        assert_eq!(h3.rejected_by[&K::BrowserCrash], 1);
        assert_eq!((h3.failed, h3.measured_runs(), h3.loaded()), (2, 4, 2));
        assert_eq!(h3.failure_words(), "1 fell back, 1 had a failed request");
        let firsts: Vec<&str> = first_attempts(&rows)
            .iter()
            .map(|r| r.run_id.as_str())
            .collect();
        assert_eq!(
            firsts,
            ["r1-h3", "r2-h3", "r3-h3", "r4-h3", "r5-h3", "r1-h2"]
        );
    }

    #[test]
    fn a_failure_is_named_by_its_first_protocol_kind() {
        use ReasonKind as K;
        assert_eq!(failure_of(&[K::Link]), None);
        assert_eq!(
            failure_of(&[K::HttpError, K::CdpProtocolMismatch]),
            Some(Failure::FellBack)
        );
        assert_eq!(failure_of(&[K::NotPrimed]), Some(Failure::FellBack));
        assert_eq!(failure_of(&[K::CorruptBody]), Some(Failure::ShortBody));
    }
}
