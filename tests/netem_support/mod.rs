//! Helpers shared by the netem integration tests: one test at a time per process, a check that
//! no namespace of ours outlives a test, and simple real-socket traffic through a link.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pagebench::config::profile::{self, Profile};
use pagebench::link::{cleanup, netns_dir, Link};

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the tests of one binary (under plain `cargo test` they would share the process,
/// the CPUs and the namespace list).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// `ip netns list`, names only.
pub fn netns_list() -> BTreeSet<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("run ip netns list");
    assert!(out.status.success(), "ip netns list failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Takes `ip netns list` before a test and checks after it that nothing was left behind.
/// The machine is shared (other worktrees run their own tests), so only pagebench namespaces
/// owned by this process or by the children a test names are attributed to the test.
pub struct NetnsCheck {
    before: BTreeSet<String>,
}

impl NetnsCheck {
    pub fn start() -> NetnsCheck {
        // Leftovers of earlier killed runs must not be blamed on this test.
        cleanup::remove_stale().expect("remove stale namespaces");
        NetnsCheck {
            before: netns_list(),
        }
    }

    /// Panics if a namespace of this process (or of `child_pids`) was added and is still there.
    pub fn finish(self, child_pids: &[u32]) {
        let after = netns_list();
        let ours: Vec<&String> = after
            .difference(&self.before)
            .filter(|name| match netns_dir::parse_name(name) {
                Some((pid, _, _)) => pid == std::process::id() || child_pids.contains(&pid),
                None => false,
            })
            .collect();
        assert!(ours.is_empty(), "namespaces left behind: {ours:?}");
        let mine_before: Vec<&String> = self
            .before
            .iter()
            .filter(|n| n.starts_with(&format!("pb-{}-", std::process::id())))
            .collect();
        assert!(
            mine_before.is_empty(),
            "test started with namespaces of this process: {mine_before:?}"
        );
    }
}

/// A shipped profile by name.
pub fn shipped(name: &str) -> Profile {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    profile::select(name, &dir)
        .expect("shipped profile")
        .remove(0)
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    assert!(n > 0, "no samples");
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// `n` sequential UDP request/response round trips client → server → client; RTTs in ms.
pub fn udp_round_trips(link: &Link, n: usize) -> Vec<f64> {
    let sip = link.server_ip();
    let cip = link.client_ip();
    let server = link
        .server()
        .run(move || UdpSocket::bind((sip, 0)))
        .unwrap()
        .unwrap();
    let addr = server.local_addr().unwrap();
    server
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = done.clone();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !d.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok((len, from)) = server.recv_from(&mut buf) {
                server.send_to(&buf[..len], from).unwrap();
            }
        }
    });
    let client = link
        .client()
        .run(move || UdpSocket::bind((cip, 0)))
        .unwrap()
        .unwrap();
    client.connect(addr).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut rtts = Vec::with_capacity(n);
    let mut buf = [0u8; 2048];
    for i in 0..n as u32 {
        let t0 = Instant::now();
        client.send(&i.to_le_bytes()).unwrap();
        let len = client.recv(&mut buf).expect("echo within 2 s");
        assert_eq!(&buf[..len], &i.to_le_bytes(), "echo of probe {i}");
        rtts.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    echo.join().unwrap();
    rtts
}

/// `n` sequential 100-byte TCP request/response round trips on one connection; RTTs in ms.
pub fn tcp_round_trips(link: &Link, n: usize) -> Vec<f64> {
    let sip = link.server_ip();
    let listener = link
        .server()
        .run(move || TcpListener::bind((sip, 0)))
        .unwrap()
        .unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut buf = [0u8; 100];
        while s.read_exact(&mut buf).is_ok() {
            s.write_all(&buf).unwrap();
        }
    });
    let mut client = link
        .client()
        .run(move || TcpStream::connect(addr))
        .unwrap()
        .unwrap();
    client.set_nodelay(true).unwrap();
    let mut rtts = Vec::with_capacity(n);
    let mut buf = [7u8; 100];
    for _ in 0..n {
        let t0 = Instant::now();
        client.write_all(&buf).unwrap();
        client.read_exact(&mut buf).unwrap();
        rtts.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    drop(client);
    echo.join().unwrap();
    rtts
}
