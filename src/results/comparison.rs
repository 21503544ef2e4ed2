//! One comparison within a cell as the summary keeps it ([`CellComparison`]: its two sides, the
//! counted verdict and the attrition behind it — [`Attrition`], [`Mark`]) and how its numbers
//! read ([`fmt_p`], [`fmt_ratio`]). Plain data below the summary, which makes comparisons, and
//! the attrition accounts, which annotate them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::attempts::Failure;
use crate::config::device::DeviceId;
use crate::config::identity::{BrowserId, ServerId, Setup, View};
use crate::config::protocol::Variant;
use crate::support::stats::{Comparison, RateTest, RatioBound, Side, Verdict};

/// One protocol (or server) comparison within a cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellComparison {
    pub profile: String,
    pub workload: String,
    /// Servers of the two sides (equal for protocol comparisons).
    pub server_a: ServerId,
    pub server_b: ServerId,
    /// Engines of the two sides (equal but for engine comparisons; absent in summaries from
    /// before there was a choice: Chromium).
    #[serde(default)]
    pub browser_a: BrowserId,
    #[serde(default)]
    pub browser_b: BrowserId,
    /// Views of the two sides (equal but for first-vs-repeat comparisons).
    #[serde(default)]
    pub view_a: View,
    #[serde(default)]
    pub view_b: View,
    /// Devices of the two sides (equal but for device-vs-desktop comparisons; absent in
    /// summaries from before there was a choice: desktop).
    #[serde(default, skip_serializing_if = "DeviceId::is_desktop")]
    pub device_a: DeviceId,
    #[serde(default, skip_serializing_if = "DeviceId::is_desktop")]
    pub device_b: DeviceId,
    /// Series: ratio = median(a) / median(b).
    #[serde(with = "crate::config::protocol::variant_name")]
    pub a: Variant,
    #[serde(with = "crate::config::protocol::variant_name")]
    pub b: Variant,
    pub comparison: Comparison,
    /// What the counted runs leave out — rejected attempts, protocol failures, the first
    /// attempts' comparison — and the marks it gives the verdict (absent in summaries from
    /// before it was kept, and in comparisons made outside a summary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attrition: Option<Attrition>,
}

impl CellComparison {
    /// `h3 vs h2`, `caddy h3 vs embedded h3` across servers, `firefox h3 vs chromium h3`
    /// across engines.
    pub fn label(&self) -> String {
        if self.device_a != self.device_b {
            format!(
                "{} {} vs {} {}",
                self.device_a, self.a, self.device_b, self.b
            )
        } else if self.view_a != self.view_b {
            format!("{} {} vs {} {}", self.view_a, self.a, self.view_b, self.b)
        } else if self.browser_a != self.browser_b {
            format!(
                "{} {} vs {} {}",
                self.browser_a, self.a, self.browser_b, self.b
            )
        } else if self.server_a == self.server_b {
            format!("{} vs {}", self.a, self.b)
        } else {
            format!(
                "{} {} vs {} {}",
                self.server_a, self.a, self.server_b, self.b
            )
        }
    }

    pub fn setup_a(&self) -> Setup {
        Setup::new(self.server_a.clone(), self.browser_a)
            .on(self.view_a)
            .with_device(self.device_a.clone())
    }

    pub fn setup_b(&self) -> Setup {
        Setup::new(self.server_b.clone(), self.browser_b)
            .on(self.view_b)
            .with_device(self.device_b.clone())
    }

    /// Whether this compares two protocols of `setup`.
    pub fn within(&self, setup: &Setup) -> bool {
        self.setup_a() == *setup && self.setup_b() == *setup
    }
}

#[cfg(test)]
impl CellComparison {
    /// `h3 vs h2` of the embedded server in Chromium's first views on `profile/workload`, at
    /// `ratio` [±5 %] with `verdict`: the base of tests that read comparisons.
    pub(crate) fn fixture(
        profile: &str,
        workload: &str,
        ratio: f64,
        verdict: Verdict,
    ) -> CellComparison {
        CellComparison {
            profile: profile.into(),
            workload: workload.into(),
            server_a: ServerId::new("embedded"),
            server_b: ServerId::new("embedded"),
            browser_a: BrowserId::default(),
            browser_b: BrowserId::default(),
            view_a: View::First,
            view_b: View::First,
            device_a: Default::default(),
            device_b: Default::default(),
            a: Variant::H3,
            b: Variant::H2,
            comparison: Comparison {
                n_valid_a: 10,
                n_valid_b: 10,
                n_dnf_a: 0,
                n_dnf_b: 0,
                ratio: Some(ratio),
                ratio_bound: RatioBound::Exact,
                ratio_ci_low: Some(ratio * 0.95),
                ratio_ci_high: Some(ratio * 1.05),
                ratio_ci_censored: false,
                u: None,
                p: None,
                test_method: None,
                p_holm: Some(0.01),
                alpha: 0.05,
                verdict,
            },
            attrition: None,
        }
    }
}

/// A comparison's attrition: what its counted runs leave out, tested.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attrition {
    /// Rejected attempts of all attempts, per side.
    pub rejections: RateTest,
    /// Protocol failures of the counted runs that measured the protocol, per side.
    pub failures: RateTest,
    #[serde(default)]
    pub failed_a: BTreeMap<Failure, usize>,
    #[serde(default)]
    pub failed_b: BTreeMap<Failure, usize>,
    /// The same comparison on every planned run's first attempt (Holm over its own family).
    pub first_attempts: Comparison,
    /// The counted runs' verdict on time alone (before a failing side lost "faster").
    pub counted: Verdict,
    #[serde(default)]
    pub marks: Vec<Mark>,
}

impl Attrition {
    /// The same attrition seen from the other side (b against a).
    pub fn inverted(&self) -> Attrition {
        let swap = |t: &RateTest| RateTest {
            events_a: t.events_b,
            trials_a: t.trials_b,
            events_b: t.events_a,
            trials_b: t.trials_a,
            ..t.clone()
        };
        Attrition {
            rejections: swap(&self.rejections),
            failures: swap(&self.failures),
            failed_a: self.failed_b.clone(),
            failed_b: self.failed_a.clone(),
            first_attempts: self.first_attempts.inverted(),
            counted: self.counted.inverted(),
            marks: self.marks.iter().map(Mark::inverted).collect(),
        }
    }

    /// `3 fell back` for a side (empty without failures).
    pub fn failure_words(&self, side: Side) -> String {
        let by = match side {
            Side::A => &self.failed_a,
            Side::B => &self.failed_b,
        };
        by.iter()
            .map(|(f, n)| format!("{n} {}", f.words()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why a comparison's verdict needs a second look.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mark", rename_all = "snake_case")]
pub enum Mark {
    /// One side's attempts were rejected significantly more often: the counted runs are a
    /// selection that depends on the protocol.
    Selection { more_rejected: Side },
    /// The first attempts' verdict is not the counted runs'.
    FirstAttempts { counted: Verdict, first: Verdict },
    /// One side failed significantly more often as a load of its protocol.
    FailsMore { side: Side },
}

impl Mark {
    /// Its name in `comparisons.csv`.
    pub fn name(&self) -> &'static str {
        match self {
            Mark::Selection { .. } => "selection",
            Mark::FirstAttempts { .. } => "first_attempts",
            Mark::FailsMore { .. } => "fails_more",
        }
    }

    fn inverted(&self) -> Mark {
        match self {
            Mark::Selection { more_rejected } => Mark::Selection {
                more_rejected: more_rejected.other(),
            },
            Mark::FirstAttempts { counted, first } => Mark::FirstAttempts {
                counted: counted.inverted(),
                first: first.inverted(),
            },
            Mark::FailsMore { side } => Mark::FailsMore { side: side.other() },
        }
    }
}

/// A p-value in three significant figures, or `<0.001`.
pub fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else if p < 0.01 {
        format!("{p:.4}")
    } else {
        format!("{p:.3}")
    }
}

/// A ratio of medians as printed: `0.83`, `≥ 4.10` (a's median did not finish), `≤ 0.25`
/// (b's did not), `DNF/DNF` (neither).
pub fn fmt_ratio(ratio: f64, bound: RatioBound) -> String {
    match bound {
        RatioBound::Exact => format!("{ratio:.2}"),
        RatioBound::AtLeast => format!("≥ {ratio:.2}"),
        RatioBound::AtMost => format!("≤ {ratio:.2}"),
        RatioBound::Unknown => "DNF/DNF".into(),
    }
}
