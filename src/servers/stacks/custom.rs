//! A user's own server (`--server-cmd`) as a server under test: their command line with the
//! testbed's placeholders filled in, run by `sh -c` in the server namespace; its access log,
//! when `--server-log-format` names one, is the run's third viewpoint.

use std::path::PathBuf;

use anyhow::Result;

use crate::config::protocol::Protocol;
use crate::servers::reference::access_log::LogFormat;
use crate::servers::reference::child_process::{ChildServer, ReferenceServer};
use crate::servers::reference::config_file::{self, Site};
use crate::servers::{ServerUnderTest, StartContext};

/// The name custom servers have in plans and records.
pub const NAME: &str = "custom";

/// A user's server: its command line and, when named, the access log that gives runs their
/// third viewpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomServer {
    pub command: String,
    pub log: Option<CustomLog>,
}

/// Where a custom server logs and in which format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomLog {
    pub format: LogFormat,
    /// The log file, placeholders allowed; `None`: the `{log}` path the command was given.
    pub path: Option<String>,
}

impl CustomServer {
    /// How the matrix identity names it: the command and the log.
    pub fn identity(&self) -> String {
        match &self.log {
            Some(l) => format!(
                "custom: {} (log {} {})",
                self.command,
                l.format.name(),
                l.path.as_deref().unwrap_or("{log}")
            ),
            None => format!("custom: {}", self.command),
        }
    }
}

/// Starts the user's command (it may speak any protocol: what it offers is what the knobs ask).
pub fn start(custom: &CustomServer, ctx: &StartContext) -> Result<Box<dyn ServerUnderTest>> {
    let site = Site::for_server(ctx, &Protocol::ALL)?;
    let child = ChildServer::start(NAME, "sh", ctx.ns, site, |ns, site| {
        if let Some(path) = custom.log.as_ref().and_then(|l| l.path.as_ref()) {
            let expanded = config_file::expand_command(path, site)
                .map_err(|e| anyhow::anyhow!("--server-log: {e}"))?;
            site.log = PathBuf::from(expanded);
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&site.log);
        }
        let line =
            config_file::expand_command(&custom.command, site).map_err(anyhow::Error::msg)?;
        let mut c = ns.command("sh");
        c.arg("-c").arg(line);
        Ok(c)
    })?;
    let format = custom.log.as_ref().map(|l| l.format);
    let description = child.describe(
        "user command",
        Some(&custom.command),
        format,
        &[],
        ctx.namespace_tcp,
    );
    Ok(Box::new(ReferenceServer::new(child, format, description)))
}
