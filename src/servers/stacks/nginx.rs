//! Debian's nginx 1.22 (h1, h2; no HTTP/3) as a server under test: a foreground nginx with one
//! worker from a generated nginx.conf, logging each request as a JSON line.

use anyhow::{bail, Result};

use crate::config::protocol::Protocol;
use crate::servers::reference::access_log::LogFormat;
use crate::servers::reference::child_process::{version_line, ChildServer, ReferenceServer};
use crate::servers::reference::config_file::{p, Site};
use crate::servers::{Registration, ServerUnderTest, StartContext};

pub const SERVER: Registration = Registration {
    name: "nginx",
    speaks: &[Protocol::H1, Protocol::H2],
    cannot_serve: "(Debian's nginx 1.22 has no HTTP/3): drop h3 from --protocols, or use caddy / --server-cmd with an nginx built with QUIC",
    start,
};

fn start(ctx: &StartContext) -> Result<Box<dyn ServerUnderTest>> {
    let site = Site::for_server(ctx, SERVER.speaks)?;
    if site.h3 {
        bail!("--server nginx: Debian's nginx 1.22 has no HTTP/3; drop h3 from --protocols, or use --server caddy, or --server-cmd with an nginx built with QUIC");
    }
    let child = ChildServer::start(SERVER.name, "nginx", ctx.ns, site, |ns, site| {
        let path = site.work.join("nginx.conf");
        std::fs::write(&path, nginx_conf(site))?;
        for d in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
            std::fs::create_dir_all(site.work.join(d))?;
        }
        let mut c = ns.command("nginx");
        c.arg("-c")
            .arg(&path)
            .arg("-p")
            .arg(&site.work)
            .arg("-e")
            .arg(site.work.join("error.log"));
        Ok(c)
    })?;
    let description = child.describe(
        &version_line("nginx", &["-v"]),
        None,
        Some(LogFormat::Nginx),
        &["protocols"],
        ctx.namespace_tcp,
    );
    Ok(Box::new(ReferenceServer::new(
        child,
        Some(LogFormat::Nginx),
        description,
    )))
}

/// nginx.conf for a foreground nginx with one worker.
pub fn nginx_conf(s: &Site) -> String {
    let http2 = if s.h2 { " http2" } else { "" };
    format!(
        "daemon off;\n\
         worker_processes 1;\n\
         pid {work}/nginx.pid;\n\
         error_log {work}/error.log warn;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n\
         \tinclude /etc/nginx/mime.types;\n\
         \tdefault_type application/octet-stream;\n\
         \tclient_body_temp_path {work}/body;\n\
         \tproxy_temp_path {work}/proxy;\n\
         \tfastcgi_temp_path {work}/fastcgi;\n\
         \tuwsgi_temp_path {work}/uwsgi;\n\
         \tscgi_temp_path {work}/scgi;\n\
         \tsendfile on;\n\
         \tgzip off;\n\
         \tlog_format pagebench escape=json '{{\"ts\":$msec,\"remote\":\"$remote_addr:$remote_port\",\
\"proto\":\"$server_protocol\",\"method\":\"$request_method\",\"uri\":\"$uri\",\"status\":$status,\
\"bytes_sent\":$body_bytes_sent,\"request_length\":$request_length,\"request_time\":$request_time,\
\"connection\":$connection}}';\n\
         \taccess_log {log} pagebench;\n\
         \tserver {{\n\
         \t\tlisten {ip}:{port} ssl{http2};\n\
         \t\tserver_name {host};\n\
         \t\tssl_certificate {cert};\n\
         \t\tssl_certificate_key {key};\n\
         \t\tssl_protocols TLSv1.3;\n\
         \t\troot {root};\n\
         \t\tadd_header Cache-Control no-store always;\n\
         \t\tlocation = /upload {{\n\
         \t\t\tclient_max_body_size 0;\n\
         \t\t\tproxy_request_buffering off;\n\
         \t\t\tproxy_http_version 1.1;\n\
         \t\t\tproxy_pass http://127.0.0.1:{sink};\n\
         \t\t}}\n\
         \t}}\n\
         }}\n",
        work = p(&s.work),
        log = p(&s.log),
        ip = s.ip,
        port = s.port,
        http2 = http2,
        host = crate::config::workload::PAGE_HOST,
        cert = p(&s.cert),
        key = p(&s.key),
        root = p(&s.root),
        sink = s.sink_port,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::reference::config_file::test_site;

    #[test]
    fn nginx_conf_has_http2_and_json_log() {
        let c = nginx_conf(&test_site());
        assert!(c.contains("listen 10.9.0.2:443 ssl http2;"));
        assert!(c.contains("access_log /w/access.log pagebench;"));
        let mut s = test_site();
        s.h2 = false;
        assert!(nginx_conf(&s).contains("listen 10.9.0.2:443 ssl;"));
    }
}
