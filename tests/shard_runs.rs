//! Shards and `merge` through the binary, with real browsers and links: one small plan run as
//! `--shard 1/2` and `--shard 2/2`, then merged — every planned run once, each shard's cells
//! whole, the statistics over both; overlapping, foreign and missing shards refused, naming
//! what is wrong.

mod runs_support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use pagebench::config::plan::{self, PlanSpec};
use pagebench::config::protocol::H3Mode;
use runs_support::{namespaces_of, runs_csv};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pagebench"));
    c.env("PAGEBENCH_LOG", "warn");
    // Both shards are one build, even if the checkout changes while the test runs (its git
    // revision is part of the machine's fingerprint, which merge compares).
    c.env("PAGEBENCH_GIT_REVISION", "shard-test");
    c
}

fn run(args: &[String]) -> Output {
    let out = bin().args(args).output().unwrap();
    eprintln!(
        "pagebench {}: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn shard_args(tmp: &Path, out: &Path, shard: &str) -> Vec<String> {
    let profiles = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    [
        "matrix",
        "--quiet",
        "--no-report",
        "--pages",
        &tmp.join("pages").display().to_string(),
        "--profiles-dir",
        &profiles.display().to_string(),
        "--profiles",
        "datacenter,wired",
        "--workloads",
        "page10",
        "--protocols",
        "h2,h3",
        "--runs",
        "3",
        "--warmup",
        "0",
        "--seed",
        "5",
        "--timeout",
        "30s",
        "--machine-check",
        "0s",
        "--jobs",
        "1",
        "--calibration-runs",
        "2",
        "--shard",
        shard,
        "--out",
        &out.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn two_shards_merge_into_the_whole_plan_and_foreign_or_overlapping_ones_are_refused() {
    let tmp = tempfile::Builder::new()
        .prefix("pagebench-shards-")
        .tempdir()
        .unwrap();
    let t = tmp.path();
    let planned = plan::plan(&PlanSpec {
        profiles: vec!["datacenter".into(), "wired".into()],
        workloads: vec!["page10".into()],
        servers: vec!["embedded".into()],
        browsers: vec![pagebench::config::identity::BrowserId::default()],
        views: vec![pagebench::config::identity::View::First],
        devices: vec![Default::default()],
        variants: pagebench::config::protocol::parse_variants("h2,h3", H3Mode::Forced).unwrap(),
        runs: 3,
        warmup: 0,
        seed: 5,
        adaptive: None,
    });
    let (s1, s2) = (t.join("s1"), t.join("s2"));
    for (dir, shard) in [(&s1, "1/2"), (&s2, "2/2")] {
        let mut child = bin().args(shard_args(t, dir, shard)).spawn().unwrap();
        let pid = child.id();
        assert!(child.wait().unwrap().success(), "shard {shard}");
        assert!(
            namespaces_of(pid).is_empty(),
            "shard {shard} left namespaces"
        );
    }
    // Each shard: one whole cell (every protocol and round of it), the cells disjoint, the
    // plan hash shared, the machine described and calibrated.
    let mut cells_seen = BTreeSet::new();
    for (dir, k) in [(&s1, 1), (&s2, 2)] {
        let meta = json(&dir.join("meta.json"));
        assert_eq!(meta["shard"]["index"], k);
        assert_eq!(meta["shard"]["count"], 2);
        let cells: Vec<String> = meta["shard"]["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                format!(
                    "{}/{}",
                    c["profile"].as_str().unwrap(),
                    c["workload"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(cells.len(), 1, "{cells:?}");
        assert!(
            cells_seen.insert(cells[0].clone()),
            "{} in two shards",
            cells[0]
        );
        let mine: BTreeSet<String> = planned
            .iter()
            .filter(|p| cells.contains(&format!("{}/{}", p.profile, p.workload)))
            .map(|p| p.id.clone())
            .collect();
        let got: BTreeSet<String> = runs_csv(dir).iter().map(|r| r["plan_id"].clone()).collect();
        assert_eq!(got, mine, "shard {k} ran exactly its cell, whole");
        let machine = json(&dir.join("machine.json"));
        assert!(!machine["fingerprint"]["cpu_model"]
            .as_str()
            .unwrap()
            .is_empty());
        let cal = &machine["calibration"];
        assert!(
            cal["netem"]["udp_packets_per_s"].as_f64().unwrap() > 1000.0,
            "{cal}"
        );
        assert!(cal["reference"]["valid"].as_u64().unwrap() >= 1, "{cal}");
    }
    assert_eq!(
        json(&s1.join("meta.json"))["plan_hash"],
        json(&s2.join("meta.json"))["plan_hash"]
    );

    // Merged: every planned run once, in plan order, and statistics over both cells.
    let merged = t.join("merged");
    let out = run(&[
        "merge".into(),
        "--quiet".into(),
        merged.display().to_string(),
        s2.display().to_string(),
        s1.display().to_string(),
    ]);
    assert!(out.status.success());
    let finals: Vec<String> = runs_csv(&merged)
        .iter()
        .map(|r| r["plan_id"].clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let all: BTreeSet<String> = planned.iter().map(|p| p.id.clone()).collect();
    assert_eq!(finals.into_iter().collect::<BTreeSet<_>>(), all);
    let order: Vec<usize> = runs_csv(&merged)
        .iter()
        .map(|r| planned.iter().position(|p| p.id == r["plan_id"]).unwrap())
        .collect();
    assert!(
        order.windows(2).all(|w| w[0] <= w[1]),
        "plan order: {order:?}"
    );
    let attempts = runs_csv(&s1).len() + runs_csv(&s2).len();
    assert_eq!(runs_csv(&merged).len(), attempts);
    let summary = json(&merged.join("summary.json"));
    let profiles: BTreeSet<&str> = summary["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"]["profile"].as_str().unwrap())
        .collect();
    assert_eq!(profiles, ["datacenter", "wired"].into_iter().collect());
    assert_eq!(summary["comparisons"].as_array().unwrap().len(), 2);
    let meta = json(&merged.join("meta.json"));
    assert!(meta.get("shard").is_none());
    assert_eq!(meta["merged_from"].as_array().unwrap().len(), 2);
    assert_eq!(meta["status"], "complete");
    assert!(merged.join("report.md").exists() && merged.join("diagnosis.md").exists());
    let report = std::fs::read_to_string(merged.join("report.md")).unwrap();
    assert!(
        report.contains("Machines"),
        "the report lists the shards' machines"
    );
    for r in runs_csv(&merged) {
        assert!(merged
            .join("runs")
            .join(format!("{}.json", r["run_id"]))
            .exists());
    }

    // Refused: the same shard twice, a shard of another plan, a missing shard.
    let refused = |dirs: &[&Path], out: &str, what: &[&str]| {
        let mut args = vec!["merge".to_string(), t.join(out).display().to_string()];
        args.extend(dirs.iter().map(|d| d.display().to_string()));
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} was merged");
        for w in what {
            assert!(err.contains(w), "{w:?} not in: {err}");
        }
        assert!(!t.join(out).exists(), "a refused merge wrote {out}");
    };
    refused(
        &[&s1, &s1],
        "out-twice",
        &["overlapping shards", "both shard 1/2"],
    );
    // Another plan: the second shard's directory as if run with another seed.
    let foreign = t.join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    for f in ["runs.csv", "resources.csv"] {
        std::fs::copy(s2.join(f), foreign.join(f)).unwrap();
    }
    let mut m = json(&s2.join("meta.json"));
    m["plan"]["seed"] = 6.into();
    std::fs::write(foreign.join("meta.json"), m.to_string()).unwrap();
    refused(
        &[&s1, &foreign],
        "out-foreign",
        &["not shards of one plan", "--seed 5 vs 6"],
    );
    refused(&[&s1], "out-alone", &["missing shard 2/2", "--shard 2/2"]);
}
