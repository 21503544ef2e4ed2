//! The run record: everything one page load produced — identity, outcome, metrics, and the raw
//! evidence (timing entries, CDP events, server log, emulator counters) — and its flat forms for
//! `runs.csv` and `resources.csv`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::browser::launch::BrowserOverhead;
use crate::metrics::{Observation, ResourceMetrics, RunMetrics};
use crate::netem::{LinkStats, SelfCheck};
use crate::server::ConnectionStats;
use crate::sysinfo::MachineSample;
use crate::validate::{self, LoadEnd, Outcome, Reason, ServerView};

/// Version of the record and column layout below; a results directory written with another one
/// is not resumed (its rows would not line up).
pub const RECORD_FORMAT: u32 = 2;

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

/// The server's transport figures for one run, summed over its connections.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TransportSummary {
    pub tcp_connections: u64,
    pub tcp_retransmits: u64,
    pub quic_connections: u64,
    pub quic_lost_packets: u64,
    pub quic_congestion_events: u64,
    /// Smoothed RTT the server measured (median over connections), ms.
    pub server_rtt_ms: Option<f64>,
    /// Congestion window at the end (largest over connections), bytes.
    pub cwnd_bytes: Option<u64>,
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
    pub protocol: String,
    pub h3_mode: Option<String>,
    /// Series name: h1, h2, h3, h3-primed.
    pub variant: String,
    pub workload: String,
    pub profile: String,
    pub server: String,
    pub phase: String,
    pub round: u32,
    pub position: u32,
    pub url: String,
    pub outcome: Outcome,
    pub reasons: Vec<Reason>,
    pub warnings: Vec<String>,
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
    pub link: Option<LinkSummary>,
    pub transport: Option<TransportSummary>,
    /// UDP/TCP counter deltas of the namespaces (`/proc/net/snmp`), by namespace then counter.
    #[serde(default)]
    pub snmp: Value,
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
}

fn first_attempt() -> u32 {
    1
}

fn three_viewpoints() -> u8 {
    3
}

impl RunRecord {
    /// Whether this invalid run failed as a measurement (link, server, browser crash): the
    /// matrix runs it again.
    pub fn is_measurement_failure(&self) -> bool {
        self.outcome == Outcome::Invalid && validate::is_measurement_failure(&self.reasons)
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{:.3}", x)).unwrap_or_default()
}

fn opt_u(v: Option<usize>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// Columns of `runs.csv`, in order.
pub const RUN_COLUMNS: &[&str] = &[
    "run_id",
    "plan_id",
    "attempt",
    "profile",
    "workload",
    "server",
    "phase",
    "round",
    "position",
    "protocol",
    "h3_mode",
    "variant",
    "outcome",
    "invalid_kinds",
    "measurement_failure",
    "invalid_reason",
    "viewpoints",
    "completion_ms",
    "load_event_end_ms",
    "queueing_median_ms",
    "queueing_p95_ms",
    "ttfb_median_ms",
    "connect_ms",
    "handshake_rtts",
    "onwire_mid",
    "onwire_peak",
    "resources",
    "connections",
    "goodput_mbit",
    "transfer_ms",
    "bytes_up",
    "bytes_down",
    "packets_up",
    "packets_down",
    "emu_drops_up",
    "emu_drops_down",
    "lateness_p99_up_us",
    "lateness_p99_down_us",
    "model_rtt_ms",
    "achieved_rtt_ms",
    "offered_rtt_ms",
    "achieved_loss_up_pct",
    "achieved_loss_down_pct",
    "tun_tx_dropped",
    "tcp_retransmits",
    "quic_lost_packets",
    "quic_congestion_events",
    "server_rtt_ms",
    "cwnd_bytes",
    "load1",
    "steal_ms",
    "steal_pct",
    "launch_ms",
    "settle_ms",
    "teardown_ms",
    "wall_ms",
    "started_at",
    "warnings",
];

impl RunRecord {
    /// The `runs.csv` row (same order as [`RUN_COLUMNS`]).
    pub fn csv_row(&self) -> Vec<String> {
        let m = &self.metrics;
        let l = self.link.clone().unwrap_or_default();
        let t = self.transport.clone().unwrap_or_default();
        let has_link = self.link.is_some();
        let has_t = self.transport.is_some();
        let lu = |v: u64| {
            if has_link {
                v.to_string()
            } else {
                String::new()
            }
        };
        let lf = |v: f64| {
            if has_link {
                format!("{v:.3}")
            } else {
                String::new()
            }
        };
        let tu = |v: u64| if has_t { v.to_string() } else { String::new() };
        let mut warnings = self.warnings.clone();
        warnings.extend(l.self_check_warnings.iter().cloned());
        // Each kind once, in the order first seen (two checks can report the same kind).
        let mut kinds: Vec<&str> = Vec::new();
        for r in &self.reasons {
            if !kinds.contains(&r.kind.name()) {
                kinds.push(r.kind.name());
            }
        }
        vec![
            self.id.clone(),
            self.plan_id.clone(),
            self.attempt.to_string(),
            self.profile.clone(),
            self.workload.clone(),
            self.server.clone(),
            self.phase.clone(),
            self.round.to_string(),
            self.position.to_string(),
            self.protocol.clone(),
            self.h3_mode.clone().unwrap_or_default(),
            self.variant.clone(),
            self.outcome.name().to_string(),
            if self.outcome == Outcome::Invalid {
                kinds.join(" ")
            } else {
                String::new()
            },
            self.is_measurement_failure().to_string(),
            validate::reason_text(&self.reasons),
            self.viewpoints.to_string(),
            opt(m.completion_ms),
            opt(m.load_event_end_ms),
            opt(m.queueing_median_ms),
            opt(m.queueing_p95_ms),
            opt(m.ttfb_median_ms),
            opt(m.nav_connect_ms),
            opt(m.handshake_rtts),
            opt_u(m.onwire_mid),
            opt_u(m.onwire_peak),
            m.resources.to_string(),
            m.connections.to_string(),
            opt(m.goodput_mbit),
            opt(m.transfer_ms),
            lu(l.bytes_up),
            lu(l.bytes_down),
            lu(l.packets_up),
            lu(l.packets_down),
            lu(l.drops_up),
            lu(l.drops_down),
            lf(l.lateness_p99_up_us),
            lf(l.lateness_p99_down_us),
            lf(l.model_rtt_ms),
            lf(l.achieved_rtt_ms),
            opt(l.offered_rtt_ms),
            lf(l.achieved_loss_up_pct),
            lf(l.achieved_loss_down_pct),
            lu(l.tun_tx_dropped),
            tu(t.tcp_retransmits),
            tu(t.quic_lost_packets),
            tu(t.quic_congestion_events),
            opt(t.server_rtt_ms),
            t.cwnd_bytes.map(|c| c.to_string()).unwrap_or_default(),
            format!("{:.2}", self.machine.load1),
            format!("{:.1}", self.machine.steal_ms),
            format!("{:.3}", self.machine.steal_pct),
            format!("{:.1}", self.overhead.launch_ms),
            format!("{:.1}", self.overhead.settle_ms),
            format!("{:.1}", self.overhead.teardown_ms),
            format!("{:.1}", self.wall_ms),
            self.started_at.clone(),
            warnings.join("; "),
        ]
    }

    /// The `resources.csv` rows of this run (same order as [`RESOURCE_COLUMNS`]).
    pub fn resource_rows(&self) -> Vec<Vec<String>> {
        self.resources
            .iter()
            .map(|r| {
                vec![
                    self.id.clone(),
                    self.profile.clone(),
                    self.workload.clone(),
                    self.server.clone(),
                    self.variant.clone(),
                    self.phase.clone(),
                    self.outcome.name().to_string(),
                    r.path.clone(),
                    r.initiator.clone(),
                    r.protocol.clone(),
                    format!("{:.3}", r.start_ms),
                    format!("{:.3}", r.request_start_ms),
                    format!("{:.3}", r.response_start_ms),
                    format!("{:.3}", r.response_end_ms),
                    format!("{:.3}", r.queueing_ms),
                    opt(r.connect_ms),
                    format!("{:.3}", r.ttfb_ms),
                    format!("{:.3}", r.download_ms),
                    format!("{}", r.encoded_body_size as u64),
                    format!("{}", r.transfer_size as u64),
                    r.status.to_string(),
                    r.connection_id.map(|c| c.to_string()).unwrap_or_default(),
                    r.connection_reused
                        .map(|c| c.to_string())
                        .unwrap_or_default(),
                ]
            })
            .collect()
    }
}

/// Columns of `resources.csv`, in order.
pub const RESOURCE_COLUMNS: &[&str] = &[
    "run_id",
    "profile",
    "workload",
    "server",
    "variant",
    "phase",
    "outcome",
    "path",
    "initiator",
    "protocol",
    "start_ms",
    "request_start_ms",
    "response_start_ms",
    "response_end_ms",
    "queueing_ms",
    "connect_ms",
    "ttfb_ms",
    "download_ms",
    "encoded_body_size",
    "transfer_size",
    "status",
    "connection_id",
    "connection_reused",
];
