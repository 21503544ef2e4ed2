//! Golden tests of `pagebench report` on the fixture results directory
//! (`tests/fixtures/report/matrix`, made by `tests/report_fixture.rs`; its series targets make
//! the verdicts known in advance). The medians are recomputed here from `runs.csv`, independently
//! of the statistics module. `report.md` is also compared with `tests/fixtures/report/
//! expected-report.md`; after an intended change, refresh it with `PAGEBENCH_BLESS=1`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pagebench::report::chart_data::ChartData;
use pagebench::report::doc::CellClass;
use pagebench::report::{self, ReportOutput};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/matrix")
}

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

/// A fresh copy of the fixture (named `matrix`, as the report's title uses the name).
fn fresh() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("matrix");
    copy_dir(&fixture(), &dir);
    (tmp, dir)
}

/// Valid measured completion times per series `profile/workload/server/variant`, from runs.csv.
fn valid_times(dir: &Path) -> BTreeMap<String, Vec<f64>> {
    let mut r = csv::Reader::from_path(dir.join("runs.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|x| x == n).unwrap();
    let (p, w, s, v, ph, o, c) = (
        col("profile"),
        col("workload"),
        col("server"),
        col("variant"),
        col("phase"),
        col("outcome"),
        col("completion_ms"),
    );
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for row in r.records() {
        let row = row.unwrap();
        if &row[ph] != "measure" || &row[o] != "valid" {
            continue;
        }
        out.entry(format!("{}/{}/{}/{}", &row[p], &row[w], &row[s], &row[v]))
            .or_default()
            .push(row[c].parse().unwrap());
    }
    out
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn cell<'a>(out: &'a ReportOutput, table: &str, row: &[&str], col: &str) -> &'a report::doc::Cell {
    out.table(table)
        .unwrap_or_else(|| {
            panic!(
                "no table {table}; have {:?}",
                out.tables.iter().map(|t| &t.id).collect::<Vec<_>>()
            )
        })
        .get(row, col)
        .unwrap_or_else(|| panic!("{table}: no cell {row:?} × {col}"))
}

#[test]
fn study_tables_show_the_expected_values_and_verdicts() {
    let (_tmp, dir) = fresh();
    let out = report::generate(&dir).unwrap();
    assert!(out.summary_computed && dir.join("summary.json").exists());
    let times = valid_times(&dir);
    let med = |k: &str| format!("{:.0} [", median(&times[k]));

    // Table 1: h1 → h2 on 50 files.
    let t = "h2-vs-h1-page50-embedded";
    let c = cell(&out, t, &["wired"], "h1 (ms)");
    assert!(
        c.text.starts_with(&med("wired/page50/embedded/h1")),
        "{}",
        c.text
    );
    let c = cell(&out, t, &["wired"], "h2/h1");
    assert_eq!(c.class, CellClass::Faster, "{}", c.text);
    assert!(
        c.text.starts_with("0.5") && c.text.contains("↓ faster"),
        "{}",
        c.text
    );
    assert_eq!(cell(&out, t, &["wired"], "study h1").text, "589");
    assert_eq!(cell(&out, t, &["wired"], "study h2").text, "321");
    assert_eq!(cell(&out, t, &["wired"], "study h2/h1").text, "0.54");
    assert_eq!(cell(&out, t, &["wired"], "vs study").text, "agrees");
    let c = cell(&out, t, &["cell-edge"], "h1 (ms)");
    assert!(
        c.text.starts_with(&med("cell-edge/page50/embedded/h1")) && c.text.ends_with("· 1 invalid"),
        "{}",
        c.text
    );
    assert_eq!(
        cell(&out, t, &["cell-edge"], "h2/h1").class,
        CellClass::Faster
    );

    // Table 2: h2 vs h3 on 10 files — equal targets: no significant difference.
    let t = "h3-vs-h2-page10-embedded";
    let c = cell(&out, t, &["wired"], "h3 (ms)");
    assert!(
        c.text.starts_with(&med("wired/page10/embedded/h3")) && c.text.ends_with("· 1 invalid"),
        "{}",
        c.text
    );
    assert_eq!(
        cell(&out, t, &["wired"], "h3/h2").class,
        CellClass::NotSignificant
    );
    assert_eq!(cell(&out, t, &["wired"], "study h3/h2").text, "0.88");
    assert_eq!(
        cell(&out, t, &["wired"], "vs study (h3/h2)").text,
        "not confirmed"
    );
    assert_eq!(
        cell(&out, t, &["cell-edge"], "h3/h2").class,
        CellClass::NotSignificant
    );
    // The study published nothing for cell-edge on 10 files.
    for col in ["study h2", "study h3", "study h3/h2", "vs study (h3/h2)"] {
        assert_eq!(
            cell(&out, t, &["cell-edge"], col).class,
            CellClass::Missing,
            "{col}"
        );
    }

    // Table 3: h2 vs h3 on 50 files, with primed h3 on wired only.
    let t = "h3-vs-h2-page50-embedded";
    assert_eq!(cell(&out, t, &["wired"], "h3/h2").class, CellClass::Slower);
    assert_eq!(
        cell(&out, t, &["wired"], "h3-primed/h2").class,
        CellClass::NotSignificant
    );
    assert_eq!(
        cell(&out, t, &["cell-edge"], "h3/h2").class,
        CellClass::Slower
    );
    assert_eq!(cell(&out, t, &["cell-edge"], "h3-primed (ms)").text, "—");
    assert_eq!(
        cell(&out, t, &["cell-edge"], "vs study (h3/h2)").text,
        "agrees"
    );
    let c = cell(&out, t, &["wired"], "h3-primed (ms)");
    assert!(
        c.text.starts_with(&med("wired/page50/embedded/h3-primed")),
        "{}",
        c.text
    );

    // Table 4: the 3 MB download; h3 on cell-edge did not finish in 5 of 8 runs.
    let t = "download-embedded";
    let c = cell(&out, t, &["cell-edge"], "h3 (ms)");
    assert_eq!(
        (c.text.as_str(), c.class),
        ("DNF (5 of 8 DNF)", CellClass::Dnf)
    );
    // Decided by the test, DNFs ranked slowest; the ratio is a lower bound.
    let c = cell(&out, t, &["cell-edge"], "h3/h2");
    assert!(
        c.text.starts_with("≥ ") && c.text.contains("↑ slower (p="),
        "{}",
        c.text
    );
    assert_eq!(
        cell(&out, t, &["cell-edge"], "study h3").text,
        "DNF (2 min)"
    );
    assert_eq!(
        cell(&out, t, &["cell-edge"], "vs study (h3/h2)").text,
        "agrees"
    );
    assert_eq!(
        cell(&out, t, &["wired"], "h2/h1").class,
        CellClass::NotSignificant
    );
    assert_eq!(
        cell(&out, t, &["wired"], "h3/h2").class,
        CellClass::NotSignificant
    );
    assert!(cell(&out, t, &["wired"], "goodput (Mbit/s)")
        .text
        .starts_with("h1 "));

    // Table 5: the breakdown.
    let t = "breakdown-page50-embedded";
    assert!(cell(&out, t, &["wired", "h1"], "handshake RTTs")
        .text
        .starts_with("2.0"));
    assert!(cell(&out, t, &["wired", "h3"], "handshake RTTs")
        .text
        .starts_with("1.0"));
    assert_eq!(
        cell(&out, t, &["wired", "h2"], "on-wire peak").text,
        "50 [50–50]"
    );
    let q = |v: &str| -> f64 {
        cell(&out, t, &["wired", v], "queueing median (ms)")
            .text
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(
        q("h3") > 20.0 * q("h2") && q("h3") > 20.0 * q("h3-primed"),
        "forced h3 queues, primed does not"
    );

    // Table 6: the sweep: forced h3 queues more as files grow.
    let t = "sweep-queueing-embedded";
    let qs: Vec<f64> = [
        "10-file page",
        "20-file page",
        "30-file page",
        "50-file page",
    ]
    .iter()
    .map(|c| {
        cell(&out, t, &["wired", "h3"], c)
            .text
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    })
    .collect();
    assert!(qs.windows(2).all(|w| w[1] > w[0]), "{qs:?}");
    assert_eq!(cell(&out, t, &["wired", "h1"], "20-file page").text, "—");
    assert!(
        out.table("sweep-queueing-caddy").is_none(),
        "caddy measured one file count"
    );

    // Server against server, oriented caddy / embedded.
    let t = "server-caddy-vs-embedded";
    assert_eq!(
        cell(&out, t, &["wired", "page50", "h3"], "caddy/embedded").class,
        CellClass::Slower
    );

    // Warnings and the problem runs are in the Markdown.
    let md = std::fs::read_to_string(&out.markdown).unwrap();
    // 20 comparisons are significant: the "too few runs" warning (which only considers the
    // series that enter a tested comparison) must not claim otherwise.
    assert!(
        !md.contains("no difference can be called significant"),
        "no misleading too-few-runs warning"
    );
    assert!(md.contains("`cell-edge/download/embedded/h3`: 3 of 8 runs valid, 0 invalid, 5 did not finish — median did not finish"));
    assert!(md.contains("(invalid: protocol_mismatch × 1)"));
    assert!(
        !md.contains("**h1 → h2 on the 50-file page — server caddy**"),
        "absent tables are explained for the first server only"
    );
}

#[test]
fn report_md_matches_the_golden_file_and_is_deterministic() {
    let (_tmp, dir) = fresh();
    let first = report::generate(&dir).unwrap();
    let md = std::fs::read_to_string(&first.markdown).unwrap();
    let golden =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/expected-report.md");
    if std::env::var_os("PAGEBENCH_BLESS").is_some() {
        std::fs::write(&golden, &md).unwrap();
    }
    let expected =
        std::fs::read_to_string(&golden).expect("golden file; create it with PAGEBENCH_BLESS=1");
    if md != expected {
        let line = md.lines().zip(expected.lines()).position(|(a, b)| a != b);
        panic!(
            "report.md differs from {} (first differing line {:?}); if intended, rerun with PAGEBENCH_BLESS=1",
            golden.display(),
            line.map(|l| l + 1)
        );
    }
    // A second run reads the summary it wrote and writes the same report.
    let second = report::generate(&dir).unwrap();
    assert!(!second.summary_computed);
    assert_eq!(std::fs::read_to_string(&second.markdown).unwrap(), md);
    assert_eq!(
        std::fs::read(&second.charts[0].path).unwrap(),
        std::fs::read(&first.charts[0].path).unwrap()
    );
}

/// Width, height and RGB pixels of a PNG file.
fn decode(path: &Path) -> (u32, u32, Vec<u8>) {
    let dec = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb, "{}", path.display());
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

#[test]
fn charts_exist_with_their_size_and_are_not_blank() {
    let (_tmp, dir) = fresh();
    let out = report::generate(&dir).unwrap();
    let expected: &[(&str, u32, u32)] = &[
        ("charts/heatmap-embedded.png", 1200, 246),
        ("charts/heatmap-caddy.png", 1200, 200),
        ("charts/bars-page10.png", 1200, 700),
        ("charts/bars-page50.png", 1200, 700),
        ("charts/bars-download.png", 1200, 700),
        ("charts/cdf-page10-embedded.png", 1200, 440),
        ("charts/cdf-page50-caddy.png", 1200, 440),
        ("charts/cdf-download-embedded.png", 1200, 440),
        ("charts/onwire-page50-embedded.png", 1200, 440),
        ("charts/onwire-page10-embedded.png", 1200, 440),
        ("charts/waterfall-page50-wired-embedded.png", 1200, 660),
        ("charts/waterfall-page10-cell-edge-embedded.png", 1200, 392),
        ("charts/sweep-queueing-embedded.png", 1200, 440),
    ];
    for (file, w, h) in expected {
        let c = out
            .charts
            .iter()
            .find(|c| c.chart.file == *file)
            .unwrap_or_else(|| panic!("no chart {file}"));
        assert_eq!((c.chart.width, c.chart.height), (*w, *h), "{file}");
    }
    assert!(!out
        .charts
        .iter()
        .any(|c| c.chart.file.contains("sweep-queueing-caddy")));
    for c in &out.charts {
        let (w, h, px) = decode(&c.path);
        assert_eq!((w, h), (c.chart.width, c.chart.height), "{}", c.chart.file);
        // Not blank: enough ink, and real variation in brightness.
        // Every 5th pixel is plenty and keeps the debug build quick.
        let lum: Vec<f64> = px
            .chunks(3)
            .step_by(5)
            .map(|p| 0.299 * p[0] as f64 + 0.587 * p[1] as f64 + 0.114 * p[2] as f64)
            .collect();
        let mean = lum.iter().sum::<f64>() / lum.len() as f64;
        let var = lum.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / lum.len() as f64;
        let inked = lum.iter().filter(|x| **x < 200.0).count() as f64 / lum.len() as f64;
        assert!(
            var > 100.0 && inked > 0.01,
            "{}: variance {var:.0}, ink {inked:.3}",
            c.chart.file
        );
        // Colour, not just black text: some saturated pixels (bars, lines, cells).
        let colourful = px
            .chunks(3)
            .step_by(5)
            .filter(|p| p.iter().max().unwrap() - p.iter().min().unwrap() > 80)
            .count();
        assert!(
            colourful > 500,
            "{}: {colourful} coloured pixels",
            c.chart.file
        );
    }
}

#[test]
fn chart_data_matches_the_fixture() {
    let (_tmp, dir) = fresh();
    let out = report::generate(&dir).unwrap();
    let times = valid_times(&dir);
    let chart = |f: &str| &out.charts.iter().find(|c| c.chart.file == f).unwrap().chart;

    // Bars: one per series with its median and CI, groups = profiles, series = protocol@server.
    let ChartData::Bars(b) = &chart("charts/bars-page50.png").data else {
        panic!()
    };
    assert_eq!(b.groups, ["wired", "cell-edge"]);
    assert_eq!(
        b.series,
        [
            "h1 @ embedded",
            "h2 @ embedded",
            "h3 @ embedded",
            "h3-primed @ embedded",
            "h2 @ caddy",
            "h3 @ caddy"
        ]
    );
    assert_eq!(b.bars.len(), 6 + 3);
    for bar in &b.bars {
        let (v, s) = b.series[bar.series].split_once(" @ ").unwrap();
        let key = format!("{}/page50/{s}/{v}", b.groups[bar.group]);
        let m = median(&times[&key]);
        assert!(
            (bar.median.unwrap() - m).abs() < 1e-9,
            "{key}: {:?} vs {m}",
            bar.median
        );
        let (lo, hi) = bar.ci.unwrap();
        assert!(lo <= m && m <= hi);
    }
    let ChartData::Bars(b) = &chart("charts/bars-download.png").data else {
        panic!()
    };
    let dnf = b.bars.iter().find(|x| x.dnf).unwrap();
    assert_eq!(
        (
            b.groups[dnf.group].as_str(),
            dnf.median,
            dnf.n_dnf,
            dnf.n_valid
        ),
        ("cell-edge", None, 5, 3)
    );

    // CDF: every valid run of the series, DNF runs keep the curve below 1.
    let ChartData::Cdf(c) = &chart("charts/cdf-download-embedded.png").data else {
        panic!()
    };
    let panel = c.panels.iter().find(|p| p.title == "cell-edge").unwrap();
    let h3 = panel.lines.iter().find(|l| l.series == "h3").unwrap();
    let mut want = times["cell-edge/download/embedded/h3"].clone();
    want.sort_by(f64::total_cmp);
    assert_eq!(h3.points.iter().map(|p| p.0).collect::<Vec<_>>(), want);
    assert_eq!(h3.points.last().unwrap().1, 3.0 / 8.0);
    let h2 = panel.lines.iter().find(|l| l.series == "h2").unwrap();
    assert_eq!(h2.points.len(), 8);
    assert_eq!(h2.points.last().unwrap().1, 1.0);

    // Heatmap: the verdict colours and printed ratios.
    let ChartData::Heatmap(h) = &chart("charts/heatmap-embedded.png").data else {
        panic!()
    };
    let panel = h
        .panels
        .iter()
        .find(|p| p.a == "h3" && p.b == "h2")
        .unwrap();
    let at = |p: &str, w: &str| {
        let (r, c) = (
            h.rows.iter().position(|x| x == p).unwrap(),
            h.cols.iter().position(|x| x == w).unwrap(),
        );
        panel
            .cells
            .iter()
            .find(|x| x.row == r && x.col == c)
            .unwrap()
    };
    use pagebench::report::report_data::VerdictClass;
    assert_eq!(at("wired", "page50").verdict, VerdictClass::Slower);
    assert_eq!(at("wired", "page10").verdict, VerdictClass::NotSignificant);
    assert!(at("cell-edge", "download").text.starts_with("≥ "));
    assert_eq!(at("cell-edge", "download").verdict, VerdictClass::Slower);
    let r = median(&times["wired/page50/embedded/h3"]) / median(&times["wired/page50/embedded/h2"]);
    assert_eq!(at("wired", "page50").text, format!("{r:.2}"));

    // Waterfall and on-wire: the median run's resources, as recorded in runs/<id>.json.
    let ChartData::Waterfall(wf) = &chart("charts/waterfall-page50-wired-embedded.png").data else {
        panic!()
    };
    assert_eq!(
        wf.panels
            .iter()
            .map(|p| p.series.as_str())
            .collect::<Vec<_>>(),
        ["h1", "h2", "h3", "h3-primed"]
    );
    for p in &wf.panels {
        let rec: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.join("runs").join(format!("{}.json", p.run_id))).unwrap(),
        )
        .unwrap();
        let res = rec["resources"].as_array().unwrap();
        assert_eq!(p.rows.len(), res.len());
        assert!(p.rows.windows(2).all(|w| w[0].start <= w[1].start));
        let first = &res
            .iter()
            .min_by(|a, b| {
                a["start_ms"]
                    .as_f64()
                    .unwrap()
                    .total_cmp(&b["start_ms"].as_f64().unwrap())
            })
            .unwrap();
        assert_eq!(p.rows[0].start, first["start_ms"].as_f64().unwrap());
        // The median run is the valid run closest to the series median.
        let key = format!("wired/page50/embedded/{}", p.series);
        let m = median(&times[&key]);
        let c = rec["metrics"]["completion_ms"].as_f64().unwrap();
        assert!(times[&key]
            .iter()
            .all(|t| (t - m).abs() >= (c - m).abs() - 1e-9));
        if p.series == "h1" {
            assert!(
                p.rows.iter().filter(|r| r.connect.is_some()).count() >= 1,
                "h1 opens connections"
            );
        }
    }
    let ChartData::Onwire(o) = &chart("charts/onwire-page50-embedded.png").data else {
        panic!()
    };
    let mut r = csv::Reader::from_path(dir.join("runs.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    let peak_col = h.iter().position(|x| x == "onwire_peak").unwrap();
    let peaks: BTreeMap<String, usize> = r
        .records()
        .map(|x| x.unwrap())
        .map(|x| (x[0].to_string(), x[peak_col].parse().unwrap_or(0)))
        .collect();
    for panel in &o.panels {
        for line in &panel.lines {
            let max = line.points.iter().map(|p| p.1).max().unwrap();
            assert_eq!(max, peaks[&line.run_id], "{}", line.run_id);
        }
    }

    // Sweep: queueing medians per file count, wired only (cell-edge measured 2 counts).
    let ChartData::Sweep(s) = &chart("charts/sweep-queueing-embedded.png").data else {
        panic!()
    };
    assert_eq!(
        s.panels
            .iter()
            .map(|p| p.title.as_str())
            .collect::<Vec<_>>(),
        ["wired"]
    );
    let h3 = s.panels[0].lines.iter().find(|l| l.series == "h3").unwrap();
    assert_eq!(
        h3.points.iter().map(|p| p.files).collect::<Vec<_>>(),
        [10, 20, 30, 50]
    );
}

/// Keeps only the runs.csv rows (and their records) that `keep` accepts; `keep` reads a row's
/// fields by column name.
fn subset(dir: &Path, keep: impl Fn(&dyn Fn(&str) -> String) -> bool) {
    let path = dir.join("runs.csv");
    let mut r = csv::Reader::from_path(&path).unwrap();
    let h = r.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
    let mut w = csv::Writer::from_path(&path).unwrap();
    w.write_record(&h).unwrap();
    for row in rows {
        let field = |name: &str| {
            let i = h.iter().position(|c| c == name).expect("column");
            row[i].to_string()
        };
        if keep(&field) {
            w.write_record(&row).unwrap();
        } else {
            let _ = std::fs::remove_file(dir.join("runs").join(format!("{}.json", &row[0])));
        }
    }
    w.flush().unwrap();
}

#[test]
fn missing_workloads_protocols_and_records_degrade_gracefully() {
    let (_tmp, dir) = fresh();
    // Only wired page10 over h2 and h3, and the median runs' records gone.
    subset(&dir, |r| {
        r("profile") == "wired"
            && r("workload") == "page10"
            && ["h2", "h3"].contains(&r("variant").as_str())
    });
    for e in std::fs::read_dir(dir.join("runs")).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
    meta["status"] = "interrupted".into();
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
    let out = report::generate(&dir).unwrap();
    let md = std::fs::read_to_string(&out.markdown).unwrap();
    assert!(
        md.contains("**h1 → h2 on the 50-file page**: not measured (needs page50 with h1 and h2)."),
        "{md}"
    );
    assert!(md.contains("**The 3 MB download**: not measured"));
    assert!(!md.contains("## File-count sweep") && !md.contains("## Server against server"));
    assert!(out.table("h3-vs-h2-page10").is_some());
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("status is \"interrupted\"")),
        "{:?}",
        out.warnings
    );
    assert!(
        out.warnings.iter().any(|w| w.contains("planned runs")),
        "{:?}",
        out.warnings
    );
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("median runs' records are unreadable")),
        "{:?}",
        out.warnings
    );
    // Without records there is no waterfall, but the rest is drawn.
    assert!(!out
        .charts
        .iter()
        .any(|c| matches!(c.chart.data, ChartData::Waterfall(_))));
    assert!(out
        .charts
        .iter()
        .any(|c| matches!(c.chart.data, ChartData::Heatmap(_))));
    for c in &out.charts {
        assert!(c.path.exists());
    }
    // Charts of the earlier, bigger report are not left behind.
    let pngs = std::fs::read_dir(dir.join("charts")).unwrap().count();
    assert_eq!(pngs, out.charts.len());
}

#[test]
fn bad_input_gets_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let err = format!("{:#}", report::generate(tmp.path()).unwrap_err());
    assert!(
        err.contains("meta.json") && err.contains("results directory"),
        "{err}"
    );

    let (_tmp, dir) = fresh();
    let csv = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    let broken: String = csv
        .lines()
        .take(3)
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        + "x,y\n";
    std::fs::write(dir.join("runs.csv"), broken).unwrap();
    let err = format!("{:#}", report::generate(&dir).unwrap_err());
    assert!(err.contains("runs.csv row 4"), "{err}");

    std::fs::write(dir.join("runs.csv"), csv).unwrap();
    subset(&dir, |_| false);
    let err = format!("{:#}", report::generate(&dir).unwrap_err());
    assert!(err.contains("no measured runs"), "{err}");
}

#[test]
fn cli_writes_the_report_and_exits_zero() {
    let (_tmp, dir) = fresh();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_pagebench"))
        .arg("report")
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("report.html") && stdout.contains("charts/bars-page50.png"),
        "{stdout}"
    );
    assert!(dir.join("report.md").exists() && dir.join("report.html").exists());
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_pagebench"))
        .args(["report", "/nonexistent/pagebench-results"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("meta.json"));
}
