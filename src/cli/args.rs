//! The command line's arguments (clap): every subcommand's flags and their parsers; strings end
//! here.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use crate::embedded_server::ServerKnobs;
use crate::{config::locations, config::profile, config::workload, report};

#[derive(Parser, Debug)]
#[command(
    name = "pagebench",
    version,
    about = "Is HTTP/1.1, HTTP/2 or HTTP/3 faster for this page on this network — and why?",
    long_about = "Loads generated pages in real headless Chromium, forced onto h1, h2 or h3 and verified \
on every resource, through a userspace packet-level link emulator between two network namespaces, \
from a server that speaks all three protocols on one port; then says which differences are real."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Run browsers as root without their own sandbox. By default every browser (run, matrix,
    /// record, bench) runs as the unprivileged user `nobody` with its sandbox on, which needs
    /// user namespaces; this is for machines that refuse them. Every record says how its
    /// browser ran.
    #[arg(long, global = true)]
    pub no_browser_sandbox: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// (Re)generate the workloads (pages/ in a checkout, else the cache directory) and list them.
    Pages(PagesArgs),
    /// List the network profiles.
    Profiles(ProfilesArgs),
    /// List the devices (the CPU the whole browser gets), with the slowdown each achieves here.
    Devices(DevicesArgs),
    /// Run the study matrix: profiles × workloads × protocols, interleaved and resumable.
    Matrix(MatrixArgs),
    /// One or more page loads of one protocol, workload and profile.
    Run(RunArgs),
    /// Serve the workloads over h1/h2 (TCP) and h3 (QUIC) on one port.
    Serve(ServeArgs),
    /// Build the emulated link, run a server command and a client command through it.
    Shell(ShellArgs),
    /// Remove namespaces and TUN devices left behind by dead pagebench processes.
    Cleanup,
    /// Benchmarks (emulator precision and rate, server throughput).
    Bench(BenchArgs),
    /// Turn a results directory into tables, charts and an HTML page.
    Report(ReportArgs),
    /// Explain slow transfers in a results directory (windows, buffers, losses).
    Diagnose(DiagnoseArgs),
    /// Turn a HAR with content (DevTools "Save all as HAR with content", or `run --har`) into a
    /// site archive: every response with its body as it went over the wire.
    Import(ImportArgs),
    /// Load a real site in Chromium (as a normal browser: no protocol forced) and keep every
    /// response as a site archive. Chromium runs where pagebench runs: the one command that
    /// reaches beyond the emulated link.
    Record(RecordArgs),
    /// Join the shards of one matrix (`matrix --shard K/N`, run on N machines) into one results
    /// directory, with the statistics, the diagnosis and the report as if run on one machine.
    Merge(MergeArgs),
    /// Compare two results directories of the same cells (e.g. before and after a server
    /// change) series by series: ratio with CI, Hodges–Lehmann shift, Mann-Whitney, Holm,
    /// failure and rejection rates, a report page; with --fail-if-slower a gate for CI (exit 3:
    /// slower or failing more often, exit 4: a series of BASE could not be judged).
    Compare(CompareArgs),
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The merged results directory to write (new, or empty).
    pub out: PathBuf,
    /// The shard directories (`matrix --shard K/N --out DIR`), in any order.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Merge shards whose machines differ (CPU, cores, kernel, browser versions, pagebench
    /// build); the report lists each shard's machine and calibration.
    #[arg(long)]
    pub allow_mixed_machines: bool,
    /// Merge even when shards are missing or unfinished (the merged directory says it is
    /// incomplete).
    #[arg(long)]
    pub allow_incomplete: bool,
    /// Skip the report (`pagebench report OUT` makes it later).
    #[arg(long)]
    pub no_report: bool,
    /// No terminal summary.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The baseline results directory.
    pub base: PathBuf,
    /// The results directory to compare with it.
    pub new: PathBuf,
    /// Make the comparison a gate. Exit 3 when a series is slower (its verdict: significant
    /// after Holm, the ratio's CI above 1) with the lower bound of the ratio NEW/BASE's 95 % CI
    /// above 1 + PCT/100 (surely slower by more than PCT %), or when its NEW runs failed as
    /// loads of the protocol significantly more often than BASE's (Fisher, Holm over the
    /// series). Exit 4 — before 3 — when a series of BASE could not be judged: missing from
    /// NEW, no valid or DNF counted run in NEW, or undetermined (too few runs); see
    /// --allow-missing.
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    pub fail_if_slower: Option<f64>,
    /// With --fail-if-slower: a series of BASE that could not be judged (missing from NEW, no
    /// valid or DNF run in NEW, undetermined) is a warning instead of exit 4. A series that
    /// fails more often still fails the gate.
    #[arg(long, requires = "fail_if_slower")]
    pub allow_missing: bool,
    /// Where compare.md, compare.html, compare.csv and compare.json go [default:
    /// NEW/compare-<name of BASE>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Chromium runs here, with this machine's network and resolver (or inside `ip netns exec NS pagebench record …`): point it at the site you mean to record. It negotiates h1, h2 or h3 as a user's browser would. --ignore-cert-errors covers TCP (h1, h2) only: QUIC ignores it, so on a self-signed staging site h3 falls back to h2 unless you give the certificate's key with --ignore-cert-spki and name the origin in --force-quic."
)]
pub struct RecordArgs {
    /// The page to record (http:// or https://).
    pub url: String,
    /// The archive directory to write (`site.json` and `bodies/`).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// When the page is done: `load` (the load event), `idle` (no request in flight for 500 ms
    /// after it) or a time after the navigation starts (e.g. `5s`).
    #[arg(long, default_value = "idle", value_name = "load|idle|DURATION",
          value_parser = |s: &str| crate::measure::site_recorder::parse_wait(s).map_err(|e| e.to_string()))]
    pub wait: crate::measure::browser::engines::chromium::load::WaitFor,
    /// Map HOST to IP in Chromium's resolver (repeatable); without any, the system resolver.
    #[arg(long, value_name = "HOST=IP",
          value_parser = |s: &str| crate::measure::site_recorder::parse_resolve(s).map_err(|e| format!("{e:#}")))]
    pub resolve: Vec<(String, IpAddr)>,
    /// Accept any certificate on TCP (h1, h2); QUIC ignores this (see --ignore-cert-spki).
    #[arg(long)]
    pub ignore_cert_errors: bool,
    /// Accept certificates with this public key (base64 SHA-256 of the SPKI; repeatable), on
    /// TCP and QUIC alike.
    #[arg(long, value_name = "BASE64",
          value_parser = |s: &str| crate::measure::site_recorder::parse_spki(s).map_err(|e| e.to_string()))]
    pub ignore_cert_spki: Vec<String>,
    /// Reach this origin over HTTP/3 from its first request (repeatable; port 443 unless
    /// given), as a returning visitor whose browser knew its Alt-Svc would: a fresh browser
    /// learns h3 only from a response, and on a self-signed site QUIC takes the certificate
    /// of --ignore-cert-spki only for origins named here.
    #[arg(long, value_name = "HOST[:PORT]",
          value_parser = |s: &str| crate::measure::site_recorder::parse_force_quic(s).map_err(|e| e.to_string()))]
    pub force_quic: Vec<String>,
    /// Give up on the page after this long.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The HAR 1.2 file.
    pub har: PathBuf,
    /// The archive directory to write (`site.json` and `bodies/`).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Refuse a HAR in which a response lacks its body, instead of serving filler bytes of the
    /// recorded size.
    #[arg(long)]
    pub strict: bool,
}

#[derive(Args, Debug)]
pub struct PagesArgs {
    /// Workloads to generate (default: the standard set). E.g. page10 page50x900 download.
    pub workloads: Vec<String>,
    /// Where the workload trees go [default: pages/ in a pagebench checkout, else
    /// $XDG_CACHE_HOME/pagebench/pages/<seed> (~/.cache/… without it)].
    #[arg(long, value_name = "DIR")]
    pub pages: Option<PathBuf>,
    /// Generation seed (the same seed always gives the same bytes).
    #[arg(long, default_value_t = workload::DEFAULT_SEED, value_name = "SEED")]
    pub pages_seed: u64,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The results directory (as written by `pagebench matrix`).
    pub dir: PathBuf,
    /// What the statistics and the report decide on: `load` (loadEventEnd, the study's; the
    /// report goes in DIR), `lcp`, `fcp` or `speed-index` (its report goes in DIR/by-<metric>/).
    #[arg(long, default_value = "load")]
    pub metric: report::HeadlineMetric,
}

#[derive(Args, Debug)]
pub struct ProfilesArgs {
    /// Which profiles: names, sets (all, extended, every) or TOML paths, comma-separated.
    #[arg(long, default_value = "every")]
    pub profiles: String,
    #[arg(long, value_name = "DIR", help = PROFILES_DIR_HELP)]
    pub profiles_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DevicesArgs {
    /// Which devices (default: the built-in ones), comma-separated, as `--devices` takes them.
    #[arg(long, value_name = "LIST")]
    pub devices: Option<String>,
    /// Also measure the quota period's effect: each capped device at each of these periods
    /// (ms, e.g. 100,20,10,5).
    #[arg(long, value_name = "MS")]
    pub periods: Option<String>,
    /// Pairs (free, capped) of the native benchmark per measurement.
    #[arg(long, default_value_t = 5)]
    pub pairs: usize,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

const PROFILES_DIR_HELP: &str = "Directory of profiles that names and sets are looked up in \
[default: profiles/ in a pagebench checkout, else the built-in profiles]";
const PAGES_HELP: &str = "Where the workloads are generated [default: pages/ in a pagebench \
checkout, else $XDG_CACHE_HOME/pagebench/pages/<seed> (~/.cache/… without it)]";

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The workload tree to serve (`pagebench pages` generates it) [default: as for `pages`,
    /// of seed 1].
    #[arg(long, value_name = "DIR")]
    pub pages: Option<PathBuf>,
    /// Port for TCP (h1, h2) and UDP (h3) alike; 0 picks one free on both.
    #[arg(long, default_value_t = 8443)]
    pub port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Server knobs from the `[server]` table of a TOML file (flags override it).
    #[arg(long, value_name = "FILE")]
    pub server_config: Option<PathBuf>,
    /// JSON-lines request log (appended).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Where cert.pem and key.pem are cached (reused while valid, so the SPKI stays stable).
    #[arg(long, default_value = "results/cert", value_name = "DIR")]
    pub cert_dir: PathBuf,
    /// Generate a new certificate for this run (written to --cert-dir, replacing the old one).
    #[arg(long)]
    pub fresh_cert: bool,
    #[command(flatten)]
    pub knobs: ServerKnobs,
}

/// Where the servers come from and how they are tuned (shared by `run` and `matrix`).
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// Servers under test, comma-separated: embedded (hyper + quinn), caddy (Debian's, quic-go),
    /// nginx (Debian's, h1/h2 only), quiche and aioquic (h3 from that stack, h1/h2 from the
    /// embedded server), apache and h2o (Debian's, h1/h2 only). Several are interleaved in one
    /// plan.
    #[arg(
        long,
        alias = "server",
        default_value = "embedded",
        value_name = "LIST"
    )]
    pub servers: String,
    /// Your own server as a command line, run in the server namespace with {port}, {root},
    /// {cert}, {key}, {log}, {ip} and {work} filled in; added to --servers as `custom`.
    #[arg(long, value_name = "CMD")]
    pub server_cmd: Option<String>,
    /// Format of --server-cmd's access log (caddy-json, nginx-json, combined, pagebench-json):
    /// its lines become a third viewpoint that checks the protocol and the files of every run.
    /// Without it the runs are cross-checked by the browser's two viewpoints only, and say so.
    #[arg(long, value_name = "FORMAT")]
    pub server_log_format: Option<String>,
    /// The access log --server-cmd writes, if not the {log} path it was given (placeholders
    /// such as {work} allowed).
    #[arg(long, value_name = "FILE")]
    pub server_log: Option<String>,
    /// Server knobs from the `[server]` table of a TOML file (flags override it).
    #[arg(long, value_name = "FILE")]
    pub server_config: Option<PathBuf>,
    #[command(flatten)]
    pub knobs: ServerKnobs,
}

impl ServerArgs {
    /// The knobs to apply: file, then flags; TCP congestion control defaults to cubic (like
    /// quinn's default QUIC controller) so h2 and h3 differ by protocol, not by controller —
    /// the system default here is bbr.
    pub fn knobs(&self) -> Result<ServerKnobs> {
        let base = match &self.server_config {
            Some(p) => ServerKnobs::load_toml(p)?,
            None => ServerKnobs::default(),
        };
        Ok(base.overlay(&self.knobs).with_default_tcp_congestion())
    }

    pub fn servers(&self) -> Result<Vec<crate::measure::testbed::ServerChoice>> {
        crate::measure::testbed::parse_servers(
            &self.servers,
            self.server_cmd.as_deref(),
            self.server_log_format.as_deref(),
            self.server_log.as_deref(),
        )
    }
}

#[derive(Args, Debug)]
pub struct MatrixArgs {
    /// Network profiles: `all` (the study's six), `extended`, `every`, names or TOML paths.
    #[arg(long, default_value = "all")]
    pub profiles: String,
    /// Browser protocols: h1, h2, h3 (forced, the study's: same as h3-forced), h3-primed,
    /// h3-discovered (repeat view), as-recorded (site workloads).
    #[arg(long, default_value = "h1,h2,h3")]
    pub protocols: String,
    /// Workloads: page10, page50, download, upload, pageN, pageNxSIZE, uploadSIZE…
    #[arg(long, default_value = "page10,page50,download")]
    pub workloads: String,
    /// Measured runs per series, or `auto`: per cell, interleaved rounds are added until the
    /// 95 % CI of every ratio in the cell is within ±--precision (from --min-runs to --max-runs).
    #[arg(long, default_value = "10", value_name = "N|auto", value_parser = parse_runs)]
    pub runs: RunsArg,
    /// With --runs auto: rounds every cell runs before its precision is judged.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub min_runs: u32,
    /// With --runs auto: the most rounds a cell runs, precise or not.
    #[arg(long, default_value_t = 30, value_name = "N")]
    pub max_runs: u32,
    /// With --runs auto: the half-width, in percent of the ratio, that the 95 % CI of every
    /// ratio in a cell must be within for the cell to stop.
    #[arg(long, default_value = "5", value_name = "PCT", value_parser = parse_pct)]
    pub precision: f64,
    /// Run only part K of N of the plan's cells (profile × workload, never split), for one of N
    /// machines; `pagebench merge` joins the N results directories. A shard also records the
    /// machine's fingerprint and a short calibration (machine.json).
    #[arg(long, value_name = "K/N")]
    pub shard: Option<crate::results::shards::ShardSpec>,
    /// Runs of the reference series (page10 over h2 on wired) a shard calibrates its machine
    /// with, after a short emulator benchmark; 0: no calibration.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub calibration_runs: u32,
    /// How long to watch the machine before the first run (other processes' CPU use, steal,
    /// timer stalls); a machine that is not quiet is warned about and recorded in meta.json.
    /// 0s: no check.
    #[arg(long, default_value = "3s", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub machine_check: Duration,
    /// How many lanes the plan may walk on at once: each its own namespaces, link, servers and
    /// browser. A round of a cell runs on one lane, its protocols interleaved as ever; rounds
    /// whose runs wait on the network (measured CPU per second of load at most
    /// --share-below) share the machine, anything heavier or not measured yet runs alone.
    /// `auto` (the default): 6 lanes on 2 CPUs (3 per CPU, at most 8); 1: one run at a time,
    /// in plan order. `bench concurrency` showed the shared rounds equivalent to a serial walk.
    #[arg(long, default_value = "auto", value_name = "N|auto")]
    pub jobs: crate::matrix::lanes::Jobs,
    /// With --jobs: the CPU need (CPU-seconds per second of load: browser, server and emulator,
    /// the median of a series' runs so far) up to which a round shares the machine. The default
    /// is what `bench concurrency` showed equivalent to a serial walk on this machine class
    /// (lossy downloads, 0.03-0.08); pages need 0.19 and more and keep the machine alone.
    #[arg(long, default_value = "0.15", value_name = "CPU", value_parser = crate::matrix::lanes::parse_share_below)]
    pub share_below: f64,
    /// Warm-up rounds per cell (run, saved, left out of the statistics).
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Seed of the run order (and of the bootstrap and the emulator's draws).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Per-run limit; a run over it "did not finish".
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Refused: the variant is named in --protocols (h3-primed, h3-discovered).
    #[arg(long, value_enum, hide = true)]
    pub h3_mode: Option<crate::config::protocol::H3Mode>,
    #[command(flatten)]
    pub server: ServerArgs,
    /// Results directory [default: results/<timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Finish the missing runs of an interrupted matrix with the options stored there (options
    /// given beside it must equal the stored ones).
    #[arg(long, value_name = "DIR", conflicts_with = "out")]
    pub resume: Option<PathBuf>,
    /// No progress bar and no terminal summary.
    #[arg(long)]
    pub quiet: bool,
    /// Skip the report at the end (`pagebench report DIR` makes it later).
    #[arg(long)]
    pub no_report: bool,
    /// Run a run again, up to this many times, when it failed as a measurement (the link did
    /// not deliver the profile, a server exited, the browser crashed, the server's log missed
    /// requests the browser made); every attempt is kept. Warm-ups are never run again.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub retry_invalid: u32,
    /// Test hook: RUN_ID=stall:DURATION@AFTER, RUN_ID=stop-emulator@AFTER or
    /// RUN_ID=kill-server@AFTER (repeatable).
    #[arg(long, hide = true, value_name = "SPEC")]
    pub inject_fault: Vec<String>,
    /// Let the emulator run the receiving stack's work itself, as before receive steering
    /// (for comparison; the link gate then rejects more runs).
    #[arg(long)]
    pub no_receive_steering: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `--runs N` or `--runs auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunsArg {
    Fixed(u32),
    Auto,
}

pub fn parse_runs(s: &str) -> Result<RunsArg, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(RunsArg::Auto);
    }
    s.parse::<u32>()
        .map(RunsArg::Fixed)
        .map_err(|_| format!("{s:?}: give a number of runs per series, or `auto`"))
}

/// `5`, `5%` or `5 %` → 5.
pub fn parse_pct(s: &str) -> Result<f64, String> {
    s.trim()
        .trim_end_matches('%')
        .trim()
        .parse::<f64>()
        .map_err(|_| format!("{s:?}: give a percentage, e.g. 5"))
}

/// Paths and browser settings shared by `run` and `matrix`.
#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    #[arg(long, value_name = "DIR", help = PAGES_HELP)]
    pub pages: Option<PathBuf>,
    /// Seed of the generated workloads (as `pagebench pages --pages-seed`): pages of another seed are
    /// regenerated.
    #[arg(long, default_value_t = workload::DEFAULT_SEED, value_name = "SEED")]
    pub pages_seed: u64,
    #[arg(long, value_name = "DIR", help = PROFILES_DIR_HELP)]
    pub profiles_dir: Option<PathBuf>,
    /// Browsers, comma-separated: chromium (Debian's, over CDP), firefox (Debian's Firefox ESR,
    /// over WebDriver BiDi). Several are interleaved in one plan, like servers; every table
    /// and comparison is per browser, and engines are compared per protocol.
    #[arg(
        long,
        alias = "browser",
        default_value = "chromium",
        value_name = "LIST"
    )]
    pub browsers: String,
    /// Visits, comma-separated: first (a fresh browser) and/or repeat (a returning visitor: the
    /// same browser after a first navigation, its connections closed, its TLS sessions and
    /// Alt-Svc knowledge kept). Several are interleaved in one plan, each its own series, and
    /// compared per protocol. Repeat views run in Chromium.
    #[arg(long, alias = "view", default_value = "first", value_name = "LIST")]
    pub views: String,
    /// Devices, comma-separated: the CPU the whole browser gets (every process of it) —
    /// desktop (this machine), phone-high (2×), phone-mid (4×), phone-low (6×) or cpu-<N>x,
    /// each a cgroup cap of one core at 1/N of it; `pagebench devices` lists them with the
    /// slowdown each achieves here. Several are interleaved in one plan, each its own series.
    #[arg(long, alias = "device", default_value = "desktop", value_name = "LIST")]
    pub devices: String,
    /// Also run on Chromium's DevTools CPU throttling at rate N (a device `devtools-<N>x`):
    /// what peers use — it slows the page's main thread alone, not the network service where
    /// QUIC runs. Chromium only.
    #[arg(long, value_name = "N")]
    pub cpu_throttle_devtools: Option<f64>,
    /// A repeat view's HTTP cache between its two navigations: clear (the measured load fetches
    /// every file again) or keep.
    #[arg(long, value_enum, default_value = "clear")]
    pub repeat_cache: crate::config::identity::RepeatCache,
    /// Upper bound of the wait for the browser's start-up CPU burst to end before navigating.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub settle_max: Duration,
    /// Site replay (site:DIR workloads): which server address each recorded origin gets —
    /// `recorded` (origins that shared a server share one, so connection coalescing is as
    /// recorded), `per-origin`, or `single` (all on one, as Web Page Replay).
    #[arg(long, default_value = "recorded", value_name = "MODE")]
    pub origin_addresses: crate::config::site_archive::origins::AddressMode,
    /// Site replay: `none` answers at once; `recorded` waits the recorded server wait minus the
    /// recording's round trip to that origin.
    #[arg(long, default_value = "none", value_name = "MODE")]
    pub think_time: crate::config::site_archive::replay::ThinkTime,
    /// Site replay: `profile` puts every origin at the profile's round trip; `recorded` puts
    /// each at the round trip its recording shows (its quickest connection set-up or first
    /// byte), instead of the profile's (never nearer: its server address delayed by the
    /// difference), the profile's rate and loss kept.
    #[arg(long, default_value = "profile", value_name = "MODE")]
    pub distances: crate::config::site_archive::distances::Distances,
    /// How the browser finds its hosts: `none` (a hosts file, no lookup: the study's way)
    /// or `resolver` (every name asked of pagebench's own resolver behind the link, at the
    /// profile's `resolver_rtt_ms`; `h3-dns` needs it: its HTTPS records announce h3).
    /// Default: `none`, but `resolver` for a site replayed at `--distances recorded` whose
    /// recording timed its lookups (each then takes its recorded time).
    #[arg(long, value_name = "MODE")]
    pub dns: Option<crate::config::name_lookup::DnsMode>,
    /// Site replay: fix Date, Math.random and performance.now's origin in the page so it asks
    /// for the same URLs on every load.
    #[arg(long)]
    pub deterministic: bool,
    /// Site replay: requests not in the archive (answered 404) a run may make and still count.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_misses: u32,
    /// Record every load's screen: Speed Index, Visually Complete and First Visual Change per
    /// run, the frames in `frames/<run id>/`, a filmstrip in the report. `--visual` (or
    /// `--visual=video`): video of the browser's window on a virtual display (Xvfb), the same
    /// for every engine; `--visual=screencast`: Chromium's DevTools screencast (headless,
    /// Chromium only).
    #[arg(long, value_name = "HOW", num_args = 0..=1, require_equals = true, default_missing_value = "video")]
    pub visual: Option<crate::evidence::visual::VisualSource>,
    /// Keep files of every run beside its record: any of pcap (the link's packets, both
    /// sides, drops marked), keys (TLS key log of browser and server), netlog (Chromium's
    /// NetLog; netlog-bytes with socket bytes), qlog (the embedded server's, per QUIC
    /// connection) — e.g. `--capture pcap,keys`. Matrix: in `captures/<run id>/`.
    #[arg(long, value_name = "KINDS")]
    pub capture: Option<crate::packets::CaptureSet>,
}

impl CommonArgs {
    pub fn browsers(&self) -> Result<Vec<crate::config::identity::BrowserId>> {
        crate::measure::browser::parse_browsers(&self.browsers)
    }

    pub fn views(&self) -> Result<Vec<crate::config::identity::View>> {
        crate::config::identity::parse_views(&self.views)
    }

    pub fn devices(&self) -> Result<Vec<crate::config::device::Device>> {
        crate::config::device::parse_devices(&self.devices, self.cpu_throttle_devtools)
    }

    pub fn capture(&self) -> crate::packets::CaptureSet {
        self.capture.clone().unwrap_or_default()
    }

    pub fn profile_source(&self) -> profile::ProfileSource {
        locations::profile_source(self.profiles_dir.as_deref())
    }

    pub fn site_options(&self) -> workload::site_plan::SiteOptions {
        workload::site_plan::SiteOptions {
            addresses: self.origin_addresses,
            think: self.think_time,
            deterministic: self.deterministic,
            max_misses: self.max_misses,
            distances: self.distances,
        }
    }

    /// `--dns` as given, or its default for `workloads` ([`crate::config::name_lookup::effective`]).
    pub fn dns_for(&self, workloads: &str) -> Result<crate::config::name_lookup::DnsMode> {
        crate::config::name_lookup::effective(self.dns, workloads, self.distances)
    }

    pub fn pages_root(&self) -> Result<PathBuf> {
        locations::pages_root(self.pages.as_deref(), self.pages_seed)
    }
}

#[derive(Args, Debug)]
pub struct DiagnoseArgs {
    /// A results directory (from `pagebench matrix`).
    pub dir: PathBuf,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// h1, h2, h3 (forced, the study's: same as h3-forced), h3-primed, h3-discovered or h3-dns.
    #[arg(long, required_unless_present = "as_recorded", value_parser = parse_forced_variant)]
    pub protocol: Option<crate::config::protocol::Variant>,
    /// For a site:DIR workload: each origin on the protocol it used when recorded (instead of
    /// --protocol).
    #[arg(long, conflicts_with = "protocol")]
    pub as_recorded: bool,
    /// page10, page50, download, upload, pageN, pageNxSIZE…
    #[arg(long, default_value = "page10")]
    pub workload: String,
    /// A profile name or a TOML file.
    #[arg(long, default_value = "datacenter")]
    pub profile: String,
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
    /// Refused: the variant is named in --protocol (h3-primed, h3-discovered).
    #[arg(long, value_enum, hide = true)]
    pub h3_mode: Option<crate::config::protocol::H3Mode>,
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Print each run record as one line of JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Where `--capture` keeps each run's files: DIR/<run id>/.
    #[arg(long, value_name = "DIR", default_value = "captures")]
    pub capture_dir: PathBuf,
    /// Write a HAR 1.2 file of the run (with --runs N: FILE-1.har … FILE-N.har; a retried run's
    /// later attempts: FILE-i.a2.har …).
    #[arg(long, value_name = "FILE")]
    pub har: Option<PathBuf>,
    /// Run a run again, up to this many times, when it failed as a measurement (as for
    /// `matrix`); every attempt is printed.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub retry_invalid: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Both commands see PAGEBENCH_CLIENT_IP, PAGEBENCH_SERVER_IP, PAGEBENCH_CLIENT_NS, \
PAGEBENCH_SERVER_NS and PAGEBENCH_SERVER_IPS (with --server-addresses N: the N addresses, space-separated, \
the profile's origin_delay_ms in this order). Example:\n  pagebench shell --profile wired --server-cmd 'python3 -m http.server \
--bind $PAGEBENCH_SERVER_IP 8000' --wait-tcp 8000 -- sh -c 'curl -so /dev/null -w \"%{time_total}\\n\" \
http://$PAGEBENCH_SERVER_IP:8000/'"
)]
pub struct ShellArgs {
    /// Network profile: a name (see `pagebench profiles`) or a path to a TOML file.
    #[arg(long)]
    pub profile: String,
    #[arg(long, value_name = "DIR", help = PROFILES_DIR_HELP)]
    pub profiles_dir: Option<PathBuf>,
    /// Command run with `sh -c` in the server namespace while the client command runs.
    #[arg(long, value_name = "CMD")]
    pub server_cmd: Option<String>,
    /// Start the client command only once the server accepts TCP connections on this port.
    #[arg(long, value_name = "PORT")]
    pub wait_tcp: Option<u16>,
    /// Give the server namespace N addresses (its own and N − 1 more), each with the profile's
    /// `origin_delay_ms` entry: origins at different distances.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub server_addresses: u16,
    /// Answer HOST with server address N (1: the namespace's own, in `PAGEBENCH_SERVER_IPS`'s
    /// order) from pagebench's resolver, behind the link on an address of its own (at the
    /// profile's `resolver_rtt_ms`); `@MS` holds its every answer that much longer. The client
    /// command then resolves every name through it (its own /etc/resolv.conf, and an
    /// /etc/hosts of localhost only); other names are NXDOMAIN. Repeatable.
    #[arg(long = "dns-name", value_name = "HOST=N[@MS]", value_parser = crate::config::name_lookup::parse_dns_name)]
    pub dns_names: Vec<crate::config::name_lookup::DnsName>,
    /// Seed of the link's loss and jitter draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run the emulator at normal priority instead of SCHED_FIFO.
    #[arg(long)]
    pub no_realtime: bool,
    /// Let idle CPUs halt while the link runs (less host CPU, slower wake-ups on VMs).
    #[arg(long)]
    pub let_cpus_sleep: bool,
    /// Also write the link's counters and self-check as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub stats_json: Option<PathBuf>,
    /// Keep `pcap` (every packet of the session, `client.pcapng.gz` and `server.pcapng.gz`)
    /// and/or `keys` (both commands get SSLKEYLOGFILE=DIR/keys.log) in --capture-dir.
    #[arg(long, value_name = "KINDS")]
    pub capture: Option<crate::packets::CaptureSet>,
    #[arg(long, value_name = "DIR", default_value = "captures/shell")]
    pub capture_dir: PathBuf,
    /// The command to run in the client namespace (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub target: BenchTarget,
}

/// What to benchmark.
#[derive(Subcommand, Debug)]
pub enum BenchTarget {
    /// The link emulator: delay error at 0/20/75 ms (idle and under bulk TCP), forwarding rate.
    Netem(BenchNetemArgs),
    /// Loopback throughput of the embedded server per protocol (default: a 3 MB body).
    Server(crate::bench::server_bench::BenchServerArgs),
    /// Does the link deliver the profile whatever the protocol? A matrix (h1, h2, h3 × page50
    /// and the 3 MB download on the study's profiles), then the achieved RTT per cell against
    /// the profile and per run against the link model.
    Link(BenchLinkArgs),
    /// What `--visual` costs: loadEventEnd with and without the screencast, runs interleaved
    /// (ABBA) on one testbed, compared as two series.
    Visual(BenchVisualArgs),
    /// What `--capture` costs (default `--capture pcap,keys`): loadEventEnd with and without
    /// keeping the files, interleaved as `bench visual`, and the bytes kept per run.
    Capture(BenchVisualArgs),
    /// What tapping the link's packets (the head-of-line analysis, on in every run) costs:
    /// loadEventEnd with and without the tap, interleaved as `bench visual`.
    Tap(BenchVisualArgs),
    /// How often `--runs auto` calls a difference that is not there: simulated cells of two
    /// protocols drawn from one distribution, run until the stopping rule stops them, judged
    /// by the summary's verdict; beside them the same cells at fixed run counts. CPU only.
    Stopping(BenchStoppingArgs),
    /// Does walking a plan on concurrent lanes measure what a serial walk does? The same
    /// cells one run at a time and on `--jobs` lanes, interleaved in blocks of one round; per
    /// series the ratio of medians with its 90 % CI and a TOST of equivalence within ±5 %.
    Concurrency(BenchConcurrencyArgs),
}

#[derive(Args, Debug)]
pub struct BenchConcurrencyArgs {
    /// Network profiles (as for `matrix`).
    #[arg(long, default_value = "mobile,bad-mobile,cell-edge,wired")]
    pub profiles: String,
    #[arg(long, default_value = "page50,download")]
    pub workloads: String,
    #[arg(long, default_value = "h1,h2,h3")]
    pub protocols: String,
    /// Measured runs per series, each way.
    #[arg(long, default_value_t = 10)]
    pub runs: u32,
    /// Lanes of the concurrent walk: N (2 to 16) that share the machine whatever their need
    /// (what sharing does), or auto (as `matrix --jobs auto` walks: rounds share by their
    /// measured CPU need, the rest run alone; what a user gets).
    #[arg(long, default_value = "3", value_parser = crate::bench::concurrency_bench::parse_jobs)]
    pub jobs: crate::matrix::lanes::Jobs,
    /// Measured rounds per block, each block walked serially and concurrently. More rounds
    /// per block put more light rounds side by side on `--jobs auto`, as a matrix's walk does
    /// (it runs every light round of every cell together, up to its lanes).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub block_rounds: u32,
    /// The equivalence margin, in percent.
    #[arg(long, default_value_t = 5.0, value_name = "PCT")]
    pub margin: f64,
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The quiet-machine check before the first block (0s: none).
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub machine_check: Duration,
    /// Results directory [default: results/bench-concurrency-<timestamp>]: `serial/`,
    /// `concurrent/`, `concurrency.md`, `concurrency.json`.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct BenchStoppingArgs {
    /// Simulated cells per distribution (2000: the rate's 95 % CI within about ±1 % at 5 %).
    #[arg(long, default_value_t = 2000)]
    pub cells: usize,
    /// Distributions of the load times, comma-separated: lognormalCV (CV in percent) or
    /// stalls (5 % CV, one run in ten stalled by a Pareto factor).
    #[arg(
        long,
        default_value = "lognormal5,lognormal10,lognormal20,stalls",
        value_delimiter = ','
    )]
    pub shapes: Vec<String>,
    #[arg(long, default_value_t = 5)]
    pub min_runs: u32,
    #[arg(long, default_value_t = 30)]
    pub max_runs: u32,
    /// `--precision` values to run the rule with, comma-separated.
    #[arg(long, default_value = "5,10", value_delimiter = ',')]
    pub precision: Vec<f64>,
    /// Fixed run counts to compare with, comma-separated.
    #[arg(long, default_value = "10,30", value_delimiter = ',')]
    pub fixed_runs: Vec<u32>,
    /// median(h3) / median(h2) of the simulated distributions: 1 (no difference) measures
    /// false positives; below 1 measures power.
    #[arg(long, default_value_t = 1.0)]
    pub true_ratio: f64,
    /// Bootstrap resamples per CI (the matrix's own count by default).
    #[arg(long, default_value_t = crate::support::stats::DEFAULT_RESAMPLES)]
    pub resamples: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulation threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchVisualArgs {
    #[arg(long, default_value = "wired")]
    pub profile: String,
    #[arg(long, default_value = "page50")]
    pub workload: String,
    /// h1, h2, h3 (forced: same as h3-forced), h3-primed, h3-discovered or h3-dns.
    #[arg(long, default_value = "h2", value_parser = parse_forced_variant)]
    pub protocol: crate::config::protocol::Variant,
    /// Refused: the variant is named in --protocol (h3-primed, h3-discovered).
    #[arg(long, value_enum, hide = true)]
    pub h3_mode: Option<crate::config::protocol::H3Mode>,
    /// Runs per arm (after one warm-up each).
    #[arg(long, default_value_t = 20)]
    pub runs: usize,
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where the runs' records go [default: results/bench-visual-<time>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct BenchLinkArgs {
    /// Only compute the table from an existing results directory (e.g. a study matrix); the
    /// options that shape a new run do not go with it.
    #[arg(long, value_name = "DIR", conflicts_with_all = [
        "profiles", "workloads", "protocols", "runs", "jitter_model", "timeout", "seed", "out",
    ])]
    pub from: Option<PathBuf>,
    /// Network profiles (as for `matrix`).
    #[arg(long, default_value = "all")]
    pub profiles: String,
    #[arg(long, default_value = "page50,download")]
    pub workloads: String,
    #[arg(long, default_value = "h1,h2,h3")]
    pub protocols: String,
    /// Measured runs per cell.
    #[arg(long, default_value_t = 10)]
    pub runs: u32,
    /// Run the profiles with this jitter model instead of their own (varying, fifo, reorder):
    /// `--jitter-model fifo` shows what the emulator did before the varying model.
    #[arg(long, value_name = "MODEL")]
    pub jitter_model: Option<String>,
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Results directory [default: results/bench-link-<timestamp>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct BenchNetemArgs {
    /// Probing time per delay and load, in seconds.
    #[arg(long, default_value_t = 4.0)]
    pub seconds: f64,
    /// Blasting time of each forwarding-rate test, in seconds.
    #[arg(long, default_value_t = 3.0)]
    pub rate_seconds: f64,
    /// One-way delays to measure at, in ms, comma-separated.
    #[arg(long, default_value = "0,20,75", value_delimiter = ',')]
    pub delays: Vec<f64>,
    /// Run the emulator at normal priority instead of SCHED_FIFO.
    #[arg(long)]
    pub no_realtime: bool,
    /// Let idle CPUs halt during the benchmark (less host CPU, slower wake-ups on VMs).
    #[arg(long)]
    pub let_cpus_sleep: bool,
    /// Let the emulator run the receiving stack's work itself (no pinning, no RPS): the
    /// behaviour before receive steering, for comparison.
    #[arg(long)]
    pub no_receive_steering: bool,
    /// Also write the figures as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub stats_json: Option<PathBuf>,
}

/// One spelling per variant: `--h3-mode M` is refused, naming `h3-M` in `flag`.
pub fn refuse_h3_mode(mode: Option<crate::config::protocol::H3Mode>, flag: &str) -> Result<()> {
    match mode {
        None => Ok(()),
        Some(m) => anyhow::bail!(
            "--h3-mode is gone: name the variant in {flag} instead (h3-{}; plain h3 is the study's forced h3)",
            m.name()
        ),
    }
}

/// `--protocol` of the single-series commands: a variant name, as `--protocols` spells it
/// (as-recorded has its own flag there).
pub fn parse_forced_variant(
    s: &str,
) -> std::result::Result<crate::config::protocol::Variant, String> {
    let v: crate::config::protocol::Variant = s
        .parse()
        .map_err(|e: anyhow::Error| e.to_string().replace("in --protocols", "in --protocol"))?;
    if v.as_recorded {
        return Err("as-recorded is --as-recorded here (with a site:DIR workload)".into());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::{Cli, Command};
    use crate::matrix::lanes::Jobs;
    use clap::Parser;

    fn matrix_jobs(args: &[&str]) -> Jobs {
        let cli = Cli::try_parse_from(["pagebench", "matrix"].iter().chain(args)).unwrap();
        match cli.command {
            Command::Matrix(m) => m.jobs,
            other => panic!("not a matrix: {other:?}"),
        }
    }

    #[test]
    fn a_matrix_walks_on_lanes_unless_told_one_run_at_a_time() {
        assert_eq!(matrix_jobs(&[]), Jobs::Auto);
        assert_eq!(matrix_jobs(&["--jobs", "1"]), Jobs::Fixed(1));
        assert_eq!(matrix_jobs(&["--jobs", "4"]), Jobs::Fixed(4));
    }
}
