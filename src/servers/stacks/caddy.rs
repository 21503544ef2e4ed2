//! Debian's Caddy (quic-go: h1, h2, h3) as a server under test: started from a generated
//! Caddyfile serving the testbed's pages, certificate and port, logging each request as JSON.

use anyhow::Result;

use crate::config::protocol::Protocol;
use crate::servers::reference::access_log::LogFormat;
use crate::servers::reference::child_process::{version_line, ChildServer, ReferenceServer};
use crate::servers::reference::config_file::{p, Site};
use crate::servers::{Registration, ServerUnderTest, StartContext};

pub const SERVER: Registration = Registration {
    name: "caddy",
    speaks: &Protocol::ALL,
    cannot_serve: "",
    start,
};

fn start(ctx: &StartContext) -> Result<Box<dyn ServerUnderTest>> {
    let site = Site::for_server(ctx, SERVER.speaks)?;
    let child = ChildServer::start(SERVER.name, "caddy", ctx.ns, site, |ns, site| {
        let path = site.work.join("Caddyfile");
        std::fs::write(&path, caddyfile(site))?;
        let mut c = ns.command("caddy");
        c.args(["run", "--adapter", "caddyfile", "--config"])
            .arg(&path);
        c.env("HOME", &site.work)
            .env("XDG_DATA_HOME", site.work.join("data"))
            .env("XDG_CONFIG_HOME", site.work.join("config"));
        Ok(c)
    })?;
    let description = child.describe(
        &version_line("caddy", &["version"]),
        None,
        Some(LogFormat::Caddy),
        &["protocols"],
        ctx.namespace_tcp,
    );
    Ok(Box::new(ReferenceServer::new(
        child,
        Some(LogFormat::Caddy),
        description,
    )))
}

/// The Caddyfile. `protocols` restricts what Caddy offers (its only protocol knob).
pub fn caddyfile(s: &Site) -> String {
    let mut protocols = Vec::new();
    if s.h1 {
        protocols.push("h1");
    }
    if s.h2 {
        protocols.push("h2");
    }
    if s.h3 {
        protocols.push("h3");
    }
    format!(
        "{{\n\
         \tauto_https off\n\
         \tadmin off\n\
         \tstorage file_system {{\n\t\troot {work}/caddy-data\n\t}}\n\
         \tservers {{\n\t\tprotocols {protocols}\n\t}}\n\
         }}\n\
         https://{host}:{port} {{\n\
         \tbind {ip}\n\
         \ttls {cert} {key}\n\
         \troot * {root}\n\
         \theader Cache-Control no-store\n\
         \thandle /upload {{\n\
         \t\treverse_proxy 127.0.0.1:{sink} {{\n\t\t\tflush_interval -1\n\t\t}}\n\
         \t}}\n\
         \thandle {{\n\t\tfile_server\n\t}}\n\
         \tlog {{\n\t\toutput file {log}\n\t\tformat json\n\t}}\n\
         }}\n",
        work = p(&s.work),
        protocols = protocols.join(" "),
        host = crate::config::workload::PAGE_HOST,
        port = s.port,
        ip = s.ip,
        cert = p(&s.cert),
        key = p(&s.key),
        root = p(&s.root),
        sink = s.sink_port,
        log = p(&s.log),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::reference::config_file::test_site;

    #[test]
    fn caddyfile_serves_the_site() {
        let c = caddyfile(&test_site());
        assert!(c.contains("https://pagebench.test:443 {"));
        assert!(c.contains("protocols h1 h2\n"));
        assert!(c.contains("tls /w/cert.pem /w/key.pem"));
        assert!(c.contains("reverse_proxy 127.0.0.1:18080"));
        assert!(c.contains("bind 10.9.0.2"));
    }
}
