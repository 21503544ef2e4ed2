//! Shards (`pagebench matrix … --shard K/N`): a deterministic part of a matrix plan, so that a
//! matrix too big for one machine runs on N machines and `pagebench merge` puts it back
//! together (`matrix::merge`).
//!
//! The unit is a whole cell (profile × workload): every server, browser and protocol of a cell
//! is interleaved in the cell's rounds (`plan.rs`), and every comparison the statistics make
//! (protocols, servers, engines) is within a cell. Splitting a cell's servers or browsers
//! across machines would compare a series measured on one machine with one measured on
//! another, without the interleaving that makes the comparison fair; so a cell never splits.
//!
//! Cells are dealt out by estimated cost (longest first, each to the least loaded shard), from
//! a rough model of a run's duration on its profile: a lossy 3 MB download costs tens of times a
//! page on a clean link, and dealing cells out in plan order would give one machine every
//! download. The model is pure arithmetic (no transcendental functions), so every machine
//! computes the same assignment.

use anyhow::{bail, Result};

use crate::config::plan::{Cell, PlanSpec};
use crate::config::profile::Profile;
use crate::config::workload::{Workload, WorkloadKind};
pub use crate::results::shards::{ShardInfo, ShardSpec};

/// A rough estimate of one run's duration (s) of `workload` over `profile`: browser overhead,
/// round trips for the connections and requests, and the bytes at the lesser of the link's rate
/// and the Mathis bound of a loss-based TCP (1.22 · MSS / (RTT · √p)). Only the ratios between
/// cells matter (they balance the shards).
pub fn run_seconds(profile: &Profile, workload: &Workload) -> f64 {
    const OVERHEAD_S: f64 = 1.5;
    const MSS_BITS: f64 = 1460.0 * 8.0;
    // What one cubic flow reaches on a clean emulated link on this machine class.
    const CLEAN_BITS_PER_S: f64 = 60e6;
    let rtt = (profile.rtt_ms / 1e3).max(0.001);
    let (bytes, round_trips, upload) = match &workload.kind {
        WorkloadKind::Page { files, file_bytes }
        | WorkloadKind::Sharded {
            files, file_bytes, ..
        } => {
            let bytes = *files as f64 * file_bytes.unwrap_or(8_400) as f64;
            (bytes, 4.0 + *files as f64 / 6.0, false)
        }
        WorkloadKind::Site { .. } => (421_000.0, 4.0 + 50.0 / 6.0, false),
        WorkloadKind::LateStylesheet { images } => {
            let bytes = *images as f64 * crate::config::workload::LATE_CSS_IMAGE_BYTES as f64;
            (bytes, 5.0 + *images as f64 / 6.0, false)
        }
        WorkloadKind::Download { bytes } => (*bytes as f64, 4.0 + slow_start_rtts(*bytes), false),
        WorkloadKind::Upload { bytes } => (*bytes as f64, 4.0 + slow_start_rtts(*bytes), true),
    };
    let rate_mbit = if upload {
        profile.up_mbit
    } else {
        profile.down_mbit
    };
    let mut bits_per_s = rate_mbit.map_or(CLEAN_BITS_PER_S, |m| m * 1e6);
    let p = profile.loss_pct / 100.0;
    if p > 0.0 {
        bits_per_s = bits_per_s.min(1.22 * MSS_BITS / (rtt * p.sqrt()));
    }
    OVERHEAD_S + round_trips * rtt + bytes * 8.0 / bits_per_s
}

/// Round trips of slow start to reach a window of `bytes` (from 10 segments): its bit length.
fn slow_start_rtts(bytes: u64) -> f64 {
    let segments = bytes / 14_600;
    (u64::BITS - segments.leading_zeros()) as f64
}

/// Deals `cells` (with their costs, in plan order) out to `count` shards: the costliest first,
/// each to the shard with the least cost so far (ties: the lower shard, the earlier cell). Each
/// shard's cells come back in plan order.
pub fn deal(cells: &[(Cell, f64)], count: u32) -> Vec<Vec<Cell>> {
    let mut order: Vec<usize> = (0..cells.len()).collect();
    order.sort_by(|&a, &b| cells[b].1.total_cmp(&cells[a].1).then(a.cmp(&b)));
    let mut load = vec![0.0f64; count as usize];
    let mut owner = vec![0usize; cells.len()];
    for i in order {
        let least = (0..load.len())
            .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
            .expect("at least one shard");
        load[least] += cells[i].1;
        owner[i] = least;
    }
    (0..count as usize)
        .map(|s| {
            cells
                .iter()
                .zip(&owner)
                .filter(|(_, o)| **o == s)
                .map(|(c, _)| c.0.clone())
                .collect()
        })
        .collect()
}

/// The plan's cells with their estimated cost in seconds (every round, warm-ups included).
pub fn costed_cells(
    spec: &PlanSpec,
    profiles: &[Profile],
    workloads: &[Workload],
) -> Vec<(Cell, f64)> {
    let runs = (spec.runs + spec.warmup) as f64 * spec.runs_per_round() as f64;
    spec.cells()
        .into_iter()
        .map(|c| {
            let p = profiles.iter().find(|p| p.name == c.profile);
            let w = workloads.iter().find(|w| w.name == c.workload);
            let each = match (p, w) {
                (Some(p), Some(w)) => run_seconds(p, w),
                _ => 1.0,
            };
            (c, runs * each)
        })
        .collect()
}

/// The cells of `shard` and its estimated cost (s); refuses a shard that would get no cell.
pub fn cells_of(
    spec: &PlanSpec,
    profiles: &[Profile],
    workloads: &[Workload],
    shard: ShardSpec,
) -> Result<(Vec<Cell>, f64)> {
    let costed = costed_cells(spec, profiles, workloads);
    if costed.len() < shard.count as usize {
        bail!(
            "--shard {shard}: the plan has {} cells (profile × workload) and a cell is never split, so at most {} shards make sense; give N ≤ {}",
            costed.len(),
            costed.len(),
            costed.len()
        );
    }
    let mine = deal(&costed, shard.count).swap_remove(shard.index as usize - 1);
    let cost = costed
        .iter()
        .filter(|(c, _)| mine.contains(c))
        .map(|(_, s)| s)
        .sum();
    Ok((mine, cost))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::identity::BrowserId;
    use crate::config::plan::plan;
    use crate::config::protocol::{parse_variants, H3Mode};

    fn study() -> (PlanSpec, Vec<Profile>, Vec<Workload>) {
        let profiles = vec![
            Profile::simple("datacenter", 0.0, 0.0, 0.0),
            Profile::simple("wired", 40.0, 5.0, 0.0),
            Profile::simple("intercontinental", 150.0, 10.0, 0.0),
            Profile::simple("mobile", 60.0, 15.0, 1.0),
            Profile::simple("bad-mobile", 60.0, 20.0, 3.0),
            Profile::simple("cell-edge", 100.0, 25.0, 5.0),
        ];
        let workloads: Vec<Workload> = ["page10", "page50", "download"]
            .iter()
            .map(|w| w.parse().unwrap())
            .collect();
        let spec = PlanSpec {
            profiles: profiles.iter().map(|p| p.name.clone()).collect(),
            workloads: workloads.iter().map(|w| w.name.clone()).collect(),
            servers: vec!["embedded".into()],
            browsers: vec![BrowserId::default()],
            views: vec![crate::config::identity::View::First],
            devices: vec![Default::default()],
            variants: parse_variants("h1,h2,h3", H3Mode::Forced).unwrap(),
            runs: 10,
            warmup: 1,
            seed: 1,
            adaptive: None,
        };
        (spec, profiles, workloads)
    }

    #[test]
    fn every_cell_goes_to_exactly_one_shard_whole() {
        let (spec, profiles, workloads) = study();
        let all = plan(&spec);
        for n in 1..=7 {
            let mut seen: Vec<Cell> = Vec::new();
            let mut runs = 0;
            for k in 1..=n {
                let (cells, cost) = cells_of(
                    &spec,
                    &profiles,
                    &workloads,
                    ShardSpec { index: k, count: n },
                )
                .unwrap();
                assert!(!cells.is_empty() && cost > 0.0, "shard {k}/{n} gets work");
                // In plan order.
                let order: Vec<usize> = cells
                    .iter()
                    .map(|c| spec.cells().iter().position(|x| x == c).unwrap())
                    .collect();
                assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
                for c in &cells {
                    assert!(!seen.contains(c), "{c} in two shards of {n}");
                    seen.push(c.clone());
                    // Whole: every run of the cell (every protocol, round, warm-up).
                    runs += all.iter().filter(|r| r.is_in(c)).count();
                }
            }
            assert_eq!(seen.len(), spec.cells().len(), "every cell of {n} shards");
            assert_eq!(runs, all.len());
        }
        // Deterministic.
        let a = cells_of(
            &spec,
            &profiles,
            &workloads,
            ShardSpec { index: 2, count: 3 },
        )
        .unwrap();
        let b = cells_of(
            &spec,
            &profiles,
            &workloads,
            ShardSpec { index: 2, count: 3 },
        )
        .unwrap();
        assert_eq!(a, b);
        // More shards than cells is refused, naming the limit.
        let e = cells_of(
            &spec,
            &profiles,
            &workloads,
            ShardSpec {
                index: 1,
                count: 19,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("18 cells") && e.contains("N ≤ 18"), "{e}");
    }

    #[test]
    fn shards_are_balanced_by_cost_not_by_plan_order() {
        let (spec, profiles, workloads) = study();
        // The lossy downloads dominate, as measured (280 s of a 364 s round here).
        let costed = costed_cells(&spec, &profiles, &workloads);
        let cost = |p: &str, w: &str| {
            costed
                .iter()
                .find(|(c, _)| c.profile == p && c.workload == w)
                .unwrap()
                .1
        };
        assert!(cost("cell-edge", "download") > 10.0 * cost("wired", "page50"));
        assert!(cost("cell-edge", "download") > cost("bad-mobile", "download"));
        assert!(cost("bad-mobile", "download") > cost("mobile", "download"));
        // Three shards: plan order would give shard 3 every download; by cost each gets one
        // of the three lossy downloads and the loads are within 35 % of each other.
        let shards = deal(&costed, 3);
        for s in &shards {
            let lossy = s
                .iter()
                .filter(|c| {
                    c.workload == "download"
                        && (c.profile.contains("mobile") || c.profile == "cell-edge")
                })
                .count();
            assert_eq!(lossy, 1, "{s:?}");
        }
        let loads: Vec<f64> = shards
            .iter()
            .map(|s| {
                costed
                    .iter()
                    .filter(|(c, _)| s.contains(c))
                    .map(|(_, x)| x)
                    .sum()
            })
            .collect();
        let (lo, hi) = (
            loads.iter().cloned().fold(f64::INFINITY, f64::min),
            loads.iter().cloned().fold(0.0, f64::max),
        );
        assert!(hi / lo < 1.35, "{loads:?}");
    }

    #[test]
    fn a_download_estimate_is_near_what_this_machine_measured() {
        // results/example: 3 MB over mobile (60 ms, 1 %) 8.1–9.4 s, cell-edge 38.7–49.4 s.
        let w: Workload = "download".parse().unwrap();
        let mobile = run_seconds(&Profile::simple("m", 60.0, 15.0, 1.0), &w);
        let edge = run_seconds(&Profile::simple("c", 100.0, 25.0, 5.0), &w);
        assert!((7.0..14.0).contains(&mobile), "{mobile}");
        assert!((30.0..55.0).contains(&edge), "{edge}");
        let page = run_seconds(
            &Profile::simple("w", 40.0, 5.0, 0.0),
            &"page10".parse().unwrap(),
        );
        assert!((1.5..3.0).contains(&page), "{page}");
    }
}
