//! Configuration files for the reference servers (pure): a Caddyfile (Caddy/quic-go: h1, h2,
//! h3) and an nginx.conf (Debian's nginx 1.22: h1, h2 only), both serving the same pages tree,
//! certificate and port as the embedded server, logging each request as JSON, and forwarding
//! `POST /upload` to pagebench's upload sink (neither server can count an upload body itself).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

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

fn p(path: &Path) -> String {
    path.display().to_string()
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
        host = crate::browser::HOST,
        port = s.port,
        ip = s.ip,
        cert = p(&s.cert),
        key = p(&s.key),
        root = p(&s.root),
        sink = s.sink_port,
        log = p(&s.log),
    )
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
        host = crate::browser::HOST,
        cert = p(&s.cert),
        key = p(&s.key),
        root = p(&s.root),
        sink = s.sink_port,
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> Site {
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

    #[test]
    fn caddyfile_serves_the_site() {
        let c = caddyfile(&site());
        assert!(c.contains("https://pagebench.test:443 {"));
        assert!(c.contains("protocols h1 h2\n"));
        assert!(c.contains("tls /w/cert.pem /w/key.pem"));
        assert!(c.contains("reverse_proxy 127.0.0.1:18080"));
        assert!(c.contains("bind 10.9.0.2"));
    }

    #[test]
    fn nginx_conf_has_http2_and_json_log() {
        let c = nginx_conf(&site());
        assert!(c.contains("listen 10.9.0.2:443 ssl http2;"));
        assert!(c.contains("access_log /w/access.log pagebench;"));
        let mut s = site();
        s.h2 = false;
        assert!(nginx_conf(&s).contains("listen 10.9.0.2:443 ssl;"));
    }

    #[test]
    fn placeholders() {
        let s = site();
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
