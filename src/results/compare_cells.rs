//! The comparisons within each cell (one profile and workload): which of its series are
//! compared — protocols within each setup, servers against the first server, engines against
//! Chromium, a returning visitor against a first visit — each with its own bootstrap seed, Holm
//! over the whole matrix, how precise a cell's estimates are, and the warning when the runs
//! are too few for any difference to be called. The summary keeps what they find.

use std::collections::BTreeMap;

use anyhow::{Context, Result};

use super::comparison::CellComparison;
use super::rows::SeriesKey;
use crate::config::device::DeviceId;
use crate::config::identity::{BrowserId, ServerId, Setup, View};
use crate::config::protocol::Variant;
use crate::support::stats::{
    apply_holm, compare, derive_seed, smallest_attainable_p, BootstrapConfig, Censored,
    CompareConfig, Comparison, RatioBound, SeriesInput, SeriesSummary,
};

/// The comparisons made within a cell, by series name: (a, b), ratio a/b.
pub(super) fn protocol_pairs(variants: &[Variant]) -> Vec<(Variant, Variant)> {
    let has = |v: Variant| variants.contains(&v);
    let mut pairs = Vec::new();
    if has(Variant::H2) && has(Variant::H1) {
        pairs.push((Variant::H2, Variant::H1));
    }
    for h3 in [Variant::H3, Variant::H3_PRIMED, Variant::H3_DISCOVERED] {
        if has(h3) {
            for base in [Variant::H2, Variant::H1] {
                if has(base) {
                    pairs.push((h3, base));
                }
            }
        }
    }
    for h3 in [Variant::H3_PRIMED, Variant::H3_DISCOVERED] {
        if has(h3) && has(Variant::H3) {
            pairs.push((h3, Variant::H3));
        }
    }
    pairs
}

/// What a cell's series differ in: its servers (those of `server_order` first, then as first
/// seen), protocol variants (as first seen), engines and views (in their own order, the
/// default engine and the first view first).
struct CellAxes {
    servers: Vec<ServerId>,
    variants: Vec<Variant>,
    browsers: Vec<BrowserId>,
    views: Vec<View>,
    /// Desktop first (the others are compared against it), then as first seen.
    devices: Vec<DeviceId>,
}

impl CellAxes {
    fn of(in_cell: &[&SeriesKey], server_order: &[ServerId]) -> CellAxes {
        let mut servers: Vec<ServerId> = server_order
            .iter()
            .filter(|s| in_cell.iter().any(|k| &k.server == *s))
            .cloned()
            .collect();
        let mut variants: Vec<Variant> = Vec::new();
        let mut devices: Vec<DeviceId> = Vec::new();
        for k in in_cell {
            if !servers.contains(&k.server) {
                servers.push(k.server.clone());
            }
            if !variants.contains(&k.variant) {
                variants.push(k.variant);
            }
            if !devices.contains(&k.device) {
                devices.push(k.device.clone());
            }
        }
        devices.sort_by_key(|d| !d.is_desktop());
        // The engines' order puts the default engine, Chromium, first.
        let browsers: std::collections::BTreeSet<BrowserId> =
            in_cell.iter().map(|k| k.browser).collect();
        CellAxes {
            servers,
            variants,
            browsers: browsers.into_iter().collect(),
            views: View::ALL
                .into_iter()
                .filter(|v| in_cell.iter().any(|k| k.view == *v))
                .collect(),
            devices,
        }
    }

    /// The sides a cell compares, in order, each (setup a, variant a, setup b, variant b):
    /// protocols within each setup, then setups that differ in one thing only, each against
    /// the first (servers within each browser, then engines within each server, then devices
    /// against desktop), then a returning visitor against a first visit, per protocol.
    fn pairs(&self) -> Vec<(Setup, Variant, Setup, Variant)> {
        let CellAxes {
            servers,
            variants,
            browsers,
            views,
            devices,
        } = self;
        let at = |s: &ServerId, b: BrowserId, v: View, d: &DeviceId| {
            Setup::new(s.clone(), b).on(v).with_device(d.clone())
        };
        let mut pairs = Vec::new();
        for view in views {
            for browser in browsers {
                for server in servers {
                    for device in devices {
                        let setup = at(server, *browser, *view, device);
                        for (a, b) in protocol_pairs(variants) {
                            pairs.push((setup.clone(), a, setup.clone(), b));
                        }
                    }
                }
            }
        }
        let mut against_first: Vec<(Setup, Setup)> = Vec::new();
        for (view, device) in views
            .iter()
            .flat_map(|v| devices.iter().map(move |d| (v, d)))
        {
            for browser in browsers {
                let on = |s: &ServerId| at(s, *browser, *view, device);
                against_first.extend(servers[1..].iter().map(|s| (on(s), on(&servers[0]))));
            }
        }
        for (view, device) in views
            .iter()
            .flat_map(|v| devices.iter().map(move |d| (v, d)))
        {
            for server in servers {
                let on = |b: &BrowserId| at(server, *b, *view, device);
                against_first.extend(browsers[1..].iter().map(|b| (on(b), on(&browsers[0]))));
            }
        }
        for view in views {
            for browser in browsers {
                for server in servers {
                    let on = |d: &DeviceId| at(server, *browser, *view, d);
                    against_first.extend(devices[1..].iter().map(|d| (on(d), on(&devices[0]))));
                }
            }
        }
        for (other, base) in &against_first {
            for v in variants {
                pairs.push((other.clone(), *v, base.clone(), *v));
            }
        }
        // A returning visitor against a first visit, per protocol.
        for browser in browsers {
            for server in servers {
                for device in devices {
                    let first = at(server, *browser, View::First, device);
                    for view in views.iter().filter(|v| **v != View::First) {
                        for v in variants {
                            pairs.push((first.clone().on(*view), *v, first.clone(), *v));
                        }
                    }
                }
            }
        }
        pairs
    }
}

/// The comparisons of one cell's series (`in_cell`, all of one profile and workload, in
/// first-seen order), unadjusted (Holm comes over the whole matrix): protocols within each
/// setup (server × browser), then servers per protocol against the first server (of
/// `server_order`, then first seen) within each browser, then engines per protocol against
/// Chromium within each server. Each comparison's bootstrap has its own seed from `seed` and
/// its label, so the same series give the same CI wherever they are compared.
pub fn cell_comparisons(
    in_cell: &[&SeriesKey],
    inputs: &BTreeMap<SeriesKey, SeriesInput>,
    server_order: &[ServerId],
    seed: u64,
    resamples: usize,
    alpha: f64,
) -> Result<Vec<CellComparison>> {
    let Some(first) = in_cell.first() else {
        return Ok(Vec::new());
    };
    let (profile, workload) = (&first.profile, &first.workload);
    let key = |setup: &Setup, variant: Variant| SeriesKey {
        profile: profile.clone(),
        workload: workload.clone(),
        server: setup.server.clone(),
        browser: setup.browser,
        view: setup.view,
        device: setup.device.clone(),
        variant,
    };
    let mut comparisons = Vec::new();
    for (sa, a, sb, b) in CellAxes::of(in_cell, server_order).pairs() {
        let (ka, kb) = (key(&sa, a), key(&sb, b));
        let (Some(ia), Some(ib)) = (inputs.get(&ka), inputs.get(&kb)) else {
            continue;
        };
        let label = format!("{} vs {}", ka.label(), kb.label());
        let cfg = CompareConfig {
            alpha,
            bootstrap: BootstrapConfig {
                resamples,
                ..BootstrapConfig::default()
            }
            .with_seed(derive_seed(seed, &label)),
        };
        comparisons.push(CellComparison {
            profile: profile.clone(),
            workload: workload.clone(),
            server_a: sa.server.clone(),
            server_b: sb.server.clone(),
            browser_a: sa.browser,
            browser_b: sb.browser,
            view_a: sa.view,
            view_b: sb.view,
            device_a: sa.device.clone(),
            device_b: sb.device.clone(),
            a,
            b,
            comparison: compare(ia, ib, &cfg).with_context(|| label.clone())?,
            attrition: None,
        });
    }
    Ok(comparisons)
}

/// How precise a cell's estimates are: the widest 95 % CI half-width among its ratios, in
/// percent of the ratio (`max(high / ratio − 1, 1 − low / ratio)`), or — in a cell without
/// comparisons (one series per setup) — among its series' medians. `None` when one of them has
/// no CI (too few runs) or is only a bound: a ratio whose median is a DNF ([`RatioBound`] not
/// `Exact`), a ratio CI whose end depends on the time a DNF is counted at, a median or median
/// CI that is a DNF. A bound is not precise at any width. What `--runs auto` holds to
/// `--precision` (`matrix::adaptive`) and what the report states per cell.
pub fn widest_ci_pct(comparisons: &[&CellComparison], series: &[&SeriesSummary]) -> Option<f64> {
    let widths: Vec<Option<f64>> = if comparisons.is_empty() {
        series
            .iter()
            .map(|s| match (s.median, s.ci_low, s.ci_high) {
                (Some(Censored::Ms(m)), Some(Censored::Ms(lo)), Some(Censored::Ms(hi)))
                    if m > 0.0 =>
                {
                    Some(100.0 * (hi / m - 1.0).max(1.0 - lo / m))
                }
                _ => None,
            })
            .collect()
    } else {
        comparisons
            .iter()
            .map(|c| {
                let x = &c.comparison;
                if x.ratio_bound != RatioBound::Exact || x.ratio_ci_censored {
                    return None;
                }
                match (x.ratio, x.ratio_ci_low, x.ratio_ci_high) {
                    (Some(r), Some(lo), Some(hi)) if r > 0.0 => {
                        Some(100.0 * (hi / r - 1.0).max(1.0 - lo / r))
                    }
                    _ => None,
                }
            })
            .collect()
    };
    if widths.is_empty() {
        return None;
    }
    widths
        .into_iter()
        .try_fold(0.0f64, |acc, w| w.map(|w| acc.max(w)))
}

/// Comparisons per cell — protocols within each setup (server × browser), then servers per
/// protocol (against the first server, within each browser), then engines per protocol
/// (against Chromium, within each server) — with Holm over all of them.
pub(super) fn all_comparisons(
    order: &[SeriesKey],
    inputs: &BTreeMap<SeriesKey, SeriesInput>,
    server_order: &[ServerId],
    seed: u64,
    resamples: usize,
    alpha: f64,
) -> Result<Vec<CellComparison>> {
    let mut cells: Vec<(String, String)> = Vec::new();
    for k in order {
        let c = (k.profile.clone(), k.workload.clone());
        if !cells.contains(&c) {
            cells.push(c);
        }
    }
    let mut comparisons = Vec::new();
    for (profile, workload) in &cells {
        let in_cell: Vec<&SeriesKey> = order
            .iter()
            .filter(|k| &k.profile == profile && &k.workload == workload)
            .collect();
        comparisons.extend(cell_comparisons(
            &in_cell,
            inputs,
            server_order,
            seed,
            resamples,
            alpha,
        )?);
    }
    let mut cmp: Vec<Comparison> = comparisons.iter().map(|c| c.comparison.clone()).collect();
    apply_holm(&mut cmp)?;
    for (c, adjusted) in comparisons.iter_mut().zip(cmp) {
        c.comparison = adjusted;
    }
    Ok(comparisons)
}

/// When the runs are too few for any comparison to survive Holm, says so.
pub(super) fn too_few_runs_warning(comparisons: &[CellComparison], alpha: f64) -> Option<String> {
    let tested: Vec<&Comparison> = comparisons
        .iter()
        .map(|c| &c.comparison)
        .filter(|c| c.p.is_some())
        .collect();
    let family = tested.len();
    // The best any tested comparison could do: its sample sizes bound its p-value.
    let best = tested
        .iter()
        .map(|c| {
            let (a, b) = c.runs();
            smallest_attainable_p(a, b)
        })
        .fold(f64::INFINITY, f64::min);
    if family == 0 || best * (family as f64) < alpha {
        return None;
    }
    let n = tested
        .iter()
        .map(|c| {
            let (a, b) = c.runs();
            a.min(b)
        })
        .max()
        .unwrap_or(0);
    Some(format!(
        "with at most {n} runs per compared series the smallest possible p is {best:.2e}; Holm over {family} comparisons needs p < {:.1e} for the first one, so no difference can be called significant: use more --runs (10 or more)",
        alpha / family as f64
    ))
}
