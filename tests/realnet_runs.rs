//! Real Chromium on a real network's disruptions: a 1 s outage in the middle of the 3 MB
//! download (h2 and h3 both finish, the stall is reported), and NAT rebinding in the middle of
//! it (h3 goes on over its one connection, which migrates; h2's connection breaks and the page
//! fetches again over a second one, in a test of its own).

use std::path::Path;
use std::time::Duration;

use pagebench::config::profile::{self, Profile};
use pagebench::config::protocol::{H3Mode, Protocol, Variant};
use pagebench::config::workload::{self, Manifest, Workload};
use pagebench::embedded_server::{ServerKnobs, Transport};
use pagebench::evidence::run_record::RunRecord;
use pagebench::evidence::validate::{Outcome, ReasonKind};
use pagebench::measure::runner::{run_counted, RunSpec};
use pagebench::measure::testbed::{ServerChoice, Testbed, TestbedConfig};

/// 10 Mbit/s, 40 ms: the 3 MB download takes ~3 s, so an event at 1 s falls in its middle.
fn profile(name: &str, extra: &str) -> Profile {
    let text = format!(
        "name = \"{name}\"\nrtt_ms = 40\ndown_mbit = 10\nup_mbit = 10\nqueue_packets = 100\n{extra}"
    );
    profile::parse_profile(&text, Path::new("realnet-test.toml")).unwrap()
}

fn run(tb: &mut Testbed, p: &Profile, m: &Manifest, proto: Protocol) -> RunRecord {
    // Run again while the link gate (a VM hiccup) rejects it, as the matrix does.
    let rec = last_attempt(tb, p, m, proto, 4);
    assert_eq!(rec.outcome, Outcome::Valid, "{}", outcome_of(&rec));
    rec
}

/// A run's id, reasons, end and warnings, for a failed assertion.
fn outcome_of(rec: &RunRecord) -> String {
    format!(
        "{}: {:?} {:?} {:?}",
        rec.id, rec.reasons, rec.end, rec.warnings
    )
}

/// The last of at most `1 + retries` attempts of `proto` on `p`.
fn last_attempt(
    tb: &mut Testbed,
    p: &Profile,
    m: &Manifest,
    proto: Protocol,
    retries: u32,
) -> RunRecord {
    tb.set_profile(p).unwrap();
    let spec = RunSpec::single(
        &format!("{}-{proto}", p.name),
        p,
        m,
        Variant::new(proto, H3Mode::Forced),
        &ServerChoice::embedded().name(),
        Duration::from_secs(120),
    );
    run_counted(tb, &spec, retries).unwrap().pop().unwrap()
}

/// One attempt, valid or failed by the link gate's timing checks alone. The h2 rebinding run
/// waits ~45 s for Chromium's keep-alive, and over such a window one VM hiccup puts the
/// emulator past the gate's 10 ms spell (all five attempts of one CI run, at the suite's start:
/// spells of 31 ms in 49.6 s) — which says nothing of what the run shows: the connection broke
/// and the page fetched again over a new one.
fn run_whatever_the_link_timing(
    tb: &mut Testbed,
    p: &Profile,
    m: &Manifest,
    proto: Protocol,
) -> RunRecord {
    let rec = last_attempt(tb, p, m, proto, 0);
    assert!(
        rec.outcome == Outcome::Valid || rec.reasons.iter().all(|r| r.kind == ReasonKind::Link),
        "{}",
        outcome_of(&rec)
    );
    rec
}

fn connections(rec: &RunRecord, t: Transport) -> usize {
    rec.server_transport
        .as_ref()
        .unwrap()
        .iter()
        .filter(|c| c.transport == t && c.protocol.is_some())
        .count()
}

fn attempts(rec: &RunRecord) -> u64 {
    rec.observation.page_result.as_ref().unwrap()["attempts"]
        .as_u64()
        .unwrap()
}

/// The 3 MB download, in a temporary pages root.
fn download(root: &Path) -> Manifest {
    workload::ensure(
        root,
        &"download".parse::<Workload>().unwrap(),
        workload::DEFAULT_SEED,
        Default::default(),
    )
    .unwrap()
}

fn testbed(root: &Path, p: &Profile) -> Testbed {
    Testbed::start(&TestbedConfig {
        profile: p.clone(),
        servers: vec![ServerChoice::embedded()],
        knobs: ServerKnobs::default().with_default_tcp_congestion(),
        pages_root: root.to_path_buf(),
        seed: 7,
        log_dir: None,
        steer_receive: true,
        extra_server_addresses: 0,
        dns: Default::default(),
        site_hosts: vec![],
        site_ports: vec![],
    })
    .expect("testbed (needs root, /dev/net/tun and Debian's chromium: run ./setup.sh)")
}

fn temp_root() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("pagebench-test-realnet-")
        .tempdir()
        .unwrap()
}

#[test]
fn outages_and_nat_rebinding_mid_download() {
    let root = temp_root();
    let m = download(root.path());
    let outage = profile("outage-1s", "outages = [[1.0, 1.0]]\n");
    let rebind = profile("nat-rebind", "nat_rebind_at_s = 1.0\n");
    let mut tb = testbed(root.path(), &outage);

    // A 1 s blackout from 1 s: both protocols recover and finish; the stall is in the record.
    for proto in [Protocol::H2, Protocol::H3] {
        let rec = run(&mut tb, &outage, &m, proto);
        let d = rec.disruption.as_ref().expect("a profile with an outage");
        assert_eq!(d.outages_ms.len(), 1);
        let [start, end] = d.outages_ms[0];
        assert!((start - 1000.0).abs() < 1e-6 && (end - 2000.0).abs() < 1e-6);
        let around = d.event_stalls[0]
            .stall
            .expect("data before and after the outage");
        // No data for at least the outage (loss recovery adds its timeouts).
        assert!(around.ms >= 990.0, "{}: {around:?}", rec.id);
        assert!(d.stall.unwrap().ms >= around.ms);
        let down = &rec
            .link_stats
            .as_ref()
            .unwrap()
            .stats
            .as_ref()
            .unwrap()
            .down;
        assert!(down.dropped_outage > 0, "{}: {down:?}", rec.id);
        assert!((down.outage_s - 1.0).abs() < 1e-6, "{}", down.outage_s);
        assert!(rec.metrics.completion_ms.unwrap() > 2000.0);
        eprintln!(
            "{}: completion {:.0} ms, stall {:.0} ms around the outage",
            rec.id,
            rec.metrics.completion_ms.unwrap(),
            around.ms
        );
    }

    // NAT rebinding at 1 s: QUIC migrates and finishes on its one connection.
    let h3 = run(&mut tb, &rebind, &m, Protocol::H3);
    let r = h3.disruption.as_ref().unwrap().rebind.as_ref().unwrap();
    assert_eq!(connections(&h3, Transport::Quic), 1, "{r:?}");
    assert_eq!((r.open_at_rebind, r.survived, r.opened_after), (1, 1, 0));
    assert!(r.connections[0].migrated);
    assert_eq!(attempts(&h3), 1);
    print_stalls(&h3);
    // QUIC's migration is bounded.
    let around = h3.disruption.as_ref().unwrap().event_stalls[0].stall;
    assert!(around.is_none_or(|s| s.ms < 1000.0), "{around:?}");
}

/// TCP breaks at a NAT rebinding (Chromium notices at its next keep-alive); the page fetches
/// again over a second connection. A test of its own, beside other tests: most of it is the
/// wait for the keep-alive, and its one attempt counts whatever the link gate's timing says
/// ([`run_whatever_the_link_timing`]).
#[test]
fn tcp_breaks_at_a_nat_rebinding_and_the_page_fetches_again() {
    let root = temp_root();
    let m = download(root.path());
    let rebind = profile("nat-rebind", "nat_rebind_at_s = 1.0\n");
    let mut tb = testbed(root.path(), &rebind);
    let h2 = run_whatever_the_link_timing(&mut tb, &rebind, &m, Protocol::H2);
    let r = h2.disruption.as_ref().unwrap().rebind.as_ref().unwrap();
    assert_eq!(connections(&h2, Transport::Tcp), 2, "{r:?}");
    assert_eq!(
        (r.open_at_rebind, r.broken, r.opened_after),
        (1, 1, 1),
        "{r:?}"
    );
    assert_eq!(attempts(&h2), 2);
    // How long it stalls depends on when TCP hears of the break (at once when an ACK leaves
    // from the new port and draws the server's reset; after Chromium's 45 s keep-alive when
    // the connection was idle): not asserted.
    print_stalls(&h2);
}

fn print_stalls(rec: &RunRecord) {
    let d = rec.disruption.as_ref().unwrap();
    eprintln!(
        "{}: completion {:.0} ms, longest stall {:.0} ms, around the rebinding {:?}",
        rec.id,
        rec.metrics.completion_ms.unwrap(),
        d.stall.unwrap().ms,
        d.event_stalls[0].stall.map(|s| s.ms)
    );
}
