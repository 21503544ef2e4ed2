//! One run, start to finish: the testbed's run protocol (a fresh browser in the client
//! namespace, one load through the emulated link, the server's and the link's view of it), then
//! [`assemble`] (pure): metrics, validation and the link's gate — one [`RunRecord`]. Errors only when the run could not be attempted at all (or a
//! signal arrived); every failure of the load itself, of the link or of the server is a
//! recorded invalid or DNF run.

use std::time::Duration;

use anyhow::Result;

use crate::config::capacity::{TraceStart, TraceWindow};
use crate::config::identity::{BrowserId, Phase, ServerId, View};
use crate::config::profile::Profile;
use crate::config::protocol::{Protocol, Variant};
use crate::config::site_archive::distances::AppliedDistance;
use crate::config::workload::Manifest;
use crate::evidence::fidelity::ReplayFidelity;
use crate::evidence::metrics;
use crate::evidence::render_path;
use crate::evidence::run_record::{LinkEvidence, LinkSummary, RunRecord};
use crate::evidence::validate::{self, ReasonKind, Verdict};
use crate::link::{self, LinkStats, SelfCheck};
use crate::measure::accounting::AccountingBase;
use crate::measure::fault::FaultInjection;
use crate::measure::testbed::{LoadRequest, RunParts, Testbed};
use crate::packets::{CaptureOutcome, CaptureParts};
use crate::servers::ServerEvidence;
use crate::support::snmp;

/// Everything that identifies and configures one run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The attempt's id (see [`crate::evidence::run_record::attempt_id`]).
    pub id: String,
    pub plan_id: String,
    pub attempt: u32,
    pub profile: Profile,
    pub manifest: Manifest,
    pub variant: Variant,
    pub server: ServerId,
    /// The engine that loads the page (a fresh one per run).
    pub browser: BrowserId,
    /// A first visit, or a repeat view (a first navigation in the same browser beforehand).
    pub view: View,
    /// What a repeat view does with the HTTP cache between its navigations.
    pub repeat_cache: crate::config::identity::RepeatCache,
    /// The CPU the whole browser gets.
    pub device: crate::config::device::Device,
    /// Time the CPU benchmarks (native and in the page) with the run: devices are compared.
    pub cpu_benchmark: bool,
    pub phase: Phase,
    pub round: u32,
    pub position: u32,
    pub timeout: Duration,
    pub settle_max: Duration,
    /// A fault to inject into this run (test hook).
    pub fault: Option<FaultInjection>,
    /// Keep the response bodies after the load (`run --har`: a HAR with content).
    pub keep_bodies: bool,
    /// Record a screencast of the load (`--visual`).
    pub visual: Option<crate::evidence::visual::VisualSource>,
    /// What the run keeps beside its record (`--capture`).
    pub capture: crate::packets::CaptureSet,
    /// Tap the link's packets for the head-of-line analysis (always, but in `bench tap`'s
    /// control arm).
    pub packet_tap: bool,
    /// Where a capacity trace starts at the mark (the plan's draw for the round).
    pub trace_start: TraceStart,
    /// The lane it ran on when the plan ran on several (`--jobs`).
    pub lane: Option<crate::evidence::run_record::LaneRun>,
    /// The seed of the link's random draws during this run (see `LoadRequest::draws`).
    pub draws: Option<u64>,
}

impl RunSpec {
    /// A lone run outside a matrix plan: its own plan id, first attempt, measured, no fault.
    pub fn single(
        id: &str,
        profile: &Profile,
        manifest: &Manifest,
        variant: Variant,
        server: &ServerId,
        timeout: Duration,
    ) -> RunSpec {
        RunSpec {
            id: id.to_string(),
            plan_id: id.to_string(),
            attempt: 1,
            profile: profile.clone(),
            manifest: manifest.clone(),
            variant,
            server: server.clone(),
            browser: BrowserId::default(),
            view: View::First,
            repeat_cache: Default::default(),
            device: crate::config::device::Device::desktop(),
            cpu_benchmark: false,
            phase: Phase::Measure,
            round: 1,
            position: 1,
            timeout,
            settle_max: Duration::from_secs(3),
            fault: None,
            keep_bodies: false,
            visual: None,
            capture: crate::packets::CaptureSet::none(),
            packet_tap: true,
            trace_start: TraceStart::default(),
            lane: None,
            draws: None,
        }
    }
}

use crate::evidence::cpu_benchmarks::CpuBenchmarks;
pub use crate::measure::testbed::page_url;
use crate::support::native_benchmark::{self, NativeTiming};

fn link_summary(stats: &LinkStats, check: &SelfCheck) -> LinkSummary {
    let drops = |d: &crate::link::DirectionStats| {
        d.dropped_loss
            + d.dropped_queue
            + d.dropped_not_for_peer
            + d.dropped_aqm
            + d.dropped_outage
            + d.dropped_nat
    };
    LinkSummary {
        bytes_up: stats.up.bytes_in,
        bytes_down: stats.down.bytes_in,
        packets_up: stats.up.packets_in,
        packets_down: stats.down.packets_in,
        drops_up: drops(&stats.up),
        drops_down: drops(&stats.down),
        lateness_p99_up_us: stats.up.lateness.p99_us,
        lateness_p99_down_us: stats.down.lateness.p99_us,
        model_rtt_ms: check.model_rtt_ms,
        achieved_rtt_ms: check.achieved_rtt_ms,
        offered_rtt_ms: check.offered_rtt_ms,
        achieved_loss_up_pct: check.up.measured_loss_pct,
        achieved_loss_down_pct: check.down.measured_loss_pct,
        tun_tx_dropped: stats.up.tun_tx_dropped + stats.down.tun_tx_dropped,
        self_check_warnings: check.warnings.clone(),
    }
}

/// Performs one run on the testbed (whose link must already have `spec.profile`) in a fresh
/// browser of `spec.browser`: the testbed's run protocol, then the record assembled from its
/// parts.
pub fn run_once(tb: &mut Testbed, spec: &RunSpec) -> Result<RunRecord> {
    let native = spec.cpu_benchmark.then(|| native_pair(&spec.device));
    let parts = tb.run(&load_request(spec))?;
    let mut rec = assemble(spec, parts);
    if spec.cpu_benchmark {
        let js_ms = rec.observation.cpu_benchmark_ms;
        rec.cpu_benchmarks = Some(CpuBenchmarks::of(&spec.device, native.flatten(), js_ms));
    }
    Ok(rec)
}

/// The native CPU benchmark free and on `device`, the quickest of three of each, interleaved
/// (None, said, when it cannot run: the run's own launch then fails with the reason). Two of
/// each read a free core as 0.69× itself in one CI run on a busy machine.
fn native_pair(device: &crate::config::device::Device) -> Option<(NativeTiming, NativeTiming)> {
    native_benchmark::quickest_pair(device.cap(), 3)
        .map_err(|e| tracing::warn!("the native CPU benchmark on {}: {e:#}", device.name))
        .ok()
}

/// The load a run spec asks the testbed for.
pub fn load_request(spec: &RunSpec) -> LoadRequest<'_> {
    LoadRequest {
        server: &spec.server,
        browser: spec.browser,
        variant: spec.variant,
        manifest: &spec.manifest,
        timeout: spec.timeout,
        settle_max: spec.settle_max,
        fault: spec.fault.as_ref(),
        keep_bodies: spec.keep_bodies,
        visual: spec.visual,
        capture: &spec.capture,
        packet_tap: spec.packet_tap,
        repeat: (spec.view == View::Repeat).then_some(spec.repeat_cache),
        device: &spec.device,
        cpu_benchmark: spec.cpu_benchmark,
        trace_start: spec.trace_start,
        draws: spec.draws,
    }
}

/// The visual evidence (frame times made relative to navigation start) and the frames' images,
/// when the run recorded its screen (with `source`).
fn visual_of(
    source: crate::evidence::visual::VisualSource,
    obs: &crate::evidence::metrics::Observation,
) -> (
    Option<crate::evidence::visual::VisualEvidence>,
    Vec<Vec<u8>>,
) {
    if let Some(error) = obs.frames_error.clone().filter(|_| obs.frames.is_empty()) {
        let failed = crate::evidence::visual::VisualEvidence {
            source,
            metrics: None,
            frames: Vec::new(),
            error: Some(error),
        };
        return (Some(failed), Vec::new());
    }
    let Some(origin) = obs.time_origin.filter(|_| !obs.frames.is_empty()) else {
        return (None, Vec::new());
    };
    let frames: Vec<(f64, &[u8])> = obs
        .frames
        .iter()
        .map(|f| (f.timestamp * 1000.0 - origin, f.jpeg.as_slice()))
        .collect();
    let evidence = crate::evidence::visual::evidence(source, &frames);
    (
        evidence,
        obs.frames.iter().map(|f| f.jpeg.clone()).collect(),
    )
}

/// The record of one run from its parts (pure): metrics derived from the browser's
/// observation, the load validated against the manifest and the server's view, the primed
/// check, the link's gate and a stopped server as invalid reasons.
pub fn assemble(spec: &RunSpec, parts: RunParts) -> RunRecord {
    let variant = spec.variant;
    let derived = derive_evidence(
        spec,
        &parts.observation,
        &parts.end,
        &parts.server,
        parts.server_exit.as_deref(),
        parts.link_stats,
        parts.capture,
        &parts.counters_before,
        &parts.counters_after,
        !parts.lookups.is_empty(),
        crate::evidence::cpu_pace::of(&parts.contention, spec.device.cap()),
    );
    let server = parts.server;
    let lookups =
        crate::evidence::lookups::on_page_clock(&parts.lookups, parts.observation.time_origin);
    RunRecord {
        id: spec.id.clone(),
        plan_id: spec.plan_id.clone(),
        attempt: spec.attempt,
        started_at: parts.started_at,
        protocol: recorded_protocol(spec),
        h3_mode: variant.h3_mode,
        variant,
        workload: spec.manifest.workload.name.clone(),
        profile: spec.profile.name.clone(),
        server: spec.server.clone(),
        browser: parts.browser,
        browser_version: parts.browser_version,
        browser_confinement: parts.browser_confinement,
        engine_tells: crate::measure::browser::engine(spec.browser)
            .ok()
            .map(|e| e.tells.clone()),
        h3_hint: crate::evidence::lookups::h3_hint(variant, &lookups),
        lookups,
        view: spec.view,
        device: spec.device.id(),
        cpu_benchmarks: None,
        phase: spec.phase,
        round: spec.round,
        position: spec.position,
        url: parts.url,
        outcome: derived.verdict.outcome,
        reasons: derived.verdict.reasons,
        warnings: derived.verdict.warnings,
        replay_fidelity: derived.replay_fidelity,
        browser_initiated: derived.verdict.browser_initiated,
        site_distances: derived.site_distances,
        viewpoints: derived.viewpoints,
        end: parts.end,
        metrics: derived.metrics,
        resources: derived.resources,
        overhead: parts.overhead,
        wall_ms: parts.wall_ms,
        machine: parts.machine,
        contention: Some(parts.contention),
        trace: derived.trace,
        link: derived.link,
        transport: server.summary,
        snmp: derived.snmp,
        server_requests: server.views.unwrap_or_default(),
        observation: parts.observation,
        link_stats: Some(LinkEvidence {
            stats: derived.stats,
            self_check: Some(derived.check),
        }),
        server_transport: server.transport,
        server_log: server.log,
        visual: derived.visual,
        frame_images: derived.frame_images,
        hol: derived.captured.hol,
        wire: derived.wire,
        lane: spec.lane,
        link_draws: spec.draws,
        round_trips: derived.round_trips,
        paint_round_trips: derived.paint_round_trips,
        render_paths: derived.render_paths,
        handshakes: derived.captured.handshakes,
        disruption: derived.disruption,
        captures: derived
            .captured
            .files
            .iter()
            .map(|f| f.reference())
            .collect(),
        capture_files: derived.captured.files,
    }
}

/// What [`assemble`] derives from a run's parts before it writes them into the record.
struct Derived {
    disruption: Option<crate::evidence::disruption::Disruption>,
    /// The capture's analyses and files (its wire evidence taken out into `wire`).
    captured: CaptureOutcome,
    metrics: metrics::RunMetrics,
    resources: Vec<metrics::ResourceMetrics>,
    visual: Option<crate::evidence::visual::VisualEvidence>,
    frame_images: Vec<Vec<u8>>,
    stats: Option<LinkStats>,
    check: SelfCheck,
    verdict: Verdict,
    viewpoints: u8,
    link: Option<LinkSummary>,
    trace: Option<TraceWindow>,
    snmp: Option<snmp::NamespaceDeltas>,
    round_trips: Option<crate::evidence::round_trips::RoundTrips>,
    paint_round_trips: Option<crate::evidence::paint_round_trips::PaintRoundTrips>,
    render_paths: Option<crate::evidence::render_path::RenderPaths>,
    wire: Option<crate::packets::WireEvidence>,
    replay_fidelity: Option<ReplayFidelity>,
    site_distances: Option<Vec<AppliedDistance>>,
}

/// The run's evidence derived from its parts, in order: the disruption, the capture, the
/// metrics and the screencast, the link's gate, the verdict, and the round trips.
#[allow(clippy::too_many_arguments)]
fn derive_evidence(
    spec: &RunSpec,
    obs: &metrics::Observation,
    end: &validate::LoadEnd,
    server: &ServerEvidence,
    server_exit: Option<&str>,
    link_stats: Result<LinkStats>,
    capture: CaptureParts,
    counters_before: &(snmp::Counters, snmp::Counters),
    counters_after: &(snmp::Counters, snmp::Counters),
    looked_up: bool,
    pace: Option<crate::evidence::cpu_pace::Pace>,
) -> Derived {
    let kind = spec.manifest.workload.kind.clone();
    let ((snmp_c0, snmp_s0), (snmp_c1, snmp_s1)) = (counters_before, counters_after);
    let disruption = disruption_of(&link_stats, &capture, server);
    let mut captured = finish_capture(spec, capture);
    let (mut metrics, mut resources) = metrics::derive(obs, &kind, spec.profile.rtt_ms);
    if !looked_up {
        // No resolver was asked: a slow hosts-file answer is no lookup through the link.
        metrics::forget_lookups(&mut metrics, &mut resources);
    }
    let (visual, frame_images) = visual_of(spec.visual.unwrap_or_default(), obs);
    add_visual_metrics(&mut metrics, visual.as_ref());
    let client = snmp::delta(snmp_c0, snmp_c1);
    let (stats, check) = gate_link(spec, link_stats);
    let verdict = judge(
        spec,
        &RunSide {
            obs,
            end,
            server,
            metrics: &metrics,
            capture_warnings: &capture_warnings(&captured),
            client: &client,
            link: &check,
            server_exit,
            pace: pace.as_ref(),
        },
    );
    let viewpoints = if server.views.is_some() { 3 } else { 2 };
    let link = stats.as_ref().map(|s| link_summary(s, &check));
    let trace = stats.as_ref().and_then(|s| trace_window(spec, s));
    let snmp = Some(snmp::NamespaceDeltas {
        client,
        server: snmp::delta(snmp_s0, snmp_s1),
    });
    let base = AccountingBase::of(
        &spec.profile,
        obs,
        server,
        &stats,
        (link.as_ref(), trace.as_ref()),
        looked_up.then(|| spec.profile.resolver_rtt()),
    );
    let sends = captured.sends.as_ref();
    let round_trips = base
        .as_ref()
        .and_then(|b| b.account(&resources, sends, metrics.completion_ms?, None));
    let wire = wire_on_navigation(captured.wire.take(), obs, sends);
    if let Some(w) = &wire {
        metrics::add_server_sends(&mut resources, w);
    }
    let shown = visual.as_ref().and_then(|v| v.metrics.as_ref());
    let changes_at: Vec<f64> = shown.map_or(Vec::new(), |v| changes_at(&v.progress));
    let render_paths = Some(render_path::of(obs, &resources, wire.as_ref(), &changes_at))
        .filter(|p| *p != Default::default());
    let paint_round_trips = base.as_ref().and_then(|b| {
        b.paints(
            obs,
            &metrics,
            &resources,
            sends,
            (render_paths.as_ref(), shown),
        )
    });
    let (replay_fidelity, site_distances) =
        replayed_site(spec, server, &verdict, obs, round_trips.as_ref(), looked_up);
    Derived {
        disruption,
        captured,
        metrics,
        resources,
        visual,
        frame_images,
        stats,
        check,
        verdict,
        viewpoints,
        link,
        trace,
        snmp,
        round_trips,
        paint_round_trips,
        render_paths,
        wire,
        replay_fidelity,
        site_distances,
    }
}

/// When the screen changed: each step of the visual progress after the baseline.
fn changes_at(progress: &[(f64, f64)]) -> Vec<f64> {
    progress.iter().skip(1).map(|(t, _)| *t).collect()
}

/// A replayed site's run: how close it came to the recording (where the server keeps a log:
/// every replay, the embedded server serves sites) and where each origin sat.
fn replayed_site(
    spec: &RunSpec,
    server: &ServerEvidence,
    verdict: &Verdict,
    obs: &metrics::Observation,
    round_trips: Option<&crate::evidence::round_trips::RoundTrips>,
    looked_up: bool,
) -> (Option<ReplayFidelity>, Option<Vec<AppliedDistance>>) {
    let Some(site) = spec.manifest.site.as_ref() else {
        return (None, None);
    };
    let lookups = if looked_up {
        metrics::timed_lookups(obs)
    } else {
        Vec::new()
    };
    let tells_connections =
        crate::measure::browser::engine(spec.browser).is_ok_and(|e| e.tells.connections);
    let fidelity = server.views.as_deref().map(|views| {
        crate::evidence::fidelity::of(
            site,
            &crate::evidence::fidelity::ReplayEvidence {
                views,
                browser_initiated: &verdict.browser_initiated,
                network: tells_connections.then_some(obs.network.requests.as_slice()),
                critical_path: round_trips
                    .map(|r| r.steps.iter().map(|s| s.path.as_str()).collect()),
                lookups: &lookups,
            },
        )
    });
    (fidelity, site.applied_distances(&spec.profile, looked_up))
}

/// The wire's streams with the navigation's start on their clock.
fn wire_on_navigation(
    wire: Option<crate::packets::WireEvidence>,
    obs: &metrics::Observation,
    sends: Option<&crate::packets::flights::Sends>,
) -> Option<crate::packets::WireEvidence> {
    let mut wire = wire?;
    wire.navigation_ms = obs.navigation.as_ref().zip(sends).and_then(|(nav, sends)| {
        crate::evidence::round_trips::navigation_on_trace_ms(
            &metrics::EntryTiming::parse(nav),
            sends,
        )
    });
    Some(wire)
}

/// What the profile's disruptions (events, competing flows) did to the load, seen by the link,
/// its packets and the server's connections; None on a profile without any, or when the
/// link's counters could not be read.
fn disruption_of(
    link_stats: &Result<LinkStats>,
    capture: &CaptureParts,
    server: &ServerEvidence,
) -> Option<crate::evidence::disruption::Disruption> {
    link_stats.as_ref().ok().and_then(|s| {
        crate::evidence::disruption::analyse(
            s.events.as_ref(),
            &s.cross,
            capture.trace.as_ref(),
            server.transport.as_deref(),
            s.elapsed_s * 1e3,
        )
    })
}

/// The run's captures analysed (head-of-line blocking, handshakes) and the files `--capture`
/// asked for, described as this run's.
fn finish_capture(spec: &RunSpec, capture: CaptureParts) -> CaptureOutcome {
    crate::packets::finish(
        capture,
        &spec.capture,
        &format!(
            "pagebench run {}: {} over {} on {}",
            spec.id, spec.manifest.workload.name, spec.variant, spec.profile.name
        ),
    )
}

/// The capture's warnings, as the verdict's (each says it is the capture's).
fn capture_warnings(captured: &CaptureOutcome) -> Vec<String> {
    captured
        .warnings
        .iter()
        .map(|w| format!("capture: {w}"))
        .collect()
}

/// The screencast's visual metrics, when it yielded any, join the run's metrics.
fn add_visual_metrics(
    metrics: &mut metrics::RunMetrics,
    visual: Option<&crate::evidence::visual::VisualEvidence>,
) {
    if let Some(m) = visual.and_then(|v| v.metrics.as_ref()) {
        metrics.speed_index_ms = Some(m.speed_index_ms);
        metrics.visual_complete_ms = Some(m.visual_complete_ms);
        metrics.first_visual_change_ms = m.first_visual_change_ms;
    }
}

/// The run's protocol: the variant's, or as recorded, the protocol the page itself came over.
fn recorded_protocol(spec: &RunSpec) -> Protocol {
    let variant = spec.variant;
    match &spec.manifest.site {
        Some(site) if variant.as_recorded => site.page_protocol().unwrap_or(variant.protocol),
        _ => variant.protocol,
    }
}

/// What the checks judge beside the run's plan: the load, the server, the metrics, the
/// capture, the client's counters, the link's self-check and a stopped server.
struct RunSide<'a> {
    obs: &'a metrics::Observation,
    end: &'a validate::LoadEnd,
    server: &'a crate::servers::ServerEvidence,
    metrics: &'a metrics::RunMetrics,
    capture_warnings: &'a [String],
    client: &'a snmp::Delta,
    link: &'a SelfCheck,
    server_exit: Option<&'a str>,
    pace: Option<&'a crate::evidence::cpu_pace::Pace>,
}

/// The run's verdict: every check of `validate::CHECKS` over its evidence.
fn judge(spec: &RunSpec, side: &RunSide) -> validate::Verdict {
    let variant = spec.variant;
    let expected = if variant.as_recorded {
        validate::Expected::AsRecorded
    } else {
        validate::Expected::All(variant.protocol.alpn())
    };
    // What the browser's namespace opened, and what the server accepted where it counts.
    let server_tcp = side
        .server
        .summary
        .as_ref()
        .map_or(0, |t| t.tcp_connections);
    let tcp_opened = (side.client.tcp_active_opens.max(0) as u64).max(server_tcp);
    validate::validate(&validate::RunEvidence {
        expected,
        manifest: &spec.manifest,
        observation: side.obs,
        end: side.end,
        server_log: side.server.views.as_deref(),
        run_id: &spec.id,
        metrics: side.metrics,
        h3_mode: variant.h3_mode,
        tcp_opened,
        link_faults: &side.link.faults,
        server_exit: side.server_exit,
        capture_warnings: side.capture_warnings,
        pace: side.pace,
    })
}

/// The link's self-check: counters that cannot be read mean the emulator stopped during the
/// load (the `link_gate` check turns its faults into reasons).
fn gate_link(spec: &RunSpec, link_stats: Result<LinkStats>) -> (Option<LinkStats>, SelfCheck) {
    match link_stats {
        Ok(s) => {
            let check = link::self_check(&s, &spec.profile);
            (Some(s), check)
        }
        Err(e) => (
            None,
            link::link_stats::stopped_check(&spec.profile, format!("{e:#}")),
        ),
    }
}

/// What a trace profile offered during the load.
fn trace_window(spec: &RunSpec, s: &LinkStats) -> Option<TraceWindow> {
    fn trace(
        t: &Option<crate::config::profile::TraceFile>,
    ) -> Option<&crate::config::capacity::CapacityTrace> {
        t.as_ref().and_then(|t| t.trace()).map(|t| &**t)
    }
    TraceWindow::of(
        trace(&spec.profile.down_trace),
        trace(&spec.profile.up_trace),
        spec.trace_start,
        (s.elapsed_s * 1e9) as u64,
    )
}

/// One run that counts: [`run_once`], run again (up to `retry_invalid` times) while it fails
/// as a measurement — as the matrix does — on a testbed the caller keeps. Returns every attempt,
/// the counted one last.
pub fn run_counted(tb: &mut Testbed, spec: &RunSpec, retry_invalid: u32) -> Result<Vec<RunRecord>> {
    let mut attempts = Vec::new();
    for attempt in 1..=retry_invalid + 1 {
        let this = RunSpec {
            id: crate::evidence::run_record::attempt_id(&spec.plan_id, attempt),
            attempt,
            fault: spec.fault.clone().filter(|_| attempt == 1),
            ..spec.clone()
        };
        let rec = run_once(tb, &this)?;
        let again = rec.is_measurement_failure();
        attempts.push(rec);
        if !again {
            break;
        }
    }
    Ok(attempts)
}

/// The lines of a run's disruptions: events, stalls, connections, competing flows.
fn describe_disruption(d: &crate::evidence::disruption::Disruption) -> String {
    let mut s = String::new();
    let mut events: Vec<String> = d
        .outages_ms
        .iter()
        .map(|[a, b]| format!("outage {a:.0}–{b:.0} ms"))
        .collect();
    if let Some(r) = d.rebind_at_ms {
        events.push(format!("NAT rebinding at {r:.0} ms"));
    }
    if !events.is_empty() || d.stall.is_some() {
        s.push_str(&format!(
            "  disruptions: {}{}
",
            if events.is_empty() {
                "none".to_string()
            } else {
                events.join(", ")
            },
            d.stall.map_or(String::new(), |st| format!(
                " · longest stall {:.0} ms ({:.0}–{:.0} ms)",
                st.ms, st.from_ms, st.to_ms
            ))
        ));
    }
    for e in &d.event_stalls {
        if let Some(st) = e.stall {
            s.push_str(&format!(
                "    {} at {:.0} ms: no data for {:.0} ms around it\n",
                e.event, e.at_ms, st.ms
            ));
        }
    }
    if let Some(r) = &d.rebind {
        s.push_str(&format!(
            "  connections at the rebinding (server view): {} open, {} survived (migrated), {} broken, {} unused; {} opened after\n",
            r.open_at_rebind, r.survived, r.broken, r.unused, r.opened_after
        ));
    }
    if !d.cross.is_empty() {
        let total: u64 = d.cross.iter().map(|c| c.bytes).sum();
        s.push_str(&format!(
            "  competing flows: {} × {} {}, {} B during the load ({})\n",
            d.cross.len(),
            d.cross[0].protocol,
            d.cross[0].direction,
            total,
            d.cross
                .iter()
                .map(|c| c.bytes.to_string())
                .collect::<Vec<_>>()
                .join(" / ")
        ));
    }
    s
}

/// The human summary of one run: what loaded and how fast, what the connections and the
/// network did, how the protocol was checked, the link, and the machine.
pub fn describe(rec: &RunRecord) -> String {
    let mut s = describe_load(rec);
    s.push_str(&describe_connections(rec));
    if let Some(d) = &rec.disruption {
        s.push_str(&describe_disruption(d));
    }
    s.push_str(&describe_protocol(rec));
    s.push_str(&describe_link(rec));
    s.push_str(&describe_machine(rec));
    s
}

/// A figure with one decimal, or a dash.
fn one_decimal(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "—".into())
}

/// The run's header, its reasons and warnings, and its load's figures.
fn describe_load(rec: &RunRecord) -> String {
    let f = one_decimal;
    let m = &rec.metrics;
    let mut s = format!(
        "{} · {} {} on {} ({}, {}) · {}\n",
        rec.id,
        rec.variant,
        rec.workload,
        rec.profile,
        rec.server,
        rec.browser_version
            .clone()
            .unwrap_or_else(|| rec.browser.label()),
        rec.outcome.name().to_uppercase()
    );
    for r in &rec.reasons {
        s.push_str(&format!("  ✗ {}: {}\n", r.kind.name(), r.detail));
    }
    for w in &rec.warnings {
        s.push_str(&format!("  ! {w}\n"));
    }
    s.push_str(&format!(
        "  completion {} ms (loadEventEnd {}) · connect {} ms ({} RTT) · queueing median {} / p95 {} ms · TTFB median {} ms\n",
        f(m.completion_ms),
        f(m.load_event_end_ms),
        f(m.nav_connect_ms),
        f(m.handshake_rtts),
        f(m.queueing_median_ms),
        f(m.queueing_p95_ms),
        f(m.ttfb_median_ms)
    ));
    let connections = (crate::evidence::metric_registry::CONNECTIONS.derive)(rec).map_or_else(
        || "connections unknown".into(),
        |n| format!("over {n} connection(s)"),
    );
    s.push_str(&format!(
        "  {} resources {connections} · on-wire mid {} / peak {}",
        m.resources,
        m.onwire_mid
            .map(|x| x.to_string())
            .unwrap_or_else(|| "—".into()),
        m.onwire_peak
            .map(|x| x.to_string())
            .unwrap_or_else(|| "—".into()),
    ));
    if let Some(g) = m.goodput_mbit {
        s.push_str(&format!(
            " · goodput {g:.1} Mbit/s over {} ms",
            f(m.transfer_ms)
        ));
    }
    s.push('\n');
    s
}

/// A repeat view's first navigation, the TLS handshakes and head-of-line blocking.
fn describe_connections(rec: &RunRecord) -> String {
    let f = one_decimal;
    let mut s = String::new();
    if let Some(fv) = &rec.observation.first_view {
        let protocols: Vec<String> = fv
            .protocols
            .iter()
            .map(|(p, n)| format!("{n} over {p}"))
            .collect();
        s.push_str(&format!(
            "  repeat view: the first navigation (not measured) loaded in {} ms, {}; then every connection closed, the HTTP cache {}\n",
            f(fv.load_event_end_ms),
            protocols.join(", "),
            if fv.cache_kept { "kept" } else { "cleared" }
        ));
    }
    if let Some(h) = rec
        .handshakes
        .as_ref()
        .filter(|h| !h.connections.is_empty())
    {
        s.push_str(&format!(
            "  handshakes: {} connection(s), {} resumed, {} with 0-RTT accepted ({} request(s) sent in 0-RTT)\n",
            h.connections.len(),
            h.resumed(),
            h.zero_rtt_accepted(),
            h.early_requests()
        ));
    }
    if let Some(h) = &rec.hol {
        for (name, side) in [("TCP", &h.tcp), ("QUIC", &h.quic)] {
            let Some(side) = side else { continue };
            s.push_str(&format!(
                "  head-of-line ({name}): {} B blocked behind {} hole(s) for {:.1} ms in all{} · {} of their packets dropped\n",
                side.blocked_bytes,
                side.episodes_total,
                side.blocked_ms,
                if name == "QUIC" {
                    format!(", {} B of other streams passed them", side.unblocked_bytes)
                } else {
                    String::new()
                },
                side.drops.total()
            ));
        }
    }
    s
}

/// Which viewpoints agreed on the protocol.
fn describe_protocol(rec: &RunRecord) -> String {
    let proto_ok = rec.reasons.iter().all(|r| {
        !matches!(
            r.kind,
            ReasonKind::ProtocolMismatch
                | ReasonKind::CdpProtocolMismatch
                | ReasonKind::ServerProtocolMismatch
        )
    });
    let devtools = rec
        .engine_tells
        .as_ref()
        .map_or("DevTools", |e| e.devtools.as_ref());
    if rec.viewpoints >= 3 {
        format!(
            "  protocol {}: Resource Timing, {devtools} and the server log ({} requests) {}\n",
            rec.protocol,
            rec.server_requests.len(),
            if proto_ok { "agree" } else { "DISAGREE" }
        )
    } else {
        format!(
            "  protocol {}: {} viewpoints only (Resource Timing and {devtools}) {}\n",
            rec.protocol,
            rec.viewpoints,
            if proto_ok { "agree" } else { "DISAGREE" }
        )
    }
}

/// What the link achieved against its model, and its gate.
fn describe_link(rec: &RunRecord) -> String {
    let mut s = String::new();
    if let Some(l) = &rec.link {
        let gate = rec
            .link_stats
            .as_ref()
            .and_then(|e| e.self_check.as_ref())
            .map_or("no self-check", |c| {
                if c.ok {
                    "delivered the profile"
                } else {
                    "FAILED its gate"
                }
            });
        s.push_str(&format!(
            "  link ({gate}): RTT {:.2} ms achieved / {:.2} ms intended by the model · {} B up / {} B down, {} / {} packets, emulator drops {} / {}, lateness p99 {:.0} / {:.0} µs{}\n",
            l.achieved_rtt_ms,
            l.model_rtt_ms,
            l.bytes_up,
            l.bytes_down,
            l.packets_up,
            l.packets_down,
            l.drops_up,
            l.drops_down,
            l.lateness_p99_up_us,
            l.lateness_p99_down_us,
            if l.self_check_warnings.is_empty() { String::new() } else { format!(" · {}", l.self_check_warnings.join("; ")) }
        ));
    }
    s
}

/// The server's transport, the run's overhead, the machine's contention and a trace's offer.
fn describe_machine(rec: &RunRecord) -> String {
    let f = one_decimal;
    let mut s = String::new();
    if let Some(t) = &rec.transport {
        s.push_str(&format!(
            "  server transport: {} TCP conn ({} retransmits), {} QUIC conn ({} lost packets, {} congestion events), RTT {} ms\n",
            t.tcp_connections,
            t.tcp_retransmits,
            t.quic_connections,
            t.quic_lost_packets,
            t.quic_congestion_events,
            f(t.server_rtt_ms)
        ));
    }
    s.push_str(&format!(
        "  overhead: launch {:.0} ms, settle {:.0} ms{}, teardown {:.0} ms, whole run {:.0} ms · load {:.2}, steal {:.1} ms\n",
        rec.overhead.launch_ms,
        rec.overhead.settle_ms,
        if rec.overhead.settled { "" } else { " (cap hit)" },
        rec.overhead.teardown_ms,
        rec.wall_ms,
        rec.machine.load1,
        rec.machine.steal_ms
    ));
    if let Some(c) = &rec.contention {
        s.push_str(&format!("  contention: {}\n", c.describe()));
        if let Some(p) = crate::evidence::cpu_pace::of(c, rec.device_cap()) {
            s.push_str(&format!("  pace: {} for the whole load\n", p.describe()));
        }
    }
    if let Some(b) = &rec.cpu_benchmarks {
        s.push_str(&format!(
            "  device {} ({:.1}× target): native {} · page benchmark {} ms\n",
            rec.device,
            b.target_slowdown,
            b.native.map_or("—".into(), |n| format!(
                "{:.2}× (longest stall {:.1} ms)",
                n.achieved_slowdown, n.longest_stall_ms
            )),
            f(b.js_ms)
        ));
    }
    if let Some(t) = &rec.trace {
        let dir = |name: &str, o: Option<crate::config::capacity::Offered>| {
            o.map(|o| format!("{name} {:.2} Mbit/s from {:.0} ms", o.mbit, o.offset_ms))
        };
        let parts: Vec<String> = [dir("down", t.down), dir("up", t.up)]
            .into_iter()
            .flatten()
            .collect();
        s.push_str(&format!("  trace offered: {}\n", parts.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::identity::BrowserId;
    use crate::config::protocol::{H3Mode, Protocol};
    use crate::evidence::metrics::tests::fixture;
    use crate::evidence::run_record::BrowserOverhead;
    use crate::evidence::validate::tests::{manifest_of, server_view};
    use crate::evidence::validate::{LoadEnd, Outcome};
    use crate::link::DirectionStats;
    use crate::servers::ServerEvidence;
    use crate::support::sysinfo::MachineSample;

    /// One direction of a link that delivered a 40 ms RTT profile exactly.
    fn quiet(n: u64) -> DirectionStats {
        DirectionStats {
            packets_in: n,
            packets_out: n,
            bytes_in: n * 1000,
            mean_intended_ms: 20.0,
            mean_delay_ms: 20.02,
            ..DirectionStats::default()
        }
    }

    fn profile() -> Profile {
        Profile::simple("wired", 40.0, 0.0, 0.0)
    }

    /// The parts of a recorded h2 page10 load on a quiet link, with the server's log agreeing.
    fn parts(spec: &RunSpec) -> RunParts {
        let obs = fixture("h2-page10");
        RunParts {
            lookups: vec![],
            started_at: "2026-12-01T00:00:00.000Z".into(),
            url: page_url(443, &spec.manifest),
            server: ServerEvidence {
                views: Some(server_view(&obs, "h2")),
                ..ServerEvidence::default()
            },
            observation: obs,
            end: LoadEnd::Completed,
            browser: BrowserId::default(),
            browser_version: Some("Chromium 156".into()),
            browser_confinement: None,
            overhead: BrowserOverhead {
                launch_ms: 300.0,
                ..BrowserOverhead::default()
            },
            server_exit: None,
            link_stats: Ok(LinkStats {
                profile: "wired".into(),
                elapsed_s: 1.0,
                up: quiet(1000),
                down: quiet(1000),
                ..LinkStats::default()
            }),
            counters_before: Default::default(),
            counters_after: Default::default(),
            machine: MachineSample::default(),
            contention: Default::default(),
            wall_ms: 1234.0,
            capture: Default::default(),
        }
    }

    fn spec(variant: Variant) -> RunSpec {
        let manifest = manifest_of(&fixture("h2-page10"), "page10");
        RunSpec::single(
            "wired-page10-h2-r1",
            &profile(),
            &manifest,
            variant,
            &ServerId::new("embedded"),
            Duration::from_secs(60),
        )
    }

    fn h2() -> Variant {
        Variant::new(Protocol::H2, H3Mode::Forced)
    }

    #[test]
    fn a_recorded_load_on_a_quiet_link_is_a_valid_record_with_three_viewpoints() {
        let s = spec(h2());
        let rec = assemble(&s, parts(&s));
        assert_eq!(rec.outcome, Outcome::Valid, "{:?}", rec.reasons);
        assert_eq!(rec.viewpoints, 3);
        assert_eq!(
            (rec.id.as_str(), rec.variant, rec.server.as_str()),
            ("wired-page10-h2-r1", Variant::H2, "embedded")
        );
        assert_eq!(rec.browser, BrowserId::default());
        assert_eq!(rec.url, "https://pagebench.test/page10/index.html");
        assert!(rec.metrics.completion_ms.is_some());
        assert_eq!(rec.resources.len(), rec.observation.resources.len());
        let link = rec.link.as_ref().unwrap();
        assert_eq!((link.packets_up, link.bytes_down), (1000, 1_000_000));
        assert!(rec.link_stats.unwrap().self_check.unwrap().ok);
        assert_eq!((rec.wall_ms, rec.overhead.launch_ms), (1234.0, 300.0));
        assert_eq!(rec.server_requests.len(), 11);
    }

    #[test]
    fn without_a_server_log_the_record_says_it_had_two_viewpoints() {
        let s = spec(h2());
        let mut p = parts(&s);
        p.server.views = None;
        let rec = assemble(&s, p);
        assert_eq!(rec.outcome, Outcome::Valid, "{:?}", rec.reasons);
        assert_eq!(rec.viewpoints, 2);
        assert!(
            rec.warnings[0].starts_with("2 viewpoints"),
            "{:?}",
            rec.warnings
        );
    }

    #[test]
    fn a_stopped_link_or_server_makes_a_measurement_failure() {
        let s = spec(h2());
        let mut p = parts(&s);
        p.link_stats = Err(anyhow::anyhow!("the emulator is gone"));
        let rec = assemble(&s, p);
        assert_eq!(rec.outcome, Outcome::Invalid);
        assert_eq!(rec.reasons[0].kind, ReasonKind::Link);
        assert!(rec.reasons[0].detail.contains("the emulator is gone"));
        assert!(rec.link.is_none() && rec.is_measurement_failure());
        let mut p = parts(&s);
        p.server_exit = Some("caddy exited (signal 9)".into());
        let rec = assemble(&s, p);
        assert_eq!(rec.reasons[0].kind, ReasonKind::Server);
        assert!(rec.is_measurement_failure());
    }

    #[test]
    fn a_primed_load_that_opened_tcp_is_not_primed() {
        let s = spec(Variant::new(Protocol::H3, H3Mode::Primed));
        let mut p = parts(&s);
        p.counters_before.0.insert("Tcp.ActiveOpens".into(), 5);
        p.counters_after.0.insert("Tcp.ActiveOpens".into(), 7);
        let rec = assemble(&s, p);
        assert_eq!(rec.variant, "h3-primed");
        assert!(
            rec.reasons.iter().any(|r| r.kind == ReasonKind::NotPrimed
                && r.detail.contains("opened 2 TCP connection(s)")),
            "{:?}",
            rec.reasons
        );
        assert_eq!(rec.snmp.unwrap().client.tcp_active_opens, 2);
    }
}
