//! `pagebench record` of a real three-origin site (Caddy in a namespace of the test's own),
//! and `pagebench import` of a HAR in the form DevTools writes: both give archives whose every
//! body decodes to the site's file, byte for byte. Needs root (namespaces), Caddy and Chromium.

mod site_support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use pagebench::config::site_archive::replay::ReplayMatch;
use pagebench::config::site_archive::{self, encoding::Coding};
use pagebench::evidence::run_record::RunRecord;
use pagebench::evidence::validate::{Outcome, ReasonKind};
use site_support::{Resource, PAGE_URL, REDIRECT};

/// The decoded body of `url`'s entry in the archive at `dir`.
fn decoded(dir: &std::path::Path, e: &site_archive::Entry) -> Vec<u8> {
    let wire = site_archive::body(dir, e).unwrap();
    Coding::parse(e.content_encoding.as_deref())
        .unwrap()
        .decode(&wire)
        .unwrap_or_else(|err| panic!("{}: {err:#}", e.url))
}

/// Every fixture file is in the archive with its body, decoding to the file; text went
/// compressed and says so.
fn assert_every_resource(
    dir: &std::path::Path,
    a: &site_archive::SiteArchive,
    resources: &[Resource],
) {
    for r in resources {
        let url = r.url();
        let e = a
            .entries
            .iter()
            .find(|e| e.url == url)
            .unwrap_or_else(|| panic!("{url} is not in the archive"));
        assert_eq!(e.status, 200, "{url}");
        assert!(e.missing.is_none(), "{url}: {:?}", e.missing);
        assert_eq!(decoded(dir, e), r.bytes, "{url}: the body is the file");
        assert_eq!(e.decoded_size, r.bytes.len() as u64, "{url}");
        if r.is_text() {
            assert_eq!(
                e.content_encoding.as_deref(),
                Some("gzip"),
                "{url}: text went gzip-encoded"
            );
            assert_eq!(e.header("content-encoding"), Some("gzip"), "{url}");
        } else if e.content_encoding.is_none() {
            assert_eq!(site_archive::body(dir, e).unwrap(), r.bytes, "{url}");
        }
    }
    let redirect = a
        .entries
        .iter()
        .find(|e| e.url == REDIRECT.0)
        .expect("the redirect is an entry of its own");
    assert_eq!(redirect.status, 301);
    assert_eq!(redirect.header("location"), Some(REDIRECT.1));
    assert!(redirect.body.is_none() && redirect.missing.is_none());
    assert!(a
        .entries
        .iter()
        .any(|e| e.url == REDIRECT.1 && e.status == 200));
}

#[test]
fn a_recorded_three_origin_site_keeps_every_response_as_it_went_over_the_wire() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = site_support::record_fixture(tmp.path());
    let a = site_archive::read(&dir).expect("the recording reads back");
    let resources = site_support::resources();
    assert_eq!(a.source.kind, "record");
    assert_eq!(a.source.from, PAGE_URL);
    // The recording browser ran as an unprivileged user with its sandbox on.
    let c = a.source.browser_confinement.as_ref().unwrap();
    assert!(c.sandboxed() && c.uids.iter().all(|u| *u != 0), "{c:?}");
    assert!(a.source.creator.contains("/ Chromium "), "{:?}", a.source);
    assert_eq!(a.page_url, PAGE_URL);
    assert!(a.entries.len() >= 60, "{} entries", a.entries.len());
    // Nothing but the fixture's files and its redirect.
    let expected: BTreeSet<String> = resources
        .iter()
        .map(Resource::url)
        .chain([REDIRECT.0.to_string()])
        .collect();
    let got: BTreeSet<String> = a.entries.iter().map(|e| e.url.clone()).collect();
    assert_eq!(got, expected);
    assert_eq!(a.entries.len(), expected.len(), "each recorded once");
    assert_every_resource(&dir, &a, &resources);
    // The page's cookie is kept as the server sent it.
    let page = a.entries.iter().find(|e| e.url == PAGE_URL).unwrap();
    assert_eq!(
        page.header("set-cookie"),
        Some(site_support::SESSION_COOKIE),
        "{:?}",
        page.headers
    );

    let origins: BTreeSet<String> = a
        .entries
        .iter()
        .filter_map(|e| site_archive::har_import::origin(&e.url))
        .collect();
    let want: BTreeSet<String> = [
        "https://www.site.test",
        "https://static.site.test",
        "https://api.site.test",
    ]
    .map(String::from)
    .into();
    assert_eq!(origins, want);
    // Each origin came from its own address, over one protocol.
    let addresses = [
        ("www.site.test", "10.77.0.11:443"),
        ("static.site.test", "10.77.0.12:443"),
        ("api.site.test", "10.77.0.13:443"),
    ];
    let mut protocols: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &a.entries {
        let host = e.url.split('/').nth(2).unwrap();
        let want = addresses.iter().find(|(h, _)| *h == host).unwrap().1;
        assert_eq!(e.server_address.as_deref(), Some(want), "{}", e.url);
        let p = e.protocol.clone().unwrap_or_default();
        assert!(p == "h2" || p == "h3", "{}: protocol {p:?}", e.url);
        protocols.entry(host.to_string()).or_default().insert(p);
        let t = e.timings;
        assert!(
            t.start_ms >= 0.0 && t.wait_ms >= 0.0 && t.receive_ms >= 0.0,
            "{}: {t:?}",
            e.url
        );
    }
    assert!(
        protocols.values().all(|p| p.len() == 1),
        "one protocol per origin: {protocols:?}"
    );

    // Replayed from its three origins (three addresses, as recorded) through the emulated link;
    // a run each: every claim below holds run by run.
    let (runs, report) = replay(&dir, "h1,h2,h3,h3-primed", 1);
    assert_eq!(runs.len(), 4);
    assert_replayed(&dir, &runs, 3);
    assert!(
        report.contains("site-archive"),
        "the report has the site:\n{report}"
    );

    // As recorded, with the recording saying static came over HTTP/1.1 and api over HTTP/3:
    // each origin gets its own protocol, from every viewpoint.
    let mixed = tmp.path().join("mixed");
    std::fs::create_dir_all(mixed.join(site_archive::BODIES)).unwrap();
    for f in std::fs::read_dir(dir.join(site_archive::BODIES)).unwrap() {
        let f = f.unwrap();
        std::fs::copy(
            f.path(),
            mixed.join(site_archive::BODIES).join(f.file_name()),
        )
        .unwrap();
    }
    let recorded = |host: &str| match host {
        "static.site.test" => "http/1.1",
        "api.site.test" => "h3",
        _ => "h2",
    };
    let mut m = a.clone();
    for e in &mut m.entries {
        e.protocol = Some(recorded(e.url.split('/').nth(2).unwrap()).into());
    }
    std::fs::write(
        mixed.join(site_archive::MANIFEST),
        serde_json::to_string_pretty(&m).unwrap(),
    )
    .unwrap();
    let (runs, _) = replay(&mixed, "as-recorded", 1);
    assert_eq!(runs.len(), 1);
    assert_replayed_as(&mixed, &runs, 3, |_, host| recorded(host).to_string());

    // Firefox too, each origin from its own address (the hosts file of its own mount
    // namespace), over each protocol and as recorded.
    let firefox = ["--browsers", "firefox"];
    let (runs, _) = replay_with(&dir, "h1,h2,h3", 1, &firefox);
    assert_eq!(runs.len(), 3);
    assert_replayed(&dir, &runs, 3);
    let (runs, _) = replay_with(&mixed, "as-recorded", 1, &firefox);
    assert_eq!(runs.len(), 1);
    assert_replayed_as(&mixed, &runs, 3, |_, host| recorded(host).to_string());
}

#[test]
fn a_devtools_har_of_the_fixture_imports_whole_with_gzip_bodies_reencoded() {
    let tmp = tempfile::tempdir().unwrap();
    let resources = site_support::write_files(&tmp.path().join("site"));
    let har = devtools_har(&tmp.path().join("site"), tmp.path());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&har).unwrap()).unwrap();
    assert_eq!(v["log"]["creator"]["name"], "WebInspector");
    assert_eq!(
        v["log"]["entries"].as_array().unwrap().len(),
        resources.len() + 1
    );

    let archive = tmp.path().join("archive");
    // --strict accepts it.
    let out = site_support::run_ok(
        Command::new(env!("CARGO_BIN_EXE_pagebench"))
            .arg("import")
            .arg(&har)
            .arg("--out")
            .arg(&archive)
            .arg("--strict"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "imported {} responses from 3 origin(s)",
            resources.len() + 1
        )),
        "{stdout}"
    );
    assert!(
        !stdout.contains("warning") && stdout.contains("redirects: 1"),
        "{stdout}"
    );
    let a = site_archive::read(&archive).unwrap();
    assert_eq!(a.source.creator, "WebInspector 537.36");
    assert_eq!(a.page_url, PAGE_URL);
    assert_eq!(a.entries.len(), resources.len() + 1);
    assert!(a.entries.iter().all(|e| e.missing.is_none()));
    assert_every_resource(&archive, &a, &resources);
    // DevTools' HAR has the IP alone (its `connection` is a socket id, not a port).
    assert!(a.entries.iter().all(|e| e
        .server_address
        .as_deref()
        .is_some_and(|s| s.starts_with("192.0.2."))));
    assert!(a
        .entries
        .iter()
        .all(|e| e.protocol.as_deref() == Some("h2")));

    let (runs, _) = replay(&archive, "h1,h2,h3", 1);
    assert_eq!(runs.len(), 3);
    assert_replayed(&archive, &runs, 3);

    // All origins on one address (as Web Page Replay serves them): still every origin by name.
    let (runs, _) = replay_with(&archive, "h2", 1, &["--origin-addresses", "single"]);
    assert_replayed(&archive, &runs, 3);
}

/// The HAR DevTools would write of the fixture site below `site` (with its redirect), in `out`.
fn devtools_har(site: &std::path::Path, out: &std::path::Path) -> std::path::PathBuf {
    let har = out.join("devtools.har");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/make_devtools_har.py"
    );
    site_support::run_ok(
        Command::new("python3")
            .arg(script)
            .arg(site)
            .arg(PAGE_URL)
            .arg(&har)
            .arg("--redirect")
            .arg(format!("{}={}", REDIRECT.0, REDIRECT.1)),
    );
    har
}

/// A page that names no icon: the browser asks its origin for `/favicon.ico` on its own, and a
/// DevTools HAR leaves that request out. Replayed, the archive answers it 404; every run counts
/// and its record names the request as the browser's own.
#[test]
fn a_favicon_the_archive_lacks_is_the_browser_s_own_request_not_a_miss() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("site");
    let resources = site_support::write_files(&dir);
    let page = resources.iter().find(|r| r.url() == PAGE_URL).unwrap();
    let html = String::from_utf8(page.bytes.clone()).unwrap();
    let without = html.replace("<link rel=\"icon\" href=\"data:,\">\n", "");
    assert_ne!(without, html, "the fixture page names a data: icon");
    std::fs::write(dir.join(page.host).join(page.file()), without).unwrap();
    let har = devtools_har(&dir, tmp.path());
    let archive = import_har(&har, &tmp.path().join("archive"));
    let icon = "https://www.site.test/favicon.ico";
    let (chromium, report) = replay(&archive, "h2,h3", 1);
    // A site's report reads as a site's: no study tables it could not fill, its server in a
    // line and its settings in a table, the defaults folded into a note (every applied setting
    // stays in meta.json).
    assert!(
        !report.contains("The study's tables") && !report.contains("50-file page taken apart"),
        "{report}"
    );
    let server = report
        .lines()
        .find(|l| l.starts_with("| **server**"))
        .unwrap_or_else(|| panic!("no server row: {report}"));
    assert!(
        server.contains("`servers_applied.embedded`") && server.len() < 300,
        "{server}"
    );
    assert!(
        report.contains("The servers' settings") && report.contains("defaults, not asked:"),
        "{report}"
    );
    let (firefox, _) = replay_with(&archive, "h2", 1, &["--browsers", "firefox"]);
    for r in chromium.iter().chain(&firefox) {
        // No browser of a replay runs as root or without its sandbox.
        let c = r.browser_confinement.as_ref().unwrap();
        assert!(
            c.sandboxed() && c.uids.iter().all(|u| *u != 0),
            "{}: {c:?}",
            r.id
        );
        if r.reasons.iter().any(|x| x.kind == ReasonKind::Link) {
            continue; // the link gate doing its job
        }
        assert_eq!(r.outcome, Outcome::Valid, "{}: {:?}", r.id, r.reasons);
        let asked: Vec<_> = r
            .server_requests
            .iter()
            .filter(|v| v.url.as_deref() == Some(icon))
            .collect();
        assert!(
            asked
                .iter()
                .all(|v| v.status == 404 && v.replay == Some(ReplayMatch::Miss)),
            "{}: {asked:?}",
            r.id
        );
        assert_eq!(
            r.browser_initiated,
            if asked.is_empty() {
                vec![]
            } else {
                vec![icon.to_string()]
            },
            "{}",
            r.id
        );
    }
    // Chromium always asks.
    assert!(chromium.iter().all(|r| r.browser_initiated == [icon]));
}

/// A HAR entry as DevTools writes it, with its body as text (`base64` for binary ones).
fn har_entry(url: &str, version: &str, ip: &str, port: u16, mime: &str, body: &str) -> String {
    let base64 = mime.starts_with("image/");
    let size = if base64 { 68 } else { body.len() };
    serde_json::json!({
        "startedDateTime": "2026-12-01T10:00:00.000Z",
        "time": 20.0,
        "request": {"method": "GET", "url": url, "httpVersion": version, "headers": []},
        "response": {"status": 200, "statusText": "", "httpVersion": version,
                     "headers": [{"name": "content-type", "value": mime},
                                 {"name": "cache-control", "value": "max-age=3600"},
                                 {"name": "access-control-allow-origin", "value": "*"}],
                     "content": {"size": size, "mimeType": mime, "text": body,
                                 "encoding": if base64 { Some("base64") } else { None }},
                     "redirectURL": "", "headersSize": -1, "bodySize": size},
        "serverIPAddress": ip, "_serverPort": port,
        "timings": {"blocked": 1.0, "dns": -1, "connect": -1, "ssl": -1, "send": 0.1,
                    "wait": 15.0, "receive": 2.0}
    })
    .to_string()
}

/// A page at `page` (its script beside it) that loads an image from an origin on 443 and
/// (with `stylesheet`) a stylesheet from one on port 8443, imported from a HAR into `dir`;
/// returns the archive and the URLs (page, script, image, stylesheet).
fn ports_site(
    dir: &std::path::Path,
    page: &str,
    stylesheet: bool,
) -> (std::path::PathBuf, Vec<String>) {
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR42mP8/x8AAwMCAO+ip1sAAAAASUVORK5CYII=";
    let js = format!("{page}app.js");
    let css = "https://static.plain.test:8443/app.css".to_string();
    let img = "https://img.plain.test/a.png".to_string();
    let link = if stylesheet {
        format!("<link rel=\"stylesheet\" href=\"{css}\">")
    } else {
        String::new()
    };
    let html = format!(
        "<!doctype html><html><head><link rel=\"icon\" href=\"data:,\">{link}</head>\
         <body><img src=\"{img}\"><script src=\"{js}\"></script></body></html>"
    );
    let (version, port) = if page.starts_with("http://") {
        ("HTTP/1.1", 80)
    } else {
        ("h2", 8444)
    };
    let script = "document.title = 'ok';";
    let mut entries = vec![
        har_entry(page, version, "192.0.2.1", port, "text/html", &html),
        har_entry(&img, "h2", "192.0.2.3", 443, "image/png", PNG),
        har_entry(
            &js,
            version,
            "192.0.2.1",
            port,
            "application/javascript",
            script,
        ),
    ];
    let mut urls = vec![page.to_string(), js, img];
    if stylesheet {
        let body = "body { margin: 0 }";
        entries.push(har_entry(&css, "h2", "192.0.2.2", 8443, "text/css", body));
        urls.push(css);
    }
    let har = dir.join("ports.har");
    std::fs::write(
        &har,
        format!(
            "{{\"log\": {{\"version\": \"1.2\", \"creator\": {{\"name\": \"test\", \"version\": \"1\"}}, \"entries\": [{}]}}}}",
            entries.join(",")
        ),
    )
    .unwrap();
    (import_har(&har, &dir.join("archive")), urls)
}

/// Each URL of `urls` served once from the archive over its protocol: `plain` ones over
/// HTTP/1.1 whatever the run's, the others over the run's; every recorded request made again.
fn assert_served(runs: &[RunRecord], urls: &[String], plain: bool) {
    for r in runs {
        if r.reasons.iter().any(|x| x.kind == ReasonKind::Link) {
            continue; // the link gate doing its job
        }
        assert_eq!(r.outcome, Outcome::Valid, "{}: {:?}", r.id, r.reasons);
        let run = r.variant.protocol.alpn();
        for (i, url) in urls.iter().enumerate() {
            // The page and its script are on the page's origin.
            let want = if plain && i < 2 { "http/1.1" } else { run };
            let v = r
                .server_requests
                .iter()
                .find(|v| v.url.as_deref() == Some(url.as_str()))
                .unwrap_or_else(|| panic!("{}: {url} not served: {:?}", r.id, r.server_requests));
            assert_eq!(
                (v.protocol.as_str(), v.status, v.replay),
                (want, 200, Some(ReplayMatch::Exact)),
                "{}: {url}",
                r.id
            );
        }
        let f = r.replay_fidelity.as_ref().unwrap();
        assert_eq!(
            (f.replayed, f.missing, f.extra),
            (urls.len(), 0, 0),
            "{}: {f:?}",
            r.id
        );
    }
}

/// A page over plain http whose stylesheet is on port 8443 and image on 443 replays in
/// Chromium over every protocol: the page and its script HTTP/1.1 without TLS (what an
/// `http://` origin is), the other two on the run's protocol, each on its own port. A page on
/// port 8444 over TLS with its image on 443 replays so in Firefox too (without the stylesheet:
/// Firefox lists this hand-made page's stylesheet twice in Resource Timing, whatever its port —
/// see docs/limits.md).
#[test]
fn origins_on_other_ports_and_plain_http_replay_over_every_protocol() {
    let tmp = tempfile::tempdir().unwrap();
    let plain_dir = tmp.path().join("plain");
    std::fs::create_dir_all(&plain_dir).unwrap();
    let (archive, urls) = ports_site(&plain_dir, "http://www.plain.test/", true);
    let (chromium, report) = replay(&archive, "h1,h2,h3", 1);
    assert_eq!(chromium.len(), 3, "{report}");
    assert_served(&chromium, &urls, true);
    let tls_dir = tmp.path().join("tls");
    std::fs::create_dir_all(&tls_dir).unwrap();
    let (archive, urls) = ports_site(&tls_dir, "https://www.plain.test:8444/", false);
    let (firefox, report) = replay_with(&archive, "h2,h3", 1, &["--browsers", "firefox"]);
    assert_eq!(firefox.len(), 2, "{report}");
    assert_served(&firefox, &urls, false);
}

/// `pagebench import HAR --out ARCHIVE`; returns the archive.
fn import_har(har: &std::path::Path, archive: &std::path::Path) -> std::path::PathBuf {
    site_support::run_ok(
        Command::new(env!("CARGO_BIN_EXE_pagebench"))
            .arg("import")
            .arg(har)
            .arg("--out")
            .arg(archive),
    );
    archive.to_path_buf()
}

/// Replays the archive at `dir` with `pagebench matrix` on `wired` (unless `flags` name the
/// profiles) over `protocols`, `runs`
/// each, and returns the final attempt of every planned run (with the matrix's own report).
fn replay(dir: &std::path::Path, protocols: &str, runs: u32) -> (Vec<RunRecord>, String) {
    replay_with(dir, protocols, runs, &[])
}

/// [`replay`] with more matrix flags.
fn replay_with(
    dir: &std::path::Path,
    protocols: &str,
    runs: u32,
    flags: &[&str],
) -> (Vec<RunRecord>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("results");
    site_support::run_ok(
        Command::new(env!("CARGO_BIN_EXE_pagebench"))
            .args(["matrix", "--protocols", protocols])
            .args(
                (!flags.contains(&"--profiles"))
                    .then_some(["--profiles", "wired"])
                    .into_iter()
                    .flatten(),
            )
            .args([
                "--runs",
                &runs.to_string(),
                "--warmup",
                "0",
                "--quiet",
                "--jobs",
                "1",
            ])
            // A test of one run a protocol gives the link gate room before it fails.
            .args(["--machine-check", "0s", "--retry-invalid", "4"])
            .arg("--workloads")
            .arg(format!("site:{}", dir.display()))
            .arg("--pages")
            .arg(tmp.path().join("pages"))
            .arg("--out")
            .arg(&out)
            .args(flags),
    );
    let mut last: BTreeMap<String, RunRecord> = BTreeMap::new();
    for f in std::fs::read_dir(out.join("runs")).unwrap() {
        let r: RunRecord =
            serde_json::from_str(&std::fs::read_to_string(f.unwrap().path()).unwrap()).unwrap();
        let keep = last.get(&r.plan_id).is_none_or(|o| o.attempt < r.attempt);
        if keep {
            last.insert(r.plan_id.clone(), r);
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    (last.into_values().collect(), report)
}

/// Every replayed run counts (or ran out of link attempts, the gate doing its job), and each
/// valid one served every recorded response of `archive` from the archive, exactly, over the
/// run's protocol, from every origin.
fn assert_replayed(dir: &std::path::Path, runs: &[RunRecord], origins: usize) {
    assert_replayed_as(dir, runs, origins, |r, _| r.protocol.alpn().to_string())
}

/// As [`assert_replayed`], with the protocol each host's requests must have come over.
fn assert_replayed_as(
    dir: &std::path::Path,
    runs: &[RunRecord],
    origins: usize,
    want: impl Fn(&RunRecord, &str) -> String,
) {
    let a = site_archive::read(dir).unwrap();
    let recorded: u64 = a
        .entries
        .iter()
        .filter_map(|e| e.body.as_ref().map(|b| b.size))
        .sum();
    let mut valid = 0;
    for r in runs {
        if r.outcome != Outcome::Valid {
            assert!(
                r.reasons.iter().all(|x| x.kind == ReasonKind::Link),
                "{}: {:?}",
                r.id,
                r.reasons
            );
            continue;
        }
        valid += 1;
        let views = &r.server_requests;
        assert!(
            views.iter().all(|v| v.replay == Some(ReplayMatch::Exact)),
            "{}: every request matched exactly: {:?}",
            r.id,
            views
                .iter()
                .filter(|v| v.replay != Some(ReplayMatch::Exact))
                .collect::<Vec<_>>()
        );
        assert!(
            r.warnings.iter().all(|w| !w.contains("not requested")),
            "{}: {:?}",
            r.id,
            r.warnings
        );
        assert_eq!(
            views.len(),
            a.entries.len(),
            "{}: every recorded request, once",
            r.id
        );
        let sent: u64 = views.iter().map(|v| v.bytes_sent).sum();
        let off = (sent as f64 - recorded as f64).abs() / recorded as f64;
        assert!(
            off <= 0.02,
            "{}: replayed {sent} body bytes, recorded {recorded}",
            r.id
        );
        let hosts: BTreeSet<&str> = views
            .iter()
            .filter_map(|v| v.url.as_deref()?.split('/').nth(2))
            .collect();
        assert_eq!(hosts.len(), origins, "{}: {hosts:?}", r.id);
        for v in views {
            let host = v
                .url
                .as_deref()
                .and_then(|u| u.split('/').nth(2))
                .unwrap_or("");
            assert_eq!(v.protocol, want(r, host), "{}: {:?}", r.id, v.url);
        }
    }
    assert!(
        valid * 2 >= runs.len(),
        "most runs count: {valid} of {}",
        runs.len()
    );
}

/// Origins that share a server address share a connection, as in a browser talking to a CDN:
/// the certificate names every host, so Chromium pools their HTTP/2 requests (the credentialed
/// ones; a font is fetched without credentials, on its own connection). With an address per
/// origin it cannot. Median over 3 runs each.
#[test]
fn origins_on_one_address_share_an_http2_connection() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("pages");
    let w: pagebench::config::workload::Workload = "page10s4".parse().unwrap();
    pagebench::config::workload::ensure(&root, &w, 1, Default::default()).unwrap();
    let dir = root.join("page10s4");
    let median_connections = |mode: &str| {
        let (runs, _) = replay_with(&dir, "h2", 3, &["--origin-addresses", mode]);
        assert_replayed(&dir, &runs, 4);
        let mut n: Vec<u64> = runs
            .iter()
            .filter(|r| r.outcome == Outcome::Valid)
            .map(|r| r.transport.as_ref().unwrap().tcp_connections)
            .collect();
        n.sort_unstable();
        n[n.len() / 2]
    };
    let shared = median_connections("single");
    let apart = median_connections("per-origin");
    assert!(shared <= 2, "one address: {shared} connections");
    assert!(apart >= 4, "an address per origin: {apart} connections");
}

/// The round trips of the three origins in [`recorded_distances_put_each_origin_back`].
const DISTANCES_MS: [f64; 3] = [10.0, 40.0, 120.0];
/// How much longer than the resolver's round trip (the link's own 2 ms) the far recordings'
/// lookups of the three origins' names take.
const LOOKUP_HOLDS_MS: [f64; 3] = [30.0, 60.0, 15.0];
/// Its recordings, and its replays.
const RECORDINGS: usize = 7;

/// The connections the recording browser opened to `host`.
fn recorded_connections(archive: &std::path::Path, host: &str) -> usize {
    let a = site_archive::read(archive).unwrap();
    let ids: std::collections::BTreeSet<String> = a
        .entries
        .iter()
        .filter(|e| e.url.split('/').nth(2) == Some(host))
        .filter_map(|e| e.connection.clone())
        .collect();
    ids.len()
}

/// The round trip of `host` the recording at `archive` tells (as `--distances recorded` reads
/// it).
fn estimate(archive: &std::path::Path, host: &str) -> Option<f64> {
    of_host(archive, host, |mine| {
        Some(site_archive::distances::recorded_rtt(mine)?.rtt_ms)
    })
}

/// `read` of the entries of `host` in the archive at `archive`.
fn of_host<T>(
    archive: &std::path::Path,
    host: &str,
    read: impl Fn(&[&site_archive::Entry]) -> T,
) -> T {
    let a = site_archive::read(archive).unwrap();
    let mine: Vec<&site_archive::Entry> = a
        .entries
        .iter()
        .filter(|e| e.url.split('/').nth(2) == Some(host))
        .collect();
    read(&mine)
}

/// Writes the fixture site into `dir` and records it `recordings` times (`archive1`…) through
/// a link whose three server addresses are at [`DISTANCES_MS`] (Caddy serving h1 and h2, or
/// with `h3` HTTP/3 too, every origin then forced onto QUIC from its first request); after
/// each, the same site from three more addresses at the link's own [`NEAR_RTT_MS`]
/// (`near/archive1`…), so the recording's own time is read side by side with the distances it
/// is in; the far recordings look each name up through `shell --dns-name`'s resolver, each
/// answer held [`LOOKUP_HOLDS_MS`]; returns the profiles directory (`far-origins`, and `near`
/// without extra delays).
fn record_far_origins(dir: &std::path::Path, recordings: usize, h3: bool) -> std::path::PathBuf {
    site_support::write_files(&dir.join("site"));
    std::fs::create_dir_all(dir.join("near")).unwrap();
    let any: std::net::IpAddr = "0.0.0.0".parse().unwrap();
    let hosts = [site_support::WWW, site_support::STATIC, site_support::API];
    let spki = site_support::caddy_config(dir, &hosts.map(|h| (h, any)), h3);
    // NEAR_RTT_MS of the profile's own, the rest added one way per address, each direction;
    // the near addresses nothing.
    let delays: Vec<String> = DISTANCES_MS
        .iter()
        .map(|d| format!("{}", (d - NEAR_RTT_MS) / 2.0))
        .chain(["0", "0", "0"].map(String::from))
        .collect();
    let profiles = dir.join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join("far-origins.toml"),
        format!(
            "name = \"far-origins\"\nrtt_ms = {NEAR_RTT_MS}\norigin_delay_ms = [{}]\n",
            delays.join(", ")
        ),
    )
    .unwrap();
    std::fs::write(
        profiles.join("near.toml"),
        format!("name = \"near\"\nrtt_ms = {NEAR_RTT_MS}\n"),
    )
    .unwrap();
    // Each origin's far and near addresses as the Caddyfile's `{$SITE_IPn}` and `{$NEAR_IPn}`
    // (h3 binds to them).
    let caddy = [
        "set -- $PAGEBENCH_SERVER_IPS; SITE_IP1=$1 SITE_IP2=$2 SITE_IP3=$3 \
                  NEAR_IP1=$4 NEAR_IP2=$5 NEAR_IP3=$6 exec env",
    ]
    .map(String::from)
    .into_iter()
    .chain(
        site_support::caddy_env(dir)
            .into_iter()
            .map(|(k, v)| format!("{k}={}", v.display())),
    )
    .chain(std::iter::once("caddy".into()))
    .chain(site_support::caddy_args(dir))
    .collect::<Vec<_>>()
    .join(" ");
    let quic: String = if h3 {
        hosts.map(|h| format!(" --force-quic {h}")).concat()
    } else {
        String::new()
    };
    // One browser per recording. A recording whose load never ends (seen in 2 of about 100
    // through this link, cause not found: the link's self-check was clean) is made again, at
    // most twice. The far recordings look each name up through the shell's resolver (its
    // answers held back by LOOKUP_HOLDS_MS), the near ones find them mapped (`--resolve`).
    let record = |out: String, resolve: String| {
        format!(
            "ok=0; for t in 1 2 3; do {} record {PAGE_URL} --out {out} --wait idle --timeout 20s \
             --ignore-cert-spki {spki}{quic}{resolve} && ok=1 && break; rm -rf {out}; done; \
             [ $ok = 1 ] || exit 1",
            env!("CARGO_BIN_EXE_pagebench"),
        )
    };
    let near: String = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| format!(" --resolve {h}=${}", i + 4))
        .collect();
    let d = dir.display();
    let script = format!(
        "set -- $PAGEBENCH_SERVER_IPS; for i in $(seq {recordings}); do {}; {}; done",
        record(format!("{d}/archive$i"), String::new()),
        record(format!("{d}/near/archive$i"), near),
    );
    let names = hosts
        .iter()
        .zip(LOOKUP_HOLDS_MS)
        .enumerate()
        .map(|(i, (h, hold))| format!("--dns-name={h}={}@{hold}", i + 1));
    site_support::run_ok(
        Command::new(env!("CARGO_BIN_EXE_pagebench"))
            .args([
                "shell",
                "--profile",
                "far-origins",
                "--server-addresses",
                "6",
            ])
            .args(names)
            .arg("--profiles-dir")
            .arg(&profiles)
            .args([
                "--server-cmd",
                &caddy,
                "--wait-tcp",
                "443",
                "--",
                "sh",
                "-c",
            ])
            .arg(&script),
    );
    profiles
}

const H3_RECORDINGS: usize = 5;

/// The same three origins recorded over HTTP/3 (Caddy serving it, `record --force-quic` for
/// each origin): every response came over QUIC, and each origin's round trip — read from first
/// bytes, a QUIC set-up spanning three round trips (`distances::QUIC_SETUP_RTTS`) — is within
/// 10 % (2 ms at the least) of the link's (the median of five recordings' estimates), above it
/// by the recording's own time at most: a first byte also carries the server's think time and
/// the browser's and the emulator's handling (debug build), read from the same site recorded
/// between them from addresses at the link's own 2 ms (1.5–2.5 ms in three runs, beside a 10 ms
/// origin's 1.4–1.6 ms above its round trip). Not taken off: on the near link the quickest of
/// the origin's two first bytes varied more (3.1–6.2 ms) than on the far one, and one CI run
/// read 6.1 ms there when the calibration ran in a shell of its own.
#[test]
fn quic_handshakes_of_an_h3_recording_tell_each_origin_s_distance() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let hosts = [site_support::WWW, site_support::STATIC, site_support::API];
    record_far_origins(dir, H3_RECORDINGS, true);
    for archive in (1..=H3_RECORDINGS).flat_map(|i| {
        [
            dir.join(format!("archive{i}")),
            dir.join(format!("near/archive{i}")),
        ]
    }) {
        let a = site_archive::read(&archive).unwrap();
        let not_h3: Vec<_> = a
            .entries
            .iter()
            .filter(|e| e.protocol.as_deref() != Some("h3"))
            .map(|e| (&e.url, &e.protocol))
            .collect();
        assert!(not_h3.is_empty(), "{}: {not_h3:?}", archive.display());
    }
    // On a 2 ms link the estimator's floor — a QUIC set-up, mostly CPU there, ÷ 3 — would hide
    // the first bytes: the quickest is read instead.
    let own = own_time(dir, H3_RECORDINGS, quickest_first_byte, 0.5);
    for (host, want) in hosts.iter().zip(DISTANCES_MS) {
        let mut read: Vec<(f64, String)> = (1..=H3_RECORDINGS)
            .filter_map(|i| {
                let a = site_archive::read(&dir.join(format!("archive{i}"))).unwrap();
                let mine: Vec<&site_archive::Entry> = a
                    .entries
                    .iter()
                    .filter(|e| e.url.split('/').nth(2) == Some(*host))
                    .collect();
                let r = site_archive::distances::recorded_rtt(&mine)?;
                Some((r.rtt_ms, r.basis.describe().to_string()))
            })
            .collect();
        read.sort_by(|a, b| a.0.total_cmp(&b.0));
        eprintln!("{host} over h3: {want} ms, read {read:?}");
        let got = read[read.len() / 2].0;
        let margin = (want * 0.1).max(2.0);
        // One recording of five may read nothing of an origin (4 of 5 read www at 11.0–11.8
        // ms in one CI run, the fifth none) — likely a busy moment stretching its one QUIC
        // set-up, whose third is the first-byte floor, above every first byte (not verified).
        assert!(
            read.len() + 1 >= H3_RECORDINGS && got >= want - margin && got <= want + margin + own,
            "{host}: read {read:?} ms, was {want} (and {own:.2} of the recording's own)"
        );
    }
}

/// The round trip of the near addresses [`record_far_origins`] records from.
const NEAR_RTT_MS: f64 = 2.0;

/// Each name's lookup: the far recordings timed it at the resolver's round trip (the link's
/// own) and its hold (the median of seven not more than 1 ms below, the quickest within 25 %
/// or 8 ms above: the browser's own time is in it, ~2 ms here and 5–15 ms on a busy machine,
/// which only lengthens a lookup; the API's, asked while the page loads, not below); on replay
/// with `--dns resolver`, each origin's lookup (the median over `runs`, as the browser timed
/// it) is within 10 % of what the replayed `archive` recorded (or the resolver's round trip,
/// when longer) or above it by the browser's own time again (read from
/// the recordings) and 2 ms (the API's, asked while the page loads, not below it); each run's
/// record says what the resolver was set to take.
fn assert_lookups_replayed(dir: &std::path::Path, archive: &std::path::Path, runs: &[&RunRecord]) {
    let hosts = [site_support::WWW, site_support::STATIC, site_support::API];
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut own = Vec::new();
    for (host, hold) in hosts.iter().zip(LOOKUP_HOLDS_MS) {
        let want = NEAR_RTT_MS + hold;
        let read: Vec<f64> = (1..=RECORDINGS)
            .filter_map(|i| recorded_lookup(&dir.join(format!("archive{i}")), host))
            .collect();
        eprintln!("{host}: lookups recorded {read:.1?} (resolver {want} ms)");
        assert_eq!(read.len(), RECORDINGS, "{host}: {read:?}");
        let quickest = read.iter().copied().fold(f64::INFINITY, f64::min);
        let m = median(read);
        // The API's name is asked from a script while 56 images arrive: the browser's busy
        // network thread reads the answer late (16–32 ms for a 17 ms resolver in one run).
        if *host == site_support::API {
            assert!(
                m >= want - 2.0,
                "{host}: median {m}, the resolver took {want} ms"
            );
            continue;
        }
        // The browser's own time is ~2 ms; beside the suite's other browsers on a busy CI
        // machine the quickest of seven was 5.0 ms over a 32 ms resolver (median 7.7).
        assert!(
            m >= want - 1.0 && quickest <= want + (want * 0.25).max(8.0),
            "{host}: quickest {quickest}, median {m}, the resolver took {want} ms"
        );
        own.push(m - want);
    }
    let own = median(own);
    for host in hosts {
        let recorded = recorded_lookup(archive, host).unwrap();
        let origin = format!("https://{host}");
        let replayed: Vec<f64> = runs
            .iter()
            .filter_map(|r| r.replay_fidelity.as_ref())
            .filter_map(|f| f.origins.iter().find(|o| o.origin == origin)?.lookup_ms)
            .collect();
        eprintln!("{host}: recorded {recorded:.1} ms, replayed {replayed:.1?}, own {own:.1}");
        assert_eq!(replayed.len(), runs.len(), "{host}: {replayed:?}");
        let m = median(replayed);
        // The API's answer read late again (22–39 ms replayed of a 21 ms recording in one
        // run): only a shorter lookup would be the replay's fault.
        let busy = host == site_support::API;
        // A lookup recorded shorter than the replay's resolver round trip (the API's name found
        // already answered: 0.3 ms in one clean-clone run) is replayed at that round trip, no
        // hold: the link cannot answer sooner.
        let target = recorded.max(NEAR_RTT_MS);
        assert!(
            (m - target).abs() <= target * 0.1
                || (0.0..=own + 2.0).contains(&(m - target))
                || (busy && m >= target - 1.0),
            "{host}: replayed median {m}, recorded {recorded}, own {own}"
        );
        for r in runs {
            let d = r.site_distances.as_ref().unwrap();
            let d = d.iter().find(|d| d.origin == origin).unwrap();
            assert_eq!(d.recorded_lookup_ms, Some(recorded), "{d:?}");
            assert!((d.replay_lookup_ms.unwrap() - target).abs() < 1e-6, "{d:?}");
        }
    }
}

/// `host`'s lookup as the recording at `archive` timed it.
fn recorded_lookup(archive: &std::path::Path, host: &str) -> Option<f64> {
    of_host(archive, host, site_archive::distances::recorded_lookup)
}

/// The recording's own time: over the `recordings` near recordings in `dir`, the `quantile`
/// of what `read` reads of the first origin's round trip, less the link's. Compared with a
/// lower quartile of far readings, it is their lower quartile too: a busy moment only
/// lengthens a reading, and a median inflated by one (near readings [2.59, 2.64, 2.97, 3.90,
/// 4.10, 4.64, 6.46] in one CI run) took more from clean far ones than they carried.
fn own_time(
    dir: &std::path::Path,
    recordings: usize,
    read: fn(&std::path::Path, &str) -> Option<f64>,
    quantile: f64,
) -> f64 {
    let mut read: Vec<f64> = (1..=recordings)
        .filter_map(|i| read(&dir.join(format!("near/archive{i}")), site_support::WWW))
        .collect();
    assert_eq!(read.len(), recordings, "{read:?}");
    read.sort_by(f64::total_cmp);
    let own = read[(read.len() as f64 * quantile) as usize] - NEAR_RTT_MS;
    eprintln!("the recording's own time at {NEAR_RTT_MS} ms: {own:.2} ms, of {read:.2?}");
    // Below the link's round trip the reading would be broken; the nearest origin's distance
    // would be all overhead.
    assert!((-0.5..DISTANCES_MS[0]).contains(&own), "own time {own} ms");
    own
}

/// The quickest first byte (from its request's start) of `host`'s network responses in the
/// archive at `archive`.
fn quickest_first_byte(archive: &std::path::Path, host: &str) -> Option<f64> {
    site_archive::read(archive)
        .unwrap()
        .entries
        .iter()
        .filter(|e| e.url.split('/').nth(2) == Some(host) && e.server_address.is_some())
        .map(|e| e.timings.first_byte_ms())
        .filter(|w| *w > 0.0)
        .min_by(f64::total_cmp)
}

/// A replay of `archive` at its recorded distances made every recorded request again and
/// nothing else (fidelity 1), each origin's requests and bytes as recorded over as many
/// connections, and put each of `hosts` at the round trip its recording tells.
fn assert_faithful(r: &RunRecord, archive: &std::path::Path, hosts: &[&str]) {
    let recorded_requests = site_archive::read(archive).unwrap().entries.len();
    // Every recorded request made again, nothing else: fidelity 1.
    let f = r.replay_fidelity.as_ref().unwrap();
    assert_eq!(
        (f.recorded, f.replayed, f.missing, f.extra),
        (recorded_requests, recorded_requests, 0, 0),
        "{}",
        r.id
    );
    assert_eq!(f.score(), 1.0);
    // Each origin's requests and bytes as recorded, over the connections it had then.
    eprintln!(
        "{}: bytes ÷ recorded {:?}, path {:?} ({:?} of {} recorded steps), origins {:?}",
        r.id,
        f.bytes_ratio(),
        f.critical_path,
        f.path_shared,
        f.recorded_path_steps,
        f.origins
    );
    assert_eq!(f.origins.len(), hosts.len());
    for o in &f.origins {
        let host = o.origin.trim_start_matches("https://");
        assert_eq!(
            o.connections,
            Some(recorded_connections(archive, host)),
            "{o:?}"
        );
        assert!(o.requests > 0, "{o:?}");
    }
    assert!((f.bytes_ratio().unwrap() - 1.0).abs() < 0.02, "{f:?}");
    assert!(
        f.recorded_path_steps >= 2 && f.path_shared.is_some(),
        "{f:?}"
    );
    let d = r
        .site_distances
        .as_ref()
        .expect("the record names the distances");
    for host in hosts {
        let o = d
            .iter()
            .find(|o| o.origin == format!("https://{host}"))
            .unwrap();
        let got = o.recorded.unwrap().rtt_ms;
        let read = estimate(archive, host).unwrap();
        assert!((got - read).abs() < 1e-6, "{host}: {got} against {read}");
        assert!((o.replay_rtt_ms - got.max(2.0)).abs() < 1e-6, "{o:?}");
    }
}

/// Three origins at 10, 40 and 120 ms: recorded through a link whose server addresses have
/// those round trips (`pagebench shell --server-addresses 6` and a profile's
/// `origin_delay_ms`), `--distances recorded` reads each origin's round trip back from the
/// recordings within 10 % (the lower quartile of seven recordings' estimates, none below,
/// less the recording's own time read between them on addresses at the link's own 2 ms), and
/// the replay of the median recording on a near profile at those distances, with its recorded
/// think times and each name's recorded lookup (`--dns resolver`), looks each name up in its
/// recorded time and loads the page within 10 % of the recorded load time (lower quartiles of
/// 7 recordings and 7 replays: a busy moment only lengthens a load).
#[test]
fn recorded_distances_put_each_origin_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let hosts = [site_support::WWW, site_support::STATIC, site_support::API];
    let profiles = record_far_origins(dir, RECORDINGS, false);
    let mut recorded: Vec<(f64, usize)> = (1..=RECORDINGS)
        .map(|i| {
            let a = site_archive::read(&dir.join(format!("archive{i}"))).unwrap();
            (a.source.load_ms.unwrap(), i)
        })
        .collect();
    recorded.sort_by(|a, b| a.0.total_cmp(&b.0));
    // The recording whose load was the median is the one replayed: its think times are the
    // median load's (replaying another compared its own load to the median's).
    let (recorded_load, median) = recorded[RECORDINGS / 2];
    let archive = dir.join(format!("archive{median}"));
    let recorded: Vec<f64> = recorded.iter().map(|r| r.0).collect();

    let (runs, report) = replay_with(
        &archive,
        "h2",
        RECORDINGS as u32,
        &[
            "--distances",
            "recorded",
            "--think-time",
            "recorded",
            // No --dns: a recording that timed its lookups replays them (`resolver`).
            "--profiles",
            "near",
            "--profiles-dir",
            profiles.to_str().unwrap(),
        ],
    );
    let valid: Vec<&RunRecord> = runs
        .iter()
        .filter(|r| r.outcome == Outcome::Valid)
        .collect();
    assert!(
        valid.len() >= RECORDINGS - 1,
        "{:?}",
        runs.iter().map(|r| &r.reasons).collect::<Vec<_>>()
    );
    // Each recording's estimate of each origin's round trip, less the recording's own time
    // (the lower quartile of what the near addresses read between them): none more than 10 %
    // below (the link never delivers early, so a short reading is the reader's fault), and the
    // lower quartile within 10 % (a busy moment only ever lengthens a reading: one clean-clone CI run read the 120 ms
    // origin as [120.7, 121.3, 122.9, 134.7, 140.8, 161.1, 161.9] beside other browser tests).
    let own = own_time(dir, RECORDINGS, estimate, 0.25);
    for (host, want) in hosts.iter().zip(DISTANCES_MS) {
        let mut read: Vec<f64> = (1..=RECORDINGS)
            .filter_map(|i| estimate(&dir.join(format!("archive{i}")), host))
            .collect();
        read.sort_by(f64::total_cmp);
        eprintln!("{host}: {want} ms, read {read:.1?}");
        let (quickest, lower_quartile) = (read[0] - own, read[read.len() / 4] - own);
        assert!(
            read.len() == RECORDINGS
                && quickest >= want * 0.9
                && (lower_quartile - want).abs() <= want * 0.1,
            "{host}: read {read:?} ms less {own:.2}, was {want}"
        );
    }
    for r in &valid {
        assert_faithful(r, &archive, &hosts);
    }
    assert_lookups_replayed(dir, &archive, &valid);
    let mut loads: Vec<f64> = valid
        .iter()
        .map(|r| r.metrics.load_event_end_ms.unwrap())
        .collect();
    loads.sort_by(f64::total_cmp);
    let median = loads[loads.len() / 2];
    eprintln!("recorded {recorded:.0?} ms, replayed {loads:.0?} ms");
    let fidelity = report
        .split("how faithful the replay was")
        .nth(1)
        .unwrap_or_else(|| panic!("no fidelity table: {report}"));
    eprintln!("{fidelity}");
    assert!(
        fidelity.contains("Each origin sat at its recorded round trip")
            && fidelity.contains("| 1.00 |")
            && fidelity.contains("The recorded critical path: /")
            && fidelity.contains("each origin in the median replays"),
        "{fidelity}"
    );
    // Within 10 %: the ratio of medians was 0.93–1.07 over 11 runs once first bytes counted
    // `send` (before, late-stamped request ends put the 40 ms origin at 37 ms and its think
    // times 3 ms too long: 1.11 and 1.12 in 2 of 13 runs); 0.93–1.035 over 10 runs in an
    // earlier month, once the median recording was the one replayed and think times stood on
    // each origin's round trip (before: 0.97–1.12); 0.99–1.03 with the recorded lookups.
    // Asserted on the lower quartiles (the second quickest of seven, each side): a busy moment
    // only ever lengthens a load, and the recordings and the replays meet other moments. In
    // clean-clone CI runs beside other browser tests the medians read 1.13 (both bimodal:
    // recorded [389, 398, 418, 419 | 498, 507, 613], replayed [388, 393 | 459, 474, 474, 487,
    // 502]) and 0.90 (recorded [531, 546, 599, 613, 616, 622, 640], replayed [493, 510, 532,
    // 549, 564, 580, 592]); their lower quartiles 0.99 and 0.93.
    let quickest = |v: &[f64]| v[v.len() / 4];
    let recorded_q1 = quickest(&recorded);
    assert!(
        (quickest(&loads) - recorded_q1).abs() <= recorded_q1 * 0.1,
        "replayed {median} ms (of {loads:?}), recorded {recorded_load} ms (of {recorded:?})"
    );
}
