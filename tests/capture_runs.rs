//! `--capture` and head-of-line blocking end to end, with real Chromium through the emulated
//! link against the embedded server:
//! - Debian's tshark decrypts the run's pcap with its key log and finds the requests the
//!   server logged (HTTP/2 over TLS/TCP, and HTTP/3 over QUIC — whose QPACK headers this test
//!   decodes itself, Wireshark 4.0 having no QPACK decoder);
//! - the server's qlog is JSON-SEQ and counts the packets quinn declared lost;
//! - one chosen data packet dropped during page10's parallel responses: over h2 the bytes
//!   behind the hole wait (blocked), over h3 the other streams' bytes pass it.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pagebench::config::profile::{self, Profile};
use pagebench::config::protocol::{H3Mode, Protocol, Variant};
use pagebench::config::workload::{self, Manifest, Workload};
use pagebench::embedded_server::ServerKnobs;
use pagebench::evidence::run_record::RunRecord;
use pagebench::evidence::validate::Outcome;
use pagebench::measure::fault::FaultInjection;
use pagebench::measure::runner::{run_once, RunSpec};
use pagebench::measure::testbed::{ServerChoice, Testbed, TestbedConfig};
use pagebench::packets::{CaptureSet, HolReport};

/// `wired` without jitter: the chosen drop is then the only thing that reorders delivery.
fn steady_wired() -> Profile {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    let mut p = profile::select("wired", &dir).unwrap().remove(0);
    p.jitter_ms = 0.0;
    p
}

fn page10(root: &Path) -> Manifest {
    workload::ensure(
        root,
        &"page10".parse::<Workload>().unwrap(),
        workload::DEFAULT_SEED,
        Default::default(),
    )
    .unwrap()
}

fn testbed(profile: &Profile, root: &Path) -> Testbed {
    Testbed::start(&TestbedConfig {
        profile: profile.clone(),
        servers: vec![ServerChoice::embedded()],
        knobs: ServerKnobs::default(),
        pages_root: root.to_path_buf(),
        seed: 11,
        log_dir: None,
        steer_receive: true,
        extra_server_addresses: 0,
        dns: Default::default(),
        site_hosts: vec![],
        site_ports: vec![],
    })
    .expect("testbed (needs root, /dev/net/tun and Debian's chromium: run ./setup.sh)")
}

fn variant(p: Protocol) -> Variant {
    Variant::new(p, H3Mode::Forced)
}

/// A valid run of `spec` (with its fault, if any, on every attempt: the drop is the point).
fn valid_run(tb: &mut Testbed, spec: &RunSpec) -> RunRecord {
    let mut last = None;
    for attempt in 1..=4 {
        let s = RunSpec {
            id: format!("{}-t{attempt}", spec.id),
            ..spec.clone()
        };
        let rec = run_once(tb, &s).unwrap();
        if rec.outcome == Outcome::Valid {
            return rec;
        }
        last = Some(rec.reasons.clone());
    }
    panic!("no valid run of {} in 4 attempts: {last:?}", spec.id);
}

fn spec(id: &str, profile: &Profile, m: &Manifest, p: Protocol) -> RunSpec {
    RunSpec::single(
        id,
        profile,
        m,
        variant(p),
        &ServerChoice::embedded().name(),
        Duration::from_secs(60),
    )
}

fn write_files(rec: &RunRecord, dir: &Path) {
    pagebench::results::store::write_captures(dir, &rec.capture_files).unwrap();
    let names: BTreeSet<&str> = rec.captures.iter().map(|c| c.name.as_str()).collect();
    for f in &rec.capture_files {
        assert!(names.contains(f.name.as_str()), "{} is listed", f.name);
    }
}

fn tshark(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(dir.join("client.pcapng.gz"))
        .arg("-o")
        .arg(format!(
            "tls.keylog_file:{}",
            dir.join("keys.log").display()
        ))
        .args(args)
        .output()
        .expect("tshark (Debian's, installed by ./setup.sh)");
    assert!(
        out.status.success(),
        "tshark {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The paths the server logged for the run.
fn server_paths(rec: &RunRecord) -> BTreeSet<String> {
    rec.server_requests.iter().map(|r| r.path.clone()).collect()
}

/// RFC 7541 §5.1 prefix integer; returns (value, bytes used).
fn prefix_int(b: &[u8], bits: u8) -> (u64, usize) {
    let max = (1u64 << bits) - 1;
    let mut v = u64::from(b[0]) & max;
    if v < max {
        return (v, 1);
    }
    let mut m = 0;
    let mut i = 1;
    loop {
        let byte = b[i];
        v += u64::from(byte & 0x7f) << m;
        m += 7;
        i += 1;
        if byte & 0x80 == 0 {
            return (v, i);
        }
    }
}

/// A QPACK string literal whose length prefix has `bits` bits and whose Huffman flag is the bit
/// just above them.
fn qpack_string(b: &[u8], bits: u8) -> (String, usize) {
    let huffman = b[0] & (1 << bits) != 0;
    let (len, used) = prefix_int(b, bits);
    let raw = &b[used..used + len as usize];
    let text = if huffman {
        hpack::huffman::HuffmanDecoder::new().decode(raw).unwrap()
    } else {
        raw.to_vec()
    };
    (String::from_utf8(text).unwrap(), used + len as usize)
}

fn varint(b: &[u8]) -> (u64, usize) {
    let len = 1usize << (b[0] >> 6);
    let mut v = u64::from(b[0] & 0x3f);
    for x in &b[1..len] {
        v = (v << 8) | u64::from(*x);
    }
    (v, len)
}

/// The `:path` of an HTTP/3 request stream's first bytes (a HEADERS frame, QPACK without the
/// dynamic table — the embedded server offers none).
fn h3_request_path(stream: &[u8]) -> Option<String> {
    let (kind, a) = varint(stream);
    if kind != 0x01 {
        return None;
    }
    let (len, b) = varint(&stream[a..]);
    let block = &stream[a + b..a + b + len as usize];
    let (_, i1) = prefix_int(block, 8); // required insert count
    let (_, i2) = prefix_int(&block[i1..], 7); // delta base
    let mut i = i1 + i2;
    while i < block.len() {
        let first = block[i];
        if first & 0x80 != 0 {
            // Indexed field line: static index 1 is `:path /`.
            let (idx, used) = prefix_int(&block[i..], 6);
            if first & 0x40 != 0 && idx == 1 {
                return Some("/".into());
            }
            i += used;
        } else if first & 0x40 != 0 {
            // Literal with name reference.
            let (idx, used) = prefix_int(&block[i..], 4);
            let (value, vused) = qpack_string(&block[i + used..], 7);
            if first & 0x10 != 0 && idx == 1 {
                return Some(value);
            }
            i += used + vused;
        } else if first & 0x20 != 0 {
            // Literal with literal name.
            let (name, nused) = qpack_string(&block[i..], 3);
            let (value, vused) = qpack_string(&block[i + nused..], 7);
            if name == ":path" {
                return Some(value);
            }
            i += nused + vused;
        } else {
            return None; // post-base forms need a dynamic table
        }
    }
    None
}

/// The request paths tshark finds in the decrypted QUIC packets the client sent.
fn h3_paths_from_pcap(dir: &Path, client_ip: &str) -> BTreeSet<String> {
    let text = tshark(
        dir,
        &[
            "-Y",
            &format!("quic && ip.src == {client_ip}"),
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-E",
            "aggregator=;",
            "-e",
            "quic.stream.stream_id",
            "-e",
            "quic.stream.off",
            "-e",
            "quic.stream.offset",
            "-e",
            "quic.stream_data",
        ],
    );
    let mut paths = BTreeSet::new();
    for line in text.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 4 || cols[0].is_empty() {
            continue;
        }
        let ids: Vec<u64> = cols[0].split(';').filter_map(|x| x.parse().ok()).collect();
        let offs: Vec<bool> = cols[1]
            .split(';')
            .map(|x| x == "1" || x == "True")
            .collect();
        let mut offsets = cols[2].split(';').filter(|x| !x.is_empty());
        let data: Vec<&str> = cols[3].split(';').collect();
        for (k, id) in ids.iter().enumerate() {
            let offset: u64 = if offs.get(k).copied().unwrap_or(false) {
                offsets
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(u64::MAX)
            } else {
                0
            };
            // Client-initiated bidirectional streams are the requests; their first bytes
            // are the HEADERS frame.
            if id % 4 != 0 || offset != 0 {
                continue;
            }
            let Some(hexed) = data.get(k) else { continue };
            let bytes = hex::decode(hexed.replace(':', "")).unwrap();
            if let Some(p) = h3_request_path(&bytes) {
                paths.insert(p);
            }
        }
    }
    paths
}

/// The qlog's events (JSON-SEQ: each record starts with RS) and its lost-packet count.
fn qlog_lost_packets(gz: &[u8]) -> u64 {
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .unwrap();
    assert!(text.starts_with('\u{1e}'), "JSON-SEQ starts with RS");
    let mut lost = 0;
    let mut records = 0;
    for rec in text.split('\u{1e}').filter(|r| !r.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(rec.trim())
            .unwrap_or_else(|e| panic!("a qlog record is not JSON ({e}): {rec}"));
        records += 1;
        if v["name"] == "recovery:packet_lost" || v["name"] == "loss:packet_lost" {
            lost += 1;
        }
    }
    assert!(
        records > 10,
        "the qlog has its header and events ({records})"
    );
    lost
}

fn hol(rec: &RunRecord) -> &HolReport {
    rec.hol
        .as_ref()
        .expect("every run has its head-of-line analysis")
}

#[test]
fn tshark_decrypts_h2_and_h3_captures_and_the_qlog_counts_quinns_losses() {
    let root = tempfile::tempdir().unwrap();
    let m = page10(root.path());
    let profile = steady_wired();
    let mut tb = testbed(&profile, root.path());
    let files = tempfile::tempdir().unwrap();
    let capture: CaptureSet = "pcap,keys,qlog".parse().unwrap();

    // HTTP/2 over TLS over TCP: tshark's own HTTP/2 dissector reads the paths.
    let h2 = valid_run(
        &mut tb,
        &RunSpec {
            capture: capture.clone(),
            ..spec("cap-h2", &profile, &m, Protocol::H2)
        },
    );
    let h2_dir = files.path().join("h2");
    write_files(&h2, &h2_dir);
    let text = tshark(
        &h2_dir,
        &[
            "-Y",
            "http2.headers.path",
            "-T",
            "fields",
            "-e",
            "http2.headers.path",
        ],
    );
    let paths: BTreeSet<String> = text
        .lines()
        .flat_map(|l| l.split(','))
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    assert_eq!(
        paths,
        server_paths(&h2),
        "h2: pcap + keys vs the server log"
    );
    assert!(h2.captures.iter().all(|c| !c.name.ends_with(".sqlog.gz")));

    // HTTP/3, with one data packet dropped so that quinn has a loss to declare (the N-th large
    // packet may be an MTU probe, which quinn counts apart: the next N is tried).
    let h3 = [12u32, 15, 18, 21, 24]
        .iter()
        .map(|n| {
            let fault: FaultInjection = format!("x=drop-down:{n}@0ms").parse().unwrap();
            valid_run(
                &mut tb,
                &RunSpec {
                    capture: capture.clone(),
                    fault: Some(fault),
                    ..spec(&format!("cap-h3-{n}"), &profile, &m, Protocol::H3)
                },
            )
        })
        .find(|r| {
            hol(r)
                .quic
                .as_ref()
                .is_some_and(|q| q.dropped_data_packets == 1)
        })
        .expect("one of five chosen drops hit a data packet");
    let h3_dir = files.path().join("h3");
    write_files(&h3, &h3_dir);
    let client_ip = h3
        .server_transport
        .as_ref()
        .and_then(|c| c.first())
        .map(|c| c.client.ip().to_string())
        .expect("the server saw the client");
    assert_eq!(
        h3_paths_from_pcap(&h3_dir, &client_ip),
        server_paths(&h3),
        "h3: pcap + keys vs the server log"
    );
    let quic = hol(&h3).quic.as_ref().unwrap();
    assert_eq!(
        quic.undecrypted_packets, 0,
        "pagebench decrypted every packet too"
    );
    assert_eq!(quic.drops.injected, 1);

    let qlogs: Vec<_> = h3
        .capture_files
        .iter()
        .filter(|f| f.name.ends_with(".sqlog.gz"))
        .collect();
    assert!(!qlogs.is_empty(), "a qlog per QUIC connection");
    let qlog_lost: u64 = qlogs.iter().map(|f| qlog_lost_packets(&f.data)).sum();
    let quinn_lost: u64 = h3
        .server_transport
        .as_ref()
        .unwrap()
        .iter()
        .filter_map(|c| c.quic.as_ref())
        .map(|q| q.lost_packets)
        .sum();
    assert!(quinn_lost >= 1, "the dropped packet was declared lost");
    assert_eq!(qlog_lost, quinn_lost, "qlog vs quinn's stats");
}

#[test]
fn a_dropped_packet_blocks_the_other_streams_over_h2_and_not_over_h3() {
    let root = tempfile::tempdir().unwrap();
    let m = page10(root.path());
    let profile = steady_wired();
    let mut tb = testbed(&profile, root.path());
    // The N-th large packet from the server: inside the nine parallel responses after the
    // handshake and the HTML. Over QUIC it may be one of quinn's MTU probes (padding, no
    // data): such a run blocks nothing and says so (`dropped_data_packets` 0); the next N is
    // tried until three runs lost a data packet.
    let choices = [12u32, 15, 18, 21, 24, 27, 30, 33];
    let mut blocked = [Vec::new(), Vec::new()];
    for (k, p) in [Protocol::H2, Protocol::H3].into_iter().enumerate() {
        for n in choices {
            if blocked[k].len() == 3 {
                break;
            }
            let fault: FaultInjection = format!("x=drop-down:{n}@0ms").parse().unwrap();
            let rec = valid_run(
                &mut tb,
                &RunSpec {
                    fault: Some(fault),
                    ..spec(&format!("hol-{p}-{n}"), &profile, &m, p)
                },
            );
            let h = hol(&rec);
            let link = rec.link_stats.as_ref().and_then(|l| l.stats.as_ref());
            let side = match p {
                Protocol::H2 => h.tcp.as_ref().expect("h2 ran over TCP"),
                _ => h.quic.as_ref().expect("h3 ran over QUIC"),
            };
            assert_eq!(
                side.drops.injected,
                1,
                "{p}: {:?}; the link dropped {:?} chosen packets down",
                side.drops,
                link.map(|l| l.down.dropped_injected)
            );
            if side.dropped_data_packets == 0 {
                assert_eq!(p, Protocol::H3, "a large TCP segment always carries data");
                assert_eq!(side.blocked_bytes, 0, "a lost probe blocks nothing");
                continue;
            }
            match p {
                Protocol::H2 => {
                    // Everything behind the hole waited, whichever stream it belonged to:
                    // more than one packet's worth, and the episode names the drop.
                    assert!(
                        side.blocked_bytes > 3 * 1200,
                        "h2 blocked {}",
                        side.blocked_bytes
                    );
                    assert!(side.episodes.iter().any(|e| e.causes.injected == 1));
                    assert_eq!(side.unblocked_bytes, 0);
                }
                _ => {
                    assert_eq!(side.undecrypted_packets, 0);
                    // Other streams' bytes went past the waiting stream.
                    assert!(
                        side.unblocked_bytes > 0,
                        "h3: nothing passed the hole: {side:?}"
                    );
                }
            }
            blocked[k].push(side.blocked_bytes);
        }
        assert_eq!(
            blocked[k].len(),
            3,
            "{p}: fewer than 3 of {} runs lost a data packet",
            choices.len()
        );
    }
    let median = |mut v: Vec<u64>| {
        v.sort();
        v[v.len() / 2]
    };
    let (h2m, h3m) = (median(blocked[0].clone()), median(blocked[1].clone()));
    assert!(
        h3m * 2 < h2m,
        "h3's blocked bytes (median {h3m}, {:?}) are the lost stream's only, well below h2's ({h2m}, {:?})",
        blocked[1],
        blocked[0]
    );
}
