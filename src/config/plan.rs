//! The matrix plan (pure): every run of a matrix, in the order it runs, decided entirely by the
//! request and the seed — so a resumed matrix finishes exactly the missing runs of the same plan.
//!
//! Cells are (profile, workload) pairs, profile-major so the link is reconfigured once per
//! profile. Within a cell, rounds: in each round every (server, browser, protocol variant) runs
//! once, in a seeded random order — interleaved, never a block of one protocol (the study's H2 → H3 → H2
//! lesson: a drifting machine must not masquerade as a protocol difference). Warm-up rounds come
//! first and are kept on disk but left out of the statistics.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::capacity::TraceStart;
use crate::config::device::DeviceId;
use crate::config::identity::{BrowserId, Phase, ServerId, View};
use crate::config::name_lookup::DnsMode;
use crate::config::protocol::Variant;

/// What the user asked for; together with the seed it fixes the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanSpec {
    pub profiles: Vec<String>,
    pub workloads: Vec<String>,
    pub servers: Vec<ServerId>,
    /// The engines (plans written before there was a choice: Chromium alone).
    #[serde(default = "chromium_only")]
    pub browsers: Vec<BrowserId>,
    /// First and/or repeat views (plans written before there was a choice: first views).
    #[serde(default = "first_only")]
    pub views: Vec<View>,
    /// The devices (plans written before there was a choice: desktop alone).
    #[serde(default = "desktop_only")]
    pub devices: Vec<DeviceId>,
    pub variants: Vec<Variant>,
    /// Measured rounds per cell (with `adaptive`: the most, `--max-runs`).
    pub runs: u32,
    pub warmup: u32,
    pub seed: u64,
    /// `--runs auto`: each cell stops adding rounds once precise enough (absent: every round
    /// runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<Adaptive>,
}

/// `--runs auto`: per cell, interleaved rounds are added until the 95 % CI of every ratio in
/// the cell is within ±`precision_pct` % of the ratio, from `min_runs` to `max_runs` rounds (the
/// plan holds `max_runs`; the rule is `matrix::adaptive`). It looks at precision only, never at
/// p-values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Adaptive {
    pub min_runs: u32,
    pub max_runs: u32,
    pub precision_pct: f64,
}

impl Adaptive {
    /// `--min-runs`, `--max-runs` and `--precision` as typed; the error names the flag.
    pub fn new(min_runs: u32, max_runs: u32, precision_pct: f64) -> anyhow::Result<Adaptive> {
        anyhow::ensure!(
            min_runs >= 3,
            "--min-runs {min_runs}: a comparison needs at least 3 runs per series; give 3 or more"
        );
        anyhow::ensure!(
            max_runs >= min_runs,
            "--max-runs {max_runs} is below --min-runs {min_runs}: give a maximum at least the minimum"
        );
        anyhow::ensure!(
            precision_pct.is_finite() && precision_pct > 0.0 && precision_pct < 100.0,
            "--precision {precision_pct}: give the half-width of the ratios' 95 % CI in percent, above 0 and below 100 (e.g. 5)"
        );
        Ok(Adaptive {
            min_runs,
            max_runs,
            precision_pct,
        })
    }
}

/// A cell of the plan: one (profile, workload) pair. Every server, browser and protocol of a
/// cell is interleaved in its rounds, so a cell is the unit that is never split: of shards
/// (`--shard`) and of adaptive stopping (`--runs auto`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Cell {
    pub profile: String,
    pub workload: String,
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.profile, self.workload)
    }
}

impl PlanSpec {
    /// The cells in plan order (profile-major).
    pub fn cells(&self) -> Vec<Cell> {
        self.profiles
            .iter()
            .flat_map(|p| {
                self.workloads.iter().map(move |w| Cell {
                    profile: p.clone(),
                    workload: w.clone(),
                })
            })
            .collect()
    }

    /// Runs per round of a cell: servers × browsers × devices × protocol variants.
    pub fn runs_per_round(&self) -> usize {
        self.servers.len() * self.browsers.len() * self.devices.len() * self.variants.len()
    }
}

/// One run of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedRun {
    /// Position in the whole plan (0-based).
    pub index: usize,
    /// Stable name, also the raw record's file name.
    pub id: String,
    pub profile: String,
    pub workload: String,
    pub server: ServerId,
    #[serde(default)]
    pub browser: BrowserId,
    #[serde(default)]
    pub view: View,
    #[serde(default)]
    pub device: DeviceId,
    pub variant: Variant,
    pub phase: Phase,
    /// 1-based within its phase.
    pub round: u32,
    /// 1-based position within its round.
    pub position: u32,
    /// Where a trace profile's capacity trace starts at the mark: one draw per round, the
    /// same for every run of the round.
    #[serde(default)]
    pub trace_start: TraceStart,
}

impl PlannedRun {
    /// The cell this run belongs to.
    pub fn cell(&self) -> Cell {
        Cell {
            profile: self.profile.clone(),
            workload: self.workload.clone(),
        }
    }

    /// Whether this run belongs to `cell`.
    pub fn is_in(&self, cell: &Cell) -> bool {
        self.profile == cell.profile && self.workload == cell.workload
    }

    /// How many times a measurement failure of this run is run again: `retry_invalid` times,
    /// a warm-up never — nothing it measures counts, and its need (what lanes read of it) is on
    /// record whatever its outcome.
    pub fn retries(&self, retry_invalid: u32) -> u32 {
        match self.phase {
            Phase::Warmup => 0,
            Phase::Measure => retry_invalid,
        }
    }
}

fn chromium_only() -> Vec<BrowserId> {
    vec![BrowserId::default()]
}

fn first_only() -> Vec<View> {
    vec![View::First]
}

fn desktop_only() -> Vec<DeviceId> {
    vec![DeviceId::default()]
}

/// Whether `variant` can be measured on `view`: `h3-discovered` learns HTTP/3 from a first
/// navigation, so it exists only as a repeat view; `h3-dns` is the first visit's own hint
/// (a returning visitor's Alt-Svc would mix in), so it exists only as a first view.
pub fn measurable(variant: Variant, view: View) -> bool {
    let first_only = variant == Variant::H3_DNS && view == View::Repeat;
    let repeat_only = variant == Variant::H3_DISCOVERED && view == View::First;
    !(first_only || repeat_only)
}

/// Refuses a plan that would measure nothing of a variant: `h3-discovered` needs a repeat view.
pub fn check_views(variants: &[Variant], views: &[View]) -> anyhow::Result<()> {
    if variants.contains(&Variant::H3_DISCOVERED) && !views.contains(&View::Repeat) {
        anyhow::bail!(
            "h3-discovered learns HTTP/3 from a first visit's Alt-Svc, so it is measured on repeat \
views only: add --views repeat (or first,repeat)"
        );
    }
    if variants.contains(&Variant::H3_DNS) && !views.contains(&View::First) {
        anyhow::bail!(
            "h3-dns measures a first visit that learns HTTP/3 from an HTTPS record, so it is \
measured on first views only: add --views first (or first,repeat)"
        );
    }
    Ok(())
}

/// Refuses `h3-dns` without a resolver to announce h3: its HTTPS record is the only hint.
pub fn check_dns(variants: &[Variant], dns: DnsMode) -> anyhow::Result<()> {
    if variants.contains(&Variant::H3_DNS) && dns.is_none() {
        anyhow::bail!(
            "h3-dns learns HTTP/3 from the HTTPS record of pagebench's resolver, and --dns none \
resolves nothing: add --dns resolver"
        );
    }
    Ok(())
}

/// A seed for one cell, so that adding a profile does not reshuffle the others.
fn cell_seed(seed: u64, profile: &str, workload: &str) -> [u8; 32] {
    let mut key = [0u8; 32];
    key.copy_from_slice(
        &Sha256::new()
            .chain_update(seed.to_le_bytes())
            .chain_update(profile.as_bytes())
            .chain_update([0])
            .chain_update(workload.as_bytes())
            .finalize(),
    );
    key
}

/// Where the capacity trace starts in one round of a cell: drawn from the seed and the round
/// alone (not the run order), so every run of the round meets the same seconds of the trace.
fn round_trace_start(seed: u64, profile: &str, workload: &str, round_tag: &str) -> TraceStart {
    let label = format!("trace start {profile} {workload} {round_tag}");
    TraceStart::from_hash(crate::support::stats::derive_seed(seed, &label))
}

/// One run of a round before its place is drawn: server, browser, device, view, protocol.
type Combo = (ServerId, BrowserId, DeviceId, View, Variant);

/// The whole plan, in run order.
pub fn plan(spec: &PlanSpec) -> Vec<PlannedRun> {
    let mut out = Vec::new();
    let mut combos: Vec<Combo> = Vec::new();
    for s in &spec.servers {
        for b in &spec.browsers {
            for device in &spec.devices {
                for view in &spec.views {
                    for v in spec.variants.iter().filter(|v| measurable(**v, *view)) {
                        combos.push((s.clone(), *b, device.clone(), *view, *v));
                    }
                }
            }
        }
    }
    let multi_server = spec.servers.len() > 1;
    let multi_browser = spec.browsers.len() > 1;
    let multi_view = spec.views.len() > 1;
    let multi_device = spec.devices.len() > 1;
    for profile in &spec.profiles {
        for workload in &spec.workloads {
            let mut rng = ChaCha8Rng::from_seed(cell_seed(spec.seed, profile, workload));
            let phases = (1..=spec.warmup)
                .map(|r| (Phase::Warmup, r))
                .chain((1..=spec.runs).map(|r| (Phase::Measure, r)));
            for (phase, round) in phases {
                let mut order = combos.clone();
                order.shuffle(&mut rng);
                let tag = match phase {
                    Phase::Warmup => format!("w{round}"),
                    Phase::Measure => format!("r{round:02}"),
                };
                let trace_start = round_trace_start(spec.seed, profile, workload, &tag);
                for (pos, (server, browser, device, view, variant)) in order.into_iter().enumerate()
                {
                    let server_part = if multi_server {
                        format!("-{}", server.file_name())
                    } else {
                        String::new()
                    };
                    let browser_part = if multi_browser {
                        format!("-{browser}")
                    } else {
                        String::new()
                    };
                    let view_part = if multi_view {
                        format!("-{view}")
                    } else {
                        String::new()
                    };
                    let device_part = if multi_device {
                        format!("-{device}")
                    } else {
                        String::new()
                    };
                    out.push(PlannedRun {
                        index: out.len(),
                        id: format!(
                            "{profile}-{workload}-{tag}{server_part}{browser_part}{device_part}{view_part}-{variant}"
                        ),
                        profile: profile.clone(),
                        workload: workload.clone(),
                        server,
                        browser,
                        view,
                        device,
                        variant,
                        phase,
                        round,
                        position: pos as u32 + 1,
                        trace_start,
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::protocol::{parse_variants, H3Mode};

    fn spec(seed: u64) -> PlanSpec {
        PlanSpec {
            profiles: vec!["wired".into(), "mobile".into()],
            workloads: vec!["page10".into(), "download".into()],
            servers: vec!["embedded".into()],
            browsers: vec![BrowserId::default()],
            views: vec![View::First],
            devices: vec![DeviceId::default()],
            variants: parse_variants("h1,h2,h3", H3Mode::Forced).unwrap(),
            runs: 5,
            warmup: 1,
            seed,
            adaptive: None,
        }
    }

    #[test]
    fn every_round_runs_each_protocol_once() {
        let p = plan(&spec(7));
        assert_eq!(p.len(), 2 * 2 * (5 + 1) * 3);
        for chunk in p.chunks(3) {
            let mut names: Vec<String> = chunk.iter().map(|r| r.variant.name()).collect();
            names.sort();
            assert_eq!(names, ["h1", "h2", "h3"]);
            assert!(chunk
                .iter()
                .all(|r| r.round == chunk[0].round && r.phase == chunk[0].phase));
            assert_eq!(
                chunk.iter().map(|r| r.position).collect::<Vec<_>>(),
                [1, 2, 3]
            );
        }
        assert_eq!(p[0].phase, Phase::Warmup);
        assert_eq!(p[3].phase, Phase::Measure);
        let ids: std::collections::BTreeSet<_> = p.iter().map(|r| r.id.clone()).collect();
        assert_eq!(ids.len(), p.len(), "ids are unique");
    }

    #[test]
    fn trace_starts_are_paired_per_round_and_spread_over_rounds() {
        let mut two_servers = spec(7);
        two_servers.servers = vec!["embedded".into(), "caddy".into()];
        two_servers.runs = 40;
        let p = plan(&two_servers);
        type Round = (String, String, bool, u32);
        let mut by_round: std::collections::BTreeMap<Round, Vec<TraceStart>> = Default::default();
        for r in &p {
            let measured = r.phase == Phase::Measure;
            let key = (r.profile.clone(), r.workload.clone(), measured, r.round);
            by_round.entry(key).or_default().push(r.trace_start);
        }
        for (round, starts) in &by_round {
            assert_eq!(starts.len(), 6, "3 protocols × 2 servers in {round:?}");
            assert!(
                starts.iter().all(|s| *s == starts[0]),
                "{round:?}: {starts:?}"
            );
        }
        // Rounds differ, and 40 rounds of one cell spread over the trace (missing three of its
        // tenths by chance has a probability below 10⁻⁴).
        let cell: Vec<u32> = by_round
            .iter()
            .filter(|((p, w, measured, _), _)| p == "wired" && w == "page10" && *measured)
            .map(|(_, s)| s[0].0)
            .collect();
        let tenths: std::collections::BTreeSet<u32> = cell.iter().map(|s| s / 100_000).collect();
        assert!(tenths.len() >= 8, "{cell:?}");
        // Cells differ too, and the same seed gives the same starts.
        let other = &by_round[&("mobile".into(), "page10".into(), true, 1)];
        assert_ne!(other[0].0, cell[0]);
        let again: Vec<TraceStart> = plan(&two_servers).iter().map(|r| r.trace_start).collect();
        assert_eq!(again, p.iter().map(|r| r.trace_start).collect::<Vec<_>>());
    }

    #[test]
    fn order_is_seeded_and_varies() {
        assert_eq!(plan(&spec(7)), plan(&spec(7)));
        let a: Vec<String> = plan(&spec(7)).iter().map(|r| r.id.clone()).collect();
        let b: Vec<String> = plan(&spec(8)).iter().map(|r| r.id.clone()).collect();
        assert_ne!(a, b);
        // Not always the same order within rounds.
        let firsts: std::collections::BTreeSet<String> = plan(&spec(7))
            .chunks(3)
            .map(|c| c[0].variant.name())
            .collect();
        assert!(firsts.len() > 1);
    }

    #[test]
    fn browsers_interleave_within_rounds_and_name_their_runs() {
        let mut two = spec(3);
        two.browsers = vec![BrowserId::default(), BrowserId::new("firefox")];
        two.variants = parse_variants("h2,h3", H3Mode::Forced).unwrap();
        let p = plan(&two);
        assert_eq!(p.len(), 2 * 2 * (5 + 1) * 4);
        for chunk in p.chunks(4) {
            let mut combos: Vec<(BrowserId, String)> = chunk
                .iter()
                .map(|r| (r.browser, r.variant.name()))
                .collect();
            combos.sort();
            assert_eq!(
                combos,
                [
                    (BrowserId::default(), "h2".to_string()),
                    (BrowserId::default(), "h3".to_string()),
                    (BrowserId::new("firefox"), "h2".to_string()),
                    (BrowserId::new("firefox"), "h3".to_string()),
                ]
            );
        }
        // Both engines lead some rounds: no engine always runs first.
        let leaders: std::collections::BTreeSet<BrowserId> =
            p.chunks(4).map(|c| c[0].browser).collect();
        assert_eq!(leaders.len(), 2);
        assert!(p.iter().any(|r| r.id == "wired-page10-r01-firefox-h3"));
        // One engine: ids as they always were.
        assert!(plan(&spec(3)).iter().any(|r| r.id == "wired-page10-r01-h3"));
        // A plan from before the choice reads as Chromium's.
        let old = r#"{"profiles":[],"workloads":[],"servers":[],"variants":[],"runs":1,"warmup":0,"seed":1}"#;
        let s: PlanSpec = serde_json::from_str(old).unwrap();
        assert_eq!(s.browsers, [BrowserId::default()]);
        assert_eq!(s.views, [View::First]);
    }

    #[test]
    fn views_interleave_and_discovered_h3_is_a_repeat_view_only() {
        let mut s = spec(9);
        s.views = vec![View::First, View::Repeat];
        s.variants = parse_variants("h2,h3-discovered", H3Mode::Forced).unwrap();
        let p = plan(&s);
        // h2 first, h2 repeat, h3-discovered repeat: 3 per round.
        assert_eq!(p.len(), 2 * 2 * (5 + 1) * 3);
        for chunk in p.chunks(3) {
            let mut combos: Vec<String> = chunk
                .iter()
                .map(|r| format!("{}/{}", r.view, r.variant))
                .collect();
            combos.sort();
            assert_eq!(combos, ["first/h2", "repeat/h2", "repeat/h3-discovered"]);
        }
        assert!(p
            .iter()
            .any(|r| r.id == "wired-page10-r01-repeat-h3-discovered"));
        assert!(!measurable(Variant::H3_DISCOVERED, View::First));
        assert!(measurable(Variant::H3, View::First));
    }
}
