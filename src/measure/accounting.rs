//! What a run's round-trip accountings are read from (the load's, and each paint's): the
//! navigation, the link's round trip, queue and rate, the server's own times, the resolver's
//! round trip — gathered once from the run's evidence, then handed to the pure accountings
//! (`evidence::round_trips`, `evidence::paint_round_trips`).

use crate::config::capacity::TraceWindow;
use crate::config::profile::Profile;
use crate::evidence::metrics;
use crate::evidence::run_record::LinkSummary;
use crate::link::LinkStats;
use crate::servers::ServerEvidence;

/// What every accounting of a run shares: the navigation, the link's round trip, queue and
/// rate, the server's own times and the resolver's round trip (None without a navigation).
pub struct AccountingBase {
    navigation: metrics::EntryTiming,
    server_ms: std::collections::BTreeMap<String, f64>,
    rtt_ms: f64,
    queue_ms: f64,
    down_queue_ms: f64,
    down_mbit: Option<f64>,
    resolver_rtt_ms: Option<f64>,
}

impl AccountingBase {
    pub fn of(
        profile: &Profile,
        obs: &metrics::Observation,
        server: &ServerEvidence,
        stats: &Option<LinkStats>,
        (link, trace): (Option<&LinkSummary>, Option<&TraceWindow>),
        resolver_rtt_ms: Option<f64>,
    ) -> Option<AccountingBase> {
        let median_ms = |q: &Option<crate::link::histogram::LatencySummary>| {
            q.as_ref().map_or(0.0, |q| q.median_us / 1000.0)
        };
        let (up_queue_ms, down_queue_ms) = stats.as_ref().map_or((0.0, 0.0), |s| {
            (median_ms(&s.up.queue_delay), median_ms(&s.down.queue_delay))
        });
        Some(AccountingBase {
            navigation: metrics::EntryTiming::parse(obs.navigation.as_ref()?),
            server_ms: server
                .views
                .iter()
                .flatten()
                .filter_map(|v| v.server_ms.map(|ms| (v.path.clone(), ms)))
                .collect(),
            rtt_ms: link
                .and_then(|l| l.offered_rtt_ms)
                .unwrap_or(profile.rtt_ms),
            queue_ms: up_queue_ms + down_queue_ms,
            down_queue_ms,
            down_mbit: trace
                .and_then(|t| t.down.as_ref().map(|d| d.mbit))
                .or(profile.down_mbit),
            resolver_rtt_ms,
        })
    }

    /// The accounting's inputs for `resources` and the link's packets (`sends`): headline 0
    /// and no end, for the caller to set.
    fn inputs<'a>(
        &'a self,
        resources: &'a [metrics::ResourceMetrics],
        sends: Option<&'a crate::packets::flights::Sends>,
    ) -> crate::evidence::round_trips::Inputs<'a> {
        crate::evidence::round_trips::Inputs {
            navigation: &self.navigation,
            resources,
            headline_ms: 0.0,
            rtt_ms: self.rtt_ms,
            queue_ms: self.queue_ms,
            down_queue_ms: self.down_queue_ms,
            down_mbit: self.down_mbit,
            server_ms: &self.server_ms,
            sends,
            resolver_rtt_ms: self.resolver_rtt_ms,
            ends_at: None,
        }
    }

    /// The accounting of `headline_ms`, its path ending at `ends_at` (None: the response that
    /// ended last before it).
    pub fn account(
        &self,
        resources: &[metrics::ResourceMetrics],
        sends: Option<&crate::packets::flights::Sends>,
        headline_ms: f64,
        ends_at: Option<&str>,
    ) -> Option<crate::evidence::round_trips::RoundTrips> {
        crate::evidence::round_trips::account(&crate::evidence::round_trips::Inputs {
            headline_ms,
            ends_at,
            ..self.inputs(resources, sends)
        })
    }

    /// Each paint's accounting along its render path: FCP's ends at its last render-blocking
    /// request (the page alone when the engine marked none blocking; none for an engine that
    /// marks nothing), LCP's at the LCP element's request, else where FCP's ends; Speed Index
    /// and visual completeness from the screencast's changes (`--visual`).
    pub fn paints(
        &self,
        obs: &metrics::Observation,
        m: &metrics::RunMetrics,
        resources: &[metrics::ResourceMetrics],
        sends: Option<&crate::packets::flights::Sends>,
        (paths, visual): (
            Option<&crate::evidence::render_path::RenderPaths>,
            Option<&crate::evidence::visual::VisualMetrics>,
        ),
    ) -> Option<crate::evidence::paint_round_trips::PaintRoundTrips> {
        let last = |p: &Option<crate::evidence::render_path::RenderPath>| {
            p.as_ref().and_then(|p| p.last()).map(|r| r.path.clone())
        };
        let fcp_end = match paths.and_then(|p| last(&p.fcp)) {
            Some(path) => Some(path),
            // Nothing blocked the paint, as far as the engine (or the page's head) tells.
            None => (crate::evidence::render_path::marks_render_blocking(&obs.resources)
                || obs
                    .paint
                    .as_ref()
                    .is_some_and(|p| !p.head_blocking.is_empty()))
            .then(|| self.navigation.name.clone()),
        };
        let lcp_end = paths.and_then(|p| last(&p.lcp)).or(fcp_end.clone());
        let fcp = m
            .fcp_ms
            .zip(fcp_end)
            .and_then(|(at, end)| self.account(resources, sends, at, Some(&end)));
        let lcp = m
            .lcp_ms
            .zip(lcp_end)
            .and_then(|(at, end)| self.account(resources, sends, at, Some(&end)));
        let (speed_index, visual_changes) = visual
            .and_then(|v| {
                crate::evidence::paint_round_trips::speed_index(
                    &self.inputs(resources, sends),
                    &v.progress,
                    v.speed_index_ms,
                )
            })
            .unzip();
        let visually_complete =
            visual.and_then(|v| self.account(resources, sends, v.visual_complete_ms, None));
        let paints = crate::evidence::paint_round_trips::PaintRoundTrips {
            fcp,
            lcp,
            speed_index,
            visually_complete,
            visual_changes: visual_changes.unwrap_or_default(),
        };
        (paints != Default::default()).then_some(paints)
    }
}
