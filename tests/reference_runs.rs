//! Reference servers and diagnostics: Caddy (quic-go) beside the embedded server through the
//! emulator, and the diagnosis naming a small h3 send buffer and an overflowing UDP receive
//! buffer from real runs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use pagebench::browser::{H3Mode, Protocol};
use pagebench::diagnose::{self, FindingKind};
use pagebench::matrix::plan::Variant;
use pagebench::profile::{self, Profile};
use pagebench::runner::{run_once, RunSpec};
use pagebench::server::ServerKnobs;
use pagebench::testbed::{ServerChoice, Testbed, TestbedConfig};
use pagebench::validate::Outcome;
use pagebench::workload::{self, Workload};

fn profile(name: &str) -> Profile {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    profile::select(name, &dir).unwrap().remove(0)
}

/// page10 generated below `root`, and a testbed on `profile` with `server` alone.
fn page10_testbed(
    root: &Path,
    profile: &Profile,
    server: ServerChoice,
) -> (workload::Manifest, anyhow::Result<Testbed>) {
    let m = workload::ensure(
        root,
        &"page10".parse::<Workload>().unwrap(),
        workload::DEFAULT_SEED,
    )
    .unwrap();
    let tb = Testbed::start(&TestbedConfig {
        profile: profile.clone(),
        servers: vec![server],
        knobs: ServerKnobs::default(),
        pages_root: root.to_path_buf(),
        seed: 3,
        log_dir: None,
    });
    (m, tb)
}

/// A temporary directory removed on drop (also when the test panics).
fn temp(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("pagebench-rtest-{tag}-"))
        .tempdir()
        .unwrap()
}

#[test]
fn caddy_serves_page10_over_each_protocol_with_its_log_cross_checked() {
    let guard = temp("caddy");
    let root = guard.path().to_path_buf();
    let wired = profile("wired");
    let (m, tb) = page10_testbed(&root, &wired, ServerChoice::Caddy);
    let mut tb = tb.expect("Caddy testbed (./setup.sh installs Debian's caddy)");
    for proto in Protocol::ALL {
        let spec = RunSpec {
            id: format!("caddy-{proto}"),
            profile: wired.clone(),
            manifest: m.clone(),
            variant: Variant::new(proto, H3Mode::Forced),
            server: "caddy".into(),
            phase: "measure".into(),
            round: 1,
            position: 1,
            timeout: Duration::from_secs(60),
            settle_max: Duration::from_secs(3),
        };
        let rec = run_once(&mut tb, &spec).unwrap();
        assert_eq!(rec.outcome, Outcome::Valid, "{proto}: {:?}", rec.reasons);
        assert!(rec.resources.iter().all(|r| r.protocol == proto.alpn()));
        // Caddy's own access log saw every request, over the same protocol.
        assert_eq!(
            rec.server_requests.len(),
            11,
            "{proto}: {:?}",
            rec.server_requests
        );
        assert!(
            rec.server_requests
                .iter()
                .all(|s| s.protocol == proto.alpn()),
            "{proto}"
        );
        for f in &m.files {
            let served = rec
                .server_requests
                .iter()
                .find(|s| s.path == f.path)
                .expect("logged");
            assert_eq!(served.bytes_sent, f.size, "{}", f.path);
        }
    }
    let desc = &tb.describe()["caddy"];
    assert!(desc["version"].as_str().unwrap().contains("2."), "{desc}");
    assert!(desc["knobs_not_applicable"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k == "h3_send_buffer"));
    drop(tb);
}

/// Runs a small matrix through the binary and returns its directory.
fn matrix(tmp: &Path, name: &str, args: &[&str]) -> PathBuf {
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

#[test]
fn a_small_h3_send_buffer_is_diagnosed_as_window_limited() {
    let guard = temp("window");
    let tmp = guard.path().to_path_buf();
    let base = [
        "--profiles",
        "wired",
        "--workloads",
        "download",
        "--protocols",
        "h2,h3",
        "--runs",
        "3",
    ];
    let small = matrix(
        &tmp,
        "small",
        &[&base[..], &["--h3-send-buffer", "64KiB"]].concat(),
    );
    let default = matrix(&tmp, "default", &base);

    let d = diagnose::run(&small).unwrap();
    let h3 = d.transfers.iter().find(|t| t.variant == "h3").unwrap();
    eprintln!("{}", diagnose::markdown(&d));
    let f = d
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::WindowLimited && f.series.ends_with("/h3"))
        .unwrap_or_else(|| panic!("not flagged: {:?}", d.findings));
    assert!(f.sentence.contains("--h3-send-buffer"), "{}", f.sentence);
    // 64 KiB per 40 ms round trip is at most ~13 Mbit/s.
    assert!(h3.goodput_mbit.unwrap() < 14.0, "{h3:?}");

    let d = diagnose::run(&default).unwrap();
    eprintln!("{}", diagnose::markdown(&d));
    assert!(
        !d.findings
            .iter()
            .any(|f| f.kind == FindingKind::WindowLimited),
        "default buffer flagged: {:?}",
        d.findings
    );
    assert!(small.join("diagnosis.md").exists());
}

#[test]
fn a_tiny_udp_receive_buffer_overflows_during_an_h3_upload_and_is_named() {
    let guard = temp("rcvbuf");
    let tmp = guard.path().to_path_buf();
    let out = matrix(
        &tmp,
        "tiny",
        &[
            "--profiles",
            "datacenter",
            "--workloads",
            "upload5mb",
            "--protocols",
            "h3",
            "--runs",
            "2",
            "--udp-recv-buffer",
            "4KiB",
        ],
    );
    let d = diagnose::run(&out).unwrap();
    eprintln!("{}", diagnose::markdown(&d));
    let t = &d.transfers[0];
    assert!(t.udp_rcvbuf_errors_server > 0.0, "{t:?}");
    let f = d
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::UdpReceiveBufferOverflow)
        .unwrap_or_else(|| panic!("not named: {:?}", d.findings));
    assert!(
        f.sentence.contains("server's") && f.sentence.contains("--udp-recv-buffer"),
        "{}",
        f.sentence
    );
}

#[test]
fn a_users_own_server_command_is_started_with_the_placeholders_filled() {
    // pagebench's own `serve`, started as if it were a user's server: it must get the testbed's
    // address, port, pages and certificate through {ip}, {port}, {root} and {cert}.
    let guard = temp("custom");
    let root = guard.path().to_path_buf();
    let cmd = format!(
        "exec {} serve --root {{root}} --bind {{ip}} --port {{port}} --cert-dir \"$(dirname {{cert}})\" --log {{log}}",
        env!("CARGO_BIN_EXE_pagebench")
    );
    let dc = profile("datacenter");
    let (m, tb) = page10_testbed(&root, &dc, ServerChoice::Command(cmd));
    let mut tb = tb.unwrap();
    for proto in [Protocol::H2, Protocol::H3] {
        let spec = RunSpec {
            id: format!("custom-{proto}"),
            profile: dc.clone(),
            manifest: m.clone(),
            variant: Variant::new(proto, H3Mode::Forced),
            server: "custom".into(),
            phase: "measure".into(),
            round: 1,
            position: 1,
            timeout: Duration::from_secs(30),
            settle_max: Duration::from_secs(3),
        };
        let rec = run_once(&mut tb, &spec).unwrap();
        assert_eq!(rec.outcome, Outcome::Valid, "{proto}: {:?}", rec.reasons);
        // Its log format is the user's: the run says it was cross-checked without it.
        assert!(
            rec.warnings.iter().any(|w| w.contains("no readable log")),
            "{:?}",
            rec.warnings
        );
    }
}

#[test]
fn nginx_serves_h1_and_h2_and_refuses_h3_clearly() {
    let e = ServerChoice::Nginx
        .check_protocol(Protocol::H3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nginx") && e.contains("h3"), "{e}");
    let guard = temp("nginx");
    let root = guard.path().to_path_buf();
    let dc = profile("datacenter");
    let (m, tb) = page10_testbed(&root, &dc, ServerChoice::Nginx);
    let mut tb = tb.expect("nginx testbed (./setup.sh installs Debian's nginx-light)");
    for proto in [Protocol::H1, Protocol::H2] {
        let spec = RunSpec {
            id: format!("nginx-{proto}"),
            profile: dc.clone(),
            manifest: m.clone(),
            variant: Variant::new(proto, H3Mode::Forced),
            server: "nginx".into(),
            phase: "measure".into(),
            round: 1,
            position: 1,
            timeout: Duration::from_secs(30),
            settle_max: Duration::from_secs(3),
        };
        let rec = run_once(&mut tb, &spec).unwrap();
        assert_eq!(rec.outcome, Outcome::Valid, "{proto}: {:?}", rec.reasons);
        assert_eq!(rec.server_requests.len(), 11);
        assert!(rec
            .server_requests
            .iter()
            .all(|s| s.protocol == proto.alpn()));
    }
}
