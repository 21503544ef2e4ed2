//! `--early-hints` end to end, with real Chromium through the emulated link against the
//! embedded server over HTTP/2 and HTTP/3: a page whose server thinks 300 ms before answering,
//! with a render-blocking stylesheet, replayed by three arms of the server in one matrix. With
//! the page's hints the browser requests the stylesheet before the page's final response
//! begins (it acted on the `103`); without them, only after; with a user's list, what it lists.

mod runs_support;

use std::path::{Path, PathBuf};

use pagebench::evidence::metrics::EntryTiming;
use pagebench::evidence::run_record::RunRecord;
use pagebench::evidence::validate::Outcome;
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

/// The page under three arms of one server, interleaved in every round: no hints, the page's
/// own, and a user's list that hints the image alone.
fn matrix(tmp: &Path, workload: &str) -> PathBuf {
    let list = tmp.join("hints.txt");
    std::fs::write(
        &list,
        "# the image only\n/ </hero.svg>; rel=preload; as=image\n",
    )
    .unwrap();
    let listed = format!(
        "embedded:early-hints=true:early-hints-links={}",
        list.display()
    );
    runs_support::matrix(
        tmp,
        "hints",
        &[
            "--profiles",
            "wired",
            "--workloads",
            workload,
            "--protocols",
            "h2,h3",
            "--runs",
            "3",
            "--think-time",
            "recorded",
            "--servers",
            &format!("embedded,{HINTED},{listed}"),
        ],
    )
}

const HINTED: &str = "embedded:early-hints=true";

/// The valid runs of one arm and protocol (at least 3).
fn records(dir: &Path, server: &str, protocol: &str) -> Vec<RunRecord> {
    let (recs, invalid): (Vec<RunRecord>, Vec<RunRecord>) = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|e| serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
        .filter(|r: &RunRecord| r.server.as_str() == server && r.variant.name() == protocol)
        .partition(|r: &RunRecord| r.outcome == Outcome::Valid);
    let why: Vec<String> = invalid
        .iter()
        .map(|r| format!("{}: {:?}", r.id, r.reasons))
        .collect();
    assert!(
        recs.len() >= 3,
        "{server} {protocol}: {} valid runs; {why:?}",
        recs.len()
    );
    recs
}

/// Per run: when the server got the stylesheet's request, relative to when it answered the
/// page (ms; negative: before), and how the page took the stylesheet (Resource Timing's
/// `initiatorType`).
fn stylesheet_vs_answer(recs: &[RunRecord]) -> Vec<(f64, String)> {
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
fn early_hints_over_h2_and_h3_start_the_stylesheet_before_the_page_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let workload = archive(&tmp.path().join("site"));
    let dir = matrix(tmp.path(), &workload);
    for protocol in ["h2", "h3"] {
        let hinted = stylesheet_vs_answer(&records(&dir, HINTED, protocol));
        let plain = stylesheet_vs_answer(&records(&dir, "embedded", protocol));
        eprintln!(
            "{protocol}: stylesheet's request − the page's answer (ms), and its initiator: \
             hinted {hinted:?}, plain {plain:?}"
        );
        // The server thinks 300 ms: a hinted stylesheet is asked for about that much earlier.
        let at = |v: &[(f64, String)]| median(v.iter().map(|x| x.0).collect());
        assert!(at(&hinted) < -150.0, "{protocol} hinted: {hinted:?}");
        assert!(
            hinted.iter().all(|x| x.1 == "early-hints"),
            "{protocol} hinted: {hinted:?}"
        );
        assert!(at(&plain) > 0.0, "{protocol} without hints: {plain:?}");
        assert!(
            plain.iter().all(|x| x.1 == "link"),
            "{protocol} without hints: {plain:?}"
        );
        // The user's list replaces the page's hints: the image alone, the stylesheet as usual.
        let listed = records(
            &dir,
            &format!(
                "embedded:early-hints=true:early-hints-links={}",
                tmp.path().join("hints.txt").display()
            ),
            protocol,
        );
        for r in &listed {
            let page = r.server_requests.iter().find(|v| v.path == "/").unwrap();
            assert_eq!(
                page.early_hints,
                vec!["</hero.svg>; rel=preload; as=image"],
                "{}",
                r.id
            );
        }
        let css = stylesheet_vs_answer(&listed);
        assert!(
            css.iter().all(|x| x.1 == "link"),
            "{protocol} listed: {css:?}"
        );
    }
}

#[test]
fn early_hints_are_refused_over_http_1_1_and_a_bad_list_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let refused = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pagebench"))
            .args(["matrix", "--machine-check", "0s", "--workloads", "page10"])
            .args(args)
            .arg("--out")
            .arg(tmp.path().join("out"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} ran");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refused(&["--protocols", "h1,h2", "--early-hints", "true"]);
    assert!(
        err.contains("HTTP/1.1") && err.contains("measure h2 and h3"),
        "{err}"
    );
    let err = refused(&[
        "--servers",
        "embedded,embedded:early-hints=true",
        "--protocols",
        "h1",
    ]);
    assert!(
        err.contains("embedded:early-hints=true") && err.contains("HTTP/1.1"),
        "{err}"
    );
    let list = tmp.path().join("bad.txt");
    std::fs::write(&list, "/index.html\n").unwrap();
    let err = refused(&[
        "--protocols",
        "h2",
        "--early-hints",
        "true",
        "--early-hints-links",
        list.to_str().unwrap(),
    ]);
    assert!(
        err.contains("bad.txt:1") && err.contains("no Link value"),
        "{err}"
    );
}
