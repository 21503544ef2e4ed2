//! `--visual` end to end: a calibration page with a known visual progression — four equal
//! blocks, each a quarter of the screen in its own colour, painted by timers — loaded by real
//! Chromium over the emulated link with the screencast on. Its Speed Index is computable by
//! hand from when the page says each block was painted; the measured one must be within 15 %.
//! The same matrix then gives the report's filmstrip and `report --metric speed-index`.

use std::path::{Path, PathBuf};
use std::process::Command;

use pagebench::config::site::{self, Builder, Entry, Source, Timings};
use pagebench::probe::record::RunRecord;

const PAGE_URL: &str = "https://calibration.pagebench.test/";
/// When the blocks are scheduled, ms after navigation start.
const BLOCKS_AT_MS: [f64; 4] = [400.0, 800.0, 1200.0, 1600.0];

fn calibration_html() -> String {
    let at: Vec<String> = BLOCKS_AT_MS.iter().map(|t| format!("{t}")).collect();
    format!(
        r#"<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>pagebench visual calibration</title>
<style>html,body{{margin:0;height:100%;overflow:hidden;background:#fff}}
div{{position:absolute;width:50vw;height:50vh}}</style></head>
<body><script>
var at = [{at}], colours = ['#3366cc', '#cc3333', '#33aa55', '#ffcc00'];
var pos = [[0, 0], [50, 0], [0, 50], [50, 50]];
window.__pagebench = {{ painted: [] }};
at.forEach(function (t, i) {{
  setTimeout(function () {{
    var d = document.createElement('div');
    d.style.left = pos[i][0] + 'vw'; d.style.top = pos[i][1] + 'vh';
    d.style.background = colours[i];
    document.body.appendChild(d);
    // The frame that shows it starts now.
    requestAnimationFrame(function () {{ window.__pagebench.painted[i] = performance.now(); }});
  }}, Math.max(0, t - performance.now()));
}});
</script></body></html>
"#,
        at = at.join(", ")
    )
}

/// A one-entry site archive of the calibration page.
fn write_archive(dir: &Path) {
    let html = calibration_html().into_bytes();
    let mut b = Builder::default();
    b.push(
        Entry {
            method: "GET".into(),
            url: PAGE_URL.into(),
            status: 200,
            headers: vec![
                ("content-type".into(), "text/html; charset=utf-8".into()),
                ("cache-control".into(), "no-store".into()),
            ],
            body: None,
            content_encoding: None,
            decoded_size: html.len() as u64,
            server_address: None,
            protocol: None,
            timings: Timings::default(),
            missing: None,
            connection: None,
        },
        Some(html),
    );
    let source = Source {
        kind: "generated".into(),
        from: "tests/visual_runs.rs".into(),
        creator: "pagebench tests".into(),
        started: None,
        browser_confinement: None,
        load_ms: None,
    };
    b.write(dir, source, PAGE_URL.into()).unwrap();
}

fn pagebench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pagebench"))
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn records(dir: &Path) -> Vec<RunRecord> {
    let mut v: Vec<RunRecord> = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|e| {
            let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
            serde_json::from_str(&text).unwrap()
        })
        .collect();
    v.sort_by(|a, b| a.id.cmp(&b.id));
    v
}

#[test]
fn speed_index_of_the_calibration_page_is_the_analytic_one_and_the_report_shows_its_filmstrip() {
    let tmp = tempfile::tempdir().unwrap();
    let keep = std::env::var_os("PAGEBENCH_KEEP").map(PathBuf::from);
    let base = keep.as_deref().unwrap_or(tmp.path());
    let archive = base.join("calibration");
    write_archive(&archive);
    let out: PathBuf = base.join("results");
    run_ok(pagebench().args([
        "matrix",
        "--profiles",
        "wired",
        "--workloads",
        &format!("site:{}", archive.display()),
        "--protocols",
        "h2,h3",
        "--runs",
        "2",
        "--warmup",
        "0",
        "--visual",
        "--quiet",
        "--machine-check",
        "0s",
        "--out",
        out.to_str().unwrap(),
    ]));
    let measured: Vec<RunRecord> = records(&out)
        .into_iter()
        .filter(|r| {
            r.phase == pagebench::config::identity::Phase::Measure && r.outcome.name() == "valid"
        })
        .collect();
    assert!(
        measured.len() >= 3,
        "{} valid measured runs",
        measured.len()
    );
    let (mut si, mut analytic, mut vc, mut last_block) = (vec![], vec![], vec![], vec![]);
    for r in &measured {
        let painted: Vec<f64> = r
            .observation
            .page_result
            .as_ref()
            .and_then(|p| p["painted"].as_array())
            .unwrap_or_else(|| panic!("{}: the page reported no paints", r.id))
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        assert_eq!(painted.len(), 4, "{}", r.id);
        // Each block is a quarter of the visual progress: SI = Σ ¼ · t_i.
        analytic.push(painted.iter().map(|t| 0.25 * t).sum::<f64>());
        last_block.push(painted[3]);
        si.push(r.metrics.speed_index_ms.unwrap());
        vc.push(r.metrics.visual_complete_ms.unwrap());
        let v = r.visual.as_ref().unwrap();
        assert!(v.error.is_none(), "{}: {:?}", r.id, v.error);
        // Every frame is on disk beside the record.
        for f in &v.frames {
            assert!(
                out.join("frames").join(&r.id).join(&f.file).is_file(),
                "{}: {}",
                r.id,
                f.file
            );
        }
        // The progress climbs in quarters.
        let steps: Vec<f64> = v
            .metrics
            .as_ref()
            .unwrap()
            .progress
            .iter()
            .map(|p| p.1)
            .collect();
        for q in [25.0, 50.0, 75.0, 100.0] {
            assert!(
                steps.iter().any(|s| (s - q).abs() < 3.0),
                "{}: progress {steps:?} has no step at {q} %",
                r.id
            );
        }
    }
    let (si, analytic) = (median(si), median(analytic));
    eprintln!("calibration: Speed Index {si:.0} ms measured, {analytic:.0} ms analytic");
    assert!(
        (si - analytic).abs() <= 0.15 * analytic,
        "Speed Index {si:.0} ms vs analytic {analytic:.0} ms"
    );
    let (vc, last) = (median(vc), median(last_block));
    assert!(
        (vc - last).abs() <= 0.15 * last,
        "VC {vc:.0} vs last block {last:.0}"
    );

    // The report: a filmstrip of the median runs and the paint table; Speed Index as headline.
    let chart = std::fs::read_dir(out.join("charts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("filmstrip-"))
        .expect("a filmstrip chart");
    let png = std::fs::read(out.join("charts").join(&chart)).unwrap();
    assert!(png.starts_with(b"\x89PNG"));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## What the user saw"), "no paint section");
    assert!(md.contains(&chart), "the filmstrip is placed in the report");
    assert!(md.contains("Speed Index (ms)"));
    let printed =
        run_ok(pagebench().args(["report", out.to_str().unwrap(), "--metric", "speed-index"]));
    assert!(printed.contains("by-speed-index"), "{printed}");
    let by_si = std::fs::read_to_string(out.join("by-speed-index/report.md")).unwrap();
    assert!(by_si.contains("Speed Index (ms)"));
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("by-speed-index/summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["metric"], "speed_index_ms");
    // The study's summary stays on loadEventEnd.
    let study: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(study["metric"], "completion_ms");
    let _ = site::read(&archive).unwrap();
}
