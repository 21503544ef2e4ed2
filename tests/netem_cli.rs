//! The netem commands as a user runs them: `pagebench shell`, `pagebench cleanup`,
//! `pagebench bench netem`, and the error without privileges or without /dev/net/tun.

mod netem_support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use netem_support::{netns_list, serial, shipped, NetnsCheck};
use pagebench::link::{Link, LinkOptions};

fn pagebench() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pagebench"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn shell_runs_a_server_and_a_client_through_the_link() {
    let _s = serial();
    let check = NetnsCheck::start();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("link.json");
    let out = pagebench()
        .args(["shell", "--profile", "wired", "--wait-tcp", "8000"])
        .arg("--server-cmd")
        .arg("exec python3 -m http.server --bind $PAGEBENCH_SERVER_IP 8000")
        .arg("--stats-json")
        .arg(&json)
        .args(["--", "sh", "-c"])
        .arg(
            "curl -s -o /dev/null -w '%{http_code} %{time_connect}' \
             http://$PAGEBENCH_SERVER_IP:8000/ && echo \" $PAGEBENCH_CLIENT_NS\"",
        )
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let fields: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(fields[0], "200", "{stdout}");
    // Connecting takes one round trip: at least RTT − 2 × jitter = 30 ms.
    let connect: f64 = fields[1].parse().unwrap();
    assert!((0.029..1.0).contains(&connect), "connect {connect} s");
    assert!(fields[2].starts_with("pb-"), "{stdout}");
    assert!(
        stderr.contains("link self-check: profile wired"),
        "{stderr}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v["stats"]["up"]["packets_in"].as_u64().unwrap() >= 4, "{v}");
    assert!(
        v["stats"]["down"]["bytes_out"].as_u64().unwrap() > 100,
        "{v}"
    );
    assert_eq!(v["self_check"]["up"]["configured_delay_ms"], 20.0);
    // The namespaces are gone with the shell.
    assert!(!netns_list().contains(fields[2]));
    check.finish(&[]);
}

#[test]
fn shell_returns_the_client_exit_code_and_rejects_bad_input() {
    let _s = serial();
    let check = NetnsCheck::start();
    let out = pagebench()
        .args([
            "shell",
            "--profile",
            "datacenter",
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{:?}", text(&out));
    assert!(text(&out).1.contains("link self-check"));

    let out = pagebench()
        .args(["shell", "--profile", "nosuch", "--", "true"])
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("nosuch") && stderr.contains("wired"),
        "{stderr}"
    );

    let out = pagebench()
        .args(["shell", "--profile", "wired"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    check.finish(&[]);
}

/// `--dns-name`: the client command's lookups cross the link to pagebench's resolver (a round
/// trip, and the name's hold), which answers each name with its server address and nothing
/// else; a bad `--dns-name` is refused before anything starts.
#[test]
fn shell_resolves_its_names_through_the_link() {
    let _s = serial();
    let check = NetnsCheck::start();
    let script = "import os, socket, time\n\
        def look(h):\n    t = time.monotonic()\n    try:\n        a = socket.gethostbyname(h)\n    except OSError:\n        a = '-'\n    print(h, a, round((time.monotonic() - t) * 1e3, 1))\n\
        [look(h) for h in ('a.test', 'b.test', 'c.test')]\n\
        print('ips', os.environ['PAGEBENCH_SERVER_IPS'], '/', os.environ['PAGEBENCH_RESOLVER'])\n";
    let out = pagebench()
        .args(["shell", "--profile", "wired", "--server-addresses", "2"])
        .args(["--dns-name", "a.test=1@50", "--dns-name", "B.test=2"])
        .args(["--", "python3", "-c", script])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let line = |h: &str| -> Vec<String> {
        let l = stdout.lines().find(|l| l.starts_with(h)).unwrap();
        l.split_whitespace().map(String::from).collect()
    };
    let ips = line("ips");
    assert_eq!(
        ips.len(),
        5,
        "two server addresses, then the resolver's: {stdout}"
    );
    let ms = |v: &[String]| v[2].parse::<f64>().unwrap();
    let (a, b, c) = (line("a.test"), line("b.test"), line("c.test"));
    assert_eq!((&a[1], &b[1], &c[1]), (&ips[1], &ips[2], &"-".to_string()));
    // One round trip of at least 40 − 2 × 5 ms (the jitter), plus a's 50 ms hold.
    assert!(
        ms(&a) >= 80.0 && ms(&b) >= 30.0 && ms(&a) - ms(&b) >= 40.0,
        "{stdout}"
    );
    assert!(
        ms(&c) >= 30.0,
        "NXDOMAIN also comes through the link: {stdout}"
    );
    for (flag, says) in [
        ("a.test=3", "give 1 to 2"),
        ("a.test", "HOST=N[@MS]"),
        ("a.test=1@x", "not a hold"),
        ("a b=1", "not a DNS name"),
    ] {
        let out = pagebench()
            .args(["shell", "--profile", "wired", "--server-addresses", "2"])
            .args(["--dns-name", flag, "--", "true"])
            .output()
            .unwrap();
        let (_, stderr) = text(&out);
        assert!(
            !out.status.success() && stderr.contains("--dns-name") && stderr.contains(says),
            "{flag}: {stderr}"
        );
    }
    check.finish(&[]);
}

#[test]
fn missing_privileges_or_tun_give_one_clear_error() {
    let _s = serial();
    let check = NetnsCheck::start();
    let exe = env!("CARGO_BIN_EXE_pagebench");
    // Without CAP_NET_ADMIN: dropped from the bounding set, so the exec'd pagebench lacks it.
    let out = Command::new("setpriv")
        .args(["--bounding-set", "-net_admin", exe])
        .args(["shell", "--profile", "wired", "--", "true"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one error: {stderr}");
    assert!(stderr.contains("lacks CAP_NET_ADMIN"), "{stderr}");
    assert!(!stderr.contains("CAP_SYS_ADMIN"), "{stderr}");
    assert!(stderr.contains("run pagebench as root"), "{stderr}");

    // Without /dev/net/tun: hidden under a tmpfs in a private mount namespace of the child.
    let script =
        format!("mount -t tmpfs none /dev/net && exec {exe} shell --profile wired -- true");
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one error: {stderr}");
    assert!(stderr.contains("/dev/net/tun does not exist"), "{stderr}");
    assert!(stderr.contains("modprobe tun"), "{stderr}");

    // Both missing: still one error, naming both.
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs none /dev/net && exec setpriv --bounding-set -net_admin,-sys_admin {exe} shell --profile wired -- true"
        ))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(stderr.trim().lines().count(), 1, "one error: {stderr}");
    assert!(
        stderr.contains("CAP_NET_ADMIN and CAP_SYS_ADMIN") && stderr.contains("/dev/net/tun"),
        "{stderr}"
    );
    check.finish(&[]);
}

const HELPER_ENV: &str = "PAGEBENCH_NETEM_TEST_HELPER";

#[test]
#[ignore = "helper: run by cleanup_removes_what_a_killed_process_left"]
fn helper_build_link_and_wait() {
    if std::env::var(HELPER_ENV).as_deref() != Ok("wait") {
        return;
    }
    let link = Link::new(&shipped("wired"), LinkOptions::default()).unwrap();
    println!("NAMES {} {}", link.client().name(), link.server().name());
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn cleanup_removes_what_a_killed_process_left() {
    let _s = serial();
    let check = NetnsCheck::start();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_build_link_and_wait",
            "--ignored",
            "--nocapture",
        ])
        .env(HELPER_ENV, "wait")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut names = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("NAMES ") {
            names = rest.split_whitespace().map(str::to_string).collect();
            break;
        }
    }
    assert_eq!(names.len(), 2, "helper did not report its namespaces");
    child.kill().unwrap(); // SIGKILL: no Drop, no signal handler
    child.wait().unwrap();
    let listed = netns_list();
    assert!(
        names.iter().all(|n| listed.contains(n)),
        "left behind after SIGKILL: {listed:?}"
    );

    let out = pagebench().arg("cleanup").output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    for n in &names {
        assert!(stdout.contains(&format!("removed {n}")), "{stdout}");
    }
    let listed = netns_list();
    assert!(names.iter().all(|n| !listed.contains(n)), "{listed:?}");
    // A second run finds nothing of that process.
    let out = pagebench().arg("cleanup").output().unwrap();
    assert!(!text(&out).0.contains(&names[0]));
    check.finish(&[pid]);
}

#[test]
fn bench_netem_prints_and_saves_its_figures() {
    let _s = serial();
    let check = NetnsCheck::start();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let out = pagebench()
        .args([
            "bench",
            "netem",
            "--seconds",
            "0.5",
            "--rate-seconds",
            "0.5",
            "--delays",
            "0",
        ])
        .arg("--stats-json")
        .arg(&json)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("Delay error") && stdout.contains("Forwarding rate"),
        "{stdout}"
    );
    assert!(stdout.contains("vs the Python prototype"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["precision"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "idle and bulk at 0 ms");
    let idle = &rows[0];
    assert_eq!(idle["load"], "idle");
    assert!(idle["rtt"]["samples"].as_u64().unwrap() >= 200, "{idle}");
    // Through the emulator at 0 ms a round trip takes well under 5 ms (median).
    let median = idle["rtt"]["median_ms"].as_f64().unwrap();
    assert!((0.0..5.0).contains(&median), "{median}");
    assert!(
        v["udp_rate"]["packets_per_s"].as_f64().unwrap() > 10_000.0,
        "{v}"
    );
    let bad = pagebench()
        .args(["bench", "netem", "--seconds", "0"])
        .output()
        .unwrap();
    assert!(text(&bad).1.contains("--seconds"), "{:?}", text(&bad));
    check.finish(&[]);
}
