//! The published study's numbers (54 series: six profiles × page10, page50 and a 3 MB
//! download × h1, h2, h3), printed beside ours so a reader sees
//! reproduction against original. Medians of loadEventEnd in ms; Chromium 141, Caddy 2.8.4
//! (quic-go), HTTP/3 forced cold with `--origin-to-force-quic-on` (our series `h3`).

/// One published median.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StudyValue {
    Ms(f64),
    /// "did not finish in 2 min".
    DidNotFinish,
}

impl StudyValue {
    pub fn ms(self) -> Option<f64> {
        match self {
            StudyValue::Ms(v) => Some(v),
            StudyValue::DidNotFinish => None,
        }
    }

    pub fn text(self) -> String {
        match self {
            StudyValue::Ms(v) => format!("{v:.0}"),
            StudyValue::DidNotFinish => "DNF (2 min)".into(),
        }
    }
}

use StudyValue::{DidNotFinish as D, Ms as M};

/// (workload, profile, series, value). Absent combinations were not published.
pub const STUDY: &[(&str, &str, &str, StudyValue)] = &[
    ("page50", "datacenter", "h1", M(199.0)),
    ("page50", "datacenter", "h2", M(161.0)),
    ("page50", "wired", "h1", M(589.0)),
    ("page50", "wired", "h2", M(321.0)),
    ("page50", "wired", "h3", M(500.0)),
    ("page50", "intercontinental", "h1", M(2018.0)),
    ("page50", "intercontinental", "h2", M(1034.0)),
    ("page50", "intercontinental", "h3", M(1633.0)),
    ("page50", "mobile", "h1", M(1027.0)),
    ("page50", "mobile", "h2", M(541.0)),
    ("page50", "mobile", "h3", M(1145.0)),
    ("page50", "bad-mobile", "h1", M(1349.0)),
    ("page50", "bad-mobile", "h2", M(679.0)),
    ("page50", "bad-mobile", "h3", M(1869.0)),
    ("page50", "cell-edge", "h1", M(2289.0)),
    ("page50", "cell-edge", "h2", M(1209.0)),
    ("page50", "cell-edge", "h3", M(3914.0)),
    ("page10", "datacenter", "h2", M(54.0)),
    ("page10", "datacenter", "h3", M(70.0)),
    ("page10", "wired", "h2", M(192.0)),
    ("page10", "wired", "h3", M(168.0)),
    ("page10", "intercontinental", "h2", M(643.0)),
    ("page10", "intercontinental", "h3", M(562.0)),
    ("page10", "mobile", "h2", M(294.0)),
    ("page10", "mobile", "h3", M(296.0)),
    ("page10", "bad-mobile", "h2", M(330.0)),
    ("page10", "bad-mobile", "h3", M(339.0)),
    ("download", "wired", "h1", M(378.0)),
    ("download", "wired", "h2", M(378.0)),
    ("download", "intercontinental", "h1", M(1296.0)),
    ("download", "intercontinental", "h2", M(1272.0)),
    ("download", "mobile", "h1", M(841.0)),
    ("download", "mobile", "h2", M(820.0)),
    ("download", "mobile", "h3", M(7517.0)),
    ("download", "bad-mobile", "h1", M(1059.0)),
    ("download", "bad-mobile", "h2", M(1161.0)),
    ("download", "bad-mobile", "h3", M(14923.0)),
    ("download", "cell-edge", "h2", M(1840.0)),
    ("download", "cell-edge", "h3", D),
];

/// The study's published median for a series, if it published one.
pub fn study_value(workload: &str, profile: &str, series: &str) -> Option<StudyValue> {
    STUDY
        .iter()
        .find(|(w, p, s, _)| *w == workload && *p == profile && *s == series)
        .map(|(_, _, _, v)| *v)
}

/// The study's ratio `a / b` (both published and finished).
pub fn study_ratio(workload: &str, profile: &str, a: &str, b: &str) -> Option<f64> {
    let a = study_value(workload, profile, a)?.ms()?;
    let b = study_value(workload, profile, b)?.ms()?;
    Some(a / b)
}

/// The study's diagnosis of the 50-file h3 loss (profile not stated in the study).
pub const STUDY_BREAKDOWN_NOTE: &str = "Study (Chromium 141, profile not stated): queueing \
median 17 ms (h2) vs 181 ms (h3), p95 20 vs 364 ms; in-flight requests at mid-window 44 (h2) vs \
29 (h3). Earlier measurement on this machine class (RTT 40 ms, Caddy 2.6.2; loadEventEnd / \
queueing median / on-wire peak): h2 499 / 81 / 50, h3 forced 639 / 170 / 19, h3 primed \
495 / 90 / 49.";

/// The study's and the earlier file-count sweeps (queueing median, ms, at 10/20/30/50 files).
pub const STUDY_SWEEP_NOTE: &str = "Study, h3 queueing median at 10/20/30/50 files: 9 / 71 / \
115 / 186 ms. Earlier measurement on this machine class (RTT 40 ms): h2 34 / 47 / 59 / 62, h3 \
forced 36 / 129 / 144 / 174, h3 primed 36 / 52 / 60 / 91 ms.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups() {
        assert_eq!(study_value("page50", "wired", "h3"), Some(M(500.0)));
        assert_eq!(study_value("page50", "datacenter", "h3"), None);
        assert_eq!(study_value("download", "cell-edge", "h3"), Some(D));
        assert_eq!(study_ratio("download", "cell-edge", "h3", "h2"), None);
        let r = study_ratio("page50", "wired", "h2", "h1").unwrap();
        assert!((r - 321.0 / 589.0).abs() < 1e-12);
        assert_eq!(study_value("page10", "cell-edge", "h2"), None);
    }
}
