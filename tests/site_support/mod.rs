//! A deterministic three-origin fixture site for the record, import and replay tests:
//! `www.site.test` (the page, and a 301 from `/old.css` to static's `/new.css`),
//! `static.site.test` (CSS with a web font and background images, many images, a script) and
//! `api.site.test` (JSON the script fetches, CORS open); the page sets a cookie. Served by
//! Caddy (`encode gzip`: every text file is over Caddy's 512-byte minimum) on three addresses
//! of `lo` inside a network namespace the test creates, and recorded there by the built
//! `pagebench record`.
//! Every process started here is ended by its id when its guard drops.
#![allow(dead_code)]

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use pagebench::link::Namespace;
use sha2::{Digest, Sha256};

pub const WWW: &str = "www.site.test";
pub const STATIC: &str = "static.site.test";
pub const API: &str = "api.site.test";
/// The page the recording loads.
pub const PAGE_URL: &str = "https://www.site.test/";
/// The fixture's one redirect (from, to).
pub const REDIRECT: (&str, &str) = (
    "https://www.site.test/old.css",
    "https://static.site.test/new.css",
);
/// The cookie the page sets (CDP's response event leaves `Set-Cookie` out: the recording takes
/// it from the raw headers).
pub const SESSION_COOKIE: &str = "session=fixture; Path=/; Secure; HttpOnly";
pub const IMAGES: usize = 44;
pub const BACKGROUNDS: usize = 8;
pub const JSON_FILES: usize = 5;

/// One file of the site: where it is served and its decoded bytes.
#[derive(Debug, Clone)]
pub struct Resource {
    pub host: &'static str,
    /// URL path (`/` for the page).
    pub path: String,
    pub bytes: Vec<u8>,
}

impl Resource {
    pub fn url(&self) -> String {
        format!("https://{}{}", self.host, self.path)
    }

    /// Text (HTML, CSS, JS, JSON): what Caddy compresses.
    pub fn is_text(&self) -> bool {
        [".css", ".js", ".json", "/"]
            .iter()
            .any(|e| self.path.ends_with(e))
    }

    /// The file below a site root (`index.html` for `/`).
    pub fn file(&self) -> String {
        if self.path == "/" {
            "index.html".into()
        } else {
            self.path.trim_start_matches('/').to_string()
        }
    }
}

/// Deterministic bytes (an LCG: no seed to keep, the same on every machine).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u8
        })
        .collect()
}

fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend((data.len() as u32).to_be_bytes());
    let mut crc = flate2::Crc::new();
    crc.update(kind);
    crc.update(data);
    out.extend(kind);
    out.extend(data);
    out.extend(crc.sum().to_be_bytes());
}

/// A valid 8×8 RGB PNG, its pixels from `seed`.
pub fn png(seed: u64) -> Vec<u8> {
    let (w, h) = (8u32, 8u32);
    let mut raw = Vec::new();
    let px = noise((w * h * 3) as usize, seed);
    for row in px.chunks((w * 3) as usize) {
        raw.push(0); // filter: none
        raw.extend(row);
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&raw).unwrap();
    let idat = z.finish().unwrap();
    let mut ihdr = Vec::new();
    ihdr.extend(w.to_be_bytes());
    ihdr.extend(h.to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]); // 8-bit RGB
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    png_chunk(&mut out, b"IHDR", &ihdr);
    png_chunk(&mut out, b"IDAT", &idat);
    png_chunk(&mut out, b"IEND", &[]);
    out
}

/// Comment lines that make a text file big enough to be compressed.
fn padding(prefix: &str, suffix: &str, lines: usize) -> String {
    (0..lines)
        .map(|i| format!("{prefix} fixture padding line {i:03}: the quick brown fox jumps over the lazy dog {suffix}\n"))
        .collect()
}

fn at(host: &'static str, path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Resource {
    Resource {
        host,
        path: path.into(),
        bytes: bytes.into(),
    }
}

/// The site's every file, the page first.
pub fn resources() -> Vec<Resource> {
    let mut v = Vec::new();
    let mut html = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>pagebench fixture</title>\n\
         <link rel=\"icon\" href=\"data:,\">\n\
         <link rel=\"stylesheet\" href=\"https://static.site.test/site.css\">\n\
         <link rel=\"stylesheet\" href=\"/old.css\">\n\
         <script src=\"https://static.site.test/app.js\" defer></script>\n\
         </head><body>\n<h1 class=\"fx\">Fixture text in the fixture font</h1>\n",
    );
    for i in 0..BACKGROUNDS {
        html.push_str(&format!("<div class=\"bg{i}\"></div>\n"));
    }
    for i in 0..IMAGES {
        html.push_str(&format!(
            "<img src=\"https://static.site.test/img/{i:02}.png\" width=\"8\" height=\"8\" alt=\"\">\n"
        ));
    }
    html.push_str("<p class=\"redirected\" id=\"out\">data: </p>\n");
    html.push_str(&padding("<!--", "-->", 12));
    html.push_str("</body></html>\n");
    v.push(at(WWW, "/", html.into_bytes()));

    let mut css = String::from(
        "@font-face { font-family: Fixture; src: url(/fonts/fixture.woff2) format(\"woff2\"); }\n\
         .fx { font-family: Fixture, sans-serif; }\n",
    );
    for i in 0..BACKGROUNDS {
        css.push_str(&format!(
            ".bg{i} {{ width: 8px; height: 8px; background-image: url(/bg/{i}.png); }}\n"
        ));
    }
    css.push_str(&padding("/*", "*/", 10));
    v.push(at(STATIC, "/site.css", css.into_bytes()));
    let new_css = format!(
        ".redirected {{ color: #123456; }}\n{}",
        padding("/*", "*/", 10)
    );
    v.push(at(STATIC, "/new.css", new_css.into_bytes()));
    let js = format!(
        "(function () {{\n  var out = document.getElementById('out');\n  for (var i = 0; i < {JSON_FILES}; i++) {{\n    fetch('https://api.site.test/data/' + i + '.json')\n      .then(function (r) {{ return r.json(); }})\n      .then(function (j) {{ out.textContent += j.id + ' '; }});\n  }}\n}})();\n{}",
        padding("//", "", 10)
    );
    v.push(at(STATIC, "/app.js", js.into_bytes()));
    // Not a real font (Chromium fetches it for the visible text, then rejects it): a WOFF2
    // signature and fixed bytes are enough for a byte-for-byte check.
    let mut font = b"wOF2".to_vec();
    font.extend(noise(3000, 99));
    v.push(at(STATIC, "/fonts/fixture.woff2", font));
    for i in 0..BACKGROUNDS {
        v.push(at(STATIC, format!("/bg/{i}.png"), png(1000 + i as u64)));
    }
    for i in 0..IMAGES {
        v.push(at(STATIC, format!("/img/{i:02}.png"), png(i as u64)));
    }
    for i in 0..JSON_FILES {
        let items: Vec<String> = (0..20)
            .map(|k| format!("{{\"k\": {k}, \"name\": \"item {i}-{k}\"}}"))
            .collect();
        v.push(at(
            API,
            format!("/data/{i}.json"),
            format!("{{\"id\": {i}, \"items\": [{}]}}\n", items.join(", ")).into_bytes(),
        ));
    }
    v
}

/// Writes the files below `dir/<host>/` (the layout `make_devtools_har.py` reads too).
pub fn write_files(dir: &Path) -> Vec<Resource> {
    let all = resources();
    for r in &all {
        let p = dir.join(r.host).join(r.file());
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, &r.bytes).unwrap();
    }
    all
}

/// A process the test started, ended by its process group id on drop (never by name).
pub struct ProcessGuard(pub Child);

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.0.try_wait() {
            return; // already ended (and reaped): its id may belong to another process now
        }
        let pgid = self.0.id() as i32;
        // SAFETY: signalling the process group this guard's child leads.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// The fixture served by Caddy inside its own namespace.
pub struct FixtureSite {
    // Dropped in this order: Caddy, then the namespace, then the files.
    caddy: ProcessGuard,
    pub ns: Namespace,
    pub dir: tempfile::TempDir,
    /// Host → its address on `lo` in the namespace.
    pub addresses: Vec<(&'static str, IpAddr)>,
    /// base64 SHA-256 of the certificate's SPKI (for `--ignore-cert-spki`).
    pub spki: String,
    pub resources: Vec<Resource>,
}

fn caddyfile(dir: &Path, addresses: &[(&str, IpAddr)], h3: bool) -> String {
    let d = |p: &str| dir.join(p).display().to_string();
    // h1 and h2 only unless asked: with h3 Chromium would switch protocols mid-page after
    // Alt-Svc (a recording of h3 forces QUIC from the first request instead).
    let protocols = if h3 { "h1 h2 h3" } else { "h1 h2" };
    let mut s = format!(
        "{{\n\tauto_https off\n\tadmin off\n\tstorage file_system {{\n\t\troot {}\n\t}}\n\
         \tservers {{\n\t\tprotocols {protocols}\n\t}}\n}}\n",
        d("caddy-data")
    );
    for (i, (host, ip)) in addresses.iter().enumerate() {
        // Unspecified: every address of the namespace (the host picked by SNI) — but for h3
        // the addresses in `SITE_IP<n>` and `NEAR_IP<n>` (if set) of Caddy's environment: a
        // QUIC answer must come from the address the client sent to, which a wildcard UDP
        // socket does not promise.
        let bind = if ip.is_unspecified() && h3 {
            format!("\tbind {{$SITE_IP{n}}} {{$NEAR_IP{n}}}\n", n = i + 1)
        } else if ip.is_unspecified() {
            String::new()
        } else {
            format!("\tbind {ip}\n")
        };
        s.push_str(&format!(
            "https://{host}:443 {{\n{bind}\ttls {} {}\n\tencode gzip\n",
            d("cert.pem"),
            d("key.pem")
        ));
        if *host == WWW {
            s.push_str("\tredir /old.css https://static.site.test/new.css 301\n");
            s.push_str(&format!("\theader / Set-Cookie \"{SESSION_COOKIE}\"\n"));
        } else {
            s.push_str("\theader Access-Control-Allow-Origin *\n");
        }
        s.push_str(&format!(
            "\troot * {}\n\tfile_server\n}}\n",
            d(&format!("site/{host}"))
        ));
    }
    s
}

/// Writes one certificate for the three names, its key and the Caddyfile serving `site/` of
/// `dir` at `addresses` into `dir`; returns the SPKI Chromium accepts the certificate by.
pub fn caddy_config(dir: &Path, addresses: &[(&str, IpAddr)], h3: bool) -> String {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let params =
        rcgen::CertificateParams::new(vec![WWW.into(), STATIC.into(), API.into()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    std::fs::write(dir.join("Caddyfile"), caddyfile(dir, addresses, h3)).unwrap();
    use rcgen::PublicKeyData;
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(key.subject_public_key_info()))
}

/// `caddy run` with the Caddyfile [`caddy_config`] wrote into `dir`.
pub fn caddy_args(dir: &Path) -> Vec<String> {
    let config = dir.join("Caddyfile").display().to_string();
    ["run", "--adapter", "caddyfile", "--config", &config]
        .map(String::from)
        .to_vec()
}

/// Caddy's HOME and data folders, inside `dir`.
pub fn caddy_env(dir: &Path) -> Vec<(String, PathBuf)> {
    vec![
        ("HOME".into(), dir.to_path_buf()),
        ("XDG_DATA_HOME".into(), dir.join("data")),
        ("XDG_CONFIG_HOME".into(), dir.join("config")),
    ]
}

impl FixtureSite {
    /// Writes the site, creates the namespace with the three addresses on `lo`, and starts
    /// Caddy there; returns once every origin accepts connections.
    pub fn start() -> FixtureSite {
        let dir = tempfile::Builder::new()
            .prefix("pagebench-site-")
            .tempdir()
            .unwrap();
        let resources = write_files(&dir.path().join("site"));
        let ns = Namespace::new("site").expect("create the fixture's namespace (needs root)");
        let addresses: Vec<(&'static str, IpAddr)> = [WWW, STATIC, API]
            .into_iter()
            .enumerate()
            .map(|(i, h)| (h, format!("10.77.0.{}", 11 + i).parse().unwrap()))
            .collect();
        for (_, ip) in &addresses {
            let st = Command::new("ip")
                .args([
                    "-n",
                    ns.name(),
                    "addr",
                    "add",
                    &format!("{ip}/32"),
                    "dev",
                    "lo",
                ])
                .status()
                .unwrap();
            assert!(st.success(), "ip addr add {ip} in {}", ns.name());
        }
        let spki = caddy_config(dir.path(), &addresses, false);
        let log = std::fs::File::create(dir.path().join("caddy.log")).unwrap();
        let mut cmd = ns.command("caddy");
        cmd.args(caddy_args(dir.path()))
            .envs(caddy_env(dir.path()))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0);
        let mut caddy = ProcessGuard(cmd.spawn().expect("start caddy (./setup.sh installs it)"));
        let deadline = Instant::now() + Duration::from_secs(20);
        for (_, ip) in &addresses {
            let addr = SocketAddr::new(*ip, 443);
            loop {
                if let Ok(Some(st)) = caddy.0.try_wait() {
                    panic!(
                        "caddy exited ({st}): {}",
                        std::fs::read_to_string(dir.path().join("caddy.log")).unwrap_or_default()
                    );
                }
                let up = ns
                    .run(move || {
                        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200))
                            .is_ok()
                    })
                    .unwrap();
                if up {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "caddy did not listen on {addr}: {}",
                    std::fs::read_to_string(dir.path().join("caddy.log")).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        FixtureSite {
            caddy,
            ns,
            dir,
            addresses,
            spki,
            resources,
        }
    }

    pub fn address(&self, host: &str) -> IpAddr {
        self.addresses
            .iter()
            .find(|(h, _)| *h == host)
            .map(|(_, ip)| *ip)
            .unwrap()
    }

    /// `https://HOST` of each origin.
    pub fn origins(&self) -> Vec<String> {
        self.addresses
            .iter()
            .map(|(h, _)| format!("https://{h}"))
            .collect()
    }

    /// Runs the built `pagebench record` inside the namespace into `out`.
    pub fn record(&self, out: &Path) -> Output {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", self.ns.name()])
            .arg(env!("CARGO_BIN_EXE_pagebench"))
            .args(["record", PAGE_URL, "--out"])
            .arg(out)
            .args(["--wait", "idle", "--timeout", "90s"])
            .args(["--ignore-cert-spki", &self.spki]);
        for (host, ip) in &self.addresses {
            cmd.arg("--resolve").arg(format!("{host}={ip}"));
        }
        cmd.stdin(Stdio::null()).process_group(0);
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The guard ends the recording (and its Chromium) if waiting panics.
        let mut guard = ProcessGuard(child);
        let stdout = guard.0.stdout.take();
        let stderr = guard.0.stderr.take();
        let (o, e) = (read_all(stdout), read_all(stderr));
        let status = guard.0.wait().unwrap();
        Output {
            status,
            stdout: o.join().unwrap(),
            stderr: e.join().unwrap(),
        }
    }
}

/// Runs `cmd` and returns its output; panics with its stderr if it fails.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn read_all<R: std::io::Read + Send + 'static>(
    pipe: Option<R>,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut v);
        }
        v
    })
}

/// Serves the fixture, records it into `out_dir/archive` and returns that directory (panics,
/// with the output, if the recording fails).
pub fn record_fixture(out_dir: &Path) -> PathBuf {
    let site = FixtureSite::start();
    let archive = out_dir.join("archive");
    let out = site.record(&archive);
    assert!(
        out.status.success(),
        "pagebench record failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    archive
}
