//! Shared helpers of the `server_*` integration tests: generated pages in a temp dir, a server
//! with a fresh certificate, curl pinned to that certificate, and waiting for log lines.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use pagebench::config::workload::{self, Manifest};
use pagebench::embedded_server::{
    Certificate, EmbeddedServer, RequestRecord, ServerConfig, ServerKnobs,
};

pub struct Pages {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub manifests: Vec<Manifest>,
}

/// Generates `names` (e.g. `["page50", "download"]`) into a fresh temp dir.
pub fn pages(names: &[&str]) -> Pages {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("pages");
    let manifests = names
        .iter()
        .map(|n| {
            workload::ensure(
                &root,
                &n.parse().unwrap(),
                workload::DEFAULT_SEED,
                Default::default(),
            )
            .unwrap()
        })
        .collect();
    Pages {
        dir,
        root,
        manifests,
    }
}

impl Pages {
    pub fn manifest(&self, name: &str) -> &Manifest {
        self.manifests
            .iter()
            .find(|m| m.workload.name == name)
            .unwrap()
    }

    /// Every URL path of a page workload: the entry and its files.
    pub fn urls(&self, name: &str) -> Vec<String> {
        let m = self.manifest(name);
        let mut v = vec![m.entry.clone()];
        v.extend(m.files.iter().map(|f| f.path.clone()));
        v
    }

    pub fn bytes(&self, url: &str) -> Vec<u8> {
        std::fs::read(self.root.join(url.trim_start_matches('/'))).unwrap()
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("requests.jsonl")
    }
}

pub fn start(root: &Path, knobs: ServerKnobs, log: Option<PathBuf>) -> EmbeddedServer {
    EmbeddedServer::start(ServerConfig {
        root: root.to_path_buf(),
        bind: "127.0.0.1:0".parse().unwrap(),
        knobs,
        cert: Certificate::generate().unwrap(),
        log_path: log,
        extra_ports: Vec::new(),
    })
    .expect("server starts")
}

/// curl against the server as `pagebench.test`, pinned to its SPKI (`-k` only skips the CA
/// check; the pin is still enforced).
pub fn curl(server: &EmbeddedServer, args: &[&str]) -> Output {
    let port = server.port();
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-k", "--max-time", "30"])
        .arg("--resolve")
        .arg(format!("pagebench.test:{port}:127.0.0.1"))
        .arg("--pinnedpubkey")
        .arg(format!("sha256//{}", server.spki()))
        .args(args);
    cmd.output().expect("curl runs")
}

pub fn url(server: &EmbeddedServer, path: &str) -> String {
    format!("https://pagebench.test:{}{}", server.port(), path)
}

/// The log lines after `mark`, waiting (up to 5 s) until there are at least `n`.
pub fn wait_requests(server: &EmbeddedServer, mark: u64, n: usize) -> Vec<RequestRecord> {
    let t0 = Instant::now();
    loop {
        let got = server.requests_since(mark);
        if got.len() >= n || t0.elapsed() > Duration::from_secs(5) {
            return got;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}
