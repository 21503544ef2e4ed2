//! Debian's h2o 2.2 (h1, h2; no HTTP/3) as a server under test: one h2o process from a
//! generated YAML config, logging each request as a JSON line. h2o 2.2 has one h2 knob of ours
//! (`http2-max-concurrent-requests-per-connection`); its flow-control windows are fixed.

use anyhow::{bail, Result};

use crate::config::protocol::Protocol;
use crate::embedded_server::ServerKnobs;
use crate::servers::reference::access_log::LogFormat;
use crate::servers::reference::child_process::{version_line, ChildServer, ReferenceServer};
use crate::servers::reference::config_file::{p, Site};
use crate::servers::{Registration, ServerUnderTest, StartContext};

pub const SERVER: Registration = Registration {
    name: "h2o",
    speaks: &[Protocol::H1, Protocol::H2],
    cannot_serve: "(Debian's h2o 2.2 speaks h1 and h2; HTTP/3 came in h2o 2.3): drop h3 from --protocols, or use caddy, quiche or aioquic for h3",
    start,
};

/// The knobs h2o takes, and the directive each becomes.
const KNOBS: &[(&str, &str)] = &[
    ("protocols", "http1-upgrade-to-http2 / ALPN"),
    (
        "h2_max_concurrent_streams",
        "http2-max-concurrent-requests-per-connection",
    ),
];

fn start(ctx: &StartContext) -> Result<Box<dyn ServerUnderTest>> {
    let site = Site::for_server(ctx, SERVER.speaks)?;
    if site.h3 {
        bail!("--servers h2o: {}", SERVER.cannot_serve);
    }
    if !site.h2 {
        // h2o 2.2 always offers h2 over TLS (ALPN): without h2 it cannot be asked for h1 only.
        bail!("--servers h2o: h2o 2.2 always offers h2 over TLS; --server-protocols without h2 cannot be honoured (use nginx or apache for h1 only)");
    }
    let knobs = ctx.knobs.clone();
    let child = ChildServer::start(SERVER.name, "h2o", ctx.ns, site, |ns, site| {
        let path = site.work.join("h2o.conf");
        std::fs::write(&path, h2o_conf(site, &knobs))?;
        let mut c = ns.command("h2o");
        c.arg("-c").arg(&path);
        Ok(c)
    })?;
    let mut description = child.describe_directives(
        &version_line("h2o", &["--version"]),
        Some(LogFormat::Nginx),
        KNOBS,
        ctx.namespace_tcp,
    );
    description.note = Some(
        "h2o 2.2 with one thread; its h2 flow-control windows and buffers have no directive in 2.2"
            .into(),
    );
    Ok(Box::new(ReferenceServer::new(
        child,
        Some(LogFormat::Nginx),
        description,
    )))
}

/// h2o's YAML config (one thread, running as root: the pages sit in root-only directories).
pub fn h2o_conf(s: &Site, k: &ServerKnobs) -> String {
    let streams = k
        .h2_max_concurrent_streams
        .map(|n| format!("http2-max-concurrent-requests-per-connection: {n}\n"))
        .unwrap_or_default();
    format!(
        "pid-file: {work}/h2o.pid\n\
         error-log: {work}/error.log\n\
         num-threads: 1\n\
         user: root\n\
         {streams}\
         listen:\n\
         \x20 host: {ip}\n\
         \x20 port: {port}\n\
         \x20 ssl:\n\
         \x20   certificate-file: {cert}\n\
         \x20   key-file: {key}\n\
         \x20   minimum-version: TLSv1.3\n\
         file.mime.addtypes:\n\
         \x20 \"text/html; charset=utf-8\": .html\n\
         \x20 \"text/css; charset=utf-8\": .css\n\
         \x20 \"text/javascript; charset=utf-8\": .js\n\
         \x20 \"font/ttf\": .ttf\n\
         hosts:\n\
         \x20 \"{host}:{port}\":\n\
         \x20   header.set: \"Cache-Control: no-store\"\n\
         \x20   paths:\n\
         \x20     \"/upload\":\n\
         \x20       proxy.reverse.url: \"http://127.0.0.1:{sink}/upload\"\n\
         \x20     \"/\":\n\
         \x20       file.dir: {root}\n\
         \x20   access-log:\n\
         \x20     path: {log}\n\
         \x20     format: '{{\"proto\":\"%H\",\"method\":\"%m\",\"uri\":\"%U\",\"status\":%s,\"bytes_sent\":%b}}'\n",
        work = p(&s.work),
        ip = s.ip,
        port = s.port,
        cert = p(&s.cert),
        key = p(&s.key),
        host = crate::config::workload::PAGE_HOST,
        sink = s.sink_port,
        root = p(&s.root),
        log = p(&s.log),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::reference::access_log::parse_line;
    use crate::servers::reference::config_file::test_site;

    #[test]
    fn h2o_conf_serves_the_site() {
        let k = ServerKnobs {
            h2_max_concurrent_streams: Some(32),
            ..Default::default()
        };
        let c = h2o_conf(&test_site(), &k);
        assert!(
            c.contains("http2-max-concurrent-requests-per-connection: 32\n"),
            "{c}"
        );
        assert!(c.contains("  host: 10.9.0.2\n  port: 443\n"), "{c}");
        assert!(c.contains("proxy.reverse.url: \"http://127.0.0.1:18080/upload\""));
        assert!(c.contains("  \"pagebench.test:443\":\n"));
        // h2o 2.2.5 writes `HTTP/2` for %H.
        let l =
            r#"{"proto":"HTTP/2","method":"GET","uri":"/page10/","status":200,"bytes_sent":1061}"#;
        assert_eq!(parse_line(LogFormat::Nginx, l).unwrap().protocol, "h2");
    }
}
