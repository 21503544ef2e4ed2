//! Starting and stopping one Chromium process: a fresh profile and HOME in a temporary
//! directory, the flags that force a protocol (or, for `record`, a normal browser's
//! negotiation: [`NaturalOptions`]), a DevTools pipe, its own process group (so the
//! whole tree can be ended by the group we created), and a settle wait after start-up.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;

use super::cdp::Cdp;
use crate::config::protocol::{H3Mode, Protocol};
use crate::evidence::run_record::BrowserOverhead;
use crate::evidence::visual::VisualSource;
use crate::measure::browser::resolver::PrivateNames;
use crate::measure::browser::sandbox::{self, Confinement};
use crate::measure::browser::{process_group, LaunchOptions, HOST};
use crate::support::cgroup::CpuGroup;
use crate::support::cpu_cap::{spawn_capped_as, startup_wait};
use crate::support::public_suffix;
use crate::support::signals;
use crate::support::tempdir::{self, TempDir};
use crate::support::unprivileged;

/// The real Chromium binary of Debian's package (`/usr/bin/chromium` is a wrapper script).
pub const CHROMIUM: &str = "/usr/lib/chromium/chromium";
/// A port nothing is served or requested on (discard): see the h3-discovered flags.
const UNUSED_PORT: u16 = 9;

/// A normal browser's networking, for `pagebench record`: no protocol forced (Chromium
/// negotiates h1/h2/h3 as it would for a user), the system resolver but for the given host
/// mappings, and certificate errors ignored only when asked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NaturalOptions {
    /// `HOST=IP` mappings (`--host-resolver-rules=MAP HOST IP`); none: the system resolver.
    pub resolve: Vec<(String, std::net::IpAddr)>,
    /// `--ignore-certificate-errors` (TCP only: QUIC ignores it).
    pub ignore_cert_errors: bool,
    /// base64 SHA-256 SPKIs for `--ignore-certificate-errors-spki-list` (QUIC honours these).
    pub ignore_cert_spki: Vec<String>,
    /// Origins (`host:port`) reached over QUIC from the first request
    /// (`--origin-to-force-quic-on`; it also lets QUIC accept a certificate under a root of
    /// `ignore_cert_spki`).
    pub force_quic: Vec<String>,
    /// Upper bound of the settle wait.
    pub settle_max: Duration,
}

/// The flags every launch gets: headless (or, on a virtual display, a full-screen window with
/// nothing but the page), no background traffic, a DevTools pipe; and `--no-sandbox` only when
/// the sandbox is off (`--no-browser-sandbox`: [`sandbox`]).
fn quiet_browser_args(on_display: bool) -> Vec<String> {
    // A fixed viewport: what the page paints (LCP, the filmstrip) does not depend on a default.
    // Full screen on X without a window manager, Chromium's page is a pixel narrower and
    // shorter than the window size given (1280×720 leaves a black edge of 1279×719's): one
    // more fills the 1280×720 screen (the page's viewport is then 1281×721).
    let window: &[&str] = if on_display {
        &[
            "--ozone-platform=x11",
            "--kiosk",
            "--window-position=0,0",
            "--window-size=1281,721",
        ]
    } else {
        &["--headless=new", "--window-size=1280,720"]
    };
    window
        .iter()
        .chain(&[
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--disable-breakpad",
        "--disable-domain-reliability",
        "--disable-client-side-phishing-detection",
        // The two omnibox pop-ups are WebUI pages Chromium preloads at start-up even
        // headless (chrome://omnibox-popup.top-chrome/ and its AI-mode variant): 0.5 CPU-s in a
        // renderer of their own, most of the start-up burst the settle wait waits out.
        "--disable-features=Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions,HttpsUpgrades,WebUIOmniboxPopup,WebUIOmniboxAimPopup",
        "--metrics-recording-only",
        "--password-store=basic",
        "--mute-audio",
        "--remote-debugging-pipe",
    ])
    .map(|s| s.to_string())
    .chain((!sandbox::engine_sandbox_on()).then(|| "--no-sandbox".to_string()))
    .collect()
}

/// The flag that exposes `chrome.benchmarking` to pages (a repeat view closes connections with
/// it: [`super::repeat`]).
pub const NET_BENCHMARKING: &str = "--enable-net-benchmarking";

/// The names Chromium looks up on its own (update, accounts, component and safe-browsing
/// services): 15 lookups of three of them in one load of page10 when nothing stopped them.
const BROWSER_SERVICE_NAMES: [&str; 3] = ["*.google.com", "*.googleapis.com", "*.gstatic.com"];

/// What a launch needs besides the command and its flags.
struct Start<'a> {
    network_state: Option<serde_json::Value>,
    settle_max: Duration,
    /// Directories the browser's user must be able to write.
    writes: &'a [PathBuf],
    /// An X display's name (a run that records video).
    display: Option<&'a str>,
    /// `--dns resolver`'s resolver.
    resolver: Option<std::net::IpAddr>,
    /// A device's CPU cap on every process of the browser.
    cap: Option<crate::config::device::CpuShare>,
}

/// Chromium's flags for one run (the profile directory is added by [`ChromiumProcess::launch`]).
pub fn chromium_args(o: &LaunchOptions) -> Vec<String> {
    let mut a = quiet_browser_args(o.visual == Some(VisualSource::Video));
    let hosts = o.host_map();
    // With a resolver, Chromium's own DNS client asks it (reading the resolv.conf of its
    // mount namespace) for A and HTTPS records alike; only its own services' names (looked up
    // during the load though background networking is off) fail at once, unless a page names
    // them.
    if o.resolver.is_some() {
        let mut rules: Vec<String> = BROWSER_SERVICE_NAMES
            .iter()
            .map(|n| format!("MAP {n} ~NOTFOUND"))
            .collect();
        rules.extend(hosts.iter().map(|(h, _)| format!("EXCLUDE {h}")));
        a.push(format!("--host-resolver-rules={}", rules.join(", ")));
    } else {
        let rules: Vec<String> = hosts
            .iter()
            .map(|(h, ip)| format!("MAP {h} {ip}"))
            .collect();
        a.push(format!(
            "--host-resolver-rules={}, MAP * ~NOTFOUND",
            rules.join(", ")
        ));
    }
    a.push(format!("--ignore-certificate-errors-spki-list={}", o.spki));
    if o.repeat.is_some() {
        a.push(NET_BENCHMARKING.into());
    }
    if let Some(path) = &o.key_log {
        a.push(format!("--ssl-key-log-file={}", path.display()));
    }
    if let Some((path, mode)) = &o.net_log {
        a.push(format!("--log-net-log={}", path.display()));
        a.push(format!("--net-log-capture-mode={}", mode.chromium_flag()));
    }
    if !o.as_recorded.is_empty() {
        let quic: Vec<String> = o
            .as_recorded_quic()
            .into_iter()
            .map(|(h, port)| format!("{h}:{port}"))
            .collect();
        a.push("--enable-quic".into());
        if !quic.is_empty() {
            a.push(format!("--origin-to-force-quic-on={}", quic.join(",")));
        }
        a.extend(o.extra_args.iter().cloned());
        a.push("about:blank".into());
        return a;
    }
    match o.protocol {
        // --disable-http2 alone is not enough: QUIC could still take over.
        Protocol::H1 => {
            a.push("--disable-http2".into());
            a.push("--disable-quic".into());
        }
        Protocol::H2 => a.push("--disable-quic".into()),
        // Discovered (or announced by DNS): nothing forced, QUIC as Chromium finds it from the
        // server's Alt-Svc (or the HTTPS record's alpn). But
        // Chromium's QUIC refuses a certificate that is not under a built-in root unless its
        // host is named in --origin-to-force-quic-on (ProofVerifierChromium's
        // ShouldAllowUnknownRootForHost, which looks at the host only): naming each host on
        // port 9, which nothing requests, lets the certificate through and forces nothing.
        Protocol::H3 if matches!(o.h3_mode, H3Mode::Discovered | H3Mode::Dns) => {
            a.push("--enable-quic".into());
            let decoys: Vec<String> = hosts
                .iter()
                .map(|(h, _)| format!("{h}:{UNUSED_PORT}"))
                .collect();
            a.push(format!("--origin-to-force-quic-on={}", decoys.join(",")));
        }
        Protocol::H3 => {
            a.push("--enable-quic".into());
            let origins: Vec<String> = o
                .quic_origins()
                .into_iter()
                .map(|(h, port)| format!("{h}:{port}"))
                .collect();
            a.push(format!("--origin-to-force-quic-on={}", origins.join(",")));
        }
    }
    a.extend(o.extra_args.iter().cloned());
    a.push("about:blank".into());
    a
}

/// Chromium's flags for a natural-protocol launch ([`NaturalOptions`]).
pub fn natural_args(o: &NaturalOptions) -> Vec<String> {
    let mut a = quiet_browser_args(false);
    if !o.resolve.is_empty() {
        let rules: Vec<String> = o
            .resolve
            .iter()
            .map(|(host, ip)| match ip {
                std::net::IpAddr::V6(v6) => format!("MAP {host} [{v6}]"),
                std::net::IpAddr::V4(v4) => format!("MAP {host} {v4}"),
            })
            .collect();
        a.push(format!("--host-resolver-rules={}", rules.join(", ")));
    }
    if o.ignore_cert_errors {
        a.push("--ignore-certificate-errors".into());
    }
    if !o.ignore_cert_spki.is_empty() {
        a.push(format!(
            "--ignore-certificate-errors-spki-list={}",
            o.ignore_cert_spki.join(",")
        ));
    }
    if !o.force_quic.is_empty() {
        a.push("--enable-quic".into());
        a.push(format!(
            "--origin-to-force-quic-on={}",
            o.force_quic.join(",")
        ));
    }
    a.push("about:blank".into());
    a
}

/// Chromium's internal time: microseconds since 1601-01-01 (for expiry fields).
fn chromium_time_us(t: std::time::SystemTime) -> u64 {
    const EPOCH_DELTA_US: u64 = 11_644_473_600_000_000;
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
        + EPOCH_DELTA_US
}

/// The schemeful site of `host`: its registrable domain by the Public Suffix List, as
/// Chromium's (`shop.example.co.uk` → `https://example.co.uk`).
fn schemeful_site(host: &str) -> String {
    format!("https://{}", public_suffix::registrable(host))
}

/// Chromium's serialised NetworkAnonymizationKey for a top-level navigation to `https://host`:
/// a base::Pickle of the schemeful site (u32 payload size, u32 string length, bytes padded to
/// 4), then "is cross-site" and the nonce flag — as Chromium itself writes it.
fn anonymization_key(top_host: &str) -> serde_json::Value {
    use base64::Engine;
    let site = schemeful_site(top_host);
    let padded = site.len().div_ceil(4) * 4;
    let mut pickle = Vec::new();
    pickle.extend(((4 + padded) as u32).to_le_bytes());
    pickle.extend((site.len() as u32).to_le_bytes());
    pickle.extend(site.as_bytes());
    pickle.resize(8 + padded, 0);
    json!([
        base64::engine::general_purpose::STANDARD.encode(pickle),
        false,
        0
    ])
}

/// The `Network Persistent State` file that tells Chromium each of `hosts` speaks h3 on
/// `port` (the first host is the page's: the top-level site of every entry), in the form
/// Chromium itself writes after seeing `Alt-Svc: h3=":port"`.
pub fn primed_network_state(hosts: &[&str], port: u16) -> serde_json::Value {
    let expires = chromium_time_us(std::time::SystemTime::now() + Duration::from_secs(30 * 86400));
    let top = hosts.first().copied().unwrap_or(HOST);
    let anonymization = anonymization_key(top);
    let servers: Vec<serde_json::Value> = hosts
        .iter()
        .map(|h| {
            json!({
                "alternative_service": [{
                    "advertised_alpns": ["h3"],
                    "expiration": expires.to_string(),
                    "port": port,
                    "protocol_str": "quic"
                }],
                "anonymization": anonymization,
                "server": format!("https://{h}:{port}"),
                "supports_spdy": true
            })
        })
        .collect();
    json!({
        "net": {
            "http_server_properties": {
                "servers": servers,
                "version": 5
            }
        }
    })
}

/// Writes a fresh profile: prediction off (else Chromium preconnects at navigation start and
/// the navigation's connect time reads 0), and a `Network Persistent State` (the primed QUIC
/// state) when given.
pub fn write_profile(dir: &Path, network_state: Option<serde_json::Value>) -> Result<()> {
    let default = dir.join("Default");
    std::fs::create_dir_all(&default)
        .with_context(|| format!("cannot create {}", default.display()))?;
    let prefs = json!({ "net": { "network_prediction_options": 2 } });
    std::fs::write(default.join("Preferences"), prefs.to_string())?;
    if let Some(state) = network_state {
        std::fs::write(default.join("Network Persistent State"), state.to_string())?;
    }
    Ok(())
}

/// A running Chromium with its DevTools pipe.
pub struct ChromiumProcess {
    child: Child,
    pub cdp: Cdp,
    pgid: i32,
    /// The profile, HOME and TMPDIR; removed by `close` (and by drop if launching fails).
    tmp: TempDir,
    stderr_path: PathBuf,
    pub overhead: BrowserOverhead,
    /// `Chromium 156.0.…`, from `Browser.getVersion`.
    pub version: Option<String>,
    /// A repeat view's first navigation, made during the launch.
    pub first_view: Option<crate::evidence::metrics::FirstView>,
    _cleanup: signals::CleanupGuard,
    /// Where the browser's processes are counted; removed by `close` once they are gone.
    cpu_group: Option<CpuGroup>,
    /// Who its processes ran as and whether its sandbox was on, read once it settled.
    pub confinement: Option<Confinement>,
    closed: bool,
}

fn pipe_cloexec() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two fds on success.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        bail!("pipe2: {}", std::io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Moves an fd above 10 so that the child's dup2 onto 3 and 4 cannot clobber it.
fn high_fd(fd: OwnedFd) -> Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new fd we own.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
    if n < 0 {
        bail!(
            "fcntl(F_DUPFD_CLOEXEC): {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

impl ChromiumProcess {
    /// The process group every Chromium process of this launch is in.
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Launches Chromium with `cmd` as the process to run (e.g. a namespace's
    /// `command(CHROMIUM)`, which makes the child enter the client namespace), a fresh temporary
    /// profile and HOME, and the flags for `o`; waits for DevTools and for the start-up burst.
    /// A repeat view's first navigation is not made here: [`crate::measure::browser::returning_visitor::first_view`] makes
    /// it next (it loads pages, which needs [`super::load`], which needs this process).
    /// On `display` (an X display's name) when the run records video.
    pub fn launch(
        cmd: Command,
        o: &LaunchOptions,
        display: Option<&str>,
    ) -> Result<ChromiumProcess> {
        let primed = o.protocol == Protocol::H3 && o.h3_mode == H3Mode::Primed;
        let hosts = o.host_map();
        let names: Vec<&str> = hosts.iter().map(|(h, _)| h.as_str()).collect();
        let state = primed.then(|| primed_network_state(&names, o.port));
        let writes: Vec<PathBuf> = [o.key_log.as_ref(), o.net_log.as_ref().map(|(p, _)| p)]
            .into_iter()
            .flatten()
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .collect();
        let start = Start {
            network_state: state,
            settle_max: o.settle_max,
            writes: &writes,
            display,
            resolver: o.resolver,
            cap: o.device.cap(),
        };
        Self::start(cmd, chromium_args(o), start)
    }

    /// Launches Chromium as a normal browser ([`NaturalOptions`]: no protocol forced), with
    /// `cmd` as the process to run.
    pub fn launch_natural(cmd: Command, o: &NaturalOptions) -> Result<ChromiumProcess> {
        let start = Start {
            network_state: None,
            settle_max: o.settle_max,
            writes: &[],
            display: None,
            resolver: None,
            cap: None,
        };
        Self::start(cmd, natural_args(o), start)
    }

    fn start(mut cmd: Command, args: Vec<String>, start: Start) -> Result<ChromiumProcess> {
        let Start {
            network_state,
            settle_max,
            writes,
            display,
            resolver,
            cap,
        } = start;
        if !Path::new(CHROMIUM).exists() {
            bail!("{CHROMIUM} not found: install Debian's chromium package (./setup.sh does)");
        }
        let tmp = tempdir::create("browser")?;
        let profile = tmp.path().join("profile");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home)?;
        // Chromium's own temporary files (e.g. its singleton socket directory) go below the
        // run's directory, so a killed browser leaves nothing in /tmp that cleanup misses.
        let browser_tmp = tmp.path().join("tmp");
        std::fs::create_dir_all(&browser_tmp)?;
        write_profile(&profile, network_state)?;
        let stderr_path = tmp.path().join("chromium.stderr");
        let stderr = std::fs::File::create(&stderr_path)?;
        // Only localhost in its hosts file and the resolver as its name server.
        let names = resolver
            .map(|ip| PrivateNames::write(tmp.path(), &[], Some(ip)))
            .transpose()?;
        let user = sandbox::browser_user();
        if let Some(user) = user {
            let mut dirs: Vec<&Path> = writes.iter().map(PathBuf::as_path).collect();
            dirs.push(tmp.path());
            unprivileged::hand_over(user, &dirs)?;
        }

        let (child_in, parent_out) = pipe_cloexec()?; // parent writes commands → child fd 3
        let (parent_in, child_out) = pipe_cloexec()?; // child writes replies (fd 4) → parent
        let child_in = high_fd(child_in)?;
        let child_out = high_fd(child_out)?;
        let (cin, cout) = (child_in.as_raw_fd(), child_out.as_raw_fd());

        cmd.args(args)
            .arg(format!("--user-data-dir={}", profile.display()))
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("TMPDIR", &browser_tmp)
            .env_remove("DISPLAY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .process_group(0);
        if let Some(d) = display {
            cmd.env("DISPLAY", d);
        }
        if let Some(names) = &names {
            names.mount_on_exec(&mut cmd);
        }
        // SAFETY: only async-signal-safe calls (dup2) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(cin, 3) < 0 || libc::dup2(cout, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let started = Instant::now();
        let (child, cpu_group) = spawn_capped_as(&mut cmd, user, cap)
            .with_context(|| format!("cannot start {CHROMIUM}"))?;
        drop(child_in);
        drop(child_out);
        let pgid = child.id() as i32;
        let tmp_for_cleanup = tmp.path().to_path_buf();
        let guard = signals::register_cleanup(move || {
            // SAFETY: signalling the process group we created.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = std::fs::remove_dir_all(&tmp_for_cleanup);
        });
        let cdp = Cdp::new(parent_out, parent_in)?;
        let mut browser = ChromiumProcess {
            child,
            cdp,
            pgid,
            tmp,
            stderr_path,
            overhead: BrowserOverhead::default(),
            version: None,
            first_view: None,
            _cleanup: guard,
            cpu_group,
            confinement: None,
            closed: false,
        };
        browser.ask_version(startup_wait(Duration::from_secs(30), cap))?;
        browser.overhead.launch_ms = started.elapsed().as_secs_f64() * 1e3;
        let settle = process_group::settle(pgid, settle_max, cap.map_or(1.0, |c| c.cores()));
        settle.count_into(&mut browser.overhead);
        browser.confinement = Some(sandbox::observe(pgid));
        Ok(browser)
    }

    /// Asks the started browser for its version over DevTools; one that does not answer is
    /// closed, and its launch fails with the last lines of its stderr.
    fn ask_version(&mut self, wait: Duration) -> Result<()> {
        let version = self.cdp.call(None, "Browser.getVersion", json!({}), wait);
        match version {
            Ok(v) => {
                self.version = v["product"].as_str().map(|p| {
                    p.replace("HeadlessChrome/", "Chromium ")
                        .replace("Chrome/", "Chromium ")
                })
            }
            Err(e) => {
                let tail = self.stderr_tail();
                self.close();
                bail!("Chromium did not answer on its DevTools pipe: {e}; stderr: {tail}");
            }
        }
        Ok(())
    }

    /// The temporary profile directory (removed by [`ChromiumProcess::close`]).
    pub fn profile_dir(&self) -> PathBuf {
        self.tmp.path().join("profile")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines Chromium wrote to stderr (for crash reports).
    pub fn stderr_tail(&self) -> String {
        process_group::stderr_tail(&self.stderr_path)
    }

    /// True when the browser process has exited (crashed, or was closed).
    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Closes the browser: `Browser.close`, then SIGTERM and SIGKILL to its process group if
    /// it lingers; removes the temporary profile. Records the teardown time.
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        let t = Instant::now();
        let _ = self
            .cdp
            .call(None, "Browser.close", json!({}), Duration::from_secs(3));
        process_group::end_group(&mut self.child, self.pgid, Duration::from_secs(5));
        self.cpu_group = None;
        let _ = std::fs::remove_dir_all(self.tmp.path());
        self.overhead.teardown_ms = t.elapsed().as_secs_f64() * 1e3;
    }
}

impl Drop for ChromiumProcess {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(p: Protocol) -> LaunchOptions {
        LaunchOptions::fixture(p)
    }

    #[test]
    fn flags_force_each_protocol() {
        let h1 = chromium_args(&opts(Protocol::H1));
        assert!(
            h1.contains(&"--disable-http2".to_string())
                && h1.contains(&"--disable-quic".to_string())
        );
        let h2 = chromium_args(&opts(Protocol::H2));
        assert!(
            !h2.contains(&"--disable-http2".to_string())
                && h2.contains(&"--disable-quic".to_string())
        );
        let h3 = chromium_args(&opts(Protocol::H3));
        assert!(h3.contains(&"--origin-to-force-quic-on=pagebench.test:443".to_string()));
        assert!(h3
            .iter()
            .any(|a| a == "--host-resolver-rules=MAP pagebench.test 10.1.2.2, MAP * ~NOTFOUND"));
        assert!(h3
            .iter()
            .any(|a| a == "--ignore-certificate-errors-spki-list=abc="));
        // Discovered forces nothing on the served port; the decoy port lets QUIC take the
        // certificate. A repeat view can call chrome.benchmarking.
        let mut o = opts(Protocol::H3);
        o.h3_mode = H3Mode::Discovered;
        o.repeat = Some(crate::measure::browser::RepeatView {
            url: "https://pagebench.test/page10/index.html".into(),
            cache: crate::config::identity::RepeatCache::Clear,
        });
        let d = chromium_args(&o);
        assert!(d.contains(&"--origin-to-force-quic-on=pagebench.test:9".to_string()));
        assert!(!d.iter().any(|a| a.contains("pagebench.test:443")), "{d:?}");
        assert!(d.contains(&"--enable-net-benchmarking".to_string()));
        assert!(!h3.contains(&"--enable-net-benchmarking".to_string()));
    }

    #[test]
    fn a_natural_launch_forces_nothing_and_maps_only_what_it_is_told() {
        let plain = natural_args(&NaturalOptions::default());
        assert!(
            !plain.iter().any(|a| a.contains("quic")
                || a.contains("http2")
                || a.contains("host-resolver-rules")
                || a.contains("ignore-certificate")),
            "{plain:?}"
        );
        assert_eq!(plain.last().map(String::as_str), Some("about:blank"));
        let mapped = natural_args(&NaturalOptions {
            resolve: vec![
                ("www.site.test".into(), "10.0.0.1".parse().unwrap()),
                ("v6.site.test".into(), "2001:db8::1".parse().unwrap()),
            ],
            ignore_cert_errors: true,
            ignore_cert_spki: vec!["a=".into(), "b=".into()],
            force_quic: vec!["www.site.test:443".into(), "cdn.site.test:8443".into()],
            settle_max: Duration::ZERO,
        });
        assert!(mapped.contains(
            &"--origin-to-force-quic-on=www.site.test:443,cdn.site.test:8443".to_string()
        ));
        assert!(mapped.contains(&"--enable-quic".to_string()));
        assert!(mapped.contains(
            &"--host-resolver-rules=MAP www.site.test 10.0.0.1, MAP v6.site.test [2001:db8::1]"
                .to_string()
        ));
        assert!(mapped.contains(&"--ignore-certificate-errors".to_string()));
        assert!(mapped.contains(&"--ignore-certificate-errors-spki-list=a=,b=".to_string()));
        // The quiet-browser flags are the measured runs' own.
        let run = chromium_args(&opts(Protocol::H2));
        assert!(plain[..plain.len() - 1].iter().all(|a| run.contains(a)));
    }

    #[test]
    fn anonymization_key_matches_what_chromium_writes() {
        // Copied from a profile Chromium 156 wrote after loading https://pagebench.test:8443/.
        assert_eq!(
            anonymization_key(HOST),
            json!(["HAAAABYAAABodHRwczovL3BhZ2ViZW5jaC50ZXN0AAA=", false, 0])
        );
        let site = schemeful_site;
        assert_eq!(site("static.site.test"), "https://site.test");
        assert_eq!(site("pagebench.test"), "https://pagebench.test");
        assert_eq!(site("s2.pagebench.test"), "https://pagebench.test");
        assert_eq!(site("shop.example.co.uk"), "https://example.co.uk");
    }

    #[test]
    fn every_host_of_a_site_is_mapped_and_forced() {
        let mut o = opts(Protocol::H3);
        o.hosts = vec![
            ("www.site.test".into(), "10.1.2.2".parse().unwrap()),
            ("static.site.test".into(), "10.250.0.1".parse().unwrap()),
        ];
        let a = chromium_args(&o);
        assert!(a.contains(
            &"--host-resolver-rules=MAP www.site.test 10.1.2.2, MAP static.site.test 10.250.0.1, MAP * ~NOTFOUND"
                .to_string()
        ));
        assert!(a.contains(
            &"--origin-to-force-quic-on=www.site.test:443,static.site.test:443".to_string()
        ));
        // As recorded: nothing disabled, only the origins recorded over h3 forced onto it.
        o.as_recorded = vec![
            ("www.site.test".into(), Protocol::H2),
            ("static.site.test".into(), Protocol::H3),
        ];
        let a = chromium_args(&o);
        assert!(
            !a.iter()
                .any(|f| f == "--disable-quic" || f == "--disable-http2"),
            "{a:?}"
        );
        assert!(a.contains(&"--origin-to-force-quic-on=static.site.test:443".to_string()));
        let state = primed_network_state(&["www.site.test", "static.site.test"], 443);
        let servers = &state["net"]["http_server_properties"]["servers"];
        assert_eq!(servers[1]["server"], "https://static.site.test:443");
        assert_eq!(servers[0]["anonymization"], servers[1]["anonymization"]);
    }

    #[test]
    fn chromium_epoch() {
        let t = std::time::UNIX_EPOCH;
        assert_eq!(chromium_time_us(t), 11_644_473_600_000_000);
    }
}
