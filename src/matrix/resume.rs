//! `pagebench matrix --resume DIR` alone. A results directory's `meta.json` holds the plan, the
//! profile values and, in [`StoredOptions`], the rest of what the matrix was started with; a
//! resume rebuilds the request from them. Options typed beside `--resume` must equal the stored
//! ones: each difference is named, and the resume refused. Pure: the command line comes in as
//! the request it built (clap's defaults filled in) and which options were typed ([`Typed`]).

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};

use super::request::MatrixRequest;
use crate::config::profile::{self, ProfileSource};
use crate::config::protocol::{H3Mode, Variant};
use crate::embedded_server::ServerKnobs;
use crate::evidence::visual::VisualSource;
use crate::measure::testbed::{self, ServerChoice};
use crate::results::resume_options::{ServerFlags, StoredOptions};
use crate::results::store::Meta;

impl StoredOptions {
    pub fn of(req: &MatrixRequest) -> StoredOptions {
        StoredOptions {
            servers: ServerFlags::of(&req.servers),
            knobs: req.knobs.clone(),
            settle_max_ms: req.settle_max.as_millis() as u64,
            steer_receive: req.steer_receive,
            visual: req.visual.is_some(),
            visual_source: req.visual.unwrap_or_else(VisualSource::before_video),
            capture: req.capture.clone(),
            repeat_cache: req.repeat_cache,
            pages: std::path::absolute(&req.pages_root).unwrap_or_else(|_| req.pages_root.clone()),
            sites: req.sites,
            dns: req.dns,
            site_dirs: crate::config::workload::parse_list(&req.workloads)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|w| match w.kind {
                    crate::config::workload::WorkloadKind::Site { dir } => Some((w.name, dir)),
                    _ => None,
                })
                .collect(),
        }
    }
}

impl ServerFlags {
    pub fn of(choices: &[ServerChoice]) -> ServerFlags {
        let mut flags = ServerFlags {
            servers: choices
                .iter()
                .filter(|c| !matches!(c, ServerChoice::Command(_)))
                .map(|c| c.name().to_string())
                .collect::<Vec<_>>()
                .join(","),
            server_cmd: None,
            server_log_format: None,
            server_log: None,
        };
        if let Some(ServerChoice::Command(c)) = choices
            .iter()
            .find(|c| matches!(c, ServerChoice::Command(_)))
        {
            flags.server_cmd = Some(c.command.clone());
            if let Some(l) = &c.log {
                flags.server_log_format = Some(l.format.name().to_string());
                flags.server_log = l.path.clone();
            }
        }
        flags
    }

    pub fn parse(&self) -> Result<Vec<ServerChoice>> {
        testbed::parse_servers(
            &self.servers,
            self.server_cmd.as_deref(),
            self.server_log_format.as_deref(),
            self.server_log.as_deref(),
        )
    }

    /// As typed on a command line.
    fn describe(&self) -> String {
        let mut s = format!("--servers {}", self.servers);
        for (flag, v) in [
            ("--server-cmd", &self.server_cmd),
            ("--server-log-format", &self.server_log_format),
            ("--server-log", &self.server_log),
        ] {
            if let Some(v) = v {
                s.push_str(&format!(" {flag} {v:?}"));
            }
        }
        s
    }
}

/// Which matrix options the command line typed (the others hold clap's defaults).
#[derive(Debug, Clone, Copy, Default)]
pub struct Typed {
    pub profiles: bool,
    pub profiles_dir: bool,
    pub workloads: bool,
    pub protocols: bool,
    pub h3_mode: bool,
    /// `--servers`, `--server-cmd`, `--server-log-format` or `--server-log`.
    pub servers: bool,
    pub browsers: bool,
    pub views: bool,
    /// `--devices` or `--cpu-throttle-devtools`.
    pub devices: bool,
    pub repeat_cache: bool,
    /// `--server-config` or any knob flag.
    pub knobs: bool,
    pub runs: bool,
    /// `--min-runs`, `--max-runs` or `--precision`.
    pub adaptive: bool,
    /// `--shard`.
    pub shard: bool,
    pub warmup: bool,
    pub seed: bool,
    pub timeout: bool,
    pub settle_max: bool,
    pub retry_invalid: bool,
    pub pages_seed: bool,
    pub no_receive_steering: bool,
    pub pages: bool,
    pub visual: bool,
    pub capture: bool,
}

/// A `--protocols` value that parses back to exactly `variants` whatever `--h3-mode` says.
fn protocols_spec(variants: &[Variant]) -> String {
    variants
        .iter()
        .map(|v| match v.h3_mode {
            Some(H3Mode::Forced) => "h3-forced".to_string(),
            _ => v.name(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn names(profiles: &[profile::Profile]) -> String {
    profiles
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

fn differs(flag: &str, given: impl std::fmt::Display, stored: impl std::fmt::Display) -> String {
    format!("{flag} {given} given, the results were made with {flag} {stored}")
}

/// The request that continues the matrix in `dir` as `stored` describes it, or the refusal
/// naming every typed option that differs. Directories written before the options were stored
/// are continued with the command line as given (the store then checks it is the same matrix).
pub fn resumed_request(
    dir: &Path,
    stored: &Meta,
    given: &MatrixRequest,
    typed: &Typed,
) -> Result<MatrixRequest> {
    let Some(options) = &stored.options else {
        return Ok(given.clone());
    };
    let mut diffs = profile_differences(stored, given, typed)?;
    diffs.extend(plan_differences(stored, options, given, typed)?);
    diffs.extend(knob_differences(options, given, typed));
    diffs.extend(run_differences(stored, given, typed));
    diffs.extend(option_differences(options, given, typed));
    if !diffs.is_empty() {
        bail!(
            "--resume {}: {}; leave these options out to continue with the stored ones, or start a new matrix with --out",
            dir.display(),
            diffs.join("; ")
        );
    }
    stored_request(dir, stored, options, given, typed)
}

/// `--profiles` and `--profiles-dir`: the same profiles, with the same values.
fn profile_differences(stored: &Meta, given: &MatrixRequest, typed: &Typed) -> Result<Vec<String>> {
    let plan = &stored.plan;
    let mut diffs: Vec<String> = Vec::new();
    if typed.profiles || typed.profiles_dir {
        let spec = if typed.profiles {
            given.profiles.clone()
        } else {
            plan.profiles.join(",")
        };
        let chosen = profile::select_from(&spec, &given.profiles_dir)?;
        let chosen_names: Vec<&str> = chosen.iter().map(|p| p.name.as_str()).collect();
        if chosen_names != plan.profiles {
            diffs.push(differs(
                "--profiles",
                names(&chosen),
                plan.profiles.join(","),
            ));
        } else {
            for (c, s) in chosen.iter().zip(&stored.profiles) {
                if c != s {
                    diffs.push(format!(
                        "profile {} of {} has other values than the one the results were made with ({})",
                        c.name,
                        given.profiles_dir.describe(),
                        s.summary()
                    ));
                }
            }
        }
    }
    Ok(diffs)
}

/// The plan's other dimensions: workloads, protocols, servers, browsers, views.
fn plan_differences(
    stored: &Meta,
    options: &StoredOptions,
    given: &MatrixRequest,
    typed: &Typed,
) -> Result<Vec<String>> {
    let plan = &stored.plan;
    let mut diffs: Vec<String> = Vec::new();
    if typed.workloads {
        let w: Vec<String> = crate::config::workload::parse_list(&given.workloads)?
            .into_iter()
            .map(|w| w.name)
            .collect();
        if w != plan.workloads {
            diffs.push(differs(
                "--workloads",
                w.join(","),
                plan.workloads.join(","),
            ));
        }
    }
    if typed.protocols || typed.h3_mode {
        let variants: Vec<Variant> = if typed.protocols {
            crate::config::protocol::parse_variants(&given.protocols, given.h3_mode)?
        } else {
            // `--h3-mode` alone: the stored protocols with h3 in the mode given.
            plan.variants
                .iter()
                .map(|v| Variant::new(v.protocol, given.h3_mode))
                .collect()
        };
        if variants != plan.variants {
            diffs.push(differs(
                "--protocols",
                protocols_spec(&variants),
                protocols_spec(&plan.variants),
            ));
        }
    }
    if typed.servers {
        let g = ServerFlags::of(&given.servers);
        if g != options.servers {
            diffs.push(format!(
                "{} given, the results were made with {}",
                g.describe(),
                options.servers.describe()
            ));
        }
    }
    if typed.browsers && given.browsers != plan.browsers {
        let list = |b: &[crate::config::identity::BrowserId]| {
            b.iter().map(|b| b.name()).collect::<Vec<_>>().join(",")
        };
        diffs.push(differs(
            "--browsers",
            list(&given.browsers),
            list(&plan.browsers),
        ));
    }
    if typed.views && given.views != plan.views {
        let list = |v: &[crate::config::identity::View]| {
            v.iter().map(|v| v.name()).collect::<Vec<_>>().join(",")
        };
        diffs.push(differs("--views", list(&given.views), list(&plan.views)));
    }
    let given_devices: Vec<_> = given.devices.iter().map(|d| d.id()).collect();
    if typed.devices && given_devices != plan.devices {
        let list = |d: &[crate::config::device::DeviceId]| {
            d.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        diffs.push(differs(
            "--devices",
            list(&given_devices),
            list(&plan.devices),
        ));
    }
    Ok(diffs)
}

/// `--repeat-cache` and the server knobs, each knob named.
fn knob_differences(options: &StoredOptions, given: &MatrixRequest, typed: &Typed) -> Vec<String> {
    let mut diffs: Vec<String> = Vec::new();
    if typed.repeat_cache && given.repeat_cache != options.repeat_cache {
        diffs.push(differs(
            "--repeat-cache",
            format!("{:?}", given.repeat_cache).to_lowercase(),
            format!("{:?}", options.repeat_cache).to_lowercase(),
        ));
    }
    if typed.knobs && given.knobs != options.knobs {
        let as_map = |k: &ServerKnobs| match serde_json::to_value(k) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        let (g, s) = (as_map(&given.knobs), as_map(&options.knobs));
        let mut keys: Vec<&String> = g.keys().chain(s.keys()).collect();
        keys.sort();
        keys.dedup();
        let show = |v: Option<&serde_json::Value>| v.map_or("unset".to_string(), |v| v.to_string());
        for k in keys {
            if g.get(k) != s.get(k) {
                diffs.push(format!(
                    "server knob {k} {} given, the results were made with {}",
                    show(g.get(k)),
                    show(s.get(k))
                ));
            }
        }
    }
    diffs
}

/// How many runs, which shard, the seeds, retries and time limits.
fn run_differences(stored: &Meta, given: &MatrixRequest, typed: &Typed) -> Vec<String> {
    let plan = &stored.plan;
    let mut diffs: Vec<String> = Vec::new();
    let runs_of = |adaptive: Option<crate::config::plan::Adaptive>, runs: u32| match adaptive {
        Some(a) => format!(
            "auto (--min-runs {} --max-runs {} --precision {})",
            a.min_runs, a.max_runs, a.precision_pct
        ),
        None => runs.to_string(),
    };
    if (typed.runs || typed.adaptive)
        && runs_of(given.adaptive, given.runs) != runs_of(plan.adaptive, plan.runs)
    {
        diffs.push(differs(
            "--runs",
            runs_of(given.adaptive, given.runs),
            runs_of(plan.adaptive, plan.runs),
        ));
    }
    let stored_shard = stored.shard.as_ref().map(|s| s.spec);
    if typed.shard && given.shard != stored_shard {
        let show = |s: Option<crate::results::shards::ShardSpec>| {
            s.map_or("none".to_string(), |s| s.to_string())
        };
        diffs.push(differs("--shard", show(given.shard), show(stored_shard)));
    }
    for (is_typed, flag, g, s) in [
        (
            typed.warmup,
            "--warmup",
            given.warmup as u64,
            plan.warmup as u64,
        ),
        (typed.seed, "--seed", given.seed, plan.seed),
        (
            typed.retry_invalid,
            "--retry-invalid",
            given.retry_invalid as u64,
            stored.retry_invalid as u64,
        ),
        (
            typed.pages_seed,
            "--pages-seed",
            given.pages_seed,
            stored.pages_seed,
        ),
    ] {
        if is_typed && g != s {
            diffs.push(differs(flag, g, s));
        }
    }
    let stored_timeout = Duration::from_secs_f64(stored.timeout_s);
    if typed.timeout && given.timeout != stored_timeout {
        diffs.push(differs(
            "--timeout",
            humantime::format_duration(given.timeout),
            humantime::format_duration(stored_timeout),
        ));
    }
    diffs
}

/// The options that change how each run is measured.
fn option_differences(
    options: &StoredOptions,
    given: &MatrixRequest,
    typed: &Typed,
) -> Vec<String> {
    let mut diffs: Vec<String> = Vec::new();
    let stored_settle = Duration::from_millis(options.settle_max_ms);
    if typed.settle_max && given.settle_max != stored_settle {
        diffs.push(differs(
            "--settle-max",
            humantime::format_duration(given.settle_max),
            humantime::format_duration(stored_settle),
        ));
    }
    if typed.no_receive_steering && options.steer_receive {
        diffs.push(
            "--no-receive-steering given, the results were made with receive steering".into(),
        );
    }
    if typed.visual && !options.visual {
        diffs.push("--visual given, the results were made without it".into());
    } else if typed.visual && given.visual != Some(options.visual_source) {
        diffs.push(differs(
            "--visual",
            given.visual.map_or("none", VisualSource::name),
            options.visual_source.name(),
        ));
    }
    if typed.capture && given.capture != options.capture {
        diffs.push(differs(
            "--capture",
            given.capture.to_string(),
            if options.capture.is_empty() {
                "none".to_string()
            } else {
                options.capture.to_string()
            },
        ));
    }
    diffs
}

/// The stored request, with what the command line may change (output, test hooks, pages).
fn stored_request(
    dir: &Path,
    stored: &Meta,
    options: &StoredOptions,
    given: &MatrixRequest,
    typed: &Typed,
) -> Result<MatrixRequest> {
    let plan = &stored.plan;
    let stored_timeout = Duration::from_secs_f64(stored.timeout_s);
    let stored_settle = Duration::from_millis(options.settle_max_ms);
    Ok(MatrixRequest {
        profiles: plan.profiles.join(","),
        profiles_dir: ProfileSource::Listed(stored.profiles.clone()),
        // A site workload is named after its archive; it parses back from its directory.
        workloads: plan
            .workloads
            .iter()
            .map(|w| match options.site_dirs.get(w) {
                Some(dir) => format!("site:{}", dir.display()),
                None => w.clone(),
            })
            .collect::<Vec<_>>()
            .join(","),
        protocols: protocols_spec(&plan.variants),
        h3_mode: given.h3_mode,
        servers: options.servers.parse()?,
        browsers: plan.browsers.clone(),
        views: plan.views.clone(),
        devices: plan
            .devices
            .iter()
            .map(|d| d.device())
            .collect::<Result<_>>()?,
        repeat_cache: options.repeat_cache,
        knobs: options.knobs.clone(),
        runs: plan.runs,
        warmup: plan.warmup,
        seed: plan.seed,
        timeout: stored_timeout,
        settle_max: stored_settle,
        pages_root: if typed.pages {
            given.pages_root.clone()
        } else {
            options.pages.clone()
        },
        out: None,
        resume: Some(dir.to_path_buf()),
        quiet: given.quiet,
        report: given.report,
        retry_invalid: stored.retry_invalid,
        pages_seed: stored.pages_seed,
        faults: given.faults.clone(),
        steer_receive: options.steer_receive,
        visual: options.visual.then_some(options.visual_source),
        capture: options.capture.clone(),
        sites: options.sites,
        dns: options.dns,
        adaptive: plan.adaptive,
        shard: stored.shard.as_ref().map(|s| s.spec),
        calibration_runs: given.calibration_runs,
        machine_check: given.machine_check,
        jobs: given.jobs,
        share_below: given.share_below,
        until_round: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::plan::PlanSpec;
    use crate::config::profile::Profile;
    use std::path::PathBuf;

    fn wired() -> Profile {
        Profile::simple("wired", 40.0, 5.0, 0.0)
    }

    fn mobile() -> Profile {
        Profile::simple("mobile", 60.0, 15.0, 1.0)
    }

    /// What `pagebench matrix` builds from a command line with every default.
    fn defaults() -> MatrixRequest {
        MatrixRequest {
            profiles: "all".into(),
            profiles_dir: ProfileSource::Listed(vec![wired(), mobile()]),
            workloads: "page10,page50,download".into(),
            protocols: "h1,h2,h3".into(),
            h3_mode: H3Mode::Forced,
            servers: vec![ServerChoice::embedded()],
            browsers: vec![crate::config::identity::BrowserId::default()],
            views: vec![crate::config::identity::View::First],
            devices: vec![crate::config::device::Device::desktop()],
            repeat_cache: Default::default(),
            knobs: ServerKnobs::default().with_default_tcp_congestion(),
            runs: 10,
            warmup: 1,
            seed: 1,
            timeout: Duration::from_secs(120),
            settle_max: Duration::from_secs(3),
            pages_root: PathBuf::new(),
            out: None,
            resume: Some("/r".into()),
            quiet: false,
            report: true,
            retry_invalid: 2,
            pages_seed: 1,
            faults: vec![],
            steer_receive: true,
            visual: None,
            capture: Default::default(),
            sites: Default::default(),
            dns: Default::default(),
            adaptive: None,
            shard: None,
            calibration_runs: 5,
            machine_check: Duration::ZERO,
            jobs: crate::matrix::lanes::Jobs::Fixed(1),
            share_below: crate::matrix::lanes::AUTO_LIGHT,
            until_round: None,
        }
    }

    /// The matrix as started: `--profiles wired,mobile --workloads page10 --protocols h2,h3
    /// --h3-mode primed --runs 4 --seed 9 --timeout 30s --pages /p --pages-seed 7`.
    fn started() -> MatrixRequest {
        MatrixRequest {
            profiles: "wired,mobile".into(),
            workloads: "page10".into(),
            protocols: "h2,h3".into(),
            h3_mode: H3Mode::Primed,
            runs: 4,
            seed: 9,
            timeout: Duration::from_secs(30),
            pages_root: "/p".into(),
            pages_seed: 7,
            resume: None,
            out: Some("/r".into()),
            ..defaults()
        }
    }

    fn meta_of(req: &MatrixRequest) -> Meta {
        let profiles = profile::select_from(&req.profiles, &req.profiles_dir).unwrap();
        let variants =
            crate::config::protocol::parse_variants(&req.protocols, req.h3_mode).unwrap();
        let plan = PlanSpec {
            profiles: profiles.iter().map(|p| p.name.clone()).collect(),
            workloads: crate::config::workload::parse_list(&req.workloads)
                .unwrap()
                .into_iter()
                .map(|w| w.name)
                .collect(),
            servers: req.servers.iter().map(ServerChoice::name).collect(),
            browsers: req.browsers.clone(),
            views: req.views.clone(),
            devices: req.devices.iter().map(|d| d.id()).collect(),
            variants,
            runs: req.runs,
            warmup: req.warmup,
            seed: req.seed,
            adaptive: req.adaptive,
        };
        Meta {
            run_columns: vec![],
            status: "interrupted".into(),
            profiles,
            timeout_s: req.timeout.as_secs_f64(),
            pages_seed: req.pages_seed,
            retry_invalid: req.retry_invalid,
            options: Some(StoredOptions::of(req)),
            shard: req.shard.map(|spec| crate::results::shards::ShardInfo {
                spec,
                cells: vec![],
            }),
            ..Meta::new(plan, 0)
        }
    }

    fn resume(given: &MatrixRequest, typed: Typed) -> Result<MatrixRequest> {
        resumed_request(Path::new("/r"), &meta_of(&started()), given, &typed)
    }

    fn refusal(given: &MatrixRequest, typed: Typed) -> String {
        format!("{:#}", resume(given, typed).unwrap_err())
    }

    /// What a request decides about the matrix (everything but output and test hooks).
    fn identity(r: &MatrixRequest) -> Meta {
        let mut m = meta_of(r);
        m.options.as_mut().unwrap().pages = PathBuf::new();
        m
    }

    #[test]
    fn resume_alone_rebuilds_the_started_request() {
        let r = resume(&defaults(), Typed::default()).unwrap();
        let s = started();
        assert_eq!(
            serde_json::to_value(identity(&r)).unwrap(),
            serde_json::to_value(identity(&s)).unwrap()
        );
        assert_eq!(r.pages_root, Path::new("/p"));
        assert_eq!(r.resume.as_deref(), Some(Path::new("/r")));
        assert_eq!(r.out, None);
        // The profiles come from the stored values, not from a directory.
        assert_eq!(
            r.profiles_dir,
            ProfileSource::Listed(vec![wired(), mobile()])
        );
        assert_eq!(
            crate::config::protocol::parse_variants(&r.protocols, H3Mode::Forced).unwrap(),
            meta_of(&s).plan.variants,
            "h3 stays primed whatever --h3-mode defaults to"
        );
    }

    #[test]
    fn options_equal_to_the_stored_ones_are_accepted() {
        let all = Typed {
            profiles: true,
            workloads: true,
            protocols: true,
            h3_mode: true,
            servers: true,
            knobs: true,
            runs: true,
            warmup: true,
            seed: true,
            timeout: true,
            settle_max: true,
            retry_invalid: true,
            pages_seed: true,
            pages: true,
            ..Typed::default()
        };
        let given = MatrixRequest {
            resume: Some("/r".into()),
            out: None,
            ..started()
        };
        let r = resume(&given, all).unwrap();
        assert_eq!(r.runs, 4);
        // `--protocols h2,h3-primed` is the same matrix as `--protocols h2,h3 --h3-mode primed`.
        let spelled = MatrixRequest {
            protocols: "h2,h3-primed".into(),
            ..defaults()
        };
        let typed = Typed {
            protocols: true,
            ..Typed::default()
        };
        assert!(resume(&spelled, typed).is_ok());
        // Output options are not part of the matrix.
        let quiet = MatrixRequest {
            quiet: true,
            report: false,
            ..defaults()
        };
        let r = resume(&quiet, Typed::default()).unwrap();
        assert!(r.quiet && !r.report);
    }

    #[test]
    fn visual_is_resumed_as_started_and_cannot_be_added() {
        // Started without --visual: giving it on resume is refused.
        let e = refusal(
            &MatrixRequest {
                visual: Some(VisualSource::Video),
                ..defaults()
            },
            Typed {
                visual: true,
                ..Typed::default()
            },
        );
        assert!(e.contains("--visual given"), "{e}");
        // Started with it: a resume alone keeps recording screencasts.
        let with = MatrixRequest {
            visual: Some(VisualSource::Screencast),
            ..started()
        };
        let r = resumed_request(
            Path::new("/r"),
            &meta_of(&with),
            &defaults(),
            &Typed::default(),
        )
        .unwrap();
        assert_eq!(r.visual, Some(VisualSource::Screencast));
        // Another method than the one the runs were made with is refused.
        let e = resumed_request(
            Path::new("/r"),
            &meta_of(&with),
            &MatrixRequest {
                visual: Some(VisualSource::Video),
                ..defaults()
            },
            &Typed {
                visual: true,
                ..Typed::default()
            },
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("--visual"), "{e:#}");
    }

    #[test]
    fn capture_is_resumed_as_started_and_cannot_change() {
        let with = MatrixRequest {
            capture: "pcap,keys".parse().unwrap(),
            ..started()
        };
        let r = resumed_request(
            Path::new("/r"),
            &meta_of(&with),
            &defaults(),
            &Typed::default(),
        )
        .unwrap();
        assert_eq!(r.capture.to_string(), "pcap,keys");
        let e = resumed_request(
            Path::new("/r"),
            &meta_of(&with),
            &MatrixRequest {
                capture: "qlog".parse().unwrap(),
                ..defaults()
            },
            &Typed {
                capture: true,
                ..Typed::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--capture qlog given, the results were made with --capture pcap,keys"),
            "{e}"
        );
    }

    #[test]
    fn a_differing_option_is_refused_with_the_difference() {
        let runs = MatrixRequest {
            runs: 10,
            ..defaults()
        };
        let typed = Typed {
            runs: true,
            ..Typed::default()
        };
        let e = refusal(&runs, typed);
        assert!(
            e.contains("--runs 10 given, the results were made with --runs 4"),
            "{e}"
        );
        assert!(e.contains("--resume /r") && e.contains("--out"), "{e}");
        // A default left untyped is no difference.
        assert!(resume(&runs, Typed::default()).is_ok());

        let several = MatrixRequest {
            timeout: Duration::from_secs(60),
            workloads: "page50".into(),
            ..defaults()
        };
        let typed = Typed {
            timeout: true,
            workloads: true,
            ..Typed::default()
        };
        let e = refusal(&several, typed);
        assert!(
            e.contains("--timeout 1m given, the results were made with --timeout 30s")
                && e.contains(
                    "--workloads page50 given, the results were made with --workloads page10"
                ),
            "{e}"
        );
        let both = MatrixRequest {
            browsers: vec![
                crate::config::identity::BrowserId::default(),
                crate::measure::browser::engines::firefox::ID,
            ],
            ..defaults()
        };
        let typed = Typed {
            browsers: true,
            ..Typed::default()
        };
        let e = refusal(&both, typed);
        assert!(
            e.contains(
                "--browsers chromium,firefox given, the results were made with --browsers chromium"
            ),
            "{e}"
        );
        let h3 = Typed {
            h3_mode: true,
            ..Typed::default()
        };
        let e = refusal(&defaults(), h3);
        assert!(
            e.contains("--protocols h2,h3-forced given, the results were made with --protocols h2,h3-primed"),
            "{e}"
        );
        let seed = MatrixRequest {
            pages_seed: 1,
            ..defaults()
        };
        let typed = Typed {
            pages_seed: true,
            ..Typed::default()
        };
        assert!(refusal(&seed, typed)
            .contains("--pages-seed 1 given, the results were made with --pages-seed 7"));
    }

    #[test]
    fn servers_knobs_and_profiles_are_compared_by_value() {
        let caddy = MatrixRequest {
            servers: vec!["caddy".parse().unwrap()],
            ..defaults()
        };
        let typed = Typed {
            servers: true,
            ..Typed::default()
        };
        let e = refusal(&caddy, typed);
        assert!(
            e.contains("--servers caddy given, the results were made with --servers embedded"),
            "{e}"
        );
        let knobs = ServerKnobs {
            tcp_congestion: Some(crate::embedded_server::knobs::TcpCongestion::Bbr),
            ..ServerKnobs::default()
        };
        let bbr = MatrixRequest {
            knobs,
            ..defaults()
        };
        let typed = Typed {
            knobs: true,
            ..Typed::default()
        };
        let e = refusal(&bbr, typed);
        assert!(
            e.contains(
                "server knob tcp_congestion \"bbr\" given, the results were made with \"cubic\""
            ),
            "{e}"
        );
        // The same names from a source where wired has other values.
        let mut slower = wired();
        slower.rtt_ms = 80.0;
        let changed = MatrixRequest {
            profiles: "wired,mobile".into(),
            profiles_dir: ProfileSource::Listed(vec![slower, mobile()]),
            ..defaults()
        };
        let typed = Typed {
            profiles: true,
            ..Typed::default()
        };
        let e = refusal(&changed, typed);
        assert!(
            e.contains("profile wired") && e.contains("RTT 40 ms"),
            "{e}"
        );
        let e = refusal(&defaults(), typed);
        assert!(e.contains("needs (the six study profiles)"), "{e}");
        let fewer = MatrixRequest {
            profiles: "wired".into(),
            ..defaults()
        };
        assert!(refusal(&fewer, typed).contains(
            "--profiles wired given, the results were made with --profiles wired,mobile"
        ));
    }

    #[test]
    fn a_custom_server_round_trips_through_its_flags() {
        let choices = testbed::parse_servers(
            "embedded",
            Some("my-server --port {port}"),
            Some("combined"),
            Some("{work}/access.log"),
        )
        .unwrap();
        let flags = ServerFlags::of(&choices);
        assert_eq!(flags.parse().unwrap(), choices);
        let json = serde_json::to_string(&flags).unwrap();
        assert_eq!(serde_json::from_str::<ServerFlags>(&json).unwrap(), flags);
    }

    #[test]
    fn a_directory_without_stored_options_is_continued_as_given() {
        let mut old = meta_of(&started());
        old.options = None;
        let r = resumed_request(Path::new("/r"), &old, &defaults(), &Typed::default()).unwrap();
        assert_eq!(r.runs, 10, "the command line as given");
    }
}
