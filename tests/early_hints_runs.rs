//! `--early-hints` end to end, with real Chromium through the emulated link against the
//! embedded server over HTTP/3: a page whose server thinks 300 ms before answering, with a
//! render-blocking stylesheet. With the hints the browser requests the stylesheet before the
//! page's final response begins (it acted on the `103`); without them, only after.

mod runs_support;

use std::path::{Path, PathBuf};

use pagebench::probe::metrics::EntryTiming;
use pagebench::probe::record::RunRecord;
use pagebench::probe::validate::Outcome;
use runs_support::SiteFile;

/// The page (recorded 300 ms slower than the origin's other answers), its stylesheet, an image.
fn archive(dir: &Path) -> String {
    let page = "<!doctype html><html><head><link rel=\"icon\" href=\"data:,\">\
                <link rel=\"stylesheet\" href=\"/style.css\"></head>\
                <body><img src=\"/hero.svg\" width=\"10\" height=\"10\"><p>hinted</p></body></html>";
    // A hinted response the browser may not keep is fetched again: the hinted ones may be.
    let files = [
        SiteFile::new("/", "text/html; charset=utf-8", page).wait(340.0),
        SiteFile::new("/style.css", "text/css", "p { color: teal }\n")
            .wait(40.0)
            .cache("max-age=600"),
        SiteFile::new(
            "/hero.svg",
            "image/svg+xml",
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"/>",
        )
        .wait(40.0)
        .cache("max-age=600"),
    ];
    runs_support::site_archive(dir, "hints.test", "h3", "tests/early_hints_runs.rs", &files)
}

fn matrix(tmp: &Path, workload: &str, hints: &str) -> PathBuf {
    runs_support::matrix(
        tmp,
        &format!("hints-{hints}"),
        &[
            "--profiles",
            "wired",
            "--workloads",
            workload,
            "--protocols",
            "h3",
            "--runs",
            "3",
            "--think-time",
            "recorded",
            "--server-protocols",
            "h3",
            "--early-hints",
            hints,
        ],
    )
}

/// Per valid run: when the server got the stylesheet's request, relative to when it answered
/// the page (ms; negative: before), and how the page took the stylesheet (Resource Timing's
/// `initiatorType`).
fn stylesheet_vs_answer(dir: &Path) -> Vec<(f64, String)> {
    let (recs, invalid): (Vec<RunRecord>, Vec<RunRecord>) = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|e| serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
        .partition(|r: &RunRecord| r.outcome == Outcome::Valid);
    let why: Vec<String> = invalid
        .iter()
        .map(|r| format!("{}: {:?}", r.id, r.reasons))
        .collect();
    assert!(recs.len() >= 3, "{} valid runs; {why:?}", recs.len());
    recs.iter()
        .map(|r| {
            let seen = |path: &str| {
                r.server_requests
                    .iter()
                    .find(|v| v.path == path)
                    .unwrap_or_else(|| panic!("{}: the server saw no {path}", r.id))
            };
            let (page, css) = (seen("/"), seen("/style.css"));
            let answered = page.received_unix_ms.unwrap() as f64 + page.server_ms.unwrap();
            let initiator = r
                .observation
                .resources
                .iter()
                .map(EntryTiming::parse)
                .find(|t| t.name.ends_with("/style.css"))
                .map(|t| t.initiator_type)
                .unwrap_or_default();
            (css.received_unix_ms.unwrap() as f64 - answered, initiator)
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn early_hints_over_h3_start_the_stylesheet_before_the_page_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let workload = archive(&tmp.path().join("site"));
    let hinted = stylesheet_vs_answer(&matrix(tmp.path(), &workload, "true"));
    let plain = stylesheet_vs_answer(&matrix(tmp.path(), &workload, "false"));
    eprintln!("stylesheet's request − the page's answer (ms), and its initiator: hinted {hinted:?}, plain {plain:?}");
    // The server thinks 300 ms: a hinted stylesheet is asked for about that much earlier.
    let at = |v: &[(f64, String)]| median(v.iter().map(|x| x.0).collect());
    assert!(at(&hinted) < -150.0, "hinted: {hinted:?}");
    assert!(
        hinted.iter().all(|x| x.1 == "early-hints"),
        "hinted: {hinted:?}"
    );
    assert!(at(&plain) > 0.0, "without hints: {plain:?}");
    assert!(
        plain.iter().all(|x| x.1 == "link"),
        "without hints: {plain:?}"
    );
}

#[test]
fn early_hints_are_refused_where_the_server_would_also_offer_tcp() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pagebench"))
        .args(["serve", "--early-hints", "true", "--port", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("--early-hints") && err.contains("--server-protocols h3"),
        "{err}"
    );
}
