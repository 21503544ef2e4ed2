//! Helpers shared by the integration tests that run pagebench end to end (`stacks_runs`,
//! `reference_runs`, `matrix_runs`, `shard_runs`): a profile by name, a small matrix through the
//! binary, `runs.csv` as rows, and the namespaces a pagebench process left.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use pagebench::config::profile::{self, Profile};

/// The checkout's profile `name`.
pub fn profile(name: &str) -> Profile {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    profile::select(name, &dir).unwrap().remove(0)
}

/// Runs a small matrix through the binary and returns its directory.
pub fn matrix(tmp: &Path, name: &str, args: &[&str]) -> PathBuf {
    let out = tmp.join(name);
    let profiles = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    let status = Command::new(env!("CARGO_BIN_EXE_pagebench"))
        .env("PAGEBENCH_LOG", "warn")
        .args([
            "matrix",
            "--quiet",
            "--no-report",
            "--warmup",
            "0",
            "--timeout",
            "60s",
            "--machine-check",
            "0s",
        ])
        .arg("--pages")
        .arg(tmp.join("pages"))
        .arg("--profiles-dir")
        .arg(&profiles)
        .arg("--out")
        .arg(&out)
        .args(args)
        .status()
        .unwrap();
    assert!(status.success());
    out
}

/// `runs.csv` of the results directory `dir`, its rows as maps.
pub fn runs_csv(dir: &Path) -> Vec<BTreeMap<String, String>> {
    let mut r = csv::Reader::from_path(dir.join("runs.csv")).unwrap();
    let headers = r.headers().unwrap().clone();
    r.records()
        .map(|row| {
            let row = row.unwrap();
            headers
                .iter()
                .map(String::from)
                .zip(row.iter().map(String::from))
                .collect()
        })
        .collect()
}

/// Namespaces created by `pid` (pagebench names them `pb-<pid>-…`).
pub fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("pb-{pid}-")))
        .map(String::from)
        .collect()
}
