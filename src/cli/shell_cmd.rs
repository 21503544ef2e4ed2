//! `pagebench shell`: build a link, run an optional server command in the server namespace and a
//! command in the client namespace, tear everything down, and print the link's self-check.
//! Like mahimahi's `mm-delay` shell, with loss, rate limits and a check of what the link did.
//!
//! Both commands see `PAGEBENCH_CLIENT_IP`, `PAGEBENCH_SERVER_IP`, `PAGEBENCH_CLIENT_NS` and
//! `PAGEBENCH_SERVER_NS`, and `PAGEBENCH_SERVER_IPS` (every server address, space-separated,
//! the namespace's own first: the profile's `origin_delay_ms` is in this order); with
//! `--dns-name`, `PAGEBENCH_RESOLVER` too (pagebench's resolver, on an address after them,
//! which the client command's every lookup asks). The client command stays in pagebench's process group (so it can be
//! interactive and receives Ctrl-C from the terminal); the server command writes to stderr (so
//! stdout is the client's alone), gets its own process group,
//! is killed with its children when the client is done, and dies with pagebench
//! (`PR_SET_PDEATHSIG`) even if pagebench is killed.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::args::ShellArgs;
use crate::config::locations;
use crate::config::name_lookup::DnsName;
use crate::config::profile::{self, Profile};
use crate::link::link_stats::{LinkStats, SelfCheck};
use crate::link::{Link, LinkOptions};
use crate::support::signals;

/// How long `--wait-tcp` waits for the server to listen.
pub const WAIT_TCP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a command gets between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// What `pagebench shell` runs.
#[derive(Debug, Clone)]
pub struct ShellOptions {
    pub profile: Profile,
    /// Run through `sh -c` in the server namespace.
    pub server_cmd: Option<String>,
    /// Wait until the server accepts TCP connections on this port before starting the client.
    pub wait_tcp: Option<u16>,
    /// Program and arguments run in the client namespace.
    pub command: Vec<String>,
    pub link: LinkOptions,
    /// Write the link's stats and self-check as JSON here.
    pub stats_json: Option<PathBuf>,
    /// Record every packet from before the server starts until both commands ended.
    pub tap: bool,
    /// More environment for both commands (e.g. `SSLKEYLOGFILE`).
    pub env: Vec<(String, String)>,
    /// Names pagebench's resolver answers (`--dns-name`); empty: no resolver.
    pub dns_names: Vec<DnsName>,
}

/// The shell's resolver: the server in the server namespace and the client command's view of
/// names (its private /etc/resolv.conf and /etc/hosts).
struct ShellResolver {
    server: crate::embedded_server::dns::DnsServer,
    names: crate::measure::browser::resolver::PrivateNames,
    _dir: tempfile::TempDir,
}

/// The zone `names` make with the server addresses `ips`, checked before anything starts.
fn shell_zone(
    names: &[DnsName],
    ips: &[std::net::Ipv4Addr],
) -> Result<crate::embedded_server::dns::Zone> {
    let mut zone = Vec::new();
    for n in names {
        let Some(ip) = ips.get(n.address) else {
            bail!(
                "--dns-name {}={}: there are {} server addresses (--server-addresses); give 1 to {}",
                n.host,
                n.address + 1,
                ips.len(),
                ips.len()
            );
        };
        zone.push(crate::embedded_server::dns::ZoneName {
            host: n.host.clone(),
            v4: Some(*ip),
            v6: None,
            https: Vec::new(),
            hold: Duration::from_secs_f64(n.hold_ms / 1e3),
        });
    }
    crate::embedded_server::dns::Zone::new(zone).context("--dns-name")
}

/// Starts the resolver on server address `index` (the last), answering `names` with the
/// addresses before it.
fn start_resolver(link: &Link, names: &[DnsName], index: usize) -> Result<ShellResolver> {
    let ips = link.server_ips();
    let zone = shell_zone(names, &ips[..index])?;
    let ip = std::net::IpAddr::V4(ips[index]);
    let server = crate::embedded_server::dns::DnsServer::start(link.server(), ip, zone)?;
    let dir = crate::support::tempdir::create("shell-names")?;
    let names = crate::measure::browser::resolver::PrivateNames::write(dir.path(), &[], Some(ip))?;
    Ok(ShellResolver {
        server,
        names,
        _dir: dir,
    })
}

/// What happened.
#[derive(Debug, Clone)]
pub struct ShellOutcome {
    /// The client command's exit code (128 + signal if it was killed by one).
    pub exit_code: i32,
    pub stats: LinkStats,
    pub check: SelfCheck,
    /// The packets, when `tap` was asked for.
    pub trace: Option<crate::link::PacketTrace>,
}

/// The server addresses as `PAGEBENCH_SERVER_IPS` gives them.
fn server_ips_env(ips: &[std::net::Ipv4Addr]) -> String {
    ips.iter()
        .map(|ip| ip.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs the shell; the self-check is printed to stderr.
pub fn run(opts: &ShellOptions) -> Result<ShellOutcome> {
    let Some(program) = opts.command.first() else {
        bail!("no command given: put the command to run in the client namespace after `--`");
    };
    signals::install();
    let (link, profile, resolver) = link_and_resolver(opts)?;
    let servers = &link.server_ips()[..=opts.link.extra_server_addresses];
    let mut env: Vec<(String, String)> = [
        ("PAGEBENCH_CLIENT_IP", link.client_ip().to_string()),
        ("PAGEBENCH_SERVER_IP", link.server_ip().to_string()),
        ("PAGEBENCH_SERVER_IPS", server_ips_env(servers)),
        ("PAGEBENCH_CLIENT_NS", link.client().name().to_string()),
        ("PAGEBENCH_SERVER_NS", link.server().name().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if let Some(r) = &resolver {
        env.push((
            "PAGEBENCH_RESOLVER".into(),
            r.server.addr().ip().to_string(),
        ));
    }
    env.extend(opts.env.iter().cloned());
    let tap = if opts.tap {
        Some(link.start_tap()?)
    } else {
        None
    };
    let mut server = match &opts.server_cmd {
        Some(cmd) => {
            let mut c = link.server().command("sh");
            c.arg("-c")
                .arg(cmd)
                .envs(env.iter().cloned())
                .process_group(0);
            // The server's output goes to stderr: stdout stays the client's, for pipes.
            if let Ok(err) = std::io::stderr().as_fd().try_clone_to_owned() {
                c.stdout(Stdio::from(err));
            }
            // SAFETY: prctl is async-signal-safe.
            unsafe {
                c.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            let child = c
                .spawn()
                .with_context(|| format!("starting the server command `{cmd}`"))?;
            Some(ServerProcess::new(child))
        }
        None => None,
    };
    if let Some(port) = opts.wait_tcp {
        wait_for_listener(&link, port, server.as_mut())?;
    }
    let mut client = link.client().command(program);
    client.args(&opts.command[1..]).envs(env.iter().cloned());
    if let Some(r) = &resolver {
        r.names.mount_on_exec(&mut client);
    }
    let status = run_client(client, program);
    if let Some(s) = server.take() {
        s.stop();
    }
    drop(resolver);
    let status = status?;
    let trace = tap.map(|t| link.finish_tap(t)).transpose()?;
    let stats = link.take_stats()?;
    let check = link.self_check(&stats, &profile);
    eprint!("{}", check.render());
    if let Some(path) = &opts.stats_json {
        let json = serde_json::json!({ "stats": stats, "self_check": check });
        crate::support::atomic::write_file(
            path,
            (serde_json::to_string_pretty(&json)? + "\n").as_bytes(),
        )?;
    }
    drop(link);
    Ok(ShellOutcome {
        exit_code: exit_code(status),
        stats,
        check,
        trace,
    })
}

/// The link (the profile it applies) and, with `--dns-name`, the resolver on an address after
/// the server addresses; bad names are refused before the link is built.
fn link_and_resolver(opts: &ShellOptions) -> Result<(Link, Profile, Option<ShellResolver>)> {
    let addresses = opts.link.extra_server_addresses + 1;
    if !opts.dns_names.is_empty() {
        shell_zone(
            &opts.dns_names,
            &vec![std::net::Ipv4Addr::UNSPECIFIED; addresses],
        )?;
    }
    let resolver_index = (!opts.dns_names.is_empty()).then_some(addresses);
    let profile = resolver_index.map_or(opts.profile.clone(), |i| {
        crate::measure::testbed::dns_side::link_profile(&opts.profile, i)
    });
    let link = Link::new(
        &profile,
        LinkOptions {
            extra_server_addresses: addresses - 1 + usize::from(resolver_index.is_some()),
            ..opts.link.clone()
        },
    )?;
    let resolver = resolver_index
        .map(|i| start_resolver(&link, &opts.dns_names, i))
        .transpose()?;
    Ok((link, profile, resolver))
}

fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Runs the client command to its end; on Ctrl-C it is asked to stop (and killed if it won't).
fn run_client(mut cmd: Command, program: &str) -> Result<ExitStatus> {
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting `{program}` in the client namespace"))?;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if signals::interrupted() {
            return Ok(terminate(&mut child, libc::SIGINT));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `signal`, waits [`TERM_GRACE`], then SIGKILL.
fn terminate(child: &mut Child, signal: i32) -> ExitStatus {
    // SAFETY: signalling our own child by PID.
    unsafe { libc::kill(child.id() as i32, signal) };
    let until = Instant::now() + TERM_GRACE;
    while Instant::now() < until {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child
        .wait()
        .unwrap_or_else(|_| ExitStatus::from_raw(libc::SIGKILL))
}

/// The server command's process group: stopped with all its children.
struct ServerProcess {
    child: Child,
    _cleanup: signals::CleanupGuard,
}

impl ServerProcess {
    fn new(child: Child) -> ServerProcess {
        let pgid = child.id() as i32;
        let cleanup = signals::register_cleanup(move || {
            // SAFETY: killing the process group we created.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        });
        ServerProcess {
            child,
            _cleanup: cleanup,
        }
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    fn stop(mut self) {
        let pgid = self.child.id() as i32;
        if self.exited().is_none() {
            // SAFETY: signalling the process group we created.
            unsafe { libc::kill(-pgid, libc::SIGTERM) };
            let until = Instant::now() + TERM_GRACE;
            while Instant::now() < until && self.exited().is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // Whatever is left of the group (children of `sh -c`) goes too.
        // SAFETY: as above.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// Waits until something in the server namespace accepts TCP connections on `port`.
fn wait_for_listener(link: &Link, port: u16, mut server: Option<&mut ServerProcess>) -> Result<()> {
    let addr = SocketAddr::from((link.server_ip(), port));
    let deadline = Instant::now() + WAIT_TCP_TIMEOUT;
    loop {
        let up = link
            .server()
            .run(move || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok())?;
        if up {
            return Ok(());
        }
        if let Some(status) = server.as_deref_mut().and_then(|s| s.exited()) {
            bail!("the server command exited ({status}) before listening on TCP port {port}");
        }
        if signals::interrupted() {
            return Err(signals::Interrupted.into());
        }
        if Instant::now() > deadline {
            bail!(
                "nothing listened on {addr} in the server namespace within {} s (--wait-tcp {port})",
                WAIT_TCP_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn shell(a: ShellArgs) -> Result<ExitCode> {
    use crate::packets::CaptureKind;
    let source = locations::profile_source(a.profiles_dir.as_deref());
    let profile = single_profile(&a.profile, &source)?;
    let capture = a.capture.clone().unwrap_or_default();
    if let Some(k) = capture
        .kinds()
        .iter()
        .find(|k| !matches!(k, CaptureKind::Pcap | CaptureKind::Keys))
    {
        anyhow::bail!(
            "--capture {k}: shell keeps only pcap and keys (NetLog and qlog come from pagebench's own browser and server, in run and matrix)"
        );
    }
    let mut env = Vec::new();
    if !capture.is_empty() {
        std::fs::create_dir_all(&a.capture_dir).with_context(|| {
            format!(
                "--capture-dir {}: cannot create it",
                a.capture_dir.display()
            )
        })?;
    }
    let keys_path = std::path::absolute(a.capture_dir.join("keys.log"))?;
    if capture.has(CaptureKind::Keys) {
        env.push(("SSLKEYLOGFILE".to_string(), keys_path.display().to_string()));
    }
    let outcome = crate::cli::shell_cmd::run(&crate::cli::shell_cmd::ShellOptions {
        tap: capture.has(CaptureKind::Pcap),
        env,
        profile,
        server_cmd: a.server_cmd,
        wait_tcp: a.wait_tcp,
        command: a.command,
        dns_names: a.dns_names,
        link: crate::link::LinkOptions {
            seed: a.seed,
            realtime: !a.no_realtime,
            hold_cpus_awake: !a.let_cpus_sleep,
            extra_server_addresses: usize::from(a.server_addresses - 1),
            ..Default::default()
        },
        stats_json: a.stats_json,
    })?;
    if let Some(trace) = &outcome.trace {
        use crate::packets::pcapng;
        let mut files = Vec::new();
        for v in [pcapng::Vantage::Client, pcapng::Vantage::Server] {
            files.push(crate::packets::CaptureFile {
                name: format!("{}.gz", v.file_name()),
                data: pcapng::gzip(&pcapng::write(trace, v, "pagebench shell")),
            });
        }
        for f in &files {
            crate::support::atomic::write_file(&a.capture_dir.join(&f.name), &f.data)?;
        }
        eprintln!(
            "capture: {} packets in {}",
            trace.packets.len(),
            a.capture_dir.display()
        );
    }
    Ok(ExitCode::from(outcome.exit_code.clamp(0, 255) as u8))
}

/// Exactly one profile from a `--profile` value.
pub fn single_profile(spec: &str, source: &profile::ProfileSource) -> Result<profile::Profile> {
    let mut selected = profile::select_from(spec, source)?;
    if selected.len() != 1 {
        anyhow::bail!(
            "--profile {spec:?} selects {} profiles; give exactly one name or TOML path",
            selected.len()
        );
    }
    Ok(selected.remove(0))
}
