//! What a reference server serves (pure): the [`Site`] — the same pages tree, certificate and
//! port as the embedded server, a JSON-lines access log, and pagebench's upload sink that
//! `POST /upload` is forwarded to (a reference server cannot count an upload body itself) — and
//! the placeholders of a user's `--server-cmd`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::config::protocol::Protocol;
use crate::servers::StartContext;

/// Where a reference server runs and what it serves.
#[derive(Debug, Clone)]
pub struct Site {
    pub ip: IpAddr,
    pub port: u16,
    pub root: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// JSON-lines access log.
    pub log: PathBuf,
    /// Scratch directory (pid file, temp paths, error log).
    pub work: PathBuf,
    /// Plain-HTTP upload sink on loopback inside the server namespace.
    pub sink_port: u16,
    pub h1: bool,
    pub h2: bool,
    pub h3: bool,
}

impl Site {
    /// The site of a server that speaks `speaks`, in its own work directory: it offers what
    /// it speaks of the protocols the knobs leave on.
    pub fn for_server(ctx: &StartContext, speaks: &[Protocol]) -> Result<Site> {
        let eff = ctx.knobs.effective();
        let offers = |p: Protocol| eff.offers(p) && speaks.contains(&p);
        Ok(Site {
            ip: ctx.ip,
            port: ctx.port,
            root: ctx.root.to_path_buf(),
            cert: ctx
                .cert
                .cert_path()
                .context("the certificate has no PEM file")?,
            key: ctx
                .cert
                .key_path()
                .context("the certificate has no PEM file")?,
            log: ctx.work.join("access.log"),
            work: ctx.work.clone(),
            sink_port: 0,
            h1: offers(Protocol::H1),
            h2: offers(Protocol::H2),
            h3: offers(Protocol::H3),
        })
    }
}

/// A path as it goes into a config file.
pub fn p(path: &Path) -> String {
    path.display().to_string()
}

/// Expands `{port}`, `{root}`, `{cert}`, `{key}`, `{log}`, `{ip}` and `{work}` in a user's
/// `--server-cmd`. An unknown `{name}` is an error naming it.
pub fn expand_command(template: &str, s: &Site) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(j) = after.find('}') else {
            return Err(format!("--server-cmd: unclosed '{{' in {template:?}"));
        };
        let name = &after[..j];
        let value = match name {
            "port" => s.port.to_string(),
            "root" => p(&s.root),
            "cert" => p(&s.cert),
            "key" => p(&s.key),
            "log" => p(&s.log),
            "ip" => s.ip.to_string(),
            "work" => p(&s.work),
            other => {
                return Err(format!(
                    "--server-cmd: unknown placeholder {{{other}}}; use {{port}}, {{root}}, {{cert}}, {{key}}, {{log}}, {{ip}} or {{work}}"
                ))
            }
        };
        out.push_str(&value);
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A site for the config tests.
#[cfg(test)]
pub fn test_site() -> Site {
    Site {
        ip: "10.9.0.2".parse().unwrap(),
        port: 443,
        root: "/srv/pages".into(),
        cert: "/w/cert.pem".into(),
        key: "/w/key.pem".into(),
        log: "/w/access.log".into(),
        work: "/w".into(),
        sink_port: 18080,
        h1: true,
        h2: true,
        h3: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders() {
        let s = test_site();
        assert_eq!(
            expand_command(
                "srv --port {port} --root {root} --tls {cert},{key} > {log}",
                &s
            )
            .unwrap(),
            "srv --port 443 --root /srv/pages --tls /w/cert.pem,/w/key.pem > /w/access.log"
        );
        assert!(expand_command("x {nope}", &s)
            .unwrap_err()
            .contains("{nope}"));
        assert!(expand_command("x {port", &s)
            .unwrap_err()
            .contains("unclosed"));
    }
}
