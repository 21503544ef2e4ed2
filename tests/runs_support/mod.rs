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
        // One run at a time, in plan order (the default walks on lanes), unless the test says.
        .args(
            (!args.contains(&"--jobs"))
                .then_some(["--jobs", "1"])
                .into_iter()
                .flatten(),
        )
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

/// One response of a generated site archive.
pub struct SiteFile {
    pub path: String,
    pub content_type: String,
    pub cache_control: &'static str,
    pub body: Vec<u8>,
    /// The recorded wait (ms): `--think-time recorded` makes the server wait what it exceeds
    /// the origin's quickest answer by.
    pub wait_ms: f64,
}

impl SiteFile {
    /// A `no-store` response recorded with no wait.
    pub fn new(path: &str, content_type: &str, body: impl Into<Vec<u8>>) -> SiteFile {
        SiteFile {
            path: path.to_string(),
            content_type: content_type.to_string(),
            cache_control: "no-store",
            body: body.into(),
            wait_ms: 0.0,
        }
    }

    pub fn wait(self, wait_ms: f64) -> SiteFile {
        SiteFile { wait_ms, ..self }
    }

    pub fn cache(self, cache_control: &'static str) -> SiteFile {
        SiteFile {
            cache_control,
            ..self
        }
    }
}

/// A site archive of `host` in `dir` with `files`, the first being the page (recorded over
/// `protocol`, by `from`); returns its workload name.
pub fn site_archive(
    dir: &Path,
    host: &str,
    protocol: &str,
    from: &str,
    files: &[SiteFile],
) -> String {
    use pagebench::config::site_archive::{Builder, Entry, Source, Timings};
    let mut b = Builder::default();
    for (i, f) in files.iter().enumerate() {
        b.push(
            Entry {
                method: "GET".into(),
                url: format!("https://{host}{}", f.path),
                status: 200,
                headers: vec![
                    ("content-type".into(), f.content_type.clone()),
                    ("cache-control".into(), f.cache_control.to_string()),
                ],
                body: None,
                content_encoding: None,
                decoded_size: f.body.len() as u64,
                server_address: Some("192.0.2.1:443".into()),
                protocol: Some(protocol.into()),
                timings: Timings {
                    start_ms: i as f64,
                    wait_ms: f.wait_ms,
                    receive_ms: 0.0,
                    ..Timings::default()
                },
                missing: None,
                browser_initiated: false,
                connection: None,
            },
            Some(f.body.clone()),
        );
    }
    let source = Source {
        kind: "generated".into(),
        from: from.into(),
        creator: "pagebench tests".into(),
        started: None,
        browser_confinement: None,
        load_ms: None,
    };
    b.write(dir, source, format!("https://{host}{}", files[0].path))
        .unwrap();
    format!("site:{}", dir.display())
}
