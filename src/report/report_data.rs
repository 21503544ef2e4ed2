//! What the report is made from (pure): the matrix's metadata and statistics, with the
//! presentation order of profiles, workloads, servers and series, lookups, and the number
//! formats every table and chart shares.

use std::collections::BTreeMap;

use crate::config::device::DeviceId;
use crate::config::identity::{BrowserId, ServerId, Setup, View};
use crate::config::protocol::Variant;
use crate::config::workload::{Workload, WorkloadKind};
use crate::evidence::engine_tells::EngineTells;
use crate::results::attrition::Attrition;
use crate::results::store::Meta;
use crate::results::summary::{CellComparison, SeriesStats, Summary};
use crate::support::stats::{
    Censored, RatioBound, SeriesSummary, Side, UndeterminedReason, Verdict,
};

/// The inputs of one report with their presentation order.
#[derive(Debug, Clone)]
pub struct ReportData {
    pub meta: Meta,
    pub summary: Summary,
    /// Profiles in the plan's order (then any others found in the summary).
    pub profiles: Vec<String>,
    pub workloads: Vec<String>,
    pub servers: Vec<ServerId>,
    /// The engines, Chromium first.
    pub browsers: Vec<BrowserId>,
    /// The visits measured, first before repeat.
    pub views: Vec<View>,
    /// The devices, desktop first, then in the plan's order.
    pub devices: Vec<DeviceId>,
    /// Every (server, browser) with series, browser-major: the unit the tables are made for.
    pub setups: Vec<Setup>,
    /// In presentation order (h1, h2, h3, h3-primed).
    pub variants: Vec<Variant>,
    /// The replay fidelity of the replayed sites' median runs, by run id, read from their
    /// records (empty until the IO shell reads them; a record that cannot be read is absent).
    pub median_replays: BTreeMap<String, crate::evidence::fidelity::ReplayFidelity>,
    /// The render paths of every series' median run, by run id (empty until the IO shell
    /// reads them; a record without them is absent).
    pub median_render_paths: BTreeMap<String, crate::evidence::render_path::RenderPaths>,
    /// The visual changes Speed Index is made of in every series' median run, by run id
    /// (empty until the IO shell reads them; a record without them is absent).
    pub median_visual_changes:
        BTreeMap<String, Vec<crate::evidence::paint_round_trips::VisualChange>>,
}

fn push_new<T: PartialEq + Clone>(v: &mut Vec<T>, s: &T) {
    if !v.contains(s) {
        v.push(s.clone());
    }
}

impl ReportData {
    pub fn new(meta: Meta, summary: Summary) -> ReportData {
        let mut profiles = Vec::new();
        let mut workloads = Vec::new();
        let mut servers = Vec::new();
        let mut variants: Vec<Variant> = Vec::new();
        let present = |f: &dyn Fn(&SeriesStats) -> &str, name: &str| {
            summary.series.iter().any(|s| f(s) == name)
        };
        for p in &meta.plan.profiles {
            if present(&|s| &s.key.profile, p) {
                push_new(&mut profiles, p);
            }
        }
        for w in &meta.plan.workloads {
            if present(&|s| &s.key.workload, w) {
                push_new(&mut workloads, w);
            }
        }
        for s in &meta.plan.servers {
            if summary.series.iter().any(|x| &x.key.server == s) {
                push_new(&mut servers, s);
            }
        }
        for s in &summary.series {
            push_new(&mut profiles, &s.key.profile);
            push_new(&mut workloads, &s.key.workload);
            push_new(&mut servers, &s.key.server);
            if !variants.contains(&s.key.variant) {
                variants.push(s.key.variant);
            }
        }
        variants.sort();
        // In the engines' order (the default engine, Chromium, first).
        let browsers: Vec<BrowserId> = summary
            .series
            .iter()
            .map(|s| s.key.browser)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let views: Vec<View> = View::ALL
            .into_iter()
            .filter(|v| summary.series.iter().any(|s| s.key.view == *v))
            .collect();
        let mut devices: Vec<DeviceId> = Vec::new();
        for d in meta
            .plan
            .devices
            .iter()
            .chain(summary.series.iter().map(|s| &s.key.device))
        {
            if summary.series.iter().any(|x| &x.key.device == d) {
                push_new(&mut devices, d);
            }
        }
        devices.sort_by_key(|d| !d.is_desktop());
        let mut setups: Vec<Setup> = Vec::new();
        for v in &views {
            for d in &devices {
                for b in &browsers {
                    for s in &servers {
                        let setup = Setup::new(s.clone(), *b).on(*v).with_device(d.clone());
                        if summary.series.iter().any(|x| x.key.is(&setup)) {
                            setups.push(setup);
                        }
                    }
                }
            }
        }
        ReportData {
            meta,
            summary,
            profiles,
            workloads,
            servers,
            browsers,
            views,
            devices,
            setups,
            variants,
            median_replays: BTreeMap::new(),
            median_render_paths: BTreeMap::new(),
            median_visual_changes: BTreeMap::new(),
        }
    }

    /// The parts of `setup` that vary in this matrix, for titles: `caddy`, `Firefox`,
    /// `caddy, Firefox`, or nothing when there is one server and one engine.
    pub fn setup_name(&self, setup: &Setup) -> Option<String> {
        let mut parts = Vec::new();
        if self.servers.len() > 1 {
            parts.push(format!("server {}", setup.server));
        }
        parts.extend(self.engine_and_view(setup));
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// What tells `setup` apart beside its server: its engine (unless the matrix has Chromium
    /// alone), its device (unless it has desktop alone) and its view (unless it has first
    /// visits alone).
    pub fn engine_and_view(&self, setup: &Setup) -> Vec<String> {
        let mut parts = Vec::new();
        if self.browsers.len() > 1 || setup.browser != BrowserId::default() {
            parts.push(setup.browser.label().to_string());
        }
        if self.devices.len() > 1 || !setup.device.is_desktop() {
            parts.push(format!("on {}", setup.device));
        }
        if self.views.len() > 1 || setup.view != View::First {
            parts.push(format!("{} view", setup.view));
        }
        parts
    }

    /// Whether the tables are made for more than one setup (ids and titles then name it).
    pub fn several_setups(&self) -> bool {
        self.setups.len() > 1
    }

    pub fn series(
        &self,
        profile: &str,
        workload: &str,
        setup: &Setup,
        variant: Variant,
    ) -> Option<&SeriesStats> {
        self.summary.series.iter().find(|s| {
            s.key.profile == profile
                && s.key.workload == workload
                && s.key.is(setup)
                && s.key.variant == variant
        })
    }

    /// The protocol comparison `a` vs `b` within one setup's cell.
    pub fn comparison(
        &self,
        profile: &str,
        workload: &str,
        setup: &Setup,
        a: Variant,
        b: Variant,
    ) -> Option<&CellComparison> {
        self.setup_comparison(profile, workload, setup, a, setup, b)
    }

    /// `setup_a`'s `a` against `setup_b`'s `b`, whichever way round the statistics made it.
    pub fn setup_comparison_either(
        &self,
        profile: &str,
        workload: &str,
        setup_a: &Setup,
        a: Variant,
        setup_b: &Setup,
        b: Variant,
    ) -> Option<CellComparison> {
        self.setup_comparison(profile, workload, setup_a, a, setup_b, b)
            .cloned()
            .or_else(|| {
                self.setup_comparison(profile, workload, setup_b, b, setup_a, a)
                    .map(invert)
            })
    }

    pub fn setup_comparison(
        &self,
        profile: &str,
        workload: &str,
        setup_a: &Setup,
        a: Variant,
        setup_b: &Setup,
        b: Variant,
    ) -> Option<&CellComparison> {
        self.summary.comparisons.iter().find(|c| {
            c.profile == profile
                && c.workload == workload
                && c.setup_a() == *setup_a
                && c.setup_b() == *setup_b
                && c.a == a
                && c.b == b
        })
    }

    pub fn has_workload(&self, w: &str) -> bool {
        self.workloads.iter().any(|x| x == w)
    }

    /// What engine `b` can tell of a run, as `meta.json` keeps it (None: not kept there, in
    /// directories made before it was).
    pub fn engine_tells(&self, b: BrowserId) -> Option<&EngineTells> {
        self.meta.engines.get(b.name())
    }

    pub fn has_variant(&self, v: Variant) -> bool {
        self.variants.contains(&v)
    }

    /// Variants that have at least one series for this workload and setup.
    pub fn variants_in(&self, workload: &str, setup: &Setup) -> Vec<Variant> {
        self.variants
            .iter()
            .copied()
            .filter(|v| {
                self.summary
                    .series
                    .iter()
                    .any(|s| s.key.workload == workload && s.key.is(setup) && s.key.variant == *v)
            })
            .collect()
    }

    /// Profiles that have at least one series for this workload and setup.
    pub fn profiles_in(&self, workload: &str, setup: &Setup) -> Vec<String> {
        self.profiles
            .iter()
            .filter(|p| {
                self.summary
                    .series
                    .iter()
                    .any(|s| s.key.workload == workload && s.key.is(setup) && &s.key.profile == *p)
            })
            .cloned()
            .collect()
    }

    /// Whether the setup has any series of this workload.
    pub fn setup_has(&self, workload: &str, setup: &Setup) -> bool {
        self.summary
            .series
            .iter()
            .any(|s| s.key.workload == workload && s.key.is(setup))
    }
}

/// The parsed workload, when its name is one pagebench knows.
pub fn workload_kind(name: &str) -> Option<WorkloadKind> {
    name.parse::<Workload>().ok().map(|w| w.kind)
}

/// What the headline time is for a workload, for axis titles: the statistics' `metric` (a
/// registry name: a paint metric after `report --metric`), or for the default (`completion_ms`)
/// the workload's own completion.
pub fn headline_label(metric: &str, workload: &str) -> &'static str {
    if metric != crate::evidence::metric_registry::COMPLETION_MS.name {
        if let Some(m) = crate::evidence::metric_registry::by_name(metric) {
            return m.label;
        }
    }
    match workload_kind(workload) {
        Some(WorkloadKind::Download { .. }) => "download complete (ms)",
        Some(WorkloadKind::Upload { .. }) => "upload answered (ms)",
        _ => "loadEventEnd (ms)",
    }
}

/// A human name of a workload: `page50` → `50-file page`, `download` → `3 MB download`.
pub fn workload_title(workload: &str) -> String {
    match workload_kind(workload) {
        Some(WorkloadKind::Page {
            files,
            file_bytes: None,
        }) => format!("{files}-file page"),
        Some(WorkloadKind::Page {
            files,
            file_bytes: Some(b),
        }) => format!("{files} × {} page", fmt_bytes(b)),
        Some(WorkloadKind::Sharded {
            files,
            file_bytes,
            shards,
        }) => {
            let page = match file_bytes {
                None => format!("{files}-file page"),
                Some(b) => format!("{files} × {} page", fmt_bytes(b)),
            };
            let hosts = if shards == 1 { "host" } else { "hosts" };
            format!("{page} over {shards} {hosts}")
        }
        Some(WorkloadKind::LateStylesheet { images }) => {
            format!("{images} images before a late stylesheet")
        }
        Some(WorkloadKind::Download { bytes }) => format!("{} download", fmt_bytes(bytes)),
        Some(WorkloadKind::Upload { bytes }) => format!("{} upload", fmt_bytes(bytes)),
        Some(WorkloadKind::Site { .. }) | None => workload.to_string(),
    }
}

fn fmt_bytes(b: u64) -> String {
    if b >= 1_000_000 && b % 100_000 == 0 {
        format!("{} MB", fmt_trim(b as f64 / 1e6))
    } else if b >= 1_000 && b % 100 == 0 {
        format!("{} KB", fmt_trim(b as f64 / 1e3))
    } else {
        format!("{b} B")
    }
}

fn fmt_trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// Numbers as tables print them: one decimal below 10, none above.
pub fn fmt_num(v: f64) -> String {
    if v.abs() < 10.0 && v.fract() != 0.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// How a metric's values are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumFormat {
    /// Milliseconds, counts: [`fmt_num`].
    Plain,
    /// Two decimals (handshake round trips, ratios).
    Fine,
}

impl NumFormat {
    pub fn fmt(self, v: f64) -> String {
        match self {
            NumFormat::Plain => fmt_num(v),
            NumFormat::Fine => format!("{v:.2}"),
        }
    }
}

/// A series cell: `median [CI low–high]` (an end that did not finish reads `DNF`),
/// `DNF (k of n DNF)` when the median itself did not finish, or `—`; then the invalid/DNF
/// counts when there are any.
pub fn series_text(s: &SeriesSummary, f: NumFormat) -> String {
    let c = |v: Censored| match v {
        Censored::Ms(x) => f.fmt(x),
        Censored::Dnf => "DNF".into(),
    };
    let mut t = match (s.median, s.ci_low, s.ci_high) {
        (Some(Censored::Dnf), _, _) => {
            format!("DNF ({} of {} DNF)", s.n_dnf, s.n_dnf + s.n_valid)
        }
        (Some(m), Some(lo), Some(hi)) => format!("{} [{}–{}]", c(m), c(lo), c(hi)),
        (Some(m), _, _) => format!("{} (no CI: n={})", c(m), s.n_valid + s.n_dnf),
        _ => "—".into(),
    };
    let mut extra = Vec::new();
    if s.n_invalid > 0 {
        extra.push(format!("{} invalid", s.n_invalid));
    }
    if s.n_dnf > 0 && !s.median_is_dnf() {
        extra.push(format!("{} DNF", s.n_dnf));
    }
    if !extra.is_empty() {
        t.push_str(&format!(" · {}", extra.join(", ")));
    }
    t
}

/// The median's CI as numbers, when neither end is a DNF (for whiskers).
pub fn finite_ci(s: &SeriesSummary) -> Option<(f64, f64)> {
    s.ci_low
        .and_then(Censored::ms)
        .zip(s.ci_high.and_then(Censored::ms))
}

/// A ratio of medians as printed in tables and charts (see `summary::fmt_ratio`).
pub fn ratio_text(ratio: f64, bound: RatioBound) -> String {
    crate::results::summary::fmt_ratio(ratio, bound)
}

/// The verdict of a comparison as a class (for colours) and a mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum VerdictClass {
    Faster,
    Slower,
    NotSignificant,
    Undetermined,
    /// The side that would be faster fails significantly more often (not called faster).
    FailsMore,
}

impl VerdictClass {
    pub fn of(v: &Verdict) -> VerdictClass {
        match v {
            Verdict::Faster => VerdictClass::Faster,
            Verdict::Slower => VerdictClass::Slower,
            Verdict::NoSignificantDifference => VerdictClass::NotSignificant,
            Verdict::Undetermined(_) => VerdictClass::Undetermined,
            Verdict::FailsMore { .. } => VerdictClass::FailsMore,
        }
    }

    /// The mark printed after a ratio (glyphs the bundled font has).
    pub fn mark(self) -> &'static str {
        match self {
            VerdictClass::Faster => "↓ faster",
            VerdictClass::Slower => "↑ slower",
            VerdictClass::NotSignificant => "≈ n.s.",
            VerdictClass::Undetermined => "?",
            VerdictClass::FailsMore => "! fails more",
        }
    }

    pub fn legend(self) -> &'static str {
        match self {
            VerdictClass::Faster => "faster (significant)",
            VerdictClass::Slower => "slower (significant)",
            VerdictClass::NotSignificant => "no significant difference",
            VerdictClass::Undetermined => "undetermined",
            VerdictClass::FailsMore => "fails more often (not called faster)",
        }
    }

    /// The classes every legend lists ([`VerdictClass::FailsMore`] only where it occurs).
    pub const ALL: [VerdictClass; 4] = [
        VerdictClass::Faster,
        VerdictClass::Slower,
        VerdictClass::NotSignificant,
        VerdictClass::Undetermined,
    ];
}

/// Why a comparison of `a` with `b` has no verdict, in words.
pub fn undetermined_why(reason: &UndeterminedReason, a: &str, b: &str) -> String {
    let side = |s: &Side| if *s == Side::A { a } else { b };
    match reason {
        UndeterminedReason::NoRuns { side: s } => format!("{} has no valid runs", side(s)),
        UndeterminedReason::AllDnf => "no run of either finished".into(),
        UndeterminedReason::TooFewRuns {
            side: s,
            n_runs,
            needed,
        } => format!(
            "{} has {n_runs} valid or DNF runs, {needed} needed",
            side(s)
        ),
    }
}

/// A comparison cell: `0.55 [0.52–0.58] ↓ faster (p=0.003)`, `≥ 4.10 [2.0–8.8] ↑ slower` when
/// a's median did not finish; undetermined comparisons say why.
pub fn comparison_text(c: &CellComparison) -> String {
    let x = &c.comparison;
    let class = VerdictClass::of(&x.verdict);
    if let Verdict::Undetermined(reason) = &x.verdict {
        let why = undetermined_why(reason, &c.a.name(), &c.b.name());
        return format!("? undetermined ({why})");
    }
    let ratio = match (x.ratio, x.ratio_ci_low, x.ratio_ci_high) {
        (Some(r), Some(lo), Some(hi)) => {
            format!("{} [{lo:.2}–{hi:.2}]", ratio_text(r, x.ratio_bound))
        }
        (Some(r), _, _) => ratio_text(r, x.ratio_bound),
        _ => String::new(),
    };
    let p = x
        .p_holm
        .map(|p| format!(" (p={})", fmt_p(p)))
        .unwrap_or_default();
    let mut text = format!("{ratio} {}{p}", class.mark()).trim().to_string();
    if c.attrition.as_ref().is_some_and(|a| !a.marks.is_empty()) {
        text.push_str(" †");
    }
    if let Some(f) = crate::results::attrition::words::failures(c) {
        text.push_str(&format!(" · {f}"));
    }
    text
}

/// The same comparison seen from the other side: b vs a (ratio and CI inverted, faster and
/// slower swapped).
pub fn invert(c: &CellComparison) -> CellComparison {
    CellComparison {
        profile: c.profile.clone(),
        workload: c.workload.clone(),
        server_a: c.server_b.clone(),
        server_b: c.server_a.clone(),
        browser_a: c.browser_b,
        browser_b: c.browser_a,
        view_a: c.view_b,
        view_b: c.view_a,
        device_a: c.device_b.clone(),
        device_b: c.device_a.clone(),
        a: c.b,
        b: c.a,
        comparison: c.comparison.inverted(),
        attrition: c.attrition.as_ref().map(Attrition::inverted),
    }
}

/// A p-value in three significant figures, or `<0.001`.
pub use crate::results::summary::fmt_p;

#[cfg(test)]
mod tests {
    use super::*;

    fn s(median: Option<f64>, n_valid: usize, n_invalid: usize, n_dnf: usize) -> SeriesSummary {
        let dnf = 2 * n_dnf >= n_valid + n_dnf && n_dnf > 0;
        let m = if dnf {
            Some(Censored::Dnf)
        } else {
            median.map(Censored::Ms)
        };
        SeriesSummary {
            n_valid,
            n_invalid,
            n_dnf,
            median: m,
            q1: None,
            q3: None,
            iqr: None,
            min: None,
            max: None,
            ci_low: median.map(|m| Censored::Ms(m - 10.0)),
            ci_high: median.map(|m| Censored::Ms(m + 12.0)),
        }
    }

    #[test]
    fn series_cells() {
        assert_eq!(
            series_text(&s(Some(321.4), 8, 0, 0), NumFormat::Plain),
            "321 [311–333]"
        );
        assert_eq!(
            series_text(&s(Some(321.0), 7, 1, 1), NumFormat::Plain),
            "321 [311–333] · 1 invalid, 1 DNF"
        );
        assert_eq!(
            series_text(&s(None, 3, 0, 5), NumFormat::Plain),
            "DNF (5 of 8 DNF)"
        );
        let mut open = s(Some(2113.0), 7, 0, 3);
        open.ci_high = Some(Censored::Dnf);
        assert_eq!(
            series_text(&open, NumFormat::Plain),
            "2113 [2103–DNF] · 3 DNF"
        );
        assert_eq!(finite_ci(&open), None);
        assert_eq!(
            series_text(&s(None, 0, 8, 0), NumFormat::Plain),
            "— · 8 invalid"
        );
        assert_eq!(fmt_num(3.25), "3.2");
        assert_eq!(fmt_num(3.0), "3");
        assert_eq!(fmt_num(180.6), "181");
    }

    #[test]
    fn workload_titles() {
        assert_eq!(workload_title("page50"), "50-file page");
        assert_eq!(workload_title("download"), "3 MB download");
        assert_eq!(workload_title("page50x900"), "50 × 900 B page");
        assert_eq!(workload_title("upload5mb"), "5 MB upload");
        assert_eq!(workload_title("weird"), "weird");
        assert_eq!(workload_title("page50s4"), "50-file page over 4 hosts");
        assert_eq!(workload_title("page20x4kbs1"), "20 × 4 KB page over 1 host");
        assert_eq!(
            headline_label("completion_ms", "page50s2"),
            "loadEventEnd (ms)"
        );
        assert_eq!(
            headline_label("completion_ms", "download"),
            "download complete (ms)"
        );
        assert_eq!(
            headline_label("completion_ms", "page10"),
            "loadEventEnd (ms)"
        );
    }
}
