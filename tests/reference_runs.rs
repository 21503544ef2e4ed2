//! Reference servers and diagnostics: Caddy (quic-go) beside the embedded server through the
//! emulator, and the diagnosis naming a small h3 send buffer and an overflowing UDP receive
//! buffer from real runs.

mod runs_support;

use std::path::Path;
use std::time::Duration;

use pagebench::config::identity::ServerId;
use pagebench::config::profile::Profile;
use pagebench::config::protocol::Variant;
use pagebench::config::protocol::{H3Mode, Protocol};
use pagebench::config::workload::{self, Workload};
use pagebench::diagnosis::slow_transfers::{self, FindingKind};
use pagebench::embedded_server::ServerKnobs;
use pagebench::evidence::validate::Outcome;
use pagebench::measure::runner::{run_counted, run_once, RunSpec};
use pagebench::measure::testbed::{ServerChoice, Testbed, TestbedConfig};
use pagebench::servers::reference::access_log::LogFormat;
use pagebench::servers::stacks::custom::{CustomLog, CustomServer};
use runs_support::{matrix, profile};

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
        Default::default(),
    )
    .unwrap();
    let tb = Testbed::start(&TestbedConfig {
        profile: profile.clone(),
        servers: vec![server],
        knobs: ServerKnobs::default(),
        pages_root: root.to_path_buf(),
        seed: 3,
        log_dir: None,
        steer_receive: true,
        extra_server_addresses: 0,
        dns: Default::default(),
        site_hosts: vec![],
        site_ports: vec![],
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
    let (m, tb) = page10_testbed(&root, &wired, "caddy".parse().unwrap());
    let mut tb = tb.expect("Caddy testbed (./setup.sh installs Debian's caddy)");
    for proto in Protocol::ALL {
        let spec = RunSpec::single(
            &format!("caddy-{proto}"),
            &wired,
            &m,
            Variant::new(proto, H3Mode::Forced),
            &ServerId::new("caddy"),
            Duration::from_secs(60),
        );
        let rec = run_counted(&mut tb, &spec, 5).unwrap().pop().unwrap();
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
    let desc = &tb.describe()[&ServerId::new("caddy")];
    assert!(desc.version.contains("2."), "{desc:?}");
    assert!(desc
        .knobs_not_applicable
        .as_ref()
        .unwrap()
        .iter()
        .any(|k| k == "h3_send_buffer"));
    drop(tb);
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

    let d = slow_transfers::run(&small).unwrap();
    let h3 = d.transfers.iter().find(|t| t.variant == "h3").unwrap();
    eprintln!("{}", slow_transfers::markdown(&d));
    let f = d
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::WindowLimited && f.series.ends_with("/h3"))
        .unwrap_or_else(|| panic!("not flagged: {:?}", d.findings));
    assert!(f.sentence.contains("--h3-send-buffer"), "{}", f.sentence);
    // 64 KiB per 40 ms round trip is at most ~13 Mbit/s.
    assert!(h3.goodput_mbit.unwrap() < 14.0, "{h3:?}");

    let d = slow_transfers::run(&default).unwrap();
    eprintln!("{}", slow_transfers::markdown(&d));
    // Only h3 is the claim: TCP's receive-window autotuning on h2 may lag in slow start (TCP_INFO
    // says so in 0–36 % of the busy time of wired downloads), a finding about the client
    // namespace, not about the send buffer.
    assert!(
        !d.findings
            .iter()
            .any(|f| f.kind == FindingKind::WindowLimited && f.series.ends_with("/h3")),
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
    let d = slow_transfers::run(&out).unwrap();
    eprintln!("{}", slow_transfers::markdown(&d));
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
    let command = format!(
        "exec {} serve --pages {{root}} --bind {{ip}} --port {{port}} --cert-dir \"$(dirname {{cert}})\" --log {{log}}",
        env!("CARGO_BIN_EXE_pagebench")
    );
    let dc = profile("datacenter");
    let custom = CustomServer { command, log: None };
    let (m, tb) = page10_testbed(&root, &dc, ServerChoice::Command(custom));
    let mut tb = tb.unwrap();
    for proto in [Protocol::H2, Protocol::H3] {
        let spec = RunSpec::single(
            &format!("custom-{proto}"),
            &dc,
            &m,
            Variant::new(proto, H3Mode::Forced),
            &ServerId::new("custom"),
            Duration::from_secs(30),
        );
        let rec = run_counted(&mut tb, &spec, 5).unwrap().pop().unwrap();
        assert_eq!(rec.outcome, Outcome::Valid, "{proto}: {:?}", rec.reasons);
        // No log format named: the run says plainly it had two viewpoints.
        assert_eq!(rec.viewpoints, 2);
        assert!(
            rec.warnings.iter().any(|w| w.starts_with("2 viewpoints")),
            "{:?}",
            rec.warnings
        );
    }
}

/// An nginx config as a user would keep it: `@NAME@` marks what the command fills in.
const USER_NGINX_CONF: &str = "daemon off;\nworker_processes 1;\npid @WORK@/nginx.pid;\n\
error_log @WORK@/error.log warn;\nevents { worker_connections 64; }\nhttp {\n\
include /etc/nginx/mime.types;\nclient_body_temp_path @WORK@/body;\nproxy_temp_path @WORK@/proxy;\n\
fastcgi_temp_path @WORK@/fastcgi;\nuwsgi_temp_path @WORK@/uwsgi;\nscgi_temp_path @WORK@/scgi;\n\
access_log @WORK@/user-access.log combined;\nserver {\nlisten @IP@:@PORT@ ssl http2;\n\
ssl_certificate @CERT@;\nssl_certificate_key @KEY@;\nroot @ROOT@;\n}\n}\n";

#[test]
fn a_users_server_log_in_combined_format_is_a_third_viewpoint() {
    // Debian's nginx as a user's own server, logging in nginx's default `combined` format to a
    // file of its choosing: with --server-log-format and --server-log, every request is
    // cross-checked against it.
    let guard = temp("custom-log");
    let root = guard.path().to_path_buf();
    let template = root.join("nginx.conf.in");
    std::fs::write(&template, USER_NGINX_CONF).unwrap();
    let command = format!(
        "mkdir -p {{work}} && sed -e 's#@WORK@#{{work}}#g; s#@IP@#{{ip}}#; s#@PORT@#{{port}}#; s#@CERT@#{{cert}}#; s#@KEY@#{{key}}#; s#@ROOT@#{{root}}#' {} > {{work}}/nginx.conf && exec nginx -c {{work}}/nginx.conf -p {{work}} -e {{work}}/error.log",
        template.display()
    );
    let custom = CustomServer {
        command,
        log: Some(CustomLog {
            format: LogFormat::Combined,
            path: Some("{work}/user-access.log".into()),
        }),
    };
    let dc = profile("datacenter");
    let (m, tb) = page10_testbed(&root, &dc, ServerChoice::Command(custom));
    let mut tb = tb.expect("nginx as a custom server (./setup.sh installs Debian's nginx-light)");
    for proto in [Protocol::H1, Protocol::H2] {
        let spec = RunSpec::single(
            &format!("custom-log-{proto}"),
            &dc,
            &m,
            Variant::new(proto, H3Mode::Forced),
            &ServerId::new("custom"),
            Duration::from_secs(30),
        );
        let rec = run_counted(&mut tb, &spec, 5).unwrap().pop().unwrap();
        assert_eq!(rec.outcome, Outcome::Valid, "{proto}: {:?}", rec.reasons);
        assert_eq!(rec.viewpoints, 3);
        assert_eq!(rec.server_requests.len(), 11, "{:?}", rec.server_requests);
        assert!(rec
            .server_requests
            .iter()
            .all(|s| s.protocol == proto.alpn()));
    }
    // The same server asked for h3, which it does not speak: the browser falls back and all
    // three viewpoints say so.
    let spec = RunSpec::single(
        "custom-log-h3",
        &dc,
        &m,
        Variant::new(Protocol::H3, H3Mode::Forced),
        &ServerId::new("custom"),
        Duration::from_secs(20),
    );
    let rec = run_once(&mut tb, &spec).unwrap();
    assert_ne!(rec.outcome, Outcome::Valid, "{:?}", rec.reasons);
}

#[test]
fn nginx_serves_h1_and_h2_and_refuses_h3_clearly() {
    let e = "nginx"
        .parse::<ServerChoice>()
        .unwrap()
        .check_protocol(Protocol::H3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nginx") && e.contains("h3"), "{e}");
    let guard = temp("nginx");
    let root = guard.path().to_path_buf();
    let dc = profile("datacenter");
    let (m, tb) = page10_testbed(&root, &dc, "nginx".parse().unwrap());
    let mut tb = tb.expect("nginx testbed (./setup.sh installs Debian's nginx-light)");
    for proto in [Protocol::H1, Protocol::H2] {
        let spec = RunSpec::single(
            &format!("nginx-{proto}"),
            &dc,
            &m,
            Variant::new(proto, H3Mode::Forced),
            &ServerId::new("nginx"),
            Duration::from_secs(30),
        );
        let rec = run_counted(&mut tb, &spec, 5).unwrap().pop().unwrap();
        assert_eq!(rec.outcome, Outcome::Valid, "{proto}: {:?}", rec.reasons);
        assert_eq!(rec.server_requests.len(), 11);
        assert!(rec
            .server_requests
            .iter()
            .all(|s| s.protocol == proto.alpn()));
    }
}
