//! Which servers a run or matrix tests (`--servers a,b`, an arm with knobs of its own,
//! `--server-cmd`): [`ServerChoice`], parsed through the registry.

use std::str::FromStr;

use anyhow::{bail, Result};

use crate::config::identity::ServerId;
use crate::config::protocol::Protocol;
use crate::embedded_server::ServerKnobs;
use crate::servers::reference::access_log::LogFormat;
use crate::servers::server_contract::{Registration, ServerUnderTest, StartContext};
use crate::servers::stacks::custom::{CustomLog, CustomServer};
use crate::servers::{arm, stacks};

/// Which server to test.
#[derive(Clone)]
pub enum ServerChoice {
    /// A server of the registry, by `--servers`.
    Registered(&'static Registration),
    /// `--server-cmd`: a user's command line with placeholders (and its log, if named).
    Command(CustomServer),
    /// A server of the registry with knobs of its own (`embedded:priorities=rfc9218`).
    Arm(arm::Arm),
}

impl std::fmt::Debug for ServerChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerChoice::Registered(r) => write!(f, "Registered({})", r.name),
            ServerChoice::Command(c) => f.debug_tuple("Command").field(c).finish(),
            ServerChoice::Arm(a) => a.fmt(f),
        }
    }
}

impl PartialEq for ServerChoice {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ServerChoice::Registered(a), ServerChoice::Registered(b)) => a.name == b.name,
            (ServerChoice::Command(a), ServerChoice::Command(b)) => a == b,
            (ServerChoice::Arm(a), ServerChoice::Arm(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for ServerChoice {}

impl ServerChoice {
    /// The embedded server (the default).
    pub fn embedded() -> ServerChoice {
        ServerChoice::Registered(stacks::DEFAULT)
    }

    /// The id the plan, the records and the report know it by.
    pub fn name(&self) -> ServerId {
        ServerId::new(match self {
            ServerChoice::Registered(r) => r.name,
            ServerChoice::Command(_) => stacks::custom::NAME,
            ServerChoice::Arm(a) => a.spec.as_str(),
        })
    }

    /// The server of the registry it runs (None: a `--server-cmd`).
    fn registration(&self) -> Option<&'static Registration> {
        match self {
            ServerChoice::Registered(r) => Some(r),
            ServerChoice::Arm(a) => Some(a.base),
            ServerChoice::Command(_) => None,
        }
    }

    /// Refuses a protocol the server cannot speak at all (as opposed to one switched off by a
    /// knob, which a forced browser is then caught failing on).
    pub fn check_protocol(&self, p: Protocol) -> Result<()> {
        match self.registration() {
            Some(r) if !r.speaks.contains(&p) => {
                bail!(
                    "--servers {} cannot serve {p} {}",
                    self.name(),
                    r.cannot_serve
                )
            }
            _ => Ok(()),
        }
    }

    /// Refuses knobs that cannot work on protocol `p` with this server: Early Hints over
    /// HTTP/1.1 (Chromium ignores a 103 there, and hyper, the embedded server's HTTP/1.1, cannot
    /// send one). `knobs` are the matrix's; an arm's own are laid over them.
    pub fn check_knobs(&self, knobs: &ServerKnobs, p: Protocol) -> Result<()> {
        let knobs = match self {
            ServerChoice::Arm(a) => knobs.overlay(&a.knobs),
            ServerChoice::Registered(r) if r.name == stacks::DEFAULT.name => knobs.clone(),
            _ => return Ok(()),
        };
        if knobs.early_hints == Some(true) && p == Protocol::H1 {
            bail!(
                "--servers {}: Early Hints are not sent over HTTP/1.1 (Chromium ignores a 103 there, and the embedded server's HTTP/1.1 cannot send one): measure h2 and h3, or leave --early-hints out",
                self.name()
            );
        }
        Ok(())
    }

    /// Refuses a site workload (a recorded site or a sharded page, served from its archive) on
    /// a server that cannot replay one: only the embedded server does.
    pub fn check_replay(&self, workload: &str) -> Result<()> {
        if self
            .registration()
            .is_some_and(|r| r.name == stacks::DEFAULT.name)
        {
            return Ok(());
        }
        bail!(
            "workload {workload} is replayed from its site archive, which only --servers embedded serves; leave {} out for it",
            self.name()
        )
    }

    /// Whether the server can speak `p` at all.
    pub fn speaks(&self, p: Protocol) -> bool {
        self.registration().is_none_or(|r| r.speaks.contains(&p))
    }

    /// How the matrix identity names this server (a custom one with its command and log).
    pub fn identity(&self) -> String {
        match self {
            ServerChoice::Registered(r) => r.name.to_string(),
            ServerChoice::Command(c) => c.identity(),
            ServerChoice::Arm(a) => a.spec.clone(),
        }
    }

    /// Starts the server.
    pub fn start(&self, ctx: &StartContext) -> Result<Box<dyn ServerUnderTest>> {
        match self {
            ServerChoice::Registered(r) => (r.start)(ctx),
            ServerChoice::Command(c) => stacks::custom::start(c, ctx),
            ServerChoice::Arm(a) => a.start(ctx),
        }
    }
}

impl FromStr for ServerChoice {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let spec = s.trim();
        let (name, knobs) = match spec.split_once(':') {
            Some((name, knobs)) => (name.trim(), Some(knobs)),
            None => (spec, None),
        };
        match stacks::REGISTRY.iter().find(|r| r.name == name) {
            Some(r) => match knobs {
                None => Ok(ServerChoice::Registered(r)),
                Some(knobs) => Ok(ServerChoice::Arm(arm::Arm::parse(r, spec, knobs)?)),
            },
            None => bail!(
                "unknown server {name:?}: use {} (or --server-cmd for your own)",
                stacks::registry_names()
            ),
        }
    }
}

/// Parses `--servers a,b` (with `--server-cmd` adding `custom`, whose access log
/// `--server-log-format` / `--server-log` name).
pub fn parse_servers(
    spec: &str,
    command: Option<&str>,
    log_format: Option<&str>,
    log_path: Option<&str>,
) -> Result<Vec<ServerChoice>> {
    let mut out: Vec<ServerChoice> = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let s: ServerChoice = item.parse()?;
        if out.contains(&s) {
            bail!("server {item:?} is listed twice in --servers");
        }
        out.push(s);
    }
    if let Some(c) = command {
        if c.trim().is_empty() {
            bail!("--server-cmd is empty");
        }
        let log = match (log_format, log_path) {
            (Some(f), path) => Some(CustomLog {
                format: f.parse().map_err(anyhow::Error::msg)?,
                path: path.map(str::to_string),
            }),
            (None, Some(p)) => bail!(
                "--server-log {p:?} needs --server-log-format ({}) so its lines can be read",
                LogFormat::NAMES
            ),
            (None, None) => None,
        };
        out.push(ServerChoice::Command(CustomServer {
            command: c.to_string(),
            log,
        }));
    } else if log_format.is_some() || log_path.is_some() {
        bail!("--server-log and --server-log-format describe the log of --server-cmd: give --server-cmd too");
    }
    if out.is_empty() {
        let names: Vec<String> = stacks::REGISTRY
            .iter()
            .enumerate()
            .map(|(i, r)| {
                if i == 0 {
                    format!("{} (the default)", r.name)
                } else {
                    r.name.to_string()
                }
            })
            .collect();
        bail!(
            "no server selected: give --servers {} or --server-cmd",
            names.join(", ")
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_parse_through_the_registry() {
        let s = parse_servers("embedded, caddy", None, None, None).unwrap();
        assert_eq!(
            s.iter().map(ServerChoice::name).collect::<Vec<_>>(),
            ["embedded", "caddy"]
        );
        assert_eq!(s[0], ServerChoice::embedded());
        let e = "lighttpd".parse::<ServerChoice>().unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown server \"lighttpd\": use embedded, caddy, nginx, quiche, aioquic, apache or h2o (or --server-cmd for your own)"
        );
        let e = parse_servers("caddy,caddy", None, None, None).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        let e = parse_servers("", None, None, None).unwrap_err().to_string();
        assert_eq!(
            e,
            "no server selected: give --servers embedded (the default), caddy, nginx, quiche, aioquic, apache, h2o or --server-cmd"
        );
    }

    #[test]
    fn an_arm_is_a_server_with_knobs_of_its_own() {
        let s = parse_servers(
            "embedded, embedded:priorities=rfc9218:h2-stream-buffer=64KiB",
            None,
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            s.iter().map(ServerChoice::name).collect::<Vec<_>>(),
            [
                "embedded",
                "embedded:priorities=rfc9218:h2-stream-buffer=64KiB"
            ]
        );
        let ServerChoice::Arm(arm) = &s[1] else {
            panic!("{:?}", s[1])
        };
        assert_eq!(
            arm.knobs.priorities,
            Some(crate::embedded_server::response_order::Priorities::Rfc9218)
        );
        assert_eq!(arm.knobs.h2_stream_buffer.map(|b| b.0), Some(65536));
        assert_eq!(
            s[1].name().file_name(),
            "embedded_priorities_rfc9218_h2-stream-buffer_64KiB"
        );
        assert!(s[1].check_replay("site-x").is_ok());
        let lists: ServerChoice = "embedded:server-protocols=h2+h3".parse().unwrap();
        let ServerChoice::Arm(lists) = lists else {
            panic!()
        };
        assert_eq!(
            lists.knobs.protocols,
            Some(vec![Protocol::H2, Protocol::H3])
        );
        // Bad arms say which, and how to write one.
        for (bad, says) in [
            ("embedded:priorities", "not knob=value"),
            ("embedded:priorities=sometimes", "sometimes"),
            ("embedded:colour=blue", "colour"),
        ] {
            let e = bad.parse::<ServerChoice>().unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--servers {bad}: ")) && e.contains(says),
                "{e}"
            );
        }
        let e =
            parse_servers("embedded:gso=false,embedded:gso=false", None, None, None).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        let nginx: ServerChoice = "nginx:tcp-congestion=reno".parse().unwrap();
        assert!(nginx
            .check_protocol(Protocol::H3)
            .unwrap_err()
            .to_string()
            .starts_with("--servers nginx:tcp-congestion=reno cannot serve h3"));
    }

    #[test]
    fn a_custom_server_comes_with_its_log() {
        let s = parse_servers(
            "",
            Some("srv {port}"),
            Some("combined"),
            Some("{work}/a.log"),
        )
        .unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].name(), "custom");
        assert_eq!(
            s[0].identity(),
            "custom: srv {port} (log combined {work}/a.log)"
        );
        let e = parse_servers("", Some("srv"), None, Some("a.log")).unwrap_err();
        assert!(e.to_string().contains("--server-log-format"), "{e}");
        let e = parse_servers("embedded", None, Some("combined"), None).unwrap_err();
        assert!(e.to_string().contains("give --server-cmd too"), "{e}");
        assert!(parse_servers("", Some("  "), None, None).is_err());
    }

    #[test]
    fn protocols_a_server_cannot_speak_are_refused_by_name() {
        let nginx: ServerChoice = "nginx".parse().unwrap();
        let e = nginx.check_protocol(Protocol::H3).unwrap_err().to_string();
        assert_eq!(e, "--servers nginx cannot serve h3 (Debian's nginx 1.22 has no HTTP/3): drop h3 from --protocols, or use caddy / --server-cmd with an nginx built with QUIC");
        assert!(ServerChoice::embedded().check_replay("site-x").is_ok());
        let e = nginx.check_replay("page50s2").unwrap_err().to_string();
        assert!(
            e.contains("page50s2") && e.contains("--servers embedded"),
            "{e}"
        );
        assert!(nginx.check_protocol(Protocol::H2).is_ok());
        for p in Protocol::ALL {
            assert!(ServerChoice::embedded().check_protocol(p).is_ok());
            for s in ["caddy", "quiche", "aioquic"] {
                assert!(s.parse::<ServerChoice>().unwrap().speaks(p), "{s} {p}");
            }
        }
        // Apache and h2o: h1 and h2 only, refused by name before any run.
        for s in ["apache", "h2o"] {
            let c: ServerChoice = s.parse().unwrap();
            assert!(c.check_protocol(Protocol::H2).is_ok());
            let e = c.check_protocol(Protocol::H3).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--servers {s} cannot serve h3 (")),
                "{e}"
            );
        }
    }
}
