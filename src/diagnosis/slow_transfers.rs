//! Diagnostics (pure analysis of a results directory): why a download or upload was slow.
//! For each transfer series: goodput, goodput × RTT (the window that was effectively in flight),
//! emulator drops against transport retransmissions, and UDP buffer overflows in each namespace.
//! Each finding is one plain sentence naming the knob that addresses it.
//!
//! Window-limited means the sender never had more than a fixed window in flight: the effective
//! window sits far below what the path carried (the link's rate × RTT, or the best goodput seen
//! in the same cell), no loss explains it, and it is near a power of two — or it matches a
//! window the server was configured with (`h3_send_buffer` for h3 downloads; the h2/h3 receive
//! windows for uploads).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::config::identity::{BrowserId, ServerId};
use crate::config::protocol::{Protocol, Variant};
use crate::evidence::cpu_pace::{Pace, Pacer};
use crate::evidence::run_record::RunRecord;
use crate::evidence::validate::Outcome;
use crate::results::store::{read_meta, read_record, Meta};
use crate::results::summary::{read_runs, RunRow, SeriesKey};
use crate::support::snmp::NamespaceDeltas;

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    WindowLimited,
    UdpReceiveBufferOverflow,
    UdpSendBufferOverflow,
    RetransmissionsBeyondLoss,
    LossLimited,
    /// TCP left slow start without a loss (HyStart's delay signal) and never caught up.
    SlowStartExit,
    /// A thread of the browser ran the whole transfer, or the whole browser used its device's
    /// cap: the browser's CPU set the pace.
    BrowserCpuLimited,
    /// A thread of pagebench's own (the embedded server, the link emulator) ran the whole
    /// transfer, or every CPU of the machine was busy: the series measures pagebench, not the
    /// protocol.
    HarnessLimited,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: FindingKind,
    /// `profile/workload/server/variant`.
    pub series: String,
    /// Runs of the series that show it, of the valid transfer runs.
    pub runs: usize,
    pub of: usize,
    /// One plain sentence, with the knob.
    pub sentence: String,
}

/// Per-series transfer figures (medians over valid runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferRow {
    pub series: String,
    pub profile: String,
    pub workload: String,
    pub server: ServerId,
    #[serde(default)]
    pub browser: BrowserId,
    #[serde(default)]
    pub view: crate::config::identity::View,
    #[serde(with = "crate::config::protocol::variant_name")]
    pub variant: Variant,
    pub runs: usize,
    pub goodput_mbit: Option<f64>,
    pub rtt_ms: f64,
    /// goodput × RTT, bytes.
    pub effective_window_bytes: Option<f64>,
    /// Rate limit × RTT of the data direction, or the best goodput of the cell × RTT.
    pub path_window_bytes: Option<f64>,
    pub emulator_loss_drops: f64,
    pub tcp_retransmits: f64,
    pub quic_lost_packets: f64,
    pub udp_rcvbuf_errors_server: f64,
    pub udp_rcvbuf_errors_client: f64,
    pub udp_sndbuf_errors: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub transfers: Vec<TransferRow>,
    pub findings: Vec<Finding>,
    /// Every significant comparison, term by term of its round-trip accounting
    /// (`diagnosis::explain`; none without the statistics or the accounting).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<crate::diagnosis::explain::Explanation>,
}

/// The power of two nearest to `bytes` and the ratio to it, for windows of 4 KiB – 64 MiB.
pub fn nearest_power_of_two(bytes: f64) -> Option<(u64, f64)> {
    if !(bytes.is_finite() && bytes > 0.0) {
        return None;
    }
    let p = 2f64.powf(bytes.log2().round());
    if !(4096.0..=67_108_864.0).contains(&p) {
        return None;
    }
    Some((p as u64, bytes / p))
}

/// The Mathis et al. bound of a loss-based controller's rate: ≈ 1.22 × MSS / (RTT × √p),
/// in Mbit/s, for a 1448-byte MSS.
pub fn mathis_mbit(rtt_ms: f64, loss_pct: f64) -> f64 {
    1.22 * 1448.0 * 8.0 / (rtt_ms / 1e3 * (loss_pct / 100.0).sqrt()) / 1e6
}

/// `65536` → `64 KiB`.
pub fn fmt_bytes(b: f64) -> String {
    if b >= 1024.0 * 1024.0 {
        format!("{:.3} MiB", b / 1024.0 / 1024.0).replace(".000", "")
    } else if b >= 1024.0 {
        format!("{:.0} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    crate::support::stats::median(&v).ok()
}

/// A window that bounds one stream's bytes in flight.
#[derive(Debug, Clone, PartialEq)]
struct Window {
    bytes: u64,
    /// The pagebench knob that sets it.
    flag: String,
    /// The server's own name for it and how it bounds the transfer (reference servers).
    setting: Option<String>,
}

/// A configured window that bounds this transfer: the embedded server's applied knobs, or the
/// windows a reference server's generated configuration sets.
fn configured_window(
    meta: &Meta,
    server: &ServerId,
    protocol: Protocol,
    upload: bool,
) -> Option<Window> {
    let d = meta.servers_applied.get(server)?;
    let Some(knobs) = d.applied_knobs() else {
        return d
            .windows
            .iter()
            .find(|w| w.protocol == protocol && w.upload == upload)
            .map(|w| Window {
                bytes: w.bytes,
                flag: w.knob.clone(),
                setting: Some(w.setting.clone()),
            });
    };
    let (bytes, flag) = match (protocol, upload) {
        (Protocol::H3, false) => (knobs.h3_send_buffer?, "--h3-send-buffer"),
        (Protocol::H3, true) => (knobs.h3_stream_receive_window, "--h3-stream-receive-window"),
        (Protocol::H2, true) => (knobs.h2_initial_stream_window, "--h2-initial-stream-window"),
        _ => return None,
    };
    Some(Window {
        bytes,
        flag: flag.into(),
        setting: None,
    })
}

/// What the server's TCP_INFO says about the connection that carried the transfer (the one
/// with the most bytes): shares of busy time limited by the receive window and by the send
/// buffer, and whether slow start ended without a loss (ssthresh set, nothing retransmitted).
#[derive(Debug, Clone, Copy, Default)]
struct TcpEvidence {
    rwnd_share: f64,
    sndbuf_share: f64,
    slow_start_exit_without_loss: bool,
    cwnd_bytes: f64,
}

/// The emulator's counters of a run, when they were read.
fn link_counters(r: &RunRecord) -> Option<&crate::link::LinkStats> {
    r.link_stats.as_ref()?.stats.as_ref()
}

fn tcp_evidence(rec: &RunRecord) -> Option<TcpEvidence> {
    let tcp = rec
        .server_transport
        .as_deref()?
        .iter()
        .filter_map(|c| c.tcp.as_ref())
        .max_by_key(|t| t.bytes_acked.unwrap_or(0) + t.bytes_received.unwrap_or(0))?;
    let busy = tcp.busy_time_us.filter(|b| *b > 0)? as f64;
    let share = |us: Option<u64>| us.unwrap_or(0) as f64 / busy;
    Some(TcpEvidence {
        rwnd_share: share(tcp.rwnd_limited_us),
        sndbuf_share: share(tcp.sndbuf_limited_us),
        // The kernel keeps ssthresh at "infinity" (2^31 − 1) until slow start ends.
        slow_start_exit_without_loss: (tcp.snd_ssthresh as f64) < 1e9 && tcp.total_retrans == 0,
        cwnd_bytes: tcp.snd_cwnd as f64 * tcp.snd_mss as f64,
    })
}

/// The namespaces' counters of a run (zero when they were not read).
fn snmp(rec: &RunRecord) -> NamespaceDeltas {
    rec.snmp.unwrap_or_default()
}

/// Analyses a results directory: each transfer series' evidence, then what it says (a window
/// held it back, a UDP buffer overflowed, losses the link did not cause, or the loss itself).
pub fn analyze(dir: &Path) -> Result<Diagnosis> {
    let meta = read_meta(dir)?;
    let rows = read_runs(dir)?;
    let mut by_series: BTreeMap<SeriesKey, Vec<&RunRow>> = BTreeMap::new();
    for r in rows.iter().filter(|r| {
        r.phase == crate::config::identity::Phase::Measure && r.outcome == Outcome::Valid
    }) {
        by_series.entry(SeriesKey::of(r)).or_default().push(r);
    }
    let best = best_goodput(&by_series);
    let mut out = Diagnosis::default();
    for (key, runs) in &by_series {
        if runs.iter().all(|r| {
            r.value(&crate::evidence::metric_registry::GOODPUT_MBIT)
                .is_none()
        }) {
            continue;
        }
        let ev = SeriesEvidence::gather(dir, &meta, key, runs, &best);
        if let Some((kind, text)) = window_finding(&meta, &ev) {
            out.findings.push(Finding {
                kind,
                series: ev.row.series.clone(),
                runs: runs.len(),
                of: runs.len(),
                sentence: format!("{}: {text}", ev.row.series),
            });
        }
        out.findings.extend(udp_findings(&ev));
        out.findings.extend(loss_finding(&ev));
        out.findings.extend(cpu_finding(&ev));
        out.transfers.push(ev.row);
    }
    // The statistics are there once a matrix ended (a directory without them: no comparison).
    if let Ok(summary) = crate::results::summary::read(dir) {
        out.differences = crate::diagnosis::explain::differences(&summary);
    }
    Ok(out)
}

/// Best goodput per (profile, workload): what the path demonstrably carried.
fn best_goodput(by_series: &BTreeMap<SeriesKey, Vec<&RunRow>>) -> BTreeMap<(String, String), f64> {
    let mut best: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (key, runs) in by_series {
        for r in runs {
            if let Some(g) = r.value(&crate::evidence::metric_registry::GOODPUT_MBIT) {
                let e = best
                    .entry((key.profile.clone(), key.workload.clone()))
                    .or_insert(0.0);
                *e = e.max(g);
            }
        }
    }
    best
}

/// What one transfer series' valid runs say, gathered once for every finding.
struct SeriesEvidence<'m> {
    row: TransferRow,
    recs: Vec<RunRecord>,
    prof: Option<&'m crate::config::profile::Profile>,
    server: &'m ServerId,
    upload: bool,
    protocol: Option<Protocol>,
    /// Goodput × RTT: the window effectively in flight.
    window: Option<f64>,
    /// What the path carried × RTT.
    path_window: Option<f64>,
    /// A lossless profile, with the emulator's counters of every run on record.
    lossless: bool,
    tcp: Vec<TcpEvidence>,
    /// The transfer's length in round trips (median).
    transfer_rtts: f64,
}

impl<'m> SeriesEvidence<'m> {
    fn gather(
        dir: &Path,
        meta: &'m Meta,
        key: &'m SeriesKey,
        runs: &[&RunRow],
        best: &BTreeMap<(String, String), f64>,
    ) -> Self {
        let prof = meta.profiles.iter().find(|p| p.name == key.profile);
        let rtt_ms = prof.map(|p| p.rtt_ms).unwrap_or(0.0);
        let recs: Vec<RunRecord> = runs
            .iter()
            .filter_map(|r| read_record(dir, &r.run_id).ok())
            .collect();
        let upload = recs
            .first()
            .map(|r| r.metrics.transfer_bytes.is_some() && r.workload.starts_with("upload"))
            .unwrap_or(false);
        let goodput = median(
            runs.iter()
                .filter_map(|r| r.value(&crate::evidence::metric_registry::GOODPUT_MBIT))
                .collect(),
        );
        let in_flight = |mbit: f64| mbit * 1e6 / 8.0 * rtt_ms / 1e3;
        let window = goodput.map(in_flight).filter(|_| rtt_ms > 0.0);
        let rate = prof.and_then(|p| if upload { p.up_mbit } else { p.down_mbit });
        // Loss explains a small window: only a lossless profile, with the emulator's counters
        // on record showing no drop, leaves a window cap as the explanation.
        let lossless = prof.is_some_and(|p| p.loss_pct == 0.0)
            && recs.iter().all(|r| link_counters(r).is_some());
        let path_rate = rate.or_else(|| {
            best.get(&(key.profile.clone(), key.workload.clone()))
                .copied()
        });
        let path_window = path_rate.map(in_flight).filter(|_| rtt_ms > 0.0);
        let transfer_rtts = median(recs.iter().filter_map(|r| r.metrics.transfer_ms).collect())
            .map(|t| if rtt_ms > 0.0 { t / rtt_ms } else { 0.0 })
            .unwrap_or(0.0);
        let row = transfer_row(key, runs.len(), &recs, goodput, rtt_ms, window, path_window);
        SeriesEvidence {
            tcp: recs.iter().filter_map(tcp_evidence).collect(),
            protocol: recs.first().map(|r| r.protocol),
            row,
            recs,
            prof,
            server: &key.server,
            upload,
            window,
            path_window,
            lossless,
            transfer_rtts,
        }
    }

    /// The median over the runs' TCP evidence of `f`.
    fn tcp_median(&self, f: &dyn Fn(&TcpEvidence) -> f64) -> f64 {
        median(self.tcp.iter().map(f).collect()).unwrap_or(0.0)
    }

    /// Lossless, and the emulator dropped nothing.
    fn nothing_lost(&self) -> bool {
        self.lossless && self.row.emulator_loss_drops == 0.0
    }

    fn carried(&self) -> String {
        self.path_window
            .map(|pw| format!("while the path carried {}", fmt_bytes(pw)))
            .unwrap_or_else(|| "far below the path's capacity".into())
    }
}

/// The series' row of the transfers table: medians per run.
fn transfer_row(
    key: &SeriesKey,
    runs: usize,
    recs: &[RunRecord],
    goodput: Option<f64>,
    rtt_ms: f64,
    window: Option<f64>,
    path_window: Option<f64>,
) -> TransferRow {
    let per_run =
        |f: &dyn Fn(&RunRecord) -> f64| median(recs.iter().map(f).collect()).unwrap_or(0.0);
    let transport = |f: &dyn Fn(&crate::servers::TransportSummary) -> u64| {
        per_run(&|r| r.transport.as_ref().map(|t| f(t) as f64).unwrap_or(0.0))
    };
    TransferRow {
        series: key.label(),
        profile: key.profile.clone(),
        workload: key.workload.clone(),
        server: key.server.clone(),
        browser: key.browser,
        view: key.view,
        variant: key.variant,
        runs,
        goodput_mbit: goodput,
        rtt_ms,
        effective_window_bytes: window,
        path_window_bytes: path_window,
        emulator_loss_drops: per_run(&|r| {
            link_counters(r)
                .map(|s| (s.up.dropped_loss + s.down.dropped_loss) as f64)
                .unwrap_or(0.0)
        }),
        tcp_retransmits: transport(&|t| t.tcp_retransmits),
        quic_lost_packets: transport(&|t| t.quic_lost_packets),
        udp_rcvbuf_errors_server: per_run(&|r| snmp(r).server.udp_rcvbuf_errors as f64),
        udp_rcvbuf_errors_client: per_run(&|r| snmp(r).client.udp_rcvbuf_errors as f64),
        udp_sndbuf_errors: per_run(&|r| snmp(r).udp_sndbuf_errors() as f64),
    }
}

/// Window-limited? Evidence first (a configured window, TCP_INFO), then the heuristic.
fn window_finding(meta: &Meta, ev: &SeriesEvidence) -> Option<(FindingKind, String)> {
    let w = ev.window?;
    let far_below = ev.path_window.map(|pw| w < 0.5 * pw).unwrap_or(false);
    // A receiver grants more only once it has consumed half its window (nghttp2, h2,
    // quinn), so an upload carries ½–1 window per round trip.
    let low = if ev.upload { 0.4 } else { 0.5 };
    let by_knob = ev
        .protocol
        .and_then(|p| configured_window(meta, ev.server, p, ev.upload))
        .filter(|k| (low..=1.2).contains(&(w / k.bytes as f64)));
    if let Some(k) = by_knob.filter(|_| far_below || ev.path_window.is_none()) {
        let text = format!(
            "window-limited — {:.1} Mbit/s × {:.0} ms RTT = {} in flight, the server's configured {} ({} {}{}), {}: raise {}.",
            ev.row.goodput_mbit.unwrap_or(0.0),
            ev.row.rtt_ms,
            fmt_bytes(w),
            if ev.upload { "receive window" } else { "per-stream send buffer" },
            k.flag,
            fmt_bytes(k.bytes as f64),
            k.setting.as_deref().map(|s| format!(": {s}")).unwrap_or_default(),
            ev.carried(),
            k.flag,
        );
        return Some((FindingKind::WindowLimited, text));
    }
    if !ev.tcp.is_empty() {
        return tcp_window_finding(ev, w);
    }
    shape_window_finding(ev, w)
}

/// TCP with its own statistics (TCP_INFO): a receive window, a send buffer, or an early end of
/// slow start.
fn tcp_window_finding(ev: &SeriesEvidence, w: f64) -> Option<(FindingKind, String)> {
    let (rwnd_share, sndbuf_share) = (
        ev.tcp_median(&|t| t.rwnd_share),
        ev.tcp_median(&|t| t.sndbuf_share),
    );
    let receiver = if ev.upload { "server" } else { "client" };
    let sender = if ev.upload { "client" } else { "server" };
    let rtt_ms = ev.row.rtt_ms;
    if rwnd_share >= 0.3 {
        return Some((FindingKind::WindowLimited, format!(
            "window-limited — the {receiver}'s TCP receive window held the sender back {:.0} % of its busy time (TCP_INFO), {:.1} Mbit/s × {rtt_ms:.0} ms = {} in flight {}: raise net.ipv4.tcp_rmem in the {receiver} namespace{}.",
            rwnd_share * 100.0,
            ev.row.goodput_mbit.unwrap_or(0.0),
            fmt_bytes(w),
            ev.carried(),
            if ev.upload && ev.protocol == Some(Protocol::H2) { " and --h2-initial-stream-window" } else { "" },
        )));
    }
    if sndbuf_share >= 0.3 {
        return Some((FindingKind::WindowLimited, format!(
            "window-limited — the {sender}'s TCP send buffer held it back {:.0} % of its busy time (TCP_INFO): raise net.ipv4.tcp_wmem in the {sender} namespace.",
            sndbuf_share * 100.0
        )));
    }
    // No window held it back. Slow start?
    let hystart_runs = ev
        .tcp
        .iter()
        .filter(|t| t.slow_start_exit_without_loss)
        .count();
    let slow = ev.path_window.map(|pw| w < 0.6 * pw).unwrap_or(false);
    (slow && hystart_runs * 2 > ev.tcp.len() && ev.nothing_lost()).then(|| {
        (FindingKind::SlowStartExit, format!(
            "slow start ended early without a loss in {hystart_runs} of {} runs (TCP_INFO: ssthresh set, nothing retransmitted — HyStart reacting to RTT jitter); cwnd ended at {}, {:.1} Mbit/s × {rtt_ms:.0} ms = {} in flight {}: a controller without delay-based slow-start exit (--tcp-congestion bbr or reno) fills the path.",
            ev.tcp.len(),
            fmt_bytes(ev.tcp_median(&|t| t.cwnd_bytes)),
            ev.row.goodput_mbit.unwrap_or(0.0),
            fmt_bytes(w),
            ev.carried(),
        ))
    })
}

/// No transport statistics (a reference server): the shape alone — far below the path, no
/// loss, near a power of two, over many round trips.
fn shape_window_finding(ev: &SeriesEvidence, w: f64) -> Option<(FindingKind, String)> {
    let (p2, _) = nearest_power_of_two(w).filter(|(_, r)| (0.9..=1.1).contains(r))?;
    let path_window = ev.path_window.unwrap_or(0.0);
    if !(w < 0.4 * path_window && ev.nothing_lost() && ev.transfer_rtts >= 30.0) {
        return None;
    }
    Some((FindingKind::WindowLimited, format!(
        "window-limited — {:.1} Mbit/s × {:.0} ms RTT = {} in flight for {:.0} round trips, near {} and far below the {} the path carried, with no loss: a fixed {} window caps each round trip ({}).",
        ev.row.goodput_mbit.unwrap_or(0.0),
        ev.row.rtt_ms,
        fmt_bytes(w),
        ev.transfer_rtts,
        fmt_bytes(p2 as f64),
        fmt_bytes(path_window),
        if ev.upload { "receive" } else { "send/flow-control" },
        match (ev.protocol, ev.upload) {
            (Some(Protocol::H3), false) => "the server's per-stream send buffer or QUIC flow control",
            (Some(Protocol::H3), true) => "the server's QUIC stream receive window",
            (Some(Protocol::H2), true) => "the server's h2 stream window",
            _ => "the server's send buffer or the client's receive window",
        }
    )))
}

/// UDP receive and send buffers that overflowed.
fn udp_findings(ev: &SeriesEvidence) -> Vec<Finding> {
    let (row, series) = (&ev.row, &ev.row.series);
    let mut out = Vec::new();
    if row.udp_rcvbuf_errors_server > 0.0 || row.udp_rcvbuf_errors_client > 0.0 {
        let n = ev
            .recs
            .iter()
            .filter(|r| snmp(r).udp_rcvbuf_errors() as f64 > 0.0)
            .count();
        let server_side = row.udp_rcvbuf_errors_server >= row.udp_rcvbuf_errors_client;
        out.push(Finding {
            kind: FindingKind::UdpReceiveBufferOverflow,
            series: series.clone(),
            runs: n,
            of: ev.recs.len(),
            sentence: format!(
                "{series}: the {} UDP receive buffer overflowed (RcvbufErrors median {:.0} per run in the {} namespace): QUIC packets were dropped by the kernel before {} read them — raise {}.",
                if server_side { "server's" } else { "client's" },
                if server_side { row.udp_rcvbuf_errors_server } else { row.udp_rcvbuf_errors_client },
                if server_side { "server" } else { "client" },
                if server_side { "the server" } else { "the browser" },
                if server_side { "--udp-recv-buffer (SO_RCVBUF)" } else { "net.core.rmem_default in the client namespace" },
            ),
        });
    }
    if row.udp_sndbuf_errors > 0.0 {
        out.push(Finding {
            kind: FindingKind::UdpSendBufferOverflow,
            series: series.clone(),
            runs: ev.recs.iter().filter(|r| snmp(r).udp_sndbuf_errors() as f64 > 0.0).count(),
            of: ev.recs.len(),
            sentence: format!(
                "{series}: UDP send buffers overflowed (SndbufErrors median {:.0} per run): raise --udp-send-buffer (SO_SNDBUF).",
                row.udp_sndbuf_errors
            ),
        });
    }
    out
}

/// Retransmissions against the emulator's drops: losses the link did not cause, or a transfer
/// held to what its loss allows.
fn loss_finding(ev: &SeriesEvidence) -> Option<Finding> {
    let (row, series) = (&ev.row, &ev.row.series);
    let loss_drops = row.emulator_loss_drops;
    let retrans = row.tcp_retransmits + row.quic_lost_packets;
    let finding = |kind, sentence| Finding {
        kind,
        series: series.clone(),
        runs: ev.recs.len(),
        of: ev.recs.len(),
        sentence,
    };
    if retrans > 0.0 && retrans > 2.0 * loss_drops + 5.0 {
        return Some(finding(FindingKind::RetransmissionsBeyondLoss, format!(
            "{series}: the transport resent {retrans:.0} packets per run (median) while the emulator dropped {loss_drops:.0}: losses the link did not cause (queue overflow, spurious timeouts or receive-buffer drops) — check the queue size of the profile and the UDP buffers (--udp-recv-buffer)."
        )));
    }
    let g = row.goodput_mbit?;
    let p = ev.prof.filter(|p| p.loss_pct > 0.0 && p.rtt_ms > 0.0)?;
    // Loss-limited: below twice the Mathis bound, which no loss-based controller escapes.
    let mathis = mathis_mbit(p.rtt_ms, p.loss_pct);
    (g < 2.0 * mathis).then(|| finding(FindingKind::LossLimited, format!(
        "{series}: loss-limited — {g:.1} Mbit/s, near the {mathis:.1} Mbit/s that {} % i.i.d. loss at {:.0} ms RTT allows a loss-based controller (Mathis bound); the emulator dropped {loss_drops:.0} packets per run and the transport resent {retrans:.0}: only a controller that does not back off on random loss (--quic-congestion bbr / --tcp-congestion bbr) or less loss changes this.",
        p.loss_pct, p.rtt_ms
    )))
}

/// A transfer at least this share of its link's rate was paced by the link, however busy
/// anyone's CPU was (a capped browser, a spinning emulator use whatever they are given).
pub const AT_LINK_RATE: f64 = 0.9;

/// Whether a transfer's `goodput` reached [`AT_LINK_RATE`] of its link's `rate` (both Mbit/s).
fn at_link_rate(goodput: Option<f64>, rate: Option<f64>) -> bool {
    matches!((goodput, rate), (Some(g), Some(r)) if r > 0.0 && g >= AT_LINK_RATE * r)
}

/// Whose CPU set the pace of most of the series' runs (`evidence::cpu_pace`), when the
/// transfer fell short of its link's rate.
fn cpu_finding(ev: &SeriesEvidence) -> Option<Finding> {
    let rate = ev
        .prof
        .and_then(|p| if ev.upload { p.up_mbit } else { p.down_mbit });
    if at_link_rate(ev.row.goodput_mbit, rate) {
        return None;
    }
    let paces: Vec<Option<Pace>> = ev
        .recs
        .iter()
        .map(|r| crate::evidence::cpu_pace::of(r.contention.as_ref()?, r.device_cap()))
        .collect();
    pace_finding(&ev.row.series, &paces)
}

/// A finding when one pacer set the pace of more than half of a series' runs (`paces`, one per
/// run, None: nothing did): the browser's CPU (a finding about the browser), or pagebench's own
/// parts or its machine (the series then measures pagebench).
fn pace_finding(series: &str, paces: &[Option<Pace>]) -> Option<Finding> {
    let paced: Vec<&Pace> = paces.iter().flatten().collect();
    let count = |p: &Pace| paced.iter().filter(|q| q.pacer == p.pacer).count();
    let most = paced.iter().max_by_key(|p| count(p))?;
    let same: Vec<&&Pace> = paced.iter().filter(|q| q.pacer == most.pacer).collect();
    if 2 * same.len() <= paces.len() {
        return None;
    }
    let typical = Pace {
        pacer: most.pacer.clone(),
        share: median(same.iter().map(|p| p.share).collect())?,
    };
    let (kind, why) = match typical.pacer {
        Pacer::Machine { .. } => (
            FindingKind::HarnessLimited,
            "the browser, the server and the link emulator share this machine's cores, which a user's device does not, so these runs measure this machine, not the protocol: run on a machine with more cores, or a slower profile",
        ),
        Pacer::Server | Pacer::Emulator => (
            FindingKind::HarnessLimited,
            "pagebench's own part set the pace, so these runs measure pagebench, not the protocol: run with --jobs 1 on a quiet machine, or a slower profile",
        ),
        Pacer::DeviceCap { .. } => (
            FindingKind::BrowserCpuLimited,
            "the device's CPU, not the link, set the pace",
        ),
        Pacer::Browser { .. } => (
            FindingKind::BrowserCpuLimited,
            "the browser's CPU, not the link, set the pace",
        ),
    };
    Some(Finding {
        kind,
        series: series.to_string(),
        runs: same.len(),
        of: paces.len(),
        sentence: format!(
            "{series}: {} for the whole transfer (median of the {} of {} runs it paced): {why}.",
            typical.describe(),
            same.len(),
            paces.len()
        ),
    })
}

/// What the differences section says before its items.
pub const DIFFERENCES_INTRO: &str = "Each significant comparison's two sides, term by term of the headline's round-trip accounting (medians over the valid runs; see \"Where the time went, in round trips\"): the terms that make most of the difference, and what remains of it.";

/// Markdown of the diagnosis (also used by the report).
pub fn markdown(d: &Diagnosis) -> String {
    let mut s = String::new();
    if !d.differences.is_empty() {
        s.push_str(&format!(
            "## Where the difference comes from\n\n{DIFFERENCES_INTRO}\n\n"
        ));
        for e in &d.differences {
            s.push_str(&format!("- `{}` {}.\n", e.label, e.sentence));
        }
        s.push_str("\n## Transfers\n\n");
    }
    if d.findings.is_empty() {
        s.push_str("No finding: no transfer was window-limited, no UDP buffer overflowed, and retransmissions match the emulator's drops.\n\n");
    } else {
        for f in &d.findings {
            s.push_str(&format!("- {} ({} of {} runs)\n", f.sentence, f.runs, f.of));
        }
        s.push('\n');
    }
    if !d.transfers.is_empty() {
        s.push_str("| series | goodput Mbit/s | RTT ms | goodput × RTT | path carried | emulator loss drops | TCP retrans | QUIC lost | UDP RcvbufErrors (server/client) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for t in &d.transfers {
            s.push_str(&format!(
                "| {} | {} | {:.0} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} / {:.0} |\n",
                t.series,
                t.goodput_mbit
                    .map(|g| format!("{g:.1}"))
                    .unwrap_or_else(|| "—".into()),
                t.rtt_ms,
                t.effective_window_bytes
                    .map(fmt_bytes)
                    .unwrap_or_else(|| "—".into()),
                t.path_window_bytes
                    .map(fmt_bytes)
                    .unwrap_or_else(|| "—".into()),
                t.emulator_loss_drops,
                t.tcp_retransmits,
                t.quic_lost_packets,
                t.udp_rcvbuf_errors_server,
                t.udp_rcvbuf_errors_client
            ));
        }
    }
    s
}

/// `pagebench diagnose DIR`: analyses, writes `diagnosis.json` and `diagnosis.md`, prints.
pub fn run(dir: &Path) -> Result<Diagnosis> {
    let d = analyze(dir).with_context(|| format!("diagnosing {}", dir.display()))?;
    crate::support::atomic::write_file(
        &dir.join("diagnosis.json"),
        (serde_json::to_string_pretty(&d)? + "\n").as_bytes(),
    )?;
    crate::support::atomic::write_file(
        &dir.join("diagnosis.md"),
        format!("# Diagnosis\n\n{}", markdown(&d)).as_bytes(),
    )?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whose_cpu_paced_most_runs_is_a_finding_and_the_harness_is_said_to_be_measured() {
        let net = |share| {
            Some(Pace {
                pacer: Pacer::Browser {
                    process: "network service".into(),
                },
                share,
            })
        };
        let server = Some(Pace {
            pacer: Pacer::Server,
            share: 0.99,
        });
        let s = "fast-1000/download100mb/embedded/h3";
        let f = pace_finding(s, &[net(0.97), net(0.95), None, net(0.99), server.clone()]).unwrap();
        assert_eq!(
            (f.kind, f.runs, f.of),
            (FindingKind::BrowserCpuLimited, 3, 5)
        );
        assert_eq!(
            f.sentence,
            "fast-1000/download100mb/embedded/h3: the browser's network service used 97 % of a \
core for the whole transfer (median of the 3 of 5 runs it paced): the browser's CPU, not the \
link, set the pace."
        );
        let f = pace_finding(s, &[server.clone(), server.clone(), None]).unwrap();
        assert_eq!(f.kind, FindingKind::HarnessLimited);
        assert!(
            f.sentence.contains("measure pagebench, not the protocol"),
            "{}",
            f.sentence
        );
        let machine = Some(Pace {
            pacer: Pacer::Machine { cpus: 2 },
            share: 0.97,
        });
        let f = pace_finding(s, &[machine.clone(), machine, net(0.5)]).unwrap();
        assert_eq!(f.kind, FindingKind::HarnessLimited);
        assert!(
            f.sentence.starts_with(
                "fast-1000/download100mb/embedded/h3: the machine's 2 CPUs were 97 % busy for \
the whole transfer (median of the 2 of 3 runs it paced)"
            ) && f
                .sentence
                .contains("measure this machine, not the protocol"),
            "{}",
            f.sentence
        );
        // Half of the runs is not most of them; nothing paced, nothing said.
        assert!(pace_finding(s, &[net(0.97), None]).is_none());
        assert!(pace_finding(s, &[None, None]).is_none());
    }

    #[test]
    fn a_transfer_at_its_link_s_rate_was_paced_by_the_link() {
        assert!(at_link_rate(Some(94.6), Some(100.0)));
        assert!(!at_link_rate(Some(426.0), Some(1000.0)));
        // An unshaped link, or no goodput: not judged here.
        assert!(!at_link_rate(Some(900.0), None));
        assert!(!at_link_rate(None, Some(100.0)));
    }

    #[test]
    fn powers_of_two() {
        assert_eq!(nearest_power_of_two(60_000.0).map(|x| x.0), Some(65_536));
        let (p, r) = nearest_power_of_two(700_000.0).unwrap();
        assert_eq!(p, 524_288);
        assert!(r > 1.3);
        assert!(nearest_power_of_two(100.0).is_none());
        assert_eq!(fmt_bytes(65_536.0), "64 KiB");
        assert_eq!(fmt_bytes(1_048_576.0), "1 MiB");
        // 1 % loss at 60 ms: ≈ 2.36 Mbit/s; a 3 MB download then takes about 10 s.
        assert!((mathis_mbit(60.0, 1.0) - 2.355).abs() < 0.01);
    }
}
