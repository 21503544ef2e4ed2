//! Each paint's accounting (pure): FCP and LCP along their render paths
//! ([`crate::evidence::render_path`]), the same terms as the load's, the paint as the
//! headline; and Speed Index taken apart in round trips.
//!
//! Speed Index is ∫ (1 − progress) dt up to visual completeness; with progress a step function
//! of the screencast's frames that is Σ (pᵢ − pᵢ₋₁) × tᵢ over the visual changes: each
//! change's time weighted by the share of the screen it completed. A change is a moment with an
//! accounting of its own — the load's ([`round_trips::account`]), the change as the headline,
//! its path ending at the response that ended last before it (what the screen was waiting
//! for) — so Speed Index's terms are the changes' terms, each weighted by its share, and they
//! add up to Speed Index as each change's add up to its time. Visual completeness is the last
//! change's own accounting.

use serde::{Deserialize, Serialize};

use crate::evidence::round_trips::{self, Inputs, RoundTrips};

/// Each paint's accounting; Speed Index's with the visual changes it is made of.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PaintRoundTrips {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fcp: Option<RoundTrips>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lcp: Option<RoundTrips>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_index: Option<RoundTrips>,
    /// Visual completeness: the last visual change's own accounting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visually_complete: Option<RoundTrips>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub visual_changes: Vec<VisualChange>,
}

/// One change of what the screen showed, and the response it followed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VisualChange {
    /// When the screencast showed it, ms from navigation start.
    pub at_ms: f64,
    /// How much of the way to the finished page it went, percentage points (negative: the
    /// screen moved away from it).
    pub gain_pct: f64,
    /// The URL path of the response that ended last before it (its accounting's last step).
    pub after: String,
}

/// Speed Index's accounting and the changes it is made of, from the visual `progress`
/// timeline ((t ms, %) at every change, the baseline first) and the run's Speed Index
/// (`speed_index_ms`: the headline; what the weighted terms leave of it is the remainder).
/// None without a change, or when a change has no accounting (`inputs` as for the load; its
/// headline and `ends_at` are set here).
pub fn speed_index(
    inputs: &Inputs,
    progress: &[(f64, f64)],
    speed_index_ms: f64,
) -> Option<(RoundTrips, Vec<VisualChange>)> {
    let mut parts: Vec<(f64, RoundTrips)> = Vec::new();
    let mut changes = Vec::new();
    for w in progress.windows(2) {
        let ((_, before), (at_ms, after)) = (w[0], w[1]);
        let accounting = round_trips::account(&Inputs {
            headline_ms: at_ms,
            ends_at: None,
            ..*inputs
        })?;
        changes.push(VisualChange {
            at_ms,
            gain_pct: after - before,
            after: accounting.steps.last()?.path.clone(),
        });
        parts.push(((after - before) / 100.0, accounting));
    }
    let first = parts.first()?.1.clone();
    Some((weighted(&parts, first, speed_index_ms), changes))
}

/// The terms of `parts` (weight, accounting), each weighted, as an accounting of `headline_ms`
/// (`like`: the first part, for what is not a term: the round trip, the resolver's).
fn weighted(parts: &[(f64, RoundTrips)], like: RoundTrips, headline_ms: f64) -> RoundTrips {
    let sum =
        |f: fn(&RoundTrips) -> f64| parts.iter().map(|(w, t)| w * f(t)).fold(0.0, |a, b| a + b);
    let mut t = RoundTrips {
        headline_ms,
        steps: Vec::new(),
        setup_rtts: sum(|t| t.setup_rtts),
        request_rtts: sum(|t| t.request_rtts),
        flight_rtts: sum(|t| t.flight_rtts),
        critical_rtts: sum(|t| t.critical_rtts),
        lookups: sum(|t| t.lookups),
        lookup_ms: sum(|t| t.lookup_ms),
        server_ms: sum(|t| t.server_ms),
        behind_ms: sum(|t| t.behind_ms),
        wire_ms: sum(|t| t.wire_ms),
        others_wire_ms: sum(|t| t.others_wire_ms),
        queue_ms: sum(|t| t.queue_ms),
        browser_ms: sum(|t| t.browser_ms),
        remainder_ms: 0.0,
        ..like
    };
    t.remainder_ms = headline_ms - t.accounted_ms();
    t
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::evidence::metrics::{EntryTiming, ResourceMetrics};

    fn resource(path: &str, start: f64, end: f64) -> ResourceMetrics {
        ResourceMetrics::fixture(path, start, start, (end - 1.0, end))
    }

    #[test]
    fn speed_index_is_its_changes_times_weighted_and_so_are_its_terms() {
        // 40 ms link: the page at 121 ms (2 RTT set-up, 1 request), its stylesheet at 165 ms,
        // an image at 210 ms. The screen: 60 % at 180 ms (after the stylesheet), 100 % at
        // 230 ms (after the image). Speed Index = 0.6 × 180 + 0.4 × 230 = 200.
        let nav = EntryTiming {
            name: "https://pagebench.test/".into(),
            connect_end: 80.0,
            request_start: 80.0,
            response_start: 120.0,
            response_end: 121.0,
            transfer_size: 1000.0,
            ..EntryTiming::default()
        };
        let r = vec![
            resource("/style.css", 124.0, 165.0),
            resource("/hero.jpg", 168.0, 210.0),
        ];
        let none = BTreeMap::new();
        let inputs = Inputs {
            navigation: &nav,
            resources: &r,
            headline_ms: 0.0,
            rtt_ms: 40.0,
            queue_ms: 0.0,
            down_queue_ms: 0.0,
            down_mbit: None,
            server_ms: &none,
            sends: None,
            resolver_rtt_ms: None,
            ends_at: None,
        };
        let progress = [(0.0, 0.0), (180.0, 60.0), (230.0, 100.0)];
        let (si, changes) = speed_index(&inputs, &progress, 200.0).unwrap();
        let after: Vec<&str> = changes.iter().map(|c| c.after.as_str()).collect();
        assert_eq!(after, ["/style.css", "/hero.jpg"]);
        assert_eq!((changes[0].gain_pct, changes[1].gain_pct), (60.0, 40.0));
        // Requests on the path: 2 for the first change, 3 for the second.
        assert!(
            (si.request_rtts - (0.6 * 2.0 + 0.4 * 3.0)).abs() < 1e-9,
            "{si:?}"
        );
        let parts = [(0.6, 180.0), (0.4, 230.0)].map(|(w, at)| {
            let t = round_trips::account(&Inputs {
                headline_ms: at,
                ..inputs
            })
            .unwrap();
            w * t.remainder_ms
        });
        assert!((si.remainder_ms - parts.iter().sum::<f64>()).abs() < 1e-9);
        let sum = si.critical_rtts * si.rtt_ms
            + si.server_ms
            + si.behind_ms
            + si.wire_ms
            + si.queue_ms
            + si.browser_ms
            + si.remainder_ms;
        assert!((sum - 200.0).abs() < 1e-9, "{si:?}");
        assert!(
            speed_index(&inputs, &progress[..1], 0.0).is_none(),
            "no change"
        );
    }
}
