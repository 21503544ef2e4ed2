//! The other stacks, through the real emulator and Chromium: quiche and aioquic serving h3 (h1/h2
//! of the same port from the embedded server) with their own logs and transport statistics,
//! Apache and h2o serving h1 and h2 with their access logs cross-checked, and seed 004's case:
//! an h2 upload to Apache across an ocean held back by its stream window (`H2WindowSize`; a
//! large `H2StreamMaxMemSize` does not lift it), named by `diagnose`.

mod runs_support;

use std::path::Path;
use std::time::Duration;

use pagebench::config::identity::ServerId;
use pagebench::config::profile::Profile;
use pagebench::config::protocol::{H3Mode, Protocol, Variant};
use pagebench::config::workload::{self, Workload};
use pagebench::diagnosis::slow_transfers::{self, FindingKind};
use pagebench::embedded_server::{ServerKnobs, Transport};
use pagebench::evidence::run_record::RunRecord;
use pagebench::evidence::validate::Outcome;
use pagebench::measure::runner::{run_counted, RunSpec};
use pagebench::measure::testbed::{ServerChoice, Testbed, TestbedConfig};
use runs_support::{matrix, profile};

/// A temporary directory removed on drop (also when the test panics).
fn temp(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("pagebench-stest-{tag}-"))
        .tempdir()
        .unwrap()
}

/// page10 below `root` and one testbed on `profile` with `servers` side by side.
fn page10_testbed(
    root: &Path,
    profile: &Profile,
    servers: &[&str],
) -> (workload::Manifest, Testbed) {
    let m = workload::ensure(
        root,
        &"page10".parse::<Workload>().unwrap(),
        workload::DEFAULT_SEED,
        Default::default(),
    )
    .unwrap();
    let tb = Testbed::start(&TestbedConfig {
        profile: profile.clone(),
        servers: servers
            .iter()
            .map(|s| s.parse::<ServerChoice>().unwrap())
            .collect(),
        knobs: ServerKnobs::default(),
        pages_root: root.to_path_buf(),
        seed: 5,
        log_dir: None,
        steer_receive: true,
        extra_server_addresses: 0,
        dns: Default::default(),
        site_hosts: vec![],
        site_ports: vec![],
    })
    .unwrap_or_else(|e| panic!("testbed with {servers:?} (./setup.sh installs them): {e:#}"));
    (m, tb)
}

/// One valid page10 run of `server` over `proto`, every file in the server's log once with its
/// size, over that protocol.
fn valid_page10(
    tb: &mut Testbed,
    m: &workload::Manifest,
    p: &Profile,
    server: &str,
    proto: Protocol,
) -> RunRecord {
    let spec = RunSpec::single(
        &format!("{server}-{proto}"),
        p,
        m,
        Variant::new(proto, H3Mode::Forced),
        &ServerId::new(server),
        Duration::from_secs(60),
    );
    let rec = run_counted(tb, &spec, 5).unwrap().pop().unwrap();
    assert_eq!(
        rec.outcome,
        Outcome::Valid,
        "{server} {proto}: {:?}",
        rec.reasons
    );
    assert_eq!(rec.viewpoints, 3, "{server} {proto}");
    assert!(rec.resources.iter().all(|r| r.protocol == proto.alpn()));
    assert_eq!(
        rec.server_requests.len(),
        11,
        "{server} {proto}: {:?}",
        rec.server_requests
    );
    assert!(
        rec.server_requests
            .iter()
            .all(|s| s.protocol == proto.alpn() && s.status == 200),
        "{server} {proto}: {:?}",
        rec.server_requests
    );
    for f in &m.files {
        let served: Vec<_> = rec
            .server_requests
            .iter()
            .filter(|s| s.path == f.path)
            .collect();
        assert_eq!(served.len(), 1, "{server} {proto} {}", f.path);
        assert_eq!(served[0].bytes_sent, f.size, "{server} {proto} {}", f.path);
    }
    rec
}

#[test]
fn quiche_and_aioquic_serve_page10_over_h3_with_their_logs_and_statistics() {
    let guard = temp("h3stacks");
    let wired = profile("wired");
    let (m, mut tb) = page10_testbed(guard.path(), &wired, &["quiche", "aioquic"]);
    for (server, controller) in [("quiche", "cubic"), ("aioquic", "cubic")] {
        let rec = valid_page10(&mut tb, &m, &wired, server, Protocol::H3);
        // The stack's own transport statistics: one QUIC connection, its RTT near the link's,
        // its controller, its packet counts.
        let conns = rec.server_transport.as_deref().unwrap_or_default();
        let quic: Vec<_> = conns
            .iter()
            .filter(|c| c.transport == Transport::Quic)
            .collect();
        assert_eq!(quic.len(), 1, "{server}: {conns:?}");
        let q = quic[0].quic.as_ref().unwrap();
        assert_eq!(q.congestion_controller, controller);
        assert!(
            (30_000..80_000).contains(&q.rtt_us),
            "{server}: RTT {} µs on a 40 ms link",
            q.rtt_us
        );
        assert!(q.sent_packets > 20 && q.cwnd > 0, "{server}: {q:?}");
        assert_eq!(quic[0].requests, 11, "{server}");
        let t = rec.transport.as_ref().unwrap();
        assert_eq!((t.quic_connections, t.tcp_connections), (1, 0), "{server}");
        assert!(t.server_rtt_ms.is_some());
    }
    // h2 on the same port comes from the embedded server, cross-checked by its own log.
    let rec = valid_page10(&mut tb, &m, &wired, "quiche", Protocol::H2);
    let t = rec.transport.as_ref().unwrap();
    assert_eq!((t.quic_connections, t.tcp_connections), (0, 1));
    let d = &tb.describe()[&ServerId::new("aioquic")];
    assert!(d.version.contains("aioquic 1.7.2"), "{d:?}");
    assert!(d.note.as_deref().unwrap().contains("hyper"), "{d:?}");
    let d = &tb.describe()[&ServerId::new("quiche")];
    assert!(d.version.contains("quiche 0.30"), "{d:?}");
    assert!(d
        .knobs_not_applicable
        .as_deref()
        .unwrap()
        .iter()
        .any(|k| k == "h3_send_buffer"));
}

#[test]
fn apache_and_h2o_serve_page10_over_h1_and_h2_and_refuse_h3_before_a_run() {
    for s in ["apache", "h2o"] {
        let e = s
            .parse::<ServerChoice>()
            .unwrap()
            .check_protocol(Protocol::H3)
            .unwrap_err()
            .to_string();
        assert!(e.contains(s) && e.contains("h3"), "{e}");
    }
    let guard = temp("h2stacks");
    let dc = profile("datacenter");
    let (m, mut tb) = page10_testbed(guard.path(), &dc, &["apache", "h2o"]);
    for server in ["apache", "h2o"] {
        for proto in [Protocol::H1, Protocol::H2] {
            valid_page10(&mut tb, &m, &dc, server, proto);
        }
    }
    let d = &tb.describe()[&ServerId::new("apache")];
    assert!(d.version.contains("Apache/2.4"), "{d:?}");
    let d = &tb.describe()[&ServerId::new("h2o")];
    assert!(d.version.contains("h2o version 2.2"), "{d:?}");
}

#[test]
fn seed_004_an_h2_upload_to_apache_is_held_by_its_stream_window_and_named() {
    let guard = temp("seed004");
    let tmp = guard.path();
    let base = [
        "--profiles",
        "intercontinental",
        "--workloads",
        "upload2mb",
        "--protocols",
        "h2",
        "--runs",
        "3",
    ];
    // Apache's default stream window (H2WindowSize 65535; our --h2-initial-stream-window) with
    // a large H2StreamMaxMemSize (our --h2-stream-buffer): the memory does not lift the window.
    // The embedded server beside it (its 1 MiB window) shows what the path carries.
    // The two matrices wait on a window-limited path, not the CPU: they run side by side,
    // each with its own pages and testbed.
    let (small, large) = std::thread::scope(|s| {
        let small = s.spawn(|| {
            let args = [&base[..], &["--servers", "apache,embedded"]].concat();
            let args = [&args[..], &["--h2-stream-buffer", "16MiB"]].concat();
            matrix(&tmp.join("a"), "small", &args)
        });
        let large = s.spawn(|| {
            let args = [&base[..], &["--servers", "apache"]].concat();
            let args = [&args[..], &["--h2-initial-stream-window", "16MiB"]].concat();
            matrix(&tmp.join("b"), "large", &args)
        });
        (small.join().unwrap(), large.join().unwrap())
    });
    let d = slow_transfers::run(&small).unwrap();
    eprintln!("{}", slow_transfers::markdown(&d));
    let goodput = |d: &slow_transfers::Diagnosis| {
        d.transfers
            .iter()
            .find(|t| t.server == "apache")
            .and_then(|t| t.goodput_mbit)
            .unwrap()
    };
    let slow = goodput(&d);
    let f = d
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::WindowLimited && f.series.contains("/apache/"))
        .unwrap_or_else(|| panic!("not named: {:?}", d.findings));
    assert!(
        f.sentence.contains("H2WindowSize") && f.sentence.contains("--h2-initial-stream-window"),
        "{}",
        f.sentence
    );
    let d = slow_transfers::run(&large).unwrap();
    eprintln!("{}", slow_transfers::markdown(&d));
    let fast = goodput(&d);
    assert!(
        fast >= 3.0 * slow,
        "H2WindowSize 16 MiB: {fast:.1} Mbit/s, 64 KiB: {slow:.1} Mbit/s"
    );
    assert!(!d
        .findings
        .iter()
        .any(|f| f.kind == FindingKind::WindowLimited && f.series.contains("/apache/")));
}
