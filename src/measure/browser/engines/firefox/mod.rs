//! Firefox as a [`Browser`]: Debian's `firefox-esr`, headless, a fresh profile per launch (prefs
//! in `user.js`, the server certificate trusted in the profile's NSS database), driven over
//! WebDriver BiDi on `--remote-debugging-port` (no geckodriver). The WebSocket is opened from
//! inside the client namespace, where Firefox listens on its loopback.
//!
//! Protocols (verified on Firefox ESR 153): h1 = HTTP/2 and HTTP/3 off; h2 = HTTP/3 off; h3 forced = the
//! alt-svc testing mapping with `force-use`; h3 primed = the same mapping without `force-use`,
//! which Firefox treats like an Alt-Svc it learnt (a returning visitor's state). Every h3 arm
//! also needs `disable_when_third_party_roots_found = false`, else Firefox silently drops h3
//! for a certificate that is not under a built-in root.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

pub mod bidi;
pub mod har;
pub mod network;
mod repeat;

use crate::config::identity::BrowserId;
use crate::config::protocol::{H3Mode, Protocol};
use crate::config::workload::WorkloadKind;
use crate::evidence::engine_tells::{EngineTells, Unmeasurable};
use crate::evidence::metrics::{DevtoolsEvent, FirstView, Observation};
use crate::evidence::run_record::BrowserOverhead;
use crate::evidence::validate::LoadEnd;
use crate::evidence::visual::VisualSource;
use crate::measure::browser::resolver::PrivateNames;
use crate::measure::browser::sandbox::{self, Confinement};
use crate::measure::browser::video::{self, VirtualDisplay};
use crate::measure::browser::{
    process_group, scripts, Asked, Browser, ClientSide, Engine, LaunchOptions,
};
use crate::support::cgroup::CpuGroup;
use crate::support::cpu_cap::{spawn_capped_as, startup_wait};
use crate::support::signals;
use crate::support::tempdir::{self, TempDir};
use crate::support::unprivileged;
use bidi::{Bidi, BidiError};
use std::borrow::Cow;

/// The flag that opens chrome contexts to the BiDi client (added only for repeat views).
pub const SYSTEM_ACCESS: &str = "--remote-allow-system-access";
/// The real binary of Debian's package (`/usr/bin/firefox-esr` links to it).
pub const FIREFOX: &str = "/usr/lib/firefox-esr/firefox-esr";
/// NSS's database tool (Debian's libnss3-tools), to trust the server certificate.
pub const CERTUTIL: &str = "/usr/bin/certutil";
/// The oldest Firefox whose BiDi, HTTP/3 prefs and paint entries pagebench relies on (ESR 128).
pub const MIN_MAJOR: u32 = 128;

/// A closed port on the client namespace's loopback, not on Firefox's banned-port list: the
/// warm-up navigation is refused at once, without a packet on the link.
const WARMUP_URL: &str = "https://127.0.0.1:2/";
/// How long the alt-svc storage is given after the warm-up: until it is ready, Firefox skips
/// the h3 mapping and the first navigation goes over h2 (with this pause: h3 in 5 of 5 probes).
const WARMUP_PAUSE: Duration = Duration::from_millis(500);

/// The BiDi events a load keeps (network events of its own browsing context).
const KEPT_EVENTS: [&str; 4] = [
    "network.beforeRequestSent",
    "network.responseStarted",
    "network.responseCompleted",
    "network.fetchError",
];

/// The installed Firefox's version (`153.8.0esr`), from `application.ini` beside the binary;
/// an error naming the fix when it is missing or older than ESR [`MIN_MAJOR`].
pub fn installed_version() -> Result<String> {
    let fix = "install Debian's firefox-esr and libnss3-tools (./setup.sh does)";
    if !Path::new(FIREFOX).exists() {
        bail!("{FIREFOX} not found: {fix}");
    }
    if !Path::new(CERTUTIL).exists() {
        bail!("{CERTUTIL} not found (Firefox's certificate database tool): {fix}");
    }
    let ini = Path::new(FIREFOX).with_file_name("application.ini");
    let text =
        std::fs::read_to_string(&ini).with_context(|| format!("reading {}", ini.display()))?;
    let version = application_version(&text)
        .ok_or_else(|| anyhow!("{} has no Version line: {fix}", ini.display()))?;
    check_version(&version)?;
    Ok(version)
}

/// `Version=153.8.0esr` of an `application.ini`.
fn application_version(ini: &str) -> Option<String> {
    ini.lines()
        .find_map(|l| l.trim().strip_prefix("Version="))
        .map(|v| v.trim().to_string())
}

fn check_version(version: &str) -> Result<()> {
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| anyhow!("cannot read Firefox's version {version:?}"))?;
    if major < MIN_MAJOR {
        bail!(
            "Firefox {version} is too old: pagebench needs Firefox ESR {MIN_MAJOR} or newer \
             (WebDriver BiDi network events, the HTTP/3 testing prefs); upgrade Debian's \
             firefox-esr (apt-get install firefox-esr)"
        );
    }
    Ok(())
}

/// A `user.js` value.
#[derive(Debug, Clone, PartialEq)]
pub enum Pref {
    Bool(bool),
    Int(i64),
    Str(String),
}

impl Pref {
    fn js(&self) -> String {
        match self {
            Pref::Bool(b) => b.to_string(),
            Pref::Int(i) => i.to_string(),
            Pref::Str(s) => Value::String(s.clone()).to_string(),
        }
    }
}

/// Prefs every launch gets: names resolve only as pagebench says (no DoH, no IPv6, no
/// HTTPS-RR/ECH lookups), nothing in the background (captive portal, connectivity checks,
/// speculative connections, prefetch, safe browsing, telemetry, updates, remote settings,
/// OCSP), and full-precision timers.
fn quiet_prefs() -> Vec<(&'static str, Pref)> {
    use Pref::*;
    vec![
        ("network.trr.mode", Int(5)),
        ("network.dns.disableIPv6", Bool(true)),
        ("network.dns.native_https_query", Bool(false)),
        ("network.dns.use_https_rr_as_altsvc", Bool(false)),
        ("network.dns.echconfig.enabled", Bool(false)),
        ("network.dns.http3_echconfig.enabled", Bool(false)),
        ("network.dns.disablePrefetch", Bool(true)),
        ("network.proxy.type", Int(0)),
        ("network.captive-portal-service.enabled", Bool(false)),
        ("network.connectivity-service.enabled", Bool(false)),
        ("network.prefetch-next", Bool(false)),
        ("network.predictor.enabled", Bool(false)),
        // No preconnect at navigation start (Chromium: network_prediction_options = 2).
        ("network.http.speculative-parallel-limit", Int(0)),
        ("browser.safebrowsing.malware.enabled", Bool(false)),
        ("browser.safebrowsing.phishing.enabled", Bool(false)),
        ("browser.safebrowsing.downloads.enabled", Bool(false)),
        ("browser.safebrowsing.blockedURIs.enabled", Bool(false)),
        (
            "browser.safebrowsing.provider.google4.updateURL",
            Str(String::new()),
        ),
        (
            "browser.safebrowsing.provider.mozilla.updateURL",
            Str(String::new()),
        ),
        ("datareporting.policy.dataSubmissionEnabled", Bool(false)),
        ("datareporting.healthreport.uploadEnabled", Bool(false)),
        ("toolkit.telemetry.enabled", Bool(false)),
        ("toolkit.telemetry.unified", Bool(false)),
        ("toolkit.telemetry.server", Str(String::new())),
        ("app.normandy.enabled", Bool(false)),
        ("app.update.auto", Bool(false)),
        ("app.update.checkInstallTime", Bool(false)),
        ("extensions.update.enabled", Bool(false)),
        ("extensions.getAddons.cache.enabled", Bool(false)),
        ("extensions.blocklist.enabled", Bool(false)),
        ("browser.search.update", Bool(false)),
        ("browser.startup.page", Int(0)),
        ("browser.startup.homepage", Str("about:blank".into())),
        (
            "browser.startup.homepage_override.mstone",
            Str("ignore".into()),
        ),
        ("browser.newtabpage.enabled", Bool(false)),
        ("browser.shell.checkDefaultBrowser", Bool(false)),
        ("browser.aboutwelcome.enabled", Bool(false)),
        ("security.OCSP.enabled", Int(0)),
        (
            "security.remote_settings.crlite_filters.enabled",
            Bool(false),
        ),
        // Honoured with MOZ_REMOTE_SETTINGS_DEVTOOLS=1: a dead loopback address.
        (
            "services.settings.server",
            Str("http://127.0.0.1:9/v1".into()),
        ),
        ("media.gmp-manager.url", Str("http://127.0.0.1:9/".into())),
        ("network.http.rcwn.enabled", Bool(false)),
        ("privacy.reduceTimerPrecision", Bool(false)),
    ]
}

/// Every pref of one launch: the quiet ones, name resolution (from the hosts file of the
/// browser's own mount namespace only: [`crate::measure::browser::resolver`]), and the protocol's.
pub fn prefs(o: &LaunchOptions) -> Result<Vec<(&'static str, Pref)>> {
    use Pref::*;
    let mut p = quiet_prefs();
    if o.visual == Some(VisualSource::Video) {
        // Reads the profile's chrome/userChrome.css (WHITE_TAB_PANEL).
        p.push((
            "toolkit.legacyUserProfileCustomizations.stylesheets",
            Bool(true),
        ));
    }
    // No DNS over HTTPS. HTTPS records only when a resolver answers (Firefox then asks for
    // them natively, through the C library's resolver, and takes their `alpn` as an Alt-Svc).
    p.push(("network.trr.mode", Int(5)));
    let https_rr = o.resolver.is_some();
    p.push(("network.dns.native_https_query", Bool(https_rr)));
    p.push(("network.dns.use_https_rr_as_altsvc", Bool(https_rr)));
    // A replayed `http://` page stays plain: no upgrade to https first.
    p.push(("dom.security.https_first", Bool(false)));
    p.push(("dom.security.https_first_schemeless", Bool(false)));
    let quic_hosts: Vec<(String, u16)> = if o.as_recorded.is_empty() {
        match o.protocol {
            Protocol::H1 => {
                p.push(("network.http.http2.enabled", Bool(false)));
                p.push(("network.http.http3.enable", Bool(false)));
                vec![]
            }
            Protocol::H2 => {
                p.push(("network.http.http3.enable", Bool(false)));
                vec![]
            }
            Protocol::H3 if o.h3_mode == H3Mode::Discovered => {
                bail!("h3-discovered (the h3 a returning visitor learnt from Alt-Svc) runs in Chromium only")
            }
            // Nothing mapped: h3 only as the HTTPS record announces it.
            Protocol::H3 if o.h3_mode == H3Mode::Dns => {
                if o.resolver.is_none() {
                    bail!("h3-dns needs --dns resolver: the HTTPS record is its only hint");
                }
                p.push(("network.http.http3.enable", Bool(true)));
                vec![]
            }
            Protocol::H3 => o.quic_origins(),
        }
    } else {
        // Each origin on its recorded protocol: QUIC mapped for the h3 origins only; the server
        // answers an h1 origin's TLS hello with HTTP/1.1 alone.
        o.as_recorded_quic()
    };
    if (o.protocol == Protocol::H3 && o.h3_mode != H3Mode::Dns) || !o.as_recorded.is_empty() {
        let mapping: Vec<String> = quic_hosts
            .iter()
            .map(|(h, port)| format!("{h};h3=:{port}"))
            .collect();
        p.push(("network.http.http3.enable", Bool(true)));
        p.push((
            "network.http.http3.alt-svc-mapping-for-testing",
            Str(mapping.join(",")),
        ));
        p.push((
            "network.http.http3.force-use-alt-svc-mapping-for-testing",
            Bool(o.h3_mode == H3Mode::Forced || !o.as_recorded.is_empty()),
        ));
    }
    // Without it Firefox drops h3 (and only h3) for a certificate under a non-built-in root.
    p.push((
        "network.http.http3.disable_when_third_party_roots_found",
        Bool(false),
    ));
    Ok(p)
}

/// The `user.js` text of `prefs`.
pub fn user_js(prefs: &[(&str, Pref)]) -> String {
    prefs
        .iter()
        .map(|(k, v)| format!("user_pref({}, {});\n", Value::String(k.to_string()), v.js()))
        .collect()
}

/// Writes a fresh profile: `user.js`, and an NSS database that trusts `cert_pem` as the
/// issuer of TLS servers (the self-signed leaf is its own anchor; `P,,` is not enough).
fn write_profile(dir: &Path, prefs: &str, cert_pem: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(dir.join("user.js"), prefs)?;
    let cert = dir.join("pagebench-cert.pem");
    std::fs::write(&cert, cert_pem)?;
    let db = format!("sql:{}", dir.display());
    let certutil = |args: &[&str]| -> Result<()> {
        let out = Command::new(CERTUTIL)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {CERTUTIL}: install libnss3-tools"))?;
        if !out.status.success() {
            bail!(
                "certutil {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    };
    certutil(&["-N", "-d", &db, "--empty-password"])?;
    let cert_path = cert.display().to_string();
    certutil(&[
        "-A",
        "-d",
        &db,
        "-n",
        crate::config::workload::PAGE_HOST,
        "-t",
        "C,,",
        "-i",
        &cert_path,
    ])
}

/// `WebDriver BiDi listening on ws://127.0.0.1:PORT` → the port.
fn bidi_port(stderr: &str) -> Option<u16> {
    stderr.lines().find_map(|l| {
        let url = l.split("WebDriver BiDi listening on ws://").nth(1)?;
        url.trim()
            .rsplit(':')
            .next()?
            .trim_end_matches('/')
            .parse()
            .ok()
    })
}

/// A running Firefox with its BiDi session and the browsing context pages load in.
struct FirefoxProcess {
    child: Child,
    bidi: Bidi,
    context: String,
    pgid: i32,
    /// The profile, HOME and TMPDIR; removed by `close`.
    tmp: TempDir,
    stderr_path: PathBuf,
    version: String,
    overhead: BrowserOverhead,
    _cleanup: signals::CleanupGuard,
    /// Where the browser's processes are counted; removed by `close` once they are gone.
    cpu_group: Option<CpuGroup>,
    /// Who its processes ran as and whether its sandbox was on, read once it settled.
    confinement: Confinement,
    /// A repeat view's first navigation, made during the launch ([`crate::measure::browser::returning_visitor::first_view`]).
    first_view: Option<FirstView>,
    closed: bool,
}

impl FirefoxProcess {
    /// On `display` (an X display's name) when the run records video.
    fn launch(
        client: &dyn ClientSide,
        o: &LaunchOptions,
        display: Option<&str>,
    ) -> Result<FirefoxProcess> {
        installed_version()?;
        let tmp = tempdir::create("firefox")?;
        let profile = tmp.path().join("profile");
        let home = tmp.path().join("home");
        let browser_tmp = tmp.path().join("tmp");
        std::fs::create_dir_all(&home)?;
        std::fs::create_dir_all(&browser_tmp)?;
        write_profile(&profile, &user_js(&prefs(o)?), &o.cert_pem)?;
        if display.is_some() {
            let chrome = profile.join("chrome");
            std::fs::create_dir_all(&chrome)?;
            std::fs::write(chrome.join("userChrome.css"), WHITE_TAB_PANEL)?;
        }
        let stderr_path = tmp.path().join("firefox.stderr");
        let stderr = std::fs::File::create(&stderr_path)?;
        let names = PrivateNames::write(tmp.path(), &o.host_map(), o.resolver)?;
        let user = sandbox::browser_user();
        if let Some(user) = user {
            // Its profile (written as root, certutil's database too) and its key log's folder.
            let mut dirs = vec![tmp.path()];
            dirs.extend(o.key_log.as_deref().and_then(Path::parent));
            unprivileged::hand_over(user, &dirs)?;
        }

        let mut cmd = command(client, o, display, tmp.path(), stderr);
        names.mount_on_exec(&mut cmd);
        let started = Instant::now();
        let (mut child, cpu_group) = spawn_capped_as(&mut cmd, user, o.device.cap())
            .with_context(|| format!("cannot start {FIREFOX}"))?;
        let pgid = child.id() as i32;
        let tmp_for_cleanup = tmp.path().to_path_buf();
        let guard = signals::register_cleanup(move || {
            // SAFETY: signalling the process group we created.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = std::fs::remove_dir_all(&tmp_for_cleanup);
        });
        let wait = |secs| startup_wait(Duration::from_secs(secs), o.device.cap());
        let session = (|| -> Result<(Bidi, String)> {
            let port = wait_for_port(&mut child, &stderr_path, wait(30))?;
            let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
            let stream = client
                .connect(addr, wait(10))
                .with_context(|| format!("connecting to Firefox's BiDi port {port}"))?;
            let bidi = Bidi::connect(stream, &format!("ws://127.0.0.1:{port}/session"))?;
            let caps = bidi.call(
                "session.new",
                json!({ "capabilities": { "alwaysMatch": { "acceptInsecureCerts": false } } }),
                wait(30),
            )?;
            let version = caps
                .pointer("/capabilities/browserVersion")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string();
            Ok((bidi, version))
        })();
        let (bidi, version) = match session {
            Ok(s) => s,
            Err(e) => {
                process_group::end_group(&mut child, pgid, Duration::ZERO);
                bail!(
                    "Firefox did not open a BiDi session: {e:#}; stderr: {}",
                    process_group::stderr_tail(&stderr_path)
                );
            }
        };
        let mut browser = FirefoxProcess {
            child,
            bidi,
            context: String::new(),
            pgid,
            tmp,
            stderr_path,
            version,
            overhead: BrowserOverhead::default(),
            _cleanup: guard,
            cpu_group,
            confinement: Confinement::default(),
            first_view: None,
            closed: false,
        };
        browser.overhead.launch_ms = started.elapsed().as_secs_f64() * 1e3;
        if let Err(e) = browser.prepare(o) {
            let tail = process_group::stderr_tail(&browser.stderr_path);
            browser.close();
            bail!("Firefox could not be prepared for the load: {e:#}; stderr: {tail}");
        }
        // The settle wait starts after the warm-up: both are part of the launch, and what it
        // measures is the browser's own start-up burst.
        let settle = process_group::settle(pgid, o.settle_max, o.device.cpu_share());
        settle.count_into(&mut browser.overhead);
        browser.confinement = sandbox::observe(pgid);
        Ok(browser)
    }

    /// The tab, its viewport, the scripts every document runs first, the events a load keeps,
    /// and the warm-up navigation.
    fn prepare(&mut self, o: &LaunchOptions) -> Result<()> {
        let t = startup_wait(Duration::from_secs(10), o.device.cap());
        let tree = self.bidi.call("browsingContext.getTree", json!({}), t)?;
        self.context = tree
            .pointer("/contexts/0/context")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("Firefox has no browsing context"))?
            .to_string();
        // A fixed viewport: what the page paints (LCP) does not depend on a default. On a
        // virtual display the window is the screen, which has that size.
        if o.visual != Some(VisualSource::Video) {
            self.bidi.call(
                "browsingContext.setViewport",
                json!({ "context": self.context, "viewport": { "width": 1280, "height": 720 } }),
                t,
            )?;
        }
        let mut preload = vec![scripts::KEEP_RESOURCE_ENTRIES.to_string()];
        preload.extend(o.init_script.clone());
        for source in preload {
            self.bidi.call(
                "script.addPreloadScript",
                json!({ "functionDeclaration": format!("() => {{ {source} }}") }),
                t,
            )?;
        }
        self.bidi
            .call("session.subscribe", json!({ "events": KEPT_EVENTS }), t)?;
        // Until Firefox's alt-svc storage is read, an HTTP/3 mapping is skipped: an https
        // navigation that is refused at once makes it read the storage.
        let _ = self.bidi.call(
            "browsingContext.navigate",
            json!({ "context": self.context, "url": WARMUP_URL, "wait": "complete" }),
            t,
        );
        std::thread::sleep(WARMUP_PAUSE);
        let _ = self.bidi.drain_events();
        Ok(())
    }

    /// Navigates to a white page, what a recording starts from (Firefox's own `about:blank`
    /// is drawn in its theme's grey, which would count as painted).
    fn blank(&mut self) -> Result<()> {
        self.bidi.call(
            "browsingContext.navigate",
            json!({ "context": self.context, "url": video::WHITE_PAGE, "wait": "complete" }),
            Duration::from_secs(10),
        )?;
        let _ = self.bidi.drain_events();
        Ok(())
    }

    fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        let t = Instant::now();
        let _ = self
            .bidi
            .call("browser.close", json!({}), Duration::from_secs(3));
        process_group::end_group(&mut self.child, self.pgid, Duration::from_secs(5));
        self.cpu_group = None;
        let _ = std::fs::remove_dir_all(self.tmp.path());
        self.overhead.teardown_ms = t.elapsed().as_secs_f64() * 1e3;
    }
}

impl Drop for FirefoxProcess {
    fn drop(&mut self) {
        self.close();
    }
}

/// Waits for Firefox to say where BiDi listens (its stderr), or to exit.
fn wait_for_port(child: &mut Child, stderr: &Path, timeout: Duration) -> Result<u16> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(port) = std::fs::read_to_string(stderr)
            .ok()
            .and_then(|s| bidi_port(&s))
        {
            return Ok(port);
        }
        if let Ok(Some(status)) = child.try_wait() {
            bail!("Firefox exited ({status}) before opening its BiDi port");
        }
        if Instant::now() >= end {
            bail!("Firefox did not open its BiDi port within {timeout:?}");
        }
        if signals::interrupted() {
            return Err(signals::Interrupted.into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Firefox's name in flags and files.
pub const ID: BrowserId = BrowserId::new("firefox");

/// Firefox in the browser registry.
pub static ENGINE: Engine = Engine {
    id: ID,
    make,
    installed: installed_version,
    cannot,
    har: har::entries,
    tells: EngineTells {
        devtools: Cow::Borrowed(network::PROTOCOL),
        // BiDi tells no connection ids, priorities or body chunks.
        connections: false,
        priorities: false,
        body_chunks: false,
        cannot_measure: Cow::Borrowed(&[
            Unmeasurable::new("cls", "no Layout Instability API"),
            Unmeasurable::new("hero_ms", "no Element Timing API"),
        ]),
        forced_h3: Some(Cow::Borrowed(
            "Firefox forced: the alt-svc testing mapping with `force-use` (no throttle of \
multiplexed requests)",
        )),
        primed_h3: Some(Cow::Borrowed(
            "Firefox primed: the alt-svc testing mapping without `force-use`, which Firefox \
takes as an Alt-Svc it learnt",
        )),
        har_lacks: Some(Cow::Borrowed(
            "Firefox's HAR files have no response bodies (WebDriver BiDi hands none over); \
Chromium's have them",
        )),
    },
    // Firefox 153 ESR asks natively and takes the record as an Alt-Svc (docs/dns.md).
    https_records_since: Some(153),
};

fn make() -> Box<dyn Browser + Send> {
    Box::new(Firefox::default())
}

/// Firefox's command line and environment for one launch whose files are in `dir` (profile,
/// home, temporary files), on `display` or headless.
fn command(
    client: &dyn ClientSide,
    o: &LaunchOptions,
    display: Option<&str>,
    dir: &Path,
    stderr: std::fs::File,
) -> Command {
    let home = dir.join("home");
    let mut cmd = client.command(FIREFOX);
    // Headless, or a full-screen window with nothing but the page on the virtual display.
    // Without a window manager the window is 90 % of the screen unless its size is given.
    let window: &[&str] = if display.is_some() {
        &["--kiosk", "--width", "1280", "--height", "720"]
    } else {
        &["--headless"]
    };
    cmd.args(window)
        .args(["--no-remote", "--profile"])
        .arg(dir.join("profile"))
        .args(["--remote-debugging-port", "0"])
        // Privileged script over BiDi, only where a repeat view needs it.
        .args(o.repeat.is_some().then_some(SYSTEM_ACCESS))
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("TMPDIR", dir.join("tmp"))
        .env("MOZ_CRASHREPORTER_DISABLE", "1")
        // Makes a release build honour `services.settings.server` (a dead address).
        .env("MOZ_REMOTE_SETTINGS_DEVTOOLS", "1")
        .env_remove("DISPLAY")
        .env_remove("SSLKEYLOGFILE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .process_group(0);
    match display {
        Some(d) => cmd.env("DISPLAY", d),
        None => cmd.env("MOZ_HEADLESS", "1"),
    };
    if let Some(path) = &o.key_log {
        // NSS writes TLS and QUIC secrets alike.
        cmd.env("SSLKEYLOGFILE", path);
    }
    cmd
}

/// On a virtual display, the tab's panel is white while a navigation has nothing painted yet:
/// Firefox's theme grey (#f9f9fb) there would read as a visual change before the page's first
/// paint (seen at ~30 ms in 8 of 40 repeat views, whose baseline was white).
const WHITE_TAB_PANEL: &str =
    "#tabbrowser-tabpanels, #tabbrowser-tabbox, browser { background-color: #ffffff !important; }\n";

/// What of a request Firefox cannot do over WebDriver BiDi.
fn cannot(asked: &Asked) -> Option<&'static str> {
    if asked.visual == Some(VisualSource::Screencast) {
        return Some("--visual=screencast is Chromium's DevTools screencast (Firefox has none over WebDriver BiDi): record Firefox with --visual (video)");
    }
    if asked.capture.netlog().is_some() {
        return Some("--capture netlog is Chromium's NetLog (Firefox keeps none)");
    }
    if asked.discovered_h3 {
        return Some("h3-discovered (the h3 a returning visitor learnt from Alt-Svc) is measured in Chromium only");
    }
    if asked.devtools_throttle {
        return Some("--cpu-throttle-devtools (a devtools-<N>x device) is Chromium's DevTools CPU throttling: Firefox has no such switch; slow Firefox down with a cgroup device (phone-mid, cpu-<N>x) instead");
    }
    None
}

/// Debian's Firefox ESR; one process between `launch` and `close`.
#[derive(Default)]
pub struct Firefox {
    running: Option<FirefoxProcess>,
    /// The virtual display its window is on (`--visual`, video), from launch to close.
    display: Option<VirtualDisplay>,
    version: Option<String>,
    /// How the last launch's processes ran (kept after close).
    confinement: Option<Confinement>,
    /// Time the page's CPU benchmark after each load (the launch options say).
    cpu_benchmark: bool,
    /// The share of a core the browser may use (its device).
    cpu_share: f64,
}

impl Browser for Firefox {
    fn id(&self) -> BrowserId {
        ID
    }

    fn launch(&mut self, client: &dyn ClientSide, opts: &LaunchOptions) -> Result<()> {
        anyhow::ensure!(
            opts.device.devtools_rate().is_none(),
            "device {}: DevTools CPU throttling is Chromium's; Firefox has none",
            opts.device.name
        );
        self.close();
        if opts.visual == Some(VisualSource::Screencast) {
            bail!("--visual=screencast is Chromium's; Firefox is recorded by --visual (video)");
        }
        if opts.net_log.is_some() {
            bail!("--capture netlog is Chromium's NetLog: Firefox runs have none");
        }
        if opts.visual == Some(VisualSource::Video) {
            self.display = Some(VirtualDisplay::start(client).context("Firefox's display")?);
        }
        let display = self.display.as_ref().map(VirtualDisplay::name);
        let mut process = FirefoxProcess::launch(client, opts, display.as_deref())
            .context("Firefox did not start")?;
        crate::measure::browser::returning_visitor::first_view(&mut process, opts)
            .context("Firefox's repeat view")?;
        if let Some(d) = &self.display {
            // The recording's first frame is the white page, not the warm-up's error page.
            process
                .blank()
                .context("Firefox's blank page before the load")?;
            d.wait_until_white(video::WHITE_WAIT)?;
        }
        self.version = Some(format!("Firefox {}", process.version));
        self.confinement = Some(process.confinement.clone());
        self.running = Some(process);
        self.cpu_benchmark = opts.cpu_benchmark;
        self.cpu_share = opts.device.cpu_share();
        Ok(())
    }

    fn version(&self) -> Option<String> {
        self.version.clone()
    }

    fn confinement(&self) -> Option<Confinement> {
        self.confinement.clone()
    }

    fn process_group(&self) -> Option<i32> {
        self.running.as_ref().map(|p| p.pgid)
    }

    fn load(
        &mut self,
        url: &str,
        kind: &WorkloadKind,
        expected_resources: usize,
        timeout: Duration,
    ) -> Result<(Observation, LoadEnd)> {
        let browser = self
            .running
            .as_mut()
            .ok_or_else(|| anyhow!("Firefox is not running: launch it first"))?;
        let first_view = browser.first_view.clone();
        let display = self.display.as_ref();
        let transfer = !kind.is_page();
        let (mut obs, end) = load(browser, url, expected_resources, transfer, timeout, display)?;
        obs.first_view = first_view;
        if self.cpu_benchmark && end == LoadEnd::Completed {
            // After the load's own work (as the launch waits for the start-up burst).
            process_group::settle(browser.pgid, Duration::from_secs(3), self.cpu_share);
            let t = Duration::from_secs(60);
            obs.cpu_benchmark_ms =
                bidi::evaluate(&browser.bidi, &browser.context, scripts::CPU_BENCHMARK, t)
                    .ok()
                    .and_then(|v| scripts::read_cpu_benchmark(&v));
        }
        Ok((obs, end))
    }

    fn close(&mut self) -> BrowserOverhead {
        let overhead = match self.running.take() {
            Some(mut process) => {
                process.close();
                process.overhead.clone()
            }
            None => BrowserOverhead::default(),
        };
        // The window is gone: now its display.
        self.display = None;
        overhead
    }
}

/// One navigation: navigate and wait for the load event, then (within the timeout) for the
/// expected Resource Timing entries and the page's own end of transfer; then (when `display`
/// is recorded, after the screen is still) the timing and paint entries and the network events.
fn load(
    browser: &mut FirefoxProcess,
    url: &str,
    expected: usize,
    transfer: bool,
    timeout: Duration,
    display: Option<&VirtualDisplay>,
) -> Result<(Observation, LoadEnd)> {
    let recording = video::start(display);
    let mut obs = match navigate(browser, url, expected, transfer, timeout)? {
        Err((mut obs, end)) => {
            video::finish_into(recording, &mut obs, false);
            return Ok((obs, end));
        }
        Ok(()) => Observation::default(),
    };
    video::finish_into(recording, &mut obs, true);
    collect(browser, &mut obs);
    if obs.navigation.is_none() {
        return Ok((
            obs,
            LoadEnd::NavigationFailed("no navigation entry after load".into()),
        ));
    }
    Ok((obs, LoadEnd::Completed))
}

/// The navigation and the wait for the page's end: `Err` with what was seen and how the load
/// ended when it failed.
fn navigate(
    browser: &mut FirefoxProcess,
    url: &str,
    expected: usize,
    transfer: bool,
    timeout: Duration,
) -> Result<std::result::Result<(), (Observation, LoadEnd)>> {
    let deadline = Instant::now() + timeout;
    let mut obs = Observation::default();
    let _ = browser.bidi.drain_events();
    let nav = browser.bidi.call_until(
        "browsingContext.navigate",
        json!({ "context": browser.context, "url": url, "wait": "complete" }),
        timeout,
        &signals::interrupted,
    );
    match nav {
        Ok(_) => {}
        Err(BidiError::Interrupted { .. }) => return Err(signals::Interrupted.into()),
        Err(BidiError::Timeout { .. }) => {
            collect(browser, &mut obs);
            return Ok(Err((obs, timed_out(timeout, "no load event"))));
        }
        Err(BidiError::Command { message, .. }) => {
            collect_events(browser, &mut obs);
            let failed = LoadEnd::NavigationFailed(format!("{message} loading {url}"));
            return Ok(Err((obs, failed)));
        }
        Err(BidiError::Closed) => return Ok(Err((obs, crashed(browser)))),
    }
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let wait = scripts::load_finished(expected, transfer);
    if let Err(e) = bidi::evaluate(&browser.bidi, &browser.context, &wait, left) {
        if matches!(e.downcast_ref(), Some(BidiError::Interrupted { .. })) {
            return Err(signals::Interrupted.into());
        }
        if browser.bidi.is_closed() || browser.has_exited() {
            return Ok(Err((obs, crashed(browser))));
        }
        tracing::debug!("the load did not finish: {e:#}");
        collect(browser, &mut obs);
        let what = if transfer {
            "the transfer did not complete"
        } else {
            "the page did not finish loading"
        };
        return Ok(Err((obs, timed_out(timeout, what))));
    }
    Ok(Ok(()))
}

fn timed_out(timeout: Duration, what: &str) -> LoadEnd {
    LoadEnd::TimedOut(format!(
        "{what} within {}",
        humantime::format_duration(timeout)
    ))
}

fn crashed(browser: &mut FirefoxProcess) -> LoadEnd {
    LoadEnd::Crashed(format!(
        "Firefox exited during the load; stderr: {}",
        process_group::stderr_tail(&browser.stderr_path)
    ))
}

/// Reads the timing and paint entries and the page result (whatever exists, also after a
/// timeout), then the network events.
fn collect(browser: &FirefoxProcess, obs: &mut Observation) {
    let t = Duration::from_secs(10);
    if let Ok(v) = bidi::evaluate(&browser.bidi, &browser.context, scripts::TIMING_ENTRIES, t) {
        scripts::read_timing_entries(&v, obs);
    }
    obs.paint = scripts::read_paint_entries(bidi::evaluate(
        &browser.bidi,
        &browser.context,
        scripts::PAINT_ENTRIES,
        Duration::from_secs(5),
    ));
    // Let the last responseCompleted events arrive.
    std::thread::sleep(Duration::from_millis(50));
    collect_events(browser, obs);
}

/// The load's network events, typed into its network view.
fn collect_events(browser: &FirefoxProcess, obs: &mut Observation) {
    let mut events = std::mem::take(&mut obs.network.events);
    for e in browser.bidi.drain_events() {
        if KEPT_EVENTS.contains(&e.method.as_str())
            && e.params.get("context").and_then(Value::as_str) == Some(browser.context.as_str())
        {
            events.push(DevtoolsEvent {
                method: e.method,
                params: e.params,
            });
        }
    }
    obs.network = network::view(events);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(p: Protocol, mode: H3Mode) -> LaunchOptions {
        LaunchOptions {
            h3_mode: mode,
            ..LaunchOptions::fixture(p)
        }
    }

    fn get<'a>(p: &'a [(&str, Pref)], k: &str) -> Option<&'a Pref> {
        p.iter().find(|(n, _)| *n == k).map(|(_, v)| v)
    }

    #[test]
    fn prefs_force_each_protocol() {
        let h1 = prefs(&opts(Protocol::H1, H3Mode::Forced)).unwrap();
        assert_eq!(
            get(&h1, "network.http.http2.enabled"),
            Some(&Pref::Bool(false))
        );
        assert_eq!(
            get(&h1, "network.http.http3.enable"),
            Some(&Pref::Bool(false))
        );
        let h2 = prefs(&opts(Protocol::H2, H3Mode::Forced)).unwrap();
        assert_eq!(get(&h2, "network.http.http2.enabled"), None);
        assert_eq!(
            get(&h2, "network.http.http3.enable"),
            Some(&Pref::Bool(false))
        );
        let h3 = prefs(&opts(Protocol::H3, H3Mode::Forced)).unwrap();
        assert_eq!(
            get(&h3, "network.http.http3.alt-svc-mapping-for-testing"),
            Some(&Pref::Str("pagebench.test;h3=:443".into()))
        );
        assert_eq!(
            get(
                &h3,
                "network.http.http3.force-use-alt-svc-mapping-for-testing"
            ),
            Some(&Pref::Bool(true))
        );
        let primed = prefs(&opts(Protocol::H3, H3Mode::Primed)).unwrap();
        assert_eq!(
            get(
                &primed,
                "network.http.http3.force-use-alt-svc-mapping-for-testing"
            ),
            Some(&Pref::Bool(false))
        );
        for p in [&h1, &h2, &h3, &primed] {
            // Names come from the hosts file of the browser's mount namespace, not a pref.
            assert_eq!(get(p, "network.dns.forceResolve"), None);
            assert_eq!(get(p, "network.trr.mode"), Some(&Pref::Int(5)));
            assert_eq!(
                get(p, "network.http.http3.disable_when_third_party_roots_found"),
                Some(&Pref::Bool(false))
            );
            assert_eq!(
                get(p, "privacy.reduceTimerPrecision"),
                Some(&Pref::Bool(false))
            );
            assert_eq!(
                get(p, "network.http.speculative-parallel-limit"),
                Some(&Pref::Int(0))
            );
        }
    }

    #[test]
    fn every_host_of_a_site_is_mapped_whatever_its_address() {
        let mut o = opts(Protocol::H3, H3Mode::Forced);
        o.hosts = vec![
            ("www.site.test".into(), "10.1.2.2".parse().unwrap()),
            ("static.site.test".into(), "10.250.0.1".parse().unwrap()),
        ];
        let p = prefs(&o).unwrap();
        assert_eq!(
            get(&p, "network.http.http3.alt-svc-mapping-for-testing"),
            Some(&Pref::Str(
                "www.site.test;h3=:443,static.site.test;h3=:443".into()
            ))
        );
    }

    #[test]
    fn as_recorded_maps_quic_for_the_h3_origins_only_and_keeps_http2() {
        let mut o = opts(Protocol::H2, H3Mode::Forced);
        o.as_recorded = vec![
            ("www.site.test".into(), Protocol::H2),
            ("static.site.test".into(), Protocol::H1),
            ("api.site.test".into(), Protocol::H3),
        ];
        let p = prefs(&o).unwrap();
        assert_eq!(
            get(&p, "network.http.http3.alt-svc-mapping-for-testing"),
            Some(&Pref::Str("api.site.test;h3=:443".into()))
        );
        assert_eq!(
            get(
                &p,
                "network.http.http3.force-use-alt-svc-mapping-for-testing"
            ),
            Some(&Pref::Bool(true))
        );
        assert_eq!(get(&p, "network.http.http2.enabled"), None);
        assert_eq!(
            get(&p, "network.http.http3.enable"),
            Some(&Pref::Bool(true))
        );
    }

    #[test]
    fn user_js_quotes_strings_only() {
        let js = user_js(&[
            ("a.b", Pref::Bool(true)),
            ("c", Pref::Int(5)),
            ("d", Pref::Str("x\"y".into())),
        ]);
        assert_eq!(
            js,
            "user_pref(\"a.b\", true);\nuser_pref(\"c\", 5);\nuser_pref(\"d\", \"x\\\"y\");\n"
        );
    }

    #[test]
    fn versions_are_read_and_checked() {
        let ini = "[App]\nVendor=Mozilla\nName=Firefox\nVersion=153.8.0esr\nBuildID=1\n";
        assert_eq!(application_version(ini).as_deref(), Some("153.8.0esr"));
        assert!(check_version("153.8.0esr").is_ok());
        assert!(check_version("128.0").is_ok());
        let e = check_version("115.9.1esr").unwrap_err().to_string();
        assert!(
            e.contains("too old") && e.contains("apt-get install firefox-esr"),
            "{e}"
        );
        assert!(check_version("esr").is_err());
        assert_eq!(application_version("[App]\n"), None);
    }

    #[test]
    fn the_bidi_port_is_read_from_stderr() {
        let err = "1764000000000\taddons.xpi\tWARN\tx\n\
                   WebDriver BiDi listening on ws://127.0.0.1:41235\n";
        assert_eq!(bidi_port(err), Some(41235));
        assert_eq!(bidi_port("nothing yet"), None);
    }
}
