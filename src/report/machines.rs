//! The machines of a merged matrix (`pagebench merge`): each shard's fingerprint and
//! calibration side by side, so a reader sees whether the shards ran on alike machines.

use super::doc::{Cell, Table};
use super::report_data::ReportData;
use crate::config::identity::BrowserId;

fn ms(v: Option<f64>) -> String {
    v.map_or("—".into(), |x| format!("{x:.0}"))
}

/// The table, when the results were merged from shards.
pub fn table(data: &ReportData) -> Option<Table> {
    let shards = &data.meta.merged_from;
    if shards.is_empty() {
        return None;
    }
    let rows = shards
        .iter()
        .map(|s| {
            let f = &s.fingerprint;
            let cal = s.calibration.as_ref();
            let netem = cal.and_then(|c| c.netem.as_ref());
            let reference = cal.and_then(|c| c.reference.as_ref());
            vec![
                Cell::label(s.spec.to_string()),
                Cell::text(&s.hostname),
                Cell::text(format!("{} × {}", f.cpus, f.cpu_model)),
                Cell::text(&f.kernel),
                Cell::text(browsers(&f.browsers)),
                Cell::text(format!("{} ({})", f.pagebench_version, f.git_revision)),
                Cell::text(format!("{} ({} attempts)", s.status, s.attempts)),
                Cell::text(netem.map_or("—".into(), |n| {
                    format!("{:.3} / {:.3}", n.rtt_error_median_ms, n.rtt_error_p99_ms)
                })),
                Cell::text(netem.map_or("—".into(), |n| {
                    format!("{:.0}k", n.udp_packets_per_s / 1e3)
                })),
                Cell::text(reference.map_or("—".into(), |r| {
                    format!("{} [{}–{}]", ms(r.median_ms), ms(r.q1_ms), ms(r.q3_ms))
                })),
            ]
        })
        .collect();
    Some(Table {
        id: "machines".into(),
        title: "Machines of the shards".into(),
        intro: vec![format!(
            "These results were merged from {} shards (`pagebench merge`); each cell ran whole on one machine, so every comparison is between runs of one machine. Calibration: the emulator's round-trip error at 20 ms one way (median / p99, ms) and its forwarding rate (1500-byte packets per second), and a reference series — page10 over h2 on `wired`, Chromium, the embedded server — median loadEventEnd [quartiles], ms.",
            shards.len()
        )],
        header: [
            "shard",
            "host",
            "CPU",
            "kernel",
            "browsers",
            "pagebench",
            "status",
            "delay error (ms)",
            "rate",
            "reference page10 h2 (ms)",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows,
        notes: vec![],
    })
}

/// A machine's engines with their versions, the default engine first (`Chromium 156.0.…,
/// Firefox 153.8.0esr`).
fn browsers(versions: &std::collections::BTreeMap<String, String>) -> String {
    let mut ids: Vec<BrowserId> = versions
        .keys()
        .filter_map(|n| BrowserId::named(n).ok())
        .collect();
    ids.sort();
    ids.iter()
        .map(|b| engine_version(*b, versions.get(b.name()).map(String::as_str)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An engine and its version for people: the version as the engine reported it when that
/// names it (`Chromium 156.0.…`), else after its name (`Firefox 153.8.0esr`), or its name
/// alone.
pub fn engine_version(b: BrowserId, version: Option<&str>) -> String {
    let label = b.label();
    match version {
        Some(v) if v.starts_with(&label) => v.to_string(),
        Some(v) => format!("{label} {v}"),
        None => label,
    }
}
