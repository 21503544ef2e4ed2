//! Names resolved through the link (`--dns resolver`) and HTTP/3 announced by an HTTPS record
//! (`h3-dns`), in real Chromium and Firefox against pagebench's own resolver in the server
//! namespace: the lookup is in the record and costs a resolver round trip before the first
//! request, the HTTPS record alone takes a first visit onto h3, and a name outside the plan is
//! NXDOMAIN.

mod runs_support;

use std::path::Path;
use std::process::Command;

use pagebench::evidence::lookups::H3Hint;
use pagebench::evidence::run_record::RunRecord;
use pagebench::evidence::validate::Outcome;
use runs_support::{matrix, SiteFile};

/// The measured records of a results directory, by engine.
fn records(dir: &Path, engine: &str) -> Vec<RunRecord> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir.join("runs")).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        let rec: RunRecord = serde_json::from_str(&text).unwrap();
        if rec.browser.name() == engine {
            out.push(rec);
        }
    }
    assert!(!out.is_empty(), "no {engine} records in {}", dir.display());
    out
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The navigation's requestStart (ms from navigation start).
fn request_start(rec: &RunRecord) -> f64 {
    rec.observation.navigation.as_ref().unwrap()["requestStart"]
        .as_f64()
        .unwrap()
}

#[test]
fn a_first_visit_asks_the_resolver_one_round_trip_before_its_first_request() {
    let tmp = tempfile::tempdir().unwrap();
    // 150 ms without jitter: one round trip to the resolver is then 150 ms, not 130 to 170.
    let far = tmp.path().join("far.toml");
    std::fs::write(&far, "name = \"far\"\nrtt_ms = 150\n").unwrap();
    let far = far.to_str().unwrap().to_string();
    let with = |dns: &str| -> Vec<String> {
        [
            "--profiles",
            &far,
            "--workloads",
            "page10",
            "--protocols",
            "h2",
            "--browsers",
            "chromium,firefox",
            "--runs",
            "3",
            "--dns",
            dns,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let (none, resolver) = (with("none"), with("resolver"));
    let none = matrix(tmp.path(), "none", &args(&none));
    let resolver = matrix(tmp.path(), "resolver", &args(&resolver));
    for engine in ["chromium", "firefox"] {
        let (before, after) = (records(&none, engine), records(&resolver, engine));
        for r in before.iter().chain(&after) {
            assert_eq!(
                r.outcome,
                Outcome::Valid,
                "{engine} {}: {:?}",
                r.id,
                r.reasons
            );
        }
        for r in &before {
            assert!(
                r.lookups.is_empty() && r.metrics.nav_dns_ms.is_none(),
                "{}",
                r.id
            );
        }
        for r in &after {
            let a = r
                .lookups
                .iter()
                .find(|l| l.said.name == "pagebench.test" && l.said.qtype == "A")
                .unwrap_or_else(|| panic!("{engine} {}: {:?}", r.id, r.lookups));
            assert_eq!(a.said.rcode, "NOERROR");
            assert_eq!(a.said.answers.len(), 1, "{a:?}");
            assert!(r.metrics.nav_dns_ms.unwrap() > 140.0, "{:?}", r.metrics);
            assert_eq!(r.round_trips.as_ref().unwrap().lookups, 1.0);
        }
        // The quickest of each side: a busy moment only delays a request (a clean-clone CI run
        // read Firefox's medians only 127 ms apart, each of its lookups over 140 ms).
        let quickest =
            |rs: &[RunRecord]| rs.iter().map(request_start).fold(f64::INFINITY, f64::min);
        let later = quickest(&after) - quickest(&before);
        // One round trip to the resolver at least (the rest: the browser's and the machine's
        // few ms either way).
        assert!(later >= 0.9 * 150.0, "{engine}: only {later:.1} ms later");
    }
}

#[test]
fn an_https_record_alone_takes_a_first_visit_onto_h3_in_both_engines() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = matrix(
        tmp.path(),
        "h3-dns",
        &[
            "--profiles",
            "wired",
            "--workloads",
            "page10",
            "--protocols",
            "h3-dns",
            "--browsers",
            "chromium,firefox",
            "--runs",
            "2",
            "--dns",
            "resolver",
        ],
    );
    for engine in ["chromium", "firefox"] {
        for r in records(&dir, engine) {
            assert_eq!(
                r.outcome,
                Outcome::Valid,
                "{engine} {}: {:?}",
                r.id,
                r.reasons
            );
            assert_eq!(r.h3_hint, Some(H3Hint::HttpsRecord), "{engine} {}", r.id);
            assert_eq!(
                r.observation.navigation.as_ref().unwrap()["nextHopProtocol"],
                "h3",
                "{engine} {}: the first request went over h3",
                r.id
            );
            assert!(r.resources.iter().all(|x| x.protocol == "h3"), "{}", r.id);
            let https = r
                .lookups
                .iter()
                .find(|l| l.said.qtype == "HTTPS" && l.said.name == "pagebench.test")
                .unwrap_or_else(|| panic!("{engine} {}: {:?}", r.id, r.lookups));
            assert_eq!(https.said.answers, vec!["1 . alpn=h3,h2".to_string()]);
            assert_eq!(https.said.alpn, vec!["h3", "h2"]);
        }
    }
}

#[test]
fn a_name_outside_the_plan_is_nxdomain_and_its_request_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let page = "<!doctype html><html><head><link rel=icon href=\"data:,\"></head><body>\
<img src=\"/a.png\"><img src=\"https://elsewhere.test/b.png\"></body></html>";
    let files = [
        SiteFile::new("/", "text/html", page),
        SiteFile::new("/a.png", "image/png", vec![0u8; 2000]),
    ];
    let archive = tmp.path().join("site");
    let workload =
        runs_support::site_archive(&archive, "www.site.test", "h2", "tests/dns_runs.rs", &files);
    let dir = matrix(
        tmp.path(),
        "outside",
        &[
            "--profiles",
            "wired",
            "--workloads",
            &workload,
            "--protocols",
            "h2",
            "--browsers",
            "chromium,firefox",
            "--runs",
            "1",
            "--dns",
            "resolver",
        ],
    );
    for engine in ["chromium", "firefox"] {
        for r in records(&dir, engine) {
            let asked = r
                .lookups
                .iter()
                .find(|l| l.said.name == "elsewhere.test" && l.said.qtype == "A")
                .unwrap_or_else(|| panic!("{engine} {}: {:?}", r.id, r.lookups));
            assert_eq!(asked.said.rcode, "NXDOMAIN");
            let failed = r
                .observation
                .network
                .requests
                .iter()
                .find(|n| n.url.contains("elsewhere.test"))
                .unwrap_or_else(|| panic!("{engine} {}: no request to elsewhere.test", r.id));
            assert!(failed.failed.is_some(), "{engine}: {failed:?}");
            assert!(
                r.lookups.iter().any(|l| l.said.name == "www.site.test"),
                "{engine}: the page's own name was asked too"
            );
        }
    }
}

#[test]
fn h3_dns_without_a_resolver_or_a_first_view_is_refused_before_anything_starts() {
    let refused = |args: &[&str], says: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_pagebench"))
            .args(["matrix", "--workloads", "page10", "--profiles", "wired"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{args:?}: {err}"
        );
    };
    refused(&["--protocols", "h3-dns"], "add --dns resolver");
    refused(
        &[
            "--protocols",
            "h3-dns",
            "--dns",
            "resolver",
            "--views",
            "repeat",
        ],
        "first views only",
    );
    refused(&["--protocols", "h2", "--dns", "doh"], "use none");
}
