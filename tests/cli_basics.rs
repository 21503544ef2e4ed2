//! The foundation through the binary: `pages` generates the workloads (deterministically, with
//! the study's sizes), `profiles` lists the profiles, each kind of bad profile is one clear
//! error with a non-zero exit, and the binary works from any directory (profiles compiled in,
//! pages in the cache directory).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

fn pagebench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pagebench"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

/// SHA-256 of every file below `dir`, by relative path.
/// Runs `cmd`, fails the test with its stderr unless it succeeded, and returns its stdout.
fn succeeded(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn hashes(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, hex::encode(Sha256::digest(std::fs::read(&p).unwrap())));
            }
        }
    }
    out
}

#[test]
fn pages_are_deterministic_and_sized_like_the_study() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let out = pagebench(&["pages", "--pages", a.path().to_str().unwrap()]);
    assert!(out.status.success());
    assert!(pagebench(&["pages", "--pages", b.path().to_str().unwrap()])
        .status
        .success());
    let (ha, hb) = (hashes(a.path()), hashes(b.path()));
    assert!(ha.len() > 150, "{} files", ha.len());
    assert_eq!(ha, hb, "two generations differ");

    // The listing: files and subresource bytes within 5 % of the targets.
    let text = String::from_utf8(out.stdout).unwrap();
    let row = |name: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} not listed:\n{text}"))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    for (name, files, bytes) in [
        ("page10", 10, 80_000.0),
        ("page50", 50, 421_000.0),
        ("download", 1, 3_000_000.0),
    ] {
        let r = row(name);
        assert_eq!(r[2], files.to_string(), "{name}: {r:?}");
        let got: f64 = r[4].parse().unwrap();
        assert!((got / bytes - 1.0).abs() <= 0.05, "{name}: {got} bytes");
    }
    assert_eq!(row("upload")[6], "20000000");
    // Another seed gives other bytes.
    let c = tempfile::tempdir().unwrap();
    assert!(pagebench(&[
        "pages",
        "--pages",
        c.path().to_str().unwrap(),
        "--pages-seed",
        "2",
        "page10"
    ])
    .status
    .success());
    let hc = hashes(c.path());
    assert_ne!(
        hc.get("page10/img/image001.png"),
        ha.get("page10/img/image001.png")
    );
}

#[test]
fn profiles_are_listed() {
    let out = pagebench(&["profiles"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "datacenter",
        "wired",
        "intercontinental",
        "mobile",
        "bad-mobile",
        "cell-edge",
        "lte",
        "3g",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(name)),
            "{name} missing:\n{text}"
        );
    }
    let all = String::from_utf8(pagebench(&["profiles", "--profiles", "all"]).stdout).unwrap();
    assert_eq!(all.lines().count(), 2 + 6, "{all}");
}

#[test]
fn bad_profiles_give_one_clear_error_each() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "unknown.toml",
            "name = \"x\"\nrtt_ms = 10\nbandwidth = 5\n",
            &["unknown.toml", "line 3", "bandwidth"][..],
        ),
        (
            "negative.toml",
            "name = \"x\"\nrtt_ms = -5\n",
            &["negative.toml", "rtt_ms", "negative"][..],
        ),
        (
            "loss.toml",
            "name = \"x\"\nrtt_ms = 10\nloss_pct = 140\n",
            &["loss.toml", "loss_pct", "0 and 100"][..],
        ),
        (
            "rate.toml",
            "name = \"x\"\nrtt_ms = 10\ndown_mbit = 0\nqueue_packets = 10\n",
            &["rate.toml", "down_mbit"][..],
        ),
        (
            "garbage.toml",
            "name = \"x\"\nrtt_ms = 10\nthis is [not toml\n",
            &["garbage.toml", "line 3"][..],
        ),
    ];
    for (file, text, expect) in cases {
        let p = dir.path().join(file);
        std::fs::write(&p, text).unwrap();
        let out = pagebench(&["profiles", "--profiles", p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{file}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{file}: one line, got:\n{err}"
        );
        for e in expect {
            assert!(err.contains(e), "{file}: {e:?} not in {err}");
        }
        assert!(!err.contains("panicked"));
    }
    // Two files with the same name.
    let a = dir.path().join("a.toml");
    let b = dir.path().join("b.toml");
    std::fs::write(&a, "name = \"same\"\nrtt_ms = 1\n").unwrap();
    std::fs::write(&b, "name = \"same\"\nrtt_ms = 2\n").unwrap();
    let out = pagebench(&[
        "profiles",
        "--profiles",
        &format!("{},{}", a.display(), b.display()),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("\"same\"")
            && err.contains("twice")
            && err.contains("a.toml")
            && err.contains("b.toml"),
        "{err}"
    );
}

#[test]
fn every_subcommand_either_works_or_explains_itself() {
    for args in [
        &["--help"][..],
        &["matrix", "--help"],
        &["run", "--help"],
        &["report", "--help"],
        &["diagnose", "--help"],
        &["bench", "netem", "--help"],
        &["shell", "--help"],
    ] {
        assert!(pagebench(args).status.success(), "{args:?}");
    }
    // Bad input: one clear error naming the flag or value.
    let out = pagebench(&["matrix", "--workloads", "page0", "--out", "/nonexistent/x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("page0"));
    let out = pagebench(&["run", "--protocol", "h4"]);
    assert_eq!(out.status.code(), Some(2), "clap usage error");
    // One spelling per variant: the old --h3-mode is refused, naming the new form.
    for args in [
        &["run", "--protocol", "h3", "--h3-mode", "primed"][..],
        &[
            "matrix",
            "--protocols",
            "h3",
            "--h3-mode",
            "primed",
            "--out",
            "/nonexistent/x",
        ],
    ] {
        let (cmd, flag) = (args[0], args[1]);
        let out = pagebench(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {err}");
        assert!(
            err.contains("--h3-mode is gone") && err.contains(flag) && err.contains("h3-primed"),
            "{err}"
        );
    }
    let out = pagebench(&["run", "--protocol", "as-recorded"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "as-recorded is its own flag in run"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--as-recorded"));
}

/// The binary run from a fresh directory that is not a checkout, with its cache in `cache`.
fn pagebench_elsewhere(cwd: &Path, cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pagebench"));
    c.current_dir(cwd)
        .env("XDG_CACHE_HOME", cache)
        .env("PAGEBENCH_LOG", "warn");
    c
}

#[test]
fn profiles_and_a_run_work_from_any_directory() {
    let cwd = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let text = succeeded(pagebench_elsewhere(cwd.path(), cache.path()).arg("profiles"));
    for name in pagebench::config::profile::BUILT_IN
        .iter()
        .map(|(file, _)| file.trim_end_matches(".toml"))
    {
        assert!(
            text.lines().any(|l| l.starts_with(name)),
            "{name} missing:\n{text}"
        );
    }
    let all = pagebench_elsewhere(cwd.path(), cache.path())
        .args(["profiles", "--profiles", "all"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&all.stdout).lines().count(), 2 + 6);

    // A real load (root and Chromium): the workload lands in the cache, nothing in the cwd.
    let out = succeeded(
        pagebench_elsewhere(cwd.path(), cache.path())
            .args(["run", "--protocol", "h2", "--workload", "page10"])
            .args(["--profile", "wired", "--timeout", "30s"]),
    );
    assert!(!out.is_empty());
    let manifest = cache.path().join("pagebench/pages/1/page10/manifest.json");
    assert!(manifest.exists(), "{} missing", manifest.display());
    let left: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().collect();
    assert!(left.is_empty(), "the run wrote into its cwd: {left:?}");
}

#[test]
fn without_a_cache_directory_the_error_names_the_flag() {
    let cwd = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pagebench"))
        .args(["pages", "page10"])
        .current_dir(cwd.path())
        .env_remove("XDG_CACHE_HOME")
        .env_remove("HOME")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("XDG_CACHE_HOME") && err.contains("--pages DIR"),
        "{err}"
    );
    // A user's own profile directory still overrides the built-in profiles.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mine.toml"),
        "name = \"mine\"\nrtt_ms = 7\n",
    )
    .unwrap();
    let text = succeeded(
        Command::new(env!("CARGO_BIN_EXE_pagebench"))
            .args(["profiles", "--profiles-dir"])
            .arg(dir.path())
            .current_dir(cwd.path()),
    );
    assert!(text.lines().any(|l| l.starts_with("mine")), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("wired")), "{text}");
}

#[test]
fn import_turns_a_har_with_content_into_an_archive_or_refuses_with_strict() {
    let dir = tempfile::tempdir().unwrap();
    let har = dir.path().join("site.har");
    let entry = |url: &str, content: serde_json::Value| {
        serde_json::json!({
            "startedDateTime": "2026-12-01T10:00:00.000Z",
            "request": {"method": "GET", "url": url, "httpVersion": "http/1.1", "headers": []},
            "response": {"status": 200, "httpVersion": "http/1.1",
                         "headers": [{"name": "content-type", "value": "text/html"}],
                         "content": content, "bodySize": 6},
            "serverIPAddress": "127.0.0.1", "timings": {"wait": 10.0, "receive": 1.0}
        })
    };
    let text = serde_json::json!({"log": {"version": "1.2", "entries": [
        entry("https://a.test/", serde_json::json!({"size": 6, "text": "<html>"})),
        entry("https://b.test/x.js", serde_json::json!({"size": 6})),
    ]}});
    std::fs::write(&har, text.to_string()).unwrap();
    let out = dir.path().join("archive");
    let (h, o) = (har.to_str().unwrap(), out.to_str().unwrap());
    let done = pagebench(&["import", h, "--out", o]);
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(
        stdout.contains("imported 2 responses from 2 origin(s)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("https://b.test/x.js: no body recorded"),
        "{stdout}"
    );
    let archive = pagebench::config::site_archive::read(&out).unwrap();
    assert_eq!(archive.page_url, "https://a.test/");

    let strict_out = dir.path().join("strict");
    let refused = pagebench(&[
        "import",
        h,
        "--out",
        strict_out.to_str().unwrap(),
        "--strict",
    ]);
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--strict") && err.contains("x.js"), "{err}");
    assert!(!strict_out.join("site.json").exists());
}

#[test]
fn a_run_har_keeps_the_bodies_and_imports_byte_exact() {
    // A real h2 load of page10 (root and Chromium) with --har, then `import --strict`: every
    // body of the archive is the generated file, byte for byte.
    let cwd = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let har = cwd.path().join("run.har");
    succeeded(
        pagebench_elsewhere(cwd.path(), cache.path())
            .args(["run", "--protocol", "h2", "--workload", "page10"])
            .args(["--profile", "datacenter", "--timeout", "30s", "--har"])
            .arg(&har),
    );
    // The counted attempt's HAR (a retried run writes run.a2.har, …): the newest.
    let mut hars: Vec<_> = std::fs::read_dir(cwd.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "har"))
        .collect();
    hars.sort();
    let har = hars.last().expect("a HAR was written").clone();
    let archive = cwd.path().join("archive");
    let imported = pagebench_elsewhere(cwd.path(), cache.path())
        .arg("import")
        .arg(&har)
        .arg("--out")
        .arg(&archive)
        .arg("--strict")
        .output()
        .unwrap();
    assert!(
        imported.status.success(),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );
    let a = pagebench::config::site_archive::read(&archive).unwrap();
    let manifest: pagebench::config::workload::Manifest = serde_json::from_slice(
        &std::fs::read(cache.path().join("pagebench/pages/1/page10/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(a.entries.len(), 1 + manifest.files.len());
    for f in &manifest.files {
        let e = a
            .entries
            .iter()
            .find(|e| e.url.ends_with(&f.path))
            .unwrap_or_else(|| panic!("{} not in the archive", f.path));
        let wire = pagebench::config::site_archive::body(&archive, e).unwrap();
        assert!(e.content_encoding.is_none(), "{}", e.url);
        assert_eq!(wire.len() as u64, f.size, "{}", e.url);
        assert_eq!(hex::encode(Sha256::digest(&wire)), f.sha256, "{}", e.url);
        assert_eq!(e.protocol.as_deref(), Some("h2"));
    }
}

#[test]
fn shards_adaptive_runs_merge_and_compare_explain_bad_input() {
    for args in [&["merge", "--help"][..], &["compare", "--help"]] {
        assert!(pagebench(args).status.success(), "{args:?}");
    }
    let err = |args: &[&str], code: i32, what: &[&str]| {
        let out = pagebench(args);
        let text = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(code), "{args:?}: {text}");
        for w in what {
            assert!(text.contains(w), "{args:?}: {w:?} not in {text}");
        }
    };
    err(&["matrix", "--runs", "often"], 2, &["auto"]);
    err(&["matrix", "--shard", "3/2"], 2, &["--shard", "K/N"]);
    err(&["matrix", "--min-runs", "7"], 1, &["--runs auto"]);
    err(
        &["matrix", "--runs", "auto", "--min-runs", "2"],
        1,
        &["--min-runs 2", "3 or more"],
    );
    err(
        &["matrix", "--runs", "auto", "--precision", "0"],
        1,
        &["--precision 0"],
    );
    err(
        &["compare", "/nonexistent/a", "/nonexistent/b"],
        1,
        &["/nonexistent/a", "meta.json"],
    );
    err(&["merge", "/tmp/x"], 2, &["DIR"]);
}
