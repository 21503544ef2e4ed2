//! `report.html` in real headless Chromium, in an empty network namespace (no network at all):
//! every chart decodes at its size, nothing but the file itself and data URIs is requested,
//! the bundled font is used, and a screenshot is taken (copied to /work/notes when that folder
//! exists, for the issue note).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use pagebench::config::protocol::{H3Mode, Protocol};
use pagebench::measure::browser::engines::chromium::cdp;
use pagebench::measure::browser::engines::chromium::launch::{ChromiumProcess, CHROMIUM};
use pagebench::measure::browser::LaunchOptions;
use serde_json::{json, Value};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn attach(b: &ChromiumProcess) -> String {
    let t = Duration::from_secs(10);
    let targets = b.cdp.call(None, "Target.getTargets", json!({}), t).unwrap();
    let target = targets["targetInfos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["type"] == "page")
        .and_then(|x| x["targetId"].as_str())
        .expect("a page target")
        .to_string();
    let s = b
        .cdp
        .call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
            t,
        )
        .unwrap();
    s["sessionId"].as_str().unwrap().to_string()
}

fn screenshot(b: &ChromiumProcess, session: &str, params: Value) -> Vec<u8> {
    let r = b
        .cdp
        .call(
            Some(session),
            "Page.captureScreenshot",
            params,
            Duration::from_secs(30),
        )
        .unwrap();
    base64::engine::general_purpose::STANDARD
        .decode(r["data"].as_str().unwrap())
        .unwrap()
}

#[test]
fn report_html_renders_offline_in_chromium() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is needed (./setup.sh installs it)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("matrix");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/matrix"),
        &dir,
    );
    let out = pagebench::report::generate(&dir).unwrap();
    let html = std::fs::read_to_string(&out.html).unwrap();
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no external URL in report.html"
    );

    // No network namespace of our own to clean up: the child unshares one that dies with
    // Chromium (as root, before the launch drops it to the browser's unprivileged user).
    let mut cmd = Command::new(CHROMIUM);
    // SAFETY: unshare is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| match libc::unshare(libc::CLONE_NEWNET) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
    let opts = LaunchOptions {
        protocol: Protocol::H2,
        h3_mode: H3Mode::Forced,
        server_ip: "127.0.0.1".parse().unwrap(),
        port: 443,
        spki: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".into(),
        cert_pem: String::new(),
        key_log: None,
        net_log: None,
        settle_max: Duration::from_secs(3),
        extra_args: vec![],
        keep_bodies: false,
        visual: None,
        hosts: vec![],
        init_script: None,
        repeat: None,
        as_recorded: vec![],
        tls_origins: vec![],
        resolver: None,
        device: Default::default(),
        cpu_benchmark: false,
    };
    let mut browser = ChromiumProcess::launch(cmd, &opts, None)
        .expect("Chromium starts in an empty network namespace");
    let session = attach(&browser);
    let t = Duration::from_secs(20);
    let call = |m: &str, p: Value| browser.cdp.call(Some(&session), m, p, t).unwrap();
    call("Network.enable", json!({}));
    call("Page.enable", json!({}));
    call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1280, "height": 1600, "deviceScaleFactor": 1, "mobile": false}),
    );
    let url = format!("file://{}", out.html.canonicalize().unwrap().display());
    let nav = call("Page.navigate", json!({ "url": url }));
    assert!(nav.get("errorText").is_none(), "{nav}");
    let ready = cdp::evaluate(
        &browser.cdp,
        &session,
        "new Promise(function (resolve) { (function check() { \
           var imgs = Array.from(document.images); \
           if (document.readyState === 'complete' && imgs.length && imgs.every(function (i) { return i.complete; })) \
             document.fonts.ready.then(function () { resolve(true); }); \
           else setTimeout(check, 50); })(); })",
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(ready, json!(true));
    let facts = cdp::evaluate(
        &browser.cdp,
        &session,
        "JSON.stringify({ \
           images: Array.from(document.images).map(function (i) { return { file: i.dataset.file, w: i.naturalWidth, h: i.naturalHeight, data: i.src.indexOf('data:image/png;base64,') === 0 }; }), \
           refs: Array.from(document.querySelectorAll('[src],[href]')).map(function (e) { return e.getAttribute('src') || e.getAttribute('href'); }) \
             .filter(function (r) { return r.indexOf('data:') !== 0 && r.indexOf('#') !== 0; }), \
           resources: performance.getEntriesByType('resource').map(function (r) { return r.name; }) \
             .filter(function (n) { return n.indexOf('data:') !== 0; }), \
           font: document.fonts.check('16px PagebenchSans'), \
           tables: document.querySelectorAll('table').length, \
           study: document.getElementById('study').getBoundingClientRect().top + window.scrollY, \
           height: document.documentElement.scrollHeight })",
        Duration::from_secs(10),
    )
    .unwrap();
    let facts: Value = serde_json::from_str(facts.as_str().unwrap()).unwrap();
    let images = facts["images"].as_array().unwrap();
    assert_eq!(images.len(), out.charts.len(), "one image per chart");
    for c in &out.charts {
        let img = images
            .iter()
            .find(|i| i["file"] == c.chart.file.as_str())
            .unwrap_or_else(|| panic!("{} is not in the page", c.chart.file));
        assert_eq!(img["data"], true, "{} is embedded", c.chart.file);
        assert_eq!(
            (img["w"].as_u64().unwrap(), img["h"].as_u64().unwrap()),
            (c.chart.width as u64, c.chart.height as u64),
            "{} decodes at its size",
            c.chart.file
        );
    }
    assert_eq!(facts["refs"], json!([]), "no reference outside the page");
    assert_eq!(facts["resources"], json!([]), "nothing fetched");
    assert_eq!(facts["font"], true, "the embedded font is loaded");
    assert!(facts["tables"].as_u64().unwrap() >= out.tables.len() as u64);
    // The only request the browser made is the file itself.
    let requested: Vec<String> = browser
        .cdp
        .drain_events()
        .into_iter()
        .filter(|e| e.method == "Network.requestWillBeSent")
        .filter_map(|e| e.params["request"]["url"].as_str().map(str::to_string))
        .filter(|u| !u.starts_with("data:"))
        .collect();
    assert_eq!(requested, vec![url], "requests: {requested:?}");

    // The first screen, and the whole page at a small scale.
    let top = screenshot(&browser, &session, json!({"format": "png"}));
    let full_height = facts["height"].as_f64().unwrap();
    let full = screenshot(
        &browser,
        &session,
        json!({"format": "png", "captureBeyondViewport": true,
               "clip": {"x": 0, "y": 0, "width": 1280, "height": full_height, "scale": 0.35}}),
    );
    let study = screenshot(
        &browser,
        &session,
        json!({"format": "png", "captureBeyondViewport": true,
               "clip": {"x": 0, "y": facts["study"].as_f64().unwrap(), "width": 1280, "height": 1500, "scale": 1}}),
    );
    browser.close();
    let shots = tmp.path().join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    std::fs::write(shots.join("report-top.png"), &top).unwrap();
    std::fs::write(shots.join("report-full.png"), &full).unwrap();
    std::fs::write(shots.join("report-study.png"), &study).unwrap();
    let dec = png::Decoder::new(std::io::Cursor::new(&top));
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1280, 1600));
    let px = &buf[..info.buffer_size()];
    let step = info.color_type.samples();
    let dark = px
        .chunks(step)
        .filter(|p| p[0] < 128 && p[1] < 128 && p[2] < 128)
        .count();
    assert!(
        dark > 5000,
        "the screenshot shows text ({dark} dark pixels)"
    );
    let notes = PathBuf::from("/work/notes");
    if notes.is_dir() {
        let _ = std::fs::write(notes.join("report-screenshot.png"), &top);
        let _ = std::fs::write(notes.join("report-screenshot-full.png"), &full);
        let _ = std::fs::write(notes.join("report-screenshot-tables.png"), &study);
    }
}
