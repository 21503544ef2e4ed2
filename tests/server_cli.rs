//! `pagebench serve` and `pagebench bench server` as a user runs them: ready line, knob flags,
//! graceful SIGTERM with the log flushed, clear errors for a taken port and a bad config file.

mod server_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use server_support::*;

const BIN: &str = env!("CARGO_BIN_EXE_pagebench");

struct Serve {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Serve {
    fn spawn(args: &[&str]) -> Serve {
        let mut child = Command::new(BIN)
            .arg("serve")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Serve { child, lines }
    }

    /// The JSON of the `ready` line.
    fn ready(&self) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
                if let Some(j) = l.strip_prefix("ready ") {
                    return serde_json::from_str(j).unwrap();
                }
            }
        }
        panic!("no ready line");
    }

    fn terminate(&mut self) -> (std::process::ExitStatus, Vec<String>) {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let rest: Vec<String> = self.lines.try_iter().collect();
                return (st, rest);
            }
            assert!(Instant::now() < deadline, "serve did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn serve_prints_ready_applies_flags_and_stops_gracefully() {
    let p = pages(&["page10"]);
    let log = p.dir.path().join("log/requests.jsonl");
    let cert_dir = p.dir.path().join("cert");
    let root = p.root.display().to_string();
    let mut serve = Serve::spawn(&[
        "--pages",
        &root,
        "--port",
        "0",
        "--cert-dir",
        cert_dir.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
        "--h3-send-buffer",
        "64KiB",
        "--quic-congestion",
        "bbr",
        "--tcp-congestion",
        "reno",
        "--h2-max-concurrent-streams",
        "33",
    ]);
    let ready = serve.ready();
    let port = ready["port"].as_u64().unwrap();
    let spki = ready["spki"].as_str().unwrap().to_string();
    let applied = &ready["applied"];
    assert_eq!(applied["knobs"]["h3_send_buffer"], 65536);
    assert_eq!(applied["knobs"]["quic_congestion"], "bbr");
    assert_eq!(applied["knobs"]["h2_max_concurrent_streams"], 33);
    assert_eq!(applied["tcp_congestion"], "reno");
    assert!(cert_dir.join("cert.pem").exists() && cert_dir.join("key.pem").exists());
    // The printed SPKI is what curl sees on the wire.
    let out = Command::new("curl")
        .args([
            "-sS",
            "-k",
            "--http2",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .arg("--resolve")
        .arg(format!("pagebench.test:{port}:127.0.0.1"))
        .arg("--pinnedpubkey")
        .arg(format!("sha256//{spki}"))
        .arg(format!("https://pagebench.test:{port}/page10/index.html"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
    let (status, rest) = serve.terminate();
    assert!(status.success(), "exit status {status:?}");
    assert!(
        rest.iter().any(|l| l.contains("stopped after 1 requests")),
        "{rest:?}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["protocol"], "h2");
    assert_eq!(lines[0]["path"], "/page10/index.html");
    // A second run reuses the cached certificate: same SPKI for Chromium's flag.
    let mut again = Serve::spawn(&[
        "--pages",
        &root,
        "--port",
        "0",
        "--cert-dir",
        cert_dir.to_str().unwrap(),
    ]);
    assert_eq!(again.ready()["spki"], spki.as_str());
    assert!(again.terminate().0.success());
}

#[test]
fn serve_on_a_taken_port_exits_with_a_clear_error() {
    let p = pages(&["page10"]);
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port().to_string();
    let cert_dir = p.dir.path().join("cert");
    let out = Command::new(BIN)
        .args([
            "serve",
            "--pages",
            p.root.to_str().unwrap(),
            "--port",
            &port,
        ])
        .args(["--cert-dir", cert_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("port {port}/tcp")) && err.contains("already in use"),
        "{err}"
    );
}

#[test]
fn bad_config_file_names_file_line_and_field() {
    let p = pages(&["page10"]);
    let cfg = p.dir.path().join("server.toml");
    std::fs::write(
        &cfg,
        "[server]\ngso = false\nh3_stream_recieve_window = \"1MB\"\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--pages", p.root.to_str().unwrap(), "--port", "0"])
        .args(["--server-config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("server.toml")
            && err.contains("line 3")
            && err.contains("h3_stream_recieve_window"),
        "{err}"
    );
    // A flag out of range names the flag.
    let out = Command::new(BIN)
        .args([
            "serve",
            "--pages",
            p.root.to_str().unwrap(),
            "--port",
            "0",
            "--h2-initial-connection-window",
            "100",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--h2-initial-connection-window"), "{err}");
    // A missing root says how to make it.
    let out = Command::new(BIN)
        .args(["serve", "--pages", "/nonexistent/pages", "--port", "0"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("pagebench pages"));
}

#[test]
fn bench_server_reports_every_offered_protocol() {
    let out = Command::new(BIN)
        .args([
            "bench", "server", "--reps", "1", "--size", "200KB", "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let protos: Vec<&str> = r["figures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["protocol"].as_str().unwrap())
        .collect();
    assert_eq!(protos, ["http/1.1", "h2", "h3"]);
    for f in r["figures"].as_array().unwrap() {
        assert!(f["mb_per_s_median"].as_f64().unwrap() > 0.0, "{f}");
    }
    let out = Command::new(BIN)
        .args([
            "bench",
            "server",
            "--reps",
            "1",
            "--size",
            "100KB",
            "--server-protocols",
            "h3",
            "--json",
        ])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["figures"].as_array().unwrap().len(), 1);
}
