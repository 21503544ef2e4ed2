use super::*;
use crate::config::plan::PlanSpec;
use crate::config::protocol::Variant;
use crate::results::store::Meta;
use crate::results::summary::{summarize_runs_on, RunRow};

fn row(workload: &str, server: &str, variant: &str, round: u32, ms: f64) -> RunRow {
    let id = format!("wired-{workload}-r{round:02}-{server}-{variant}");
    RunRow::measured(&id, "wired", workload, server, variant, round)
        .with_value(&crate::evidence::metric_registry::COMPLETION_MS, Some(ms))
        .with_value(
            &crate::evidence::metric_registry::QUEUEING_MEDIAN_MS,
            Some(1.0),
        )
        .with_value(
            &crate::evidence::metric_registry::QUEUEING_P95_MS,
            Some(2.0),
        )
        .with_value(
            &crate::evidence::metric_registry::TTFB_MEDIAN_MS,
            Some(40.0),
        )
        .with_value(&crate::evidence::metric_registry::CONNECT_MS, Some(80.0))
        .with_value(&crate::evidence::metric_registry::HANDSHAKE_RTTS, Some(2.0))
        .with_value(&crate::evidence::metric_registry::ONWIRE_MID, Some(1.0))
        .with_value(&crate::evidence::metric_registry::ONWIRE_PEAK, Some(1.0))
        .with_value(
            &crate::evidence::metric_registry::GOODPUT_MBIT,
            Some(20_000_000.0 * 8.0 / (ms * 1000.0)),
        )
        .with_value(&crate::evidence::metric_registry::MODEL_RTT_MS, Some(40.0))
        .with_value(
            &crate::evidence::metric_registry::ACHIEVED_RTT_MS,
            Some(40.1),
        )
        .with_value(
            &crate::evidence::metric_registry::OFFERED_RTT_MS,
            Some(40.0),
        )
        .with_value(&crate::evidence::metric_registry::STEAL_MS, Some(0.0))
}

fn data(rows: &[RunRow], servers: &[&str]) -> ReportData {
    data_on(
        &crate::evidence::metric_registry::COMPLETION_MS,
        rows,
        servers,
    )
}

/// The report data of `rows` deciding on `headline` (`report --metric`).
fn data_on(headline: &'static Metric, rows: &[RunRow], servers: &[&str]) -> ReportData {
    let summary = summarize_runs_on(headline, rows, 3, 500, &[], 120_000.0).unwrap();
    let meta = Meta::fixture(
        PlanSpec {
            profiles: vec!["wired".into()],
            workloads: vec!["upload".into()],
            servers: servers
                .iter()
                .map(|s| crate::config::identity::ServerId::new(*s))
                .collect(),
            browsers: vec![crate::config::identity::BrowserId::default()],
            views: vec![crate::config::identity::View::First],
            devices: vec![Default::default()],
            variants: ["h2", "h3"]
                .iter()
                .map(|v| v.parse::<Variant>().unwrap())
                .collect(),
            runs: 10,
            warmup: 0,
            seed: 3,
            adaptive: None,
        },
        rows.len(),
        120.0,
    );
    ReportData::new(meta, summary)
}

#[test]
fn upload_table_with_goodput_and_no_study_tables() {
    let mut rows = Vec::new();
    for r in 1..=10 {
        rows.push(row("upload", "embedded", "h2", r, 2000.0 + r as f64));
        rows.push(row("upload", "embedded", "h3", r, 4000.0 + r as f64));
    }
    let d = data(&rows, &["embedded"]);
    let embedded = Setup::new("embedded", crate::config::identity::BrowserId::default());
    let t = uploads(&d, &embedded);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].id, "upload-upload");
    assert_eq!(t[0].title, "The 20 MB upload");
    assert_eq!(
        t[0].get(&["wired"], "h3/h2").unwrap().class,
        CellClass::Slower
    );
    assert_eq!(
        t[0].get(&["wired"], "goodput (Mbit/s)").unwrap().text,
        "h2 80 / h3 40"
    );
    assert!(h2_vs_h1(&d, &embedded).is_err());
    assert!(download(&d, &embedded).is_err());
    assert!(!has_sweep(&d) && sweep(&d, &embedded, None).is_none());
    assert!(servers(&d).is_empty());
}

#[test]
fn valid_runs_without_the_headline_are_shown_per_series() {
    use crate::evidence::metric_registry::LCP_MS;
    let mut rows = Vec::new();
    for r in 1..=10 {
        let h2 = row("page10", "embedded", "h2", r, 500.0 + r as f64);
        rows.push(h2.with_value(&LCP_MS, Some(400.0 + r as f64)));
        // h3 recorded no LCP in 3 of its 10 valid runs.
        let h3 = row("page10", "embedded", "h3", r, 480.0 + r as f64);
        rows.push(h3.with_value(&LCP_MS, (r > 3).then_some(380.0 + r as f64)));
    }
    let d = data_on(&LCP_MS, &rows, &["embedded"]);
    assert_eq!(
        problem_runs(&d),
        ["`wired/page10/embedded/h3`: 3 of 10 valid runs have no LCP: left out of its median and comparisons, which use the other 7"]
    );
    let embedded = Setup::new("embedded", crate::config::identity::BrowserId::default());
    let t = all_series(&d, "page10", &embedded).unwrap();
    let h3 = t.get(&["wired"], "h3 (ms)").unwrap();
    assert!(
        h3.text.ends_with(" · 3 of 10 valid without LCP"),
        "{}",
        h3.text
    );
    assert!(!t
        .get(&["wired"], "h2 (ms)")
        .unwrap()
        .text
        .contains("without"));
    let (doc, _) = super::super::build::document(&d, "t", &[], &d.summary.warnings, None);
    let md = super::super::doc::to_markdown(&doc);
    assert!(
        md.contains("20 valid (3 of the valid runs have no LCP: they are left out"),
        "{md}"
    );
    assert!(md.contains("wired/page10/embedded/h3 3 of 10"), "{md}");
    // On loadEventEnd nothing is missing and nothing is said.
    let load = data(&rows, &["embedded"]);
    assert!(problem_runs(&load).is_empty());
}

#[test]
fn server_table_is_oriented_against_the_first_server_of_the_plan() {
    let mut rows = Vec::new();
    // caddy's runs come first in runs.csv, so the statistics compare embedded vs caddy.
    for r in 1..=10 {
        rows.push(row("upload", "caddy", "h2", r, 3000.0 + r as f64));
        rows.push(row("upload", "embedded", "h2", r, 2000.0 + r as f64));
    }
    let d = data(&rows, &["embedded", "caddy"]);
    let raw = &d.summary.comparisons[0];
    assert_eq!(
        (raw.server_a.as_str(), raw.server_b.as_str()),
        ("embedded", "caddy")
    );
    let t = servers(&d);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].header[5], "caddy/embedded");
    let c = t[0]
        .get(&["wired", "upload", "h2"], "caddy/embedded")
        .unwrap();
    assert_eq!(c.class, CellClass::Slower, "{}", c.text);
    assert!(c.text.starts_with("1.50 ["), "{}", c.text);
}
