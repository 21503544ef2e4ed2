use super::*;
use crate::config::identity::{BrowserId, View};
use crate::results::store::RUNS_CSV;

fn row(profile: &str, variant: &str, round: u32, outcome: Outcome, ms: f64) -> RunRow {
    let id = format!("{profile}-page10-r{round}-{variant}");
    use crate::evidence::metric_registry::*;
    let mut r = RunRow::measured(&id, profile, "page10", "embedded", variant, round);
    r.outcome = outcome;
    if outcome == Outcome::Invalid {
        r.invalid_kinds = vec![ReasonKind::ProtocolMismatch];
    }
    r.with_value(&COMPLETION_MS, (outcome == Outcome::Valid).then_some(ms))
        .with_value(&QUEUEING_MEDIAN_MS, Some(ms / 10.0))
        .with_value(&QUEUEING_P95_MS, Some(ms / 5.0))
        .with_value(&TTFB_MEDIAN_MS, Some(1.0))
        .with_value(&CONNECT_MS, Some(2.0))
        .with_value(&ONWIRE_MID, Some(3.0))
        .with_value(&ONWIRE_PEAK, Some(6.0))
        .with_value(&MODEL_RTT_MS, Some(40.0))
        .with_value(&ACHIEVED_RTT_MS, Some(40.05))
        .with_value(&OFFERED_RTT_MS, Some(40.0))
        .with_value(&STEAL_MS, Some(0.0))
}

const TIMEOUT_MS: f64 = 120_000.0;

#[test]
fn a_browser_without_its_sandbox_is_a_warning() {
    let row = |id: &str, sandboxed: Option<f64>| {
        RunRow::measured(id, "wired", "page10", "embedded", "h2", 1)
            .with_value(&metric_registry::BROWSER_SANDBOXED, sandboxed)
    };
    let all_in = [row("a", Some(1.0)), row("b", Some(1.0)), row("c", None)];
    assert_eq!(unsandboxed_warning(&all_in), None);
    let one_out = [row("a", Some(1.0)), row("b", Some(0.0)), row("c", None)];
    let w = unsandboxed_warning(&one_out).unwrap();
    assert!(w.starts_with("1 of 2 attempts' browsers"), "{w}");
    assert!(w.contains("--no-browser-sandbox"), "{w}");
}

#[test]
fn engines_and_views_are_series_of_their_own_and_compared_per_protocol() {
    let mut rows = Vec::new();
    for r in 1..=10 {
        for (browser, view, base) in [
            (BrowserId::default(), View::First, 500.0),
            (BrowserId::new("firefox"), View::First, 600.0),
            (BrowserId::default(), View::Repeat, 400.0),
        ] {
            for (v, extra) in [("h2", 0.0), ("h3", 20.0)] {
                let mut row = row("wired", v, r, Outcome::Valid, base + extra + r as f64);
                row.browser = browser;
                row.view = view;
                row.run_id = format!("{}-{browser}-{view}", row.run_id);
                row.plan_id = row.run_id.clone();
                rows.push(row);
            }
        }
    }
    let s = summarize_runs(&rows, 1, 300, &[], TIMEOUT_MS).unwrap();
    assert_eq!(s.series.len(), 6);
    let labels: Vec<String> = s.comparisons.iter().map(|c| c.label()).collect();
    assert_eq!(
        labels,
        [
            "h3 vs h2",                  // Chromium, first view
            "h3 vs h2",                  // Firefox, first view
            "h3 vs h2",                  // Chromium, repeat view
            "firefox h2 vs chromium h2", // engines, first view
            "firefox h3 vs chromium h3",
            "repeat h2 vs first h2", // a returning visitor against a first visit
            "repeat h3 vs first h3",
        ]
    );
    let repeat = s
        .comparisons
        .iter()
        .find(|c| c.view_a == View::Repeat && c.view_b == View::First && c.a == Variant::H2)
        .unwrap();
    assert!(repeat.comparison.ratio.unwrap() < 0.85);
    assert_eq!(repeat.comparison.verdict, Verdict::Faster);
    // Only Chromium's first-view series keep the labels (and bootstrap seeds) they had.
    let keys: Vec<String> = s.series.iter().map(|x| x.key.label()).collect();
    assert!(keys.contains(&"wired/page10/embedded/h2".to_string()));
    assert!(keys.contains(&"wired/page10/embedded/firefox/h2".to_string()));
    assert!(keys.contains(&"wired/page10/embedded/repeat/h3".to_string()));
    let text = terminal(&s);
    assert!(
        text.contains("page10 on embedded in Firefox, first view"),
        "{text}"
    );
}

#[test]
fn comparisons_and_invalid_runs() {
    let mut rows = Vec::new();
    for r in 1..=12 {
        rows.push(row("wired", "h1", r, Outcome::Valid, 500.0 + r as f64));
        rows.push(row("wired", "h2", r, Outcome::Valid, 300.0 + r as f64));
        rows.push(row(
            "wired",
            "h3",
            r,
            Outcome::Valid,
            301.0 + r as f64 * 0.5,
        ));
    }
    // An invalid run with an absurd time must not move anything.
    let mut bad = row("wired", "h2", 13, Outcome::Invalid, 1.0);
    bad.set(&crate::evidence::metric_registry::COMPLETION_MS, Some(1.0));
    rows.push(bad);
    let mut warm = row("wired", "h1", 1, Outcome::Valid, 99999.0);
    warm.phase = Phase::Warmup;
    rows.push(warm);
    let s = summarize_runs(&rows, 1, 2000, &[], TIMEOUT_MS).unwrap();
    assert_eq!(s.series.len(), 3);
    let h2 = s.series.iter().find(|x| x.key.variant == "h2").unwrap();
    assert_eq!(h2.completion.n_valid, 12);
    assert_eq!(h2.completion.n_invalid, 1);
    assert_eq!(h2.completion.median, Some(Censored::Ms(306.5)));
    assert_eq!(
        h2.invalid_reasons.get(&ReasonKind::ProtocolMismatch),
        Some(&1)
    );
    let h1 = s.series.iter().find(|x| x.key.variant == "h1").unwrap();
    assert_eq!(
        h1.completion.max,
        Some(Censored::Ms(512.0)),
        "warm-up runs are discarded"
    );
    assert_eq!(s.comparisons.len(), 3);
    let c = |a: &str, b: &str| s.comparisons.iter().find(|c| c.a == a && c.b == b).unwrap();
    assert_eq!(c("h2", "h1").comparison.verdict, Verdict::Faster);
    assert_eq!(c("h3", "h1").comparison.verdict, Verdict::Faster);
    assert!(c("h2", "h1").comparison.p_holm.unwrap() >= c("h2", "h1").comparison.p.unwrap());
    assert_eq!(s.holm_family, 3);
    assert!(s.warnings.is_empty());
    let t = terminal(&s);
    assert!(
        t.contains("page10 on embedded") && t.contains("h2/h1"),
        "{t}"
    );
}

#[test]
fn few_runs_warn_that_nothing_can_be_significant() {
    let mut rows = Vec::new();
    for r in 1..=5 {
        for (p, base) in [
            ("a", 100.0),
            ("b", 200.0),
            ("c", 300.0),
            ("d", 400.0),
            ("e", 500.0),
            ("f", 600.0),
        ] {
            rows.push(row(p, "h1", r, Outcome::Valid, base * 2.0 + r as f64));
            rows.push(row(p, "h2", r, Outcome::Valid, base + r as f64));
            rows.push(row(p, "h3", r, Outcome::Valid, base * 1.5 + r as f64));
        }
    }
    let s = summarize_runs(&rows, 1, 500, &[], TIMEOUT_MS).unwrap();
    assert_eq!(s.holm_family, 18);
    assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
    assert!(s
        .comparisons
        .iter()
        .all(|c| c.comparison.verdict == Verdict::NoSignificantDifference));
}

#[test]
fn dnf_runs_are_slowest_observations_and_tested() {
    let mut rows = Vec::new();
    for r in 1..=6 {
        rows.push(row("cell-edge", "h2", r, Outcome::Valid, 1800.0 + r as f64));
        rows.push(row(
            "cell-edge",
            "h3",
            r,
            if r <= 4 { Outcome::Dnf } else { Outcome::Valid },
            9000.0,
        ));
    }
    let s = summarize_runs(&rows, 1, 500, &[], TIMEOUT_MS).unwrap();
    let h3 = s.series.iter().find(|x| x.key.variant == "h3").unwrap();
    assert!(h3.completion.median_is_dnf());
    assert_eq!(fmt_series(&h3.completion), "DNF (4 of 6 DNF)");
    let c = &s.comparisons[0];
    assert_eq!((c.a, c.b), (Variant::H3, Variant::H2));
    // Decided by the test, inside the Holm family (6 vs 6, fully separated: p ≈ 0.004).
    assert!(c.comparison.p.is_some());
    assert_eq!(s.holm_family, 1);
    assert_eq!(c.comparison.verdict, Verdict::Slower);
    assert_eq!(c.comparison.ratio_bound, RatioBound::AtLeast);
    assert!(terminal(&s).contains("≥"), "{}", terminal(&s));
}

#[test]
fn only_the_last_attempt_of_a_retried_run_counts() {
    let mut rows = Vec::new();
    for r in 1..=5 {
        rows.push(row("wired", "h2", r, Outcome::Valid, 300.0 + r as f64));
    }
    // Round 1 failed on the link first (its time is absurd), then ran clean.
    let mut failed = row("wired", "h2", 1, Outcome::Invalid, 5.0);
    failed.invalid_kinds = vec![ReasonKind::Link];
    failed.measurement_failure = true;
    failed.set(&crate::evidence::metric_registry::COMPLETION_MS, Some(5.0));
    let mut retry = rows[0].clone();
    retry.run_id = format!("{}.a2", retry.plan_id);
    retry.attempt = 2;
    retry.set(
        &crate::evidence::metric_registry::COMPLETION_MS,
        Some(301.0),
    );
    rows[0] = failed;
    rows.push(retry);
    let s = summarize_runs(&rows, 1, 500, &[], TIMEOUT_MS).unwrap();
    let h2 = &s.series[0];
    assert_eq!((h2.completion.n_valid, h2.completion.n_invalid), (5, 0));
    assert_eq!(h2.retries, 1);
    assert_eq!(s.retries, 1);
    assert_eq!(s.invalid_by_reason.get(&ReasonKind::Link), Some(&1));
    assert_eq!(s.links[0].link_invalid, 1);
    assert_eq!(s.links[0].runs, 5, "the link-invalid attempt is left out");
    assert_eq!(s.links[0].achieved_rtt_median_ms, Some(40.05));
    assert!(s.is_current(&rows));
    // The summary of before the retry: same counted runs, but it is stale.
    let before: Vec<RunRow> = rows.iter().filter(|r| r.attempt == 1).cloned().collect();
    let old = summarize_runs(&before, 1, 500, &[], TIMEOUT_MS).unwrap();
    assert!(old.is_current(&before));
    assert!(
        !old.is_current(&rows),
        "a retry makes the older summary stale"
    );
}

#[test]
fn valid_runs_without_the_headline_are_counted_and_said_not_dropped() {
    use crate::evidence::metric_registry::LCP_MS;
    let mut rows = Vec::new();
    for r in 1..=10 {
        let h2 = row("wired", "h2", r, Outcome::Valid, 500.0 + r as f64);
        rows.push(h2.with_value(&LCP_MS, Some(400.0 + r as f64)));
        // h3 recorded no LCP in 3 of its 10 valid runs.
        let h3 = row("wired", "h3", r, Outcome::Valid, 480.0 + r as f64);
        rows.push(h3.with_value(&LCP_MS, (r > 3).then_some(380.0 + r as f64)));
    }
    let s = summarize_runs_on(&LCP_MS, &rows, 1, 500, &[], TIMEOUT_MS).unwrap();
    let of = |v: &str| s.series.iter().find(|x| x.key.variant == v).unwrap();
    assert_eq!(
        (of("h3").without_headline, of("h3").completion.n_valid),
        (3, 7)
    );
    assert_eq!((of("h3").valid_runs(), of("h3").counted_runs()), (10, 10));
    assert_eq!(of("h2").without_headline, 0);
    assert!(s.is_current(&rows));
    let c = &s.comparisons[0];
    assert_eq!((c.comparison.n_valid_a, c.comparison.n_valid_b), (7, 10));
    let warning = s
        .warnings
        .iter()
        .find(|w| w.contains("without LCP"))
        .unwrap();
    assert!(
        warning.contains("wired/page10/embedded/h3 3 of 10") && !warning.contains("/h2"),
        "{warning}"
    );
    assert!(terminal(&s).contains("without LCP (lcp_ms)"));
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &s).unwrap();
    let csv = std::fs::read_to_string(dir.path().join("summary.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains(",n_without_metric,"));
    let h3 = csv.lines().find(|l| l.contains(",h3,")).unwrap();
    assert!(h3.contains(",7,0,0,3,"), "{h3}");
    let back = read(dir.path()).unwrap();
    assert_eq!(back.series[1].without_headline, 3);
    // On loadEventEnd every valid run has its figure: nothing to say, nothing written.
    let load = summarize_runs(&rows, 1, 500, &[], TIMEOUT_MS).unwrap();
    assert!(load.series.iter().all(|x| x.without_headline == 0));
    assert!(!load.warnings.iter().any(|w| w.contains("without")));
    assert!(!serde_json::to_string(&load)
        .unwrap()
        .contains("without_headline"));
}

#[test]
fn reason_kinds_are_read_typed() {
    let tmp = crate::support::tempdir::create("summary-test").unwrap();
    let dir = tmp.path();
    let header = crate::results::csv::RUN_COLUMNS.join(",");
    let mut fields: Vec<String> = vec![String::new(); crate::results::csv::RUN_COLUMNS.len()];
    let set = |f: &mut Vec<String>, name: &str, v: &str| {
        let i = crate::results::csv::RUN_COLUMNS
            .iter()
            .position(|c| *c == name)
            .unwrap();
        f[i] = v.to_string();
    };
    for (k, v) in [
        ("run_id", "a"),
        ("plan_id", "a"),
        ("attempt", "1"),
        ("round", "1"),
        ("position", "1"),
        ("phase", "measure"),
        ("browser", "chromium"),
        ("view", "first"),
        ("variant", "h2"),
        ("outcome", "invalid"),
        ("invalid_kinds", "link"),
        ("measurement_failure", "true"),
        ("viewpoints", "3"),
    ] {
        set(&mut fields, k, v);
    }
    // The same run id twice (a row appended again by hand): read once, the last one kept.
    let first = fields.join(",");
    set(&mut fields, "invalid_kinds", "link server");
    std::fs::write(
        dir.join(RUNS_CSV),
        format!("{header}\n{first}\n{}\n", fields.join(",")),
    )
    .unwrap();
    let rows = read_runs(dir).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].invalid_kinds,
        [ReasonKind::Link, ReasonKind::Server]
    );
    set(&mut fields, "invalid_kinds", "gremlins");
    std::fs::write(
        dir.join(RUNS_CSV),
        format!("{header}\n{}\n", fields.join(",")),
    )
    .unwrap();
    let e = format!("{:#}", read_runs(dir).unwrap_err());
    assert!(e.contains("row 2") && e.contains("gremlins"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}
