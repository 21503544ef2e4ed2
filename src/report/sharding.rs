//! Domain sharding (pure): a page's files spread over K hosts (`pageNsK`) against the same page
//! from one host (`pageN`), per profile, server and protocol. The study's advice was that
//! sharding helps HTTP/1.1 (more connections) and hurts HTTP/2 (one connection per host, its
//! multiplexing split). The matrix statistics compare protocols within a workload; these
//! comparisons cross workloads, so they are made here from the series' runs, with the same test
//! and bootstrap, and corrected with Holm over this section's own family.

use std::collections::BTreeMap;

use anyhow::{Context, Result};

use super::doc::{Cell, CellClass, Table};
use super::report_data::{fmt_p, ratio_text, ReportData, VerdictClass};
use super::tables::series_cell;
use crate::config::identity::Setup;
use crate::config::protocol::Variant;
use crate::config::workload::Workload;
use crate::results::summary::SeriesStats;
use crate::support::stats::{
    apply_holm, compare, derive_seed, BootstrapConfig, CompareConfig, Comparison, RatioBound,
    SeriesInput, UndeterminedReason, Verdict,
};

/// A page and the sharded versions of it the matrix measured.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardFamily {
    /// The unsharded page, `pageN`: one host.
    pub base: String,
    /// `(K, pageNsK)` by K.
    pub sharded: Vec<(u32, String)>,
}

/// The families present: a `pageN` measured together with at least one `pageNsK`.
pub fn families(data: &ReportData) -> Vec<ShardFamily> {
    let mut by_base: BTreeMap<String, Vec<(u32, String)>> = BTreeMap::new();
    for w in &data.workloads {
        let Some((page, k)) = w.parse::<Workload>().ok().and_then(|w| w.unsharded()) else {
            continue;
        };
        if data.has_workload(&page.name) {
            by_base.entry(page.name).or_default().push((k, w.clone()));
        }
    }
    // The plan's order of the unsharded pages.
    let mut out: Vec<ShardFamily> = Vec::new();
    for w in &data.workloads {
        if let Some(mut sharded) = by_base.remove(w) {
            sharded.sort();
            out.push(ShardFamily {
                base: w.clone(),
                sharded,
            });
        }
    }
    out
}

/// One sharded series against the unsharded one: ratio = median(pageNsK) / median(pageN).
#[derive(Debug, Clone)]
pub struct ShardComparison {
    pub profile: String,
    pub setup: Setup,
    pub variant: Variant,
    pub base: String,
    pub workload: String,
    pub shards: u32,
    /// `a` is the sharded series; Holm-adjusted over [`Sharding::comparisons`].
    pub comparison: Comparison,
}

/// The section: its tables, and per profile and server a sentence on the study's advice.
#[derive(Debug, Clone)]
pub struct Sharding {
    pub comparisons: Vec<ShardComparison>,
    pub tables: Vec<Table>,
    pub advice: Vec<String>,
}

/// The headline time of a series exactly as the matrix statistics fed it to the test: the valid
/// runs' values, the DNFs censored at the matrix's timeout.
fn input(s: &SeriesStats, timeout_ms: f64) -> SeriesInput {
    SeriesInput {
        values: s.values.clone(),
        invalid: s.completion.n_invalid,
        dnf: s.completion.n_dnf,
        censor_at: timeout_ms,
    }
}

/// Every sharded series against its page from one host, Holm-corrected over the lot.
pub fn compare_all(data: &ReportData, fams: &[ShardFamily]) -> Result<Vec<ShardComparison>> {
    let s = &data.summary;
    let timeout_ms = data.meta.timeout_s * 1e3;
    let mut out = Vec::new();
    for fam in fams {
        for setup in &data.setups {
            for profile in &data.profiles {
                for variant in &data.variants {
                    let Some(base) = data.series(profile, &fam.base, setup, *variant) else {
                        continue;
                    };
                    for (k, w) in &fam.sharded {
                        let Some(sharded) = data.series(profile, w, setup, *variant) else {
                            continue;
                        };
                        let label =
                            format!("sharding {} vs {}", sharded.key.label(), base.key.label());
                        let cfg = CompareConfig {
                            alpha: s.alpha,
                            bootstrap: BootstrapConfig {
                                resamples: s.bootstrap_resamples,
                                ..BootstrapConfig::default()
                            }
                            .with_seed(derive_seed(data.meta.plan.seed, &label)),
                        };
                        let comparison =
                            compare(&input(sharded, timeout_ms), &input(base, timeout_ms), &cfg)
                                .with_context(|| label.clone())?;
                        out.push(ShardComparison {
                            profile: profile.clone(),
                            setup: setup.clone(),
                            variant: *variant,
                            base: fam.base.clone(),
                            workload: w.clone(),
                            shards: *k,
                            comparison,
                        });
                    }
                }
            }
        }
    }
    let mut cmp: Vec<Comparison> = out.iter().map(|c| c.comparison.clone()).collect();
    apply_holm(&mut cmp)?;
    for (c, adjusted) in out.iter_mut().zip(cmp) {
        c.comparison = adjusted;
    }
    Ok(out)
}

fn hosts(k: u32) -> String {
    if k == 1 {
        "1 host".into()
    } else {
        format!("{k} hosts")
    }
}

/// How many times faster or slower, from a ratio sharded/unsharded: `1.6×`.
fn factor(c: &Comparison) -> String {
    let r = c.ratio.unwrap_or(1.0);
    let f = if r < 1.0 { 1.0 / r } else { r };
    let bound = match (c.ratio_bound, r < 1.0) {
        (RatioBound::AtLeast, false) | (RatioBound::AtMost, true) => "≥ ",
        _ => "",
    };
    format!("{bound}{f:.2}×")
}

/// `p=0.012`, or `p<0.001`.
fn p_text(c: &Comparison) -> String {
    c.p_holm
        .map(|p| {
            let t = fmt_p(p);
            if t.starts_with('<') {
                format!("p{t}")
            } else {
                format!("p={t}")
            }
        })
        .unwrap_or_default()
}

/// The cell of a sharded series against one host: `0.62 [0.58–0.66] ↓ faster (p=0.002)`.
fn verdict_cell(c: &ShardComparison) -> Cell {
    let x = &c.comparison;
    let class = VerdictClass::of(&x.verdict);
    let cell_class = match class {
        VerdictClass::Faster => CellClass::Faster,
        VerdictClass::Slower => CellClass::Slower,
        VerdictClass::NotSignificant => CellClass::NotSignificant,
        VerdictClass::Undetermined => CellClass::Undetermined,
        VerdictClass::FailsMore => CellClass::Slower,
    };
    if let Verdict::Undetermined(reason) = &x.verdict {
        return Cell::new(format!("? undetermined ({})", why(c, reason)), cell_class);
    }
    let ratio = match (x.ratio, x.ratio_ci_low, x.ratio_ci_high) {
        (Some(r), Some(lo), Some(hi)) => {
            format!("{} [{lo:.2}–{hi:.2}]", ratio_text(r, x.ratio_bound))
        }
        (Some(r), _, _) => ratio_text(r, x.ratio_bound),
        _ => String::new(),
    };
    let p = p_text(x);
    let p = if p.is_empty() { p } else { format!(" ({p})") };
    Cell::new(
        format!("{ratio} {}{p}", class.mark()).trim().to_string(),
        cell_class,
    )
}

fn why(c: &ShardComparison, reason: &UndeterminedReason) -> String {
    super::report_data::undetermined_why(reason, &c.workload, &c.base)
}

/// The verdict as a sentence: `sharding over 4 hosts: h1 1.60× faster (p=0.002)`.
pub fn verdict_sentence(c: &ShardComparison) -> String {
    let x = &c.comparison;
    let what = match &x.verdict {
        Verdict::Faster => format!("{} faster ({})", factor(x), p_text(x)),
        Verdict::Slower => format!("{} slower ({})", factor(x), p_text(x)),
        Verdict::NoSignificantDifference => format!(
            "no difference (ratio {}, {})",
            x.ratio
                .map(|r| ratio_text(r, x.ratio_bound))
                .unwrap_or_else(|| "—".into()),
            p_text(x)
        ),
        Verdict::Undetermined(reason) => format!("undetermined ({})", why(c, reason)),
        Verdict::FailsMore { side } => format!("not faster: {side} fails more often"),
    };
    let over = if c.shards == 1 {
        format!("the archive on 1 host ({})", c.workload)
    } else {
        format!("sharding over {}", hosts(c.shards))
    };
    format!("{over}: {} {what}", c.variant)
}

/// What sharding did to one protocol on one profile, over every K ≥ 2.
#[derive(Debug, Clone)]
enum Effect<'a> {
    NotMeasured,
    /// Faster with some K, slower with none: the K of the biggest gain.
    Helps(&'a ShardComparison),
    Hurts(&'a ShardComparison),
    Mixed,
    NoDifference,
}

fn effect<'a>(cs: &[&'a ShardComparison], v: Variant) -> Effect<'a> {
    let mine: Vec<&ShardComparison> = cs
        .iter()
        .copied()
        .filter(|c| c.variant == v && c.shards >= 2)
        .collect();
    let tested: Vec<&ShardComparison> = mine
        .iter()
        .copied()
        .filter(|c| !matches!(c.comparison.verdict, Verdict::Undetermined(_)))
        .collect();
    if tested.is_empty() {
        return Effect::NotMeasured;
    }
    let ratio = |c: &&ShardComparison| c.comparison.ratio.unwrap_or(1.0);
    let faster: Vec<&ShardComparison> = tested
        .iter()
        .copied()
        .filter(|c| c.comparison.verdict == Verdict::Faster)
        .collect();
    let slower: Vec<&ShardComparison> = tested
        .iter()
        .copied()
        .filter(|c| c.comparison.verdict == Verdict::Slower)
        .collect();
    match (faster.is_empty(), slower.is_empty()) {
        (false, true) => Effect::Helps(
            faster
                .iter()
                .min_by(|a, b| ratio(a).total_cmp(&ratio(b)))
                .copied()
                .unwrap_or(faster[0]),
        ),
        (true, false) => Effect::Hurts(
            slower
                .iter()
                .max_by(|a, b| ratio(a).total_cmp(&ratio(b)))
                .copied()
                .unwrap_or(slower[0]),
        ),
        (false, false) => Effect::Mixed,
        (true, true) => Effect::NoDifference,
    }
}

fn effect_clause(name: &str, e: &Effect) -> String {
    match e {
        Effect::NotMeasured => format!("{name} was not measured sharded and unsharded"),
        Effect::Helps(c) => format!(
            "sharding makes {name} faster ({} over {}, {})",
            factor(&c.comparison),
            hosts(c.shards),
            p_text(&c.comparison)
        ),
        Effect::Hurts(c) => format!(
            "sharding makes {name} slower ({} over {}, {})",
            factor(&c.comparison),
            hosts(c.shards),
            p_text(&c.comparison)
        ),
        Effect::Mixed => {
            format!("sharding makes {name} faster with some host counts and slower with others")
        }
        Effect::NoDifference => format!("sharding makes no significant difference to {name}"),
    }
}

/// The study's advice checked against one profile's (and server's) numbers.
pub fn advice_sentence(where_: &str, cs: &[&ShardComparison]) -> String {
    let h1 = effect(cs, Variant::H1);
    let h2 = effect(cs, Variant::H2);
    let helps_h1 = matches!(h1, Effect::Helps(_));
    let hurts_h2 = matches!(h2, Effect::Hurts(_));
    let conclusion = if matches!(h1, Effect::NotMeasured) || matches!(h2, Effect::NotMeasured) {
        "the study's advice (sharding helps HTTP/1.1 and hurts HTTP/2) cannot be checked in full"
    } else {
        match (helps_h1, hurts_h2) {
            (true, true) => "the study's advice (sharding helps HTTP/1.1 and hurts HTTP/2) holds",
            (true, false) => {
                "the study's advice holds for HTTP/1.1 only (sharding helps it, but does not hurt HTTP/2)"
            }
            (false, true) => {
                "the study's advice holds for HTTP/2 only (sharding hurts it, but does not help HTTP/1.1)"
            }
            (false, false) => {
                "the study's advice (sharding helps HTTP/1.1 and hurts HTTP/2) does not hold here"
            }
        }
    };
    format!(
        "{where_}: {}; {} — {conclusion}.",
        effect_clause("HTTP/1.1", &h1),
        effect_clause("HTTP/2", &h2)
    )
}

/// The section, when the results hold a `pageN` with some `pageNsK`.
pub fn section(data: &ReportData) -> Result<Option<Sharding>> {
    let fams = families(data);
    if fams.is_empty() {
        return Ok(None);
    }
    let comparisons = compare_all(data, &fams)?;
    let mut tables = Vec::new();
    let mut advice = Vec::new();
    for fam in &fams {
        for setup in &data.setups {
            for profile in &data.profiles {
                let mine: Vec<&ShardComparison> = comparisons
                    .iter()
                    .filter(|c| &c.profile == profile && &c.setup == setup && c.base == fam.base)
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let suffix = data
                    .setup_name(setup)
                    .map(|n| format!(" — {n}"))
                    .unwrap_or_default();
                let mut header = vec![
                    "protocol".to_string(),
                    format!("{} ({})", hosts(1), fam.base),
                ];
                for (k, w) in &fam.sharded {
                    header.push(format!("{} ({w})", hosts(*k)));
                    header.push(format!("{w}/{}", fam.base));
                }
                let variants: Vec<Variant> = data
                    .variants
                    .iter()
                    .copied()
                    .filter(|v| mine.iter().any(|c| c.variant == *v))
                    .collect();
                let rows = variants
                    .iter()
                    .map(|v| {
                        let mut r = vec![
                            Cell::label(v.name()),
                            series_cell(data, profile, &fam.base, setup, *v),
                        ];
                        for (_, w) in &fam.sharded {
                            r.push(series_cell(data, profile, w, setup, *v));
                            r.push(
                                mine.iter()
                                    .find(|c| c.variant == *v && &c.workload == w)
                                    .map(|c| verdict_cell(c))
                                    .unwrap_or_else(Cell::missing),
                            );
                        }
                        r
                    })
                    .collect();
                let notes = mine.iter().map(|c| verdict_sentence(c)).collect();
                let mut id = format!("sharding-{}-{profile}", fam.base);
                if data.several_setups() {
                    id.push_str(&format!("-{}", setup.slug()));
                }
                tables.push(Table {
                    id,
                    title: format!(
                        "Domain sharding: {} over 1 to {} hosts on {profile}{suffix}",
                        fam.base,
                        fam.sharded.last().map_or(1, |(k, _)| *k)
                    ),
                    intro: vec![format!(
                        "Median loadEventEnd (ms) [95 % CI] of the same files from one host \
({}) and spread round-robin over K hosts; ratio = sharded / one host, below 1 means sharding is \
faster (Mann-Whitney U, Holm over this section's {} comparisons).",
                        fam.base,
                        comparisons.len()
                    )],
                    header,
                    rows,
                    notes,
                });
                advice.push(advice_sentence(
                    &format!("On {profile} ({}{suffix})", fam.base),
                    &mine,
                ));
            }
        }
    }
    Ok(Some(Sharding {
        comparisons,
        tables,
        advice,
    }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::plan::PlanSpec;
    use crate::evidence::validate::Outcome;
    use crate::results::store::Meta;
    use crate::results::summary::{summarize_runs, RunRow};

    pub(crate) fn row(profile: &str, workload: &str, variant: &str, round: u32, ms: f64) -> RunRow {
        let id = format!("{profile}-{workload}-r{round:02}-embedded-{variant}");
        RunRow::measured(&id, profile, workload, "embedded", variant, round)
            .with_value(&crate::evidence::metric_registry::COMPLETION_MS, Some(ms))
    }

    pub(crate) fn data(rows: &[RunRow], workloads: &[&str]) -> ReportData {
        let summary = summarize_runs(rows, 3, 500, &[], 60_000.0).unwrap();
        let meta = Meta::fixture(
            PlanSpec {
                profiles: vec!["wired".into(), "lossy".into()],
                workloads: workloads.iter().map(|w| w.to_string()).collect(),
                servers: vec![crate::config::identity::ServerId::new("embedded")],
                browsers: vec![crate::config::identity::BrowserId::default()],
                views: vec![crate::config::identity::View::First],
                devices: vec![Default::default()],
                variants: ["h1", "h2"].iter().map(|v| v.parse().unwrap()).collect(),
                runs: 12,
                warmup: 0,
                seed: 3,
                adaptive: None,
            },
            rows.len(),
            60.0,
        );
        ReportData::new(meta, summary)
    }

    /// On `wired` HTTP/1.1 gets faster with more hosts and HTTP/2 slower; on `lossy` HTTP/1.1
    /// gets faster and HTTP/2 does not change (the same spread around the same median).
    fn rows() -> Vec<RunRow> {
        let mut rows = Vec::new();
        let jitter = |r: u32| ((r * 37) % 11) as f64;
        for r in 1..=12 {
            for (w, h1, h2) in [
                ("page50", 1000.0, 500.0),
                ("page50s2", 800.0, 600.0),
                ("page50s4", 600.0, 700.0),
            ] {
                rows.push(row("wired", w, "h1", r, h1 + jitter(r)));
                rows.push(row("wired", w, "h2", r, h2 + jitter(r)));
                rows.push(row("lossy", w, "h1", r, 2.0 * h1 + jitter(r)));
                rows.push(row("lossy", w, "h2", r, 900.0 + jitter(r + 3)));
            }
        }
        rows
    }

    #[test]
    fn h1_faster_and_h2_slower_with_shards_and_the_advice_said_per_profile() {
        let d = data(&rows(), &["page50", "page50s2", "page50s4"]);
        assert_eq!(
            families(&d),
            [ShardFamily {
                base: "page50".into(),
                sharded: vec![(2, "page50s2".into()), (4, "page50s4".into())]
            }]
        );
        let s = section(&d).unwrap().unwrap();
        // 2 profiles × 2 protocols × 2 host counts, Holm over exactly those.
        assert_eq!(s.comparisons.len(), 8);
        assert!(s
            .comparisons
            .iter()
            .all(|c| c.comparison.p_holm.unwrap() >= c.comparison.p.unwrap()));
        assert_eq!(s.tables.len(), 2);
        let wired = &s.tables[0];
        assert_eq!(wired.id, "sharding-page50-wired");
        assert_eq!(
            wired.header,
            [
                "protocol",
                "1 host (page50)",
                "2 hosts (page50s2)",
                "page50s2/page50",
                "4 hosts (page50s4)",
                "page50s4/page50"
            ]
        );
        let cell = |t: &Table, v: &str, col: &str| t.get(&[v], col).unwrap().clone();
        let h1 = cell(wired, "h1", "page50s4/page50");
        assert_eq!(h1.class, CellClass::Faster, "{}", h1.text);
        assert!(h1.text.starts_with("0.60 ["), "{}", h1.text);
        assert_eq!(
            cell(wired, "h2", "page50s2/page50").class,
            CellClass::Slower
        );
        assert_eq!(
            cell(wired, "h2", "page50s4/page50").class,
            CellClass::Slower
        );
        assert!(cell(wired, "h1", "1 host (page50)").text.starts_with("100"));
        let lossy = &s.tables[1];
        assert_eq!(
            cell(lossy, "h2", "page50s4/page50").class,
            CellClass::NotSignificant
        );
        assert!(
            wired
                .notes
                .iter()
                .any(|n| n.starts_with("sharding over 4 hosts: h1 1.66× faster (p")),
            "{:?}",
            wired.notes
        );
        assert!(wired
            .notes
            .iter()
            .any(|n| n.starts_with("sharding over 4 hosts: h2 1.40× slower (p")));
        assert!(lossy
            .notes
            .iter()
            .any(|n| n.starts_with("sharding over 2 hosts: h2 no difference (ratio 1.00")));
        assert_eq!(s.advice.len(), 2);
        assert!(
            s.advice[0].starts_with(
                "On wired (page50): sharding makes HTTP/1.1 faster (1.66× over 4 hosts, p"
            ) && s.advice[0].contains("sharding makes HTTP/2 slower (1.40× over 4 hosts")
                && s.advice[0].ends_with(
                    "the study's advice (sharding helps HTTP/1.1 and hurts HTTP/2) holds."
                ),
            "{}",
            s.advice[0]
        );
        assert!(
            s.advice[1].contains("no significant difference to HTTP/2")
                && s.advice[1].ends_with(
                    "holds for HTTP/1.1 only (sharding helps it, but does not hurt HTTP/2)."
                ),
            "{}",
            s.advice[1]
        );
    }

    #[test]
    fn the_inputs_are_the_ones_the_matrix_statistics_tested() {
        // A DNF and an invalid run: the rebuilt input must give the summary's own p-value.
        let mut rows = rows();
        rows[0].outcome = Outcome::Dnf;
        rows[0].set(&crate::evidence::metric_registry::COMPLETION_MS, None);
        rows[1].outcome = Outcome::Invalid;
        let d = data(&rows, &["page50", "page50s2", "page50s4"]);
        let theirs = d
            .comparison(
                "wired",
                "page50",
                &Setup::new("embedded", crate::config::identity::BrowserId::default()),
                Variant::H2,
                Variant::H1,
            )
            .unwrap();
        let server = Setup::new("embedded", crate::config::identity::BrowserId::default());
        let a = d.series("wired", "page50", &server, Variant::H2).unwrap();
        let b = d.series("wired", "page50", &server, Variant::H1).unwrap();
        assert_eq!(b.completion.n_dnf, 1);
        let ours = compare(
            &input(a, 60_000.0),
            &input(b, 60_000.0),
            &CompareConfig::default(),
        )
        .unwrap();
        assert_eq!(ours.p, theirs.comparison.p);
        assert_eq!(ours.ratio, theirs.comparison.ratio);
        assert_eq!(ours.n_dnf_b, 1);
    }

    #[test]
    fn absent_without_a_page_and_its_sharded_versions() {
        let all = rows();
        let only = |ws: &[&str]| -> Vec<RunRow> {
            all.iter()
                .filter(|r| ws.contains(&r.workload.as_str()))
                .cloned()
                .collect()
        };
        let d = data(&only(&["page50"]), &["page50"]);
        assert!(section(&d).unwrap().is_none());
        let (doc, _) = super::super::build::document(&d, "t", &[], &[], None);
        let md = super::super::doc::to_markdown(&doc);
        assert!(!md.contains("Domain sharding"), "{md}");
        // Sharded pages without their one-host page: nothing to compare against.
        let d = data(&only(&["page50s2", "page50s4"]), &["page50s2", "page50s4"]);
        assert!(families(&d).is_empty() && section(&d).unwrap().is_none());
        // With them, the document has the section and its tables.
        let d = data(&all, &["page50", "page50s2", "page50s4"]);
        let (doc, tables) = super::super::build::document(&d, "t", &[], &[], None);
        let md = super::super::doc::to_markdown(&doc);
        assert!(md.contains("## Domain sharding"), "{md}");
        assert!(md.contains("the study's advice (sharding helps HTTP/1.1 and hurts HTTP/2) holds"));
        assert!(tables.iter().any(|t| t.id == "sharding-page50-lossy"));
        assert!(tables.iter().any(|t| t.id == "all-page50s4-embedded"));
    }

    #[test]
    fn summary_files_and_charts_take_sharded_names() {
        let d = data(&rows(), &["page50", "page50s2", "page50s4"]);
        let dir = tempfile::tempdir().unwrap();
        crate::results::summary::write(dir.path(), &d.summary).unwrap();
        let back = crate::results::summary::read(dir.path()).unwrap();
        assert!(back.series.iter().any(|s| s.key.workload == "page50s4"));
        let csv = std::fs::read_to_string(dir.path().join("summary.csv")).unwrap();
        assert!(csv.contains(",page50s2,"), "{csv}");
        let charts = super::super::chart_data::all(&d, &BTreeMap::new());
        assert!(
            charts.iter().any(|c| c.file == "charts/bars-page50s4.png"),
            "{:?}",
            charts.iter().map(|c| &c.file).collect::<Vec<_>>()
        );
        assert!(charts
            .iter()
            .any(|c| c.title.contains("50-file page over 4 hosts")));
    }
}
