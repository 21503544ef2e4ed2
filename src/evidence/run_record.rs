//! The run record: everything one page load produced — identity, outcome, metrics, and the raw
//! evidence (timing entries, CDP events, server log, emulator counters) — and its flat forms for
//! `runs.csv` and `resources.csv`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::identity::{BrowserId, Phase, ServerId, View};
use crate::config::protocol::{H3Mode, Protocol, Variant};
use crate::embedded_server::ConnectionStats;
use crate::evidence::metrics::{Observation, ResourceMetrics, RunMetrics};
use crate::evidence::validate::{self, LoadEnd, Outcome, Reason};
pub use crate::evidence::visual::{FrameRef, VisualEvidence};
use crate::link::{LinkStats, SelfCheck};
use crate::measure::browser::sandbox::Confinement;
use crate::servers::{ServerView, TransportSummary};
use crate::support::sysinfo::MachineSample;

/// Version of the record and column layout below; a results directory written with another one
/// is not resumed (its rows would not line up).
pub const RECORD_FORMAT: u32 = 4;

/// The id of attempt `attempt` (1-based) of planned run `plan_id`: the plan id itself for the
/// first, `<plan_id>.a<N>` for retries.
pub fn attempt_id(plan_id: &str, attempt: u32) -> String {
    if attempt <= 1 {
        plan_id.to_string()
    } else {
        format!("{plan_id}.a{attempt}")
    }
}

/// The emulator's figures for one run, flattened for the CSV (the full counters and the
/// self-check stay in [`LinkEvidence`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkSummary {
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub packets_up: u64,
    pub packets_down: u64,
    /// Drops by the emulator (loss + queue + not-for-peer), per direction.
    pub drops_up: u64,
    pub drops_down: u64,
    pub lateness_p99_up_us: f64,
    pub lateness_p99_down_us: f64,
    /// Mean delay the link model intended for this run's packets, both directions summed.
    #[serde(default)]
    pub model_rtt_ms: f64,
    /// Mean delay the packets really got, both directions summed.
    #[serde(default)]
    pub achieved_rtt_ms: f64,
    /// Mean RTT the link offered over the run, whatever the traffic (the profile's, on average).
    #[serde(default)]
    pub offered_rtt_ms: Option<f64>,
    #[serde(alias = "loss_achieved_up_pct")]
    pub achieved_loss_up_pct: f64,
    #[serde(alias = "loss_achieved_down_pct")]
    pub achieved_loss_down_pct: f64,
    /// Packets the kernel dropped in the TUN queues (a stalled emulator).
    pub tun_tx_dropped: u64,
    /// The self-check's warnings (CPU steal); its faults are invalid reasons of kind `link`.
    pub self_check_warnings: Vec<String>,
}

/// The link's full evidence for one run: the emulator's counters (none when they could not be
/// read) and the self-check that gates the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkEvidence {
    pub stats: Option<LinkStats>,
    pub self_check: Option<SelfCheck>,
}

/// One finished run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// Unique per attempt (see [`attempt_id`]).
    pub id: String,
    /// The planned run this is an attempt of, and which attempt (1 = the first).
    #[serde(default)]
    pub plan_id: String,
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    pub started_at: String,
    pub protocol: Protocol,
    pub h3_mode: Option<H3Mode>,
    /// The series: h1, h2, h3, h3-primed.
    #[serde(with = "crate::config::protocol::variant_name")]
    pub variant: Variant,
    pub workload: String,
    pub profile: String,
    pub server: ServerId,
    /// The engine that loaded the page (records from before there was a choice: Chromium).
    #[serde(default)]
    pub browser: BrowserId,
    /// The engine's version as it reported it (`Chromium 156.0.…`, `Firefox 153.8.0esr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_version: Option<String>,
    /// Who the browser's processes ran as and whether its sandbox was on, read from /proc
    /// after it settled (None: it never started, or a record from before this was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_confinement: Option<Confinement>,
    /// What the engine can tell of a run (records from before it was kept: not said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_tells: Option<crate::evidence::engine_tells::EngineTells>,
    /// Each name the browser asked pagebench's resolver for (`--dns resolver`; empty: no
    /// lookup was made, names came from a hosts file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lookups: Vec<crate::evidence::lookups::LookupRecord>,
    /// How the browser came to use HTTP/3 (h3 runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h3_hint: Option<crate::evidence::lookups::H3Hint>,
    /// A first visit, or a repeat view (records from before there was a choice: first).
    #[serde(default)]
    pub view: View,
    /// The CPU the whole browser got (records from before there was a choice: desktop).
    #[serde(default)]
    pub device: crate::config::device::DeviceId,
    /// What the device achieved: the CPU benchmarks timed with the run (devices compared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_benchmarks: Option<crate::evidence::cpu_benchmarks::CpuBenchmarks>,
    pub phase: Phase,
    pub round: u32,
    pub position: u32,
    pub url: String,
    pub outcome: Outcome,
    pub reasons: Vec<Reason>,
    pub warnings: Vec<String>,
    /// What the browser asked for on its own, not the page (a favicon when the page names no
    /// icon), by manifest name: answered (from the archive if recorded, else 404) and left out
    /// of validation (`validate::Verdict::browser_initiated`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub browser_initiated: Vec<String>,
    /// A replayed site at its recorded distances (`--distances recorded`): each origin's
    /// recorded round trip and the one the link gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site_distances: Option<Vec<crate::config::site_archive::distances::AppliedDistance>>,
    /// A replayed site: how close this load came to the recording's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_fidelity: Option<crate::evidence::fidelity::ReplayFidelity>,
    /// How many viewpoints cross-checked the protocol and the files: 3 (Resource Timing, CDP
    /// and the server's log) or 2 when the server keeps no log pagebench can read.
    #[serde(default = "three_viewpoints")]
    pub viewpoints: u8,
    pub end: LoadEnd,
    pub metrics: RunMetrics,
    pub resources: Vec<ResourceMetrics>,
    pub overhead: BrowserOverhead,
    /// Whole run, launch to teardown, ms.
    pub wall_ms: f64,
    pub machine: MachineSample,
    /// Each side's CPU time and run-queue wait and everything else's CPU time during the
    /// load (absent in records from before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<crate::support::contention::Contention>,
    /// A trace profile's: where the run started in its traces and what they offered during
    /// the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::config::capacity::TraceWindow>,
    pub link: Option<LinkSummary>,
    pub transport: Option<TransportSummary>,
    /// UDP/TCP counter deltas of the namespaces (`/proc/net/snmp`), by namespace then counter.
    #[serde(default)]
    pub snmp: Option<crate::support::snmp::NamespaceDeltas>,
    pub server_requests: Vec<ServerView>,
    /// Raw evidence.
    pub observation: Observation,
    #[serde(default)]
    pub link_stats: Option<LinkEvidence>,
    /// The server's per-connection transport statistics (TCP_INFO, QUIC); None when the
    /// server gives none (reference servers).
    #[serde(default)]
    pub server_transport: Option<Vec<ConnectionStats>>,
    /// The server's own log lines of the run, verbatim (each server's format; read only by a
    /// person: the typed reading of them is `server_requests`).
    pub server_log: Value,
    /// What the screencast showed (`--visual` runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visual: Option<VisualEvidence>,
    /// The frames' JPEG images, in the order of `visual.frames`: written by the store beside
    /// the record, not into it.
    #[serde(skip)]
    pub frame_images: Vec<Vec<u8>>,
    /// Head-of-line blocking measured from the link's packets (records from before the
    /// analysis: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hol: Option<crate::packets::HolReport>,
    /// The server's responses as the wire showed them: every h2/h3 stream's priority and bytes
    /// over time, and the order check (records from before the analysis: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<crate::packets::WireEvidence>,
    /// The lane it ran on when its plan ran on several (`--jobs`; None: a serial walk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<LaneRun>,
    /// The seed of the link's random draws during the run (loss, jitter, outages): the same
    /// planned attempt meets the same draws in any walk (None: the link's stream went on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_draws: Option<u64>,
    /// Where the headline went, in round trips: the critical path and its terms (records from
    /// before the accounting, or a run without a navigation: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trips: Option<crate::evidence::round_trips::RoundTrips>,
    /// Each paint's headline in round trips along its render path (records from before, or
    /// without paint entries: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paint_round_trips: Option<crate::evidence::paint_round_trips::PaintRoundTrips>,
    /// What first and largest contentful paint waited for: each request on their render paths
    /// with its priorities and what the server sent ahead of it (records from before: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render_paths: Option<crate::evidence::render_path::RenderPaths>,
    /// Every connection's TLS handshake, from the link's packets: resumed, 0-RTT offered and
    /// accepted, requests sent in 0-RTT (records from before the analysis: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshakes: Option<crate::packets::handshake::Handshakes>,
    /// What the profile's outages, NAT rebinding and competing flows did to the run (profiles
    /// with them only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<crate::evidence::disruption::Disruption>,
    /// The files `--capture` kept, in `captures/<run id>/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub captures: Vec<crate::packets::CaptureFileRef>,
    /// Their bytes: written by the store beside the record, not into it.
    #[serde(skip)]
    pub capture_files: Vec<crate::packets::CaptureFile>,
}

fn first_attempt() -> u32 {
    1
}

fn three_viewpoints() -> u8 {
    3
}

/// Where a run of a plan walked on concurrent lanes (`--jobs`) ran: its lane, and whether its
/// round shared the machine with other lanes' (else it had it alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneRun {
    pub lane: u32,
    pub shared: bool,
}

impl RunRecord {
    /// The CPU cap of the run's device (None: uncapped, or a device this version does not
    /// know).
    pub fn device_cap(&self) -> Option<crate::support::cpu_cap::CpuShare> {
        self.device.device().ok().and_then(|d| d.cap())
    }

    /// Whether this invalid run failed as a measurement (link, server, browser crash): the
    /// matrix runs it again.
    pub fn is_measurement_failure(&self) -> bool {
        self.outcome == Outcome::Invalid && validate::is_measurement_failure(&self.reasons)
    }
}

/// Timings of the browser's life, reported per run (the per-run overhead).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BrowserOverhead {
    /// Spawn → DevTools pipe answers.
    pub launch_ms: f64,
    /// Waiting for the start-up CPU burst to end (capped by `settle_max`).
    pub settle_ms: f64,
    /// Whether the settle wait ended because CPU use dropped (false: the cap was hit).
    pub settled: bool,
    /// CPU use of the browser's processes in the last settle sample (cores).
    pub settle_cpu: f64,
    /// Browser.close → process tree gone, temp directory removed.
    pub teardown_ms: f64,
    /// A repeat view's first navigation, connections closed and cache cleared (0: a first visit).
    #[serde(default)]
    pub first_view_ms: f64,
    /// How long the run waited for the browser to be launched and settled: all of it when it
    /// was launched at the run's start, what was left when it was launched in the background
    /// after the previous run's load (`prelaunched`).
    #[serde(default)]
    pub wait_ms: f64,
    /// Launched after the previous run's measured window, during that run's teardown.
    #[serde(default)]
    pub prelaunched: bool,
}

#[cfg(test)]
impl RunRecord {
    /// A valid first attempt `id` with no figures and no evidence: the base unit tests build on.
    pub fn fixture(id: &str) -> RunRecord {
        RunRecord {
            id: id.into(),
            plan_id: id.into(),
            attempt: 1,
            started_at: "2026-12-01T00:00:00Z".into(),
            protocol: Protocol::H2,
            h3_mode: None,
            variant: Variant::H2,
            workload: "page10".into(),
            profile: "wired".into(),
            server: "embedded".into(),
            browser: BrowserId::default(),
            browser_version: None,
            browser_confinement: None,
            engine_tells: None,
            lookups: vec![],
            h3_hint: None,
            view: View::First,
            device: Default::default(),
            cpu_benchmarks: None,
            phase: Phase::Measure,
            round: 1,
            position: 1,
            url: String::new(),
            outcome: Outcome::Valid,
            reasons: vec![],
            warnings: vec![],
            browser_initiated: vec![],
            site_distances: None,
            replay_fidelity: None,
            viewpoints: 3,
            end: LoadEnd::Completed,
            metrics: RunMetrics::default(),
            resources: vec![],
            overhead: BrowserOverhead::default(),
            wall_ms: 0.0,
            machine: MachineSample::default(),
            contention: None,
            trace: None,
            link: None,
            transport: None,
            snmp: None,
            server_requests: vec![],
            observation: Observation::default(),
            link_stats: None,
            server_transport: None,
            server_log: Value::Null,
            visual: None,
            frame_images: vec![],
            hol: None,
            wire: None,
            lane: None,
            link_draws: None,
            round_trips: None,
            paint_round_trips: None,
            render_paths: None,
            handshakes: None,
            disruption: None,
            captures: vec![],
            capture_files: vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_from_before_the_browser_field_reads_as_chromium() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("results/example/runs/mobile-download-r01-h1.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let old: Value = serde_json::from_str(&text).unwrap();
        assert!(
            old.get("browser").is_none(),
            "the example predates the field"
        );
        let rec: RunRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(rec.browser, BrowserId::default());
        assert_eq!(rec.server, ServerId::new("embedded"));
        // Written again, it names its browser and keeps the server's bare name.
        let again = serde_json::to_value(&rec).unwrap();
        assert_eq!(again["browser"], "chromium");
        assert_eq!(again["server"], old["server"]);
    }
}
