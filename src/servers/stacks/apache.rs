//! Debian's Apache 2.4 with mod_http2 (h1, h2; no HTTP/3) as a server under test: a foreground
//! Apache (event MPM, one child) from a generated config, logging each request as a JSON line,
//! our h2 knobs mapped onto `H2MaxSessionStreams`, `H2WindowSize` and `H2StreamMaxMemSize`.
//!
//! Apache refuses to serve as root, and the pages (like every testbed file) sit in root-only
//! temporary directories: it runs as `www-data` with two capabilities, `CAP_NET_BIND_SERVICE`
//! (port 443) and `CAP_DAC_READ_SEARCH` (read the pages and the key wherever they are), given by
//! `setpriv`; its work directory is made `www-data`'s.

use anyhow::{bail, Context, Result};

use crate::config::protocol::Protocol;
use crate::embedded_server::ServerKnobs;
use crate::servers::reference::access_log::LogFormat;
use crate::servers::reference::child_process::{version_line, ChildServer, ReferenceServer};
use crate::servers::reference::config_file::{p, Site};
use crate::servers::{ConfiguredWindow, Registration, ServerUnderTest, StartContext};

pub const SERVER: Registration = Registration {
    name: "apache",
    speaks: &[Protocol::H1, Protocol::H2],
    cannot_serve: "(Apache's mod_http2 speaks h1 and h2; Debian's Apache has no HTTP/3): drop h3 from --protocols, or use caddy, quiche or aioquic for h3",
    start,
};

/// The user Apache runs as.
const USER: &str = "www-data";
const MODULES: &str = "/usr/lib/apache2/modules";
/// mod_http2's defaults (Apache 2.4 documentation), for the metadata and `diagnose`.
pub const DEFAULT_H2_WINDOW_SIZE: u64 = 65_535;
pub const DEFAULT_H2_STREAM_MAX_MEM_SIZE: u64 = 65_536;
pub const DEFAULT_H2_MAX_SESSION_STREAMS: u64 = 100;

/// The knobs Apache takes, and the directive each becomes.
const KNOBS: &[(&str, &str)] = &[
    ("protocols", "Protocols"),
    ("h2_max_concurrent_streams", "H2MaxSessionStreams"),
    ("h2_initial_stream_window", "H2WindowSize"),
    ("h2_stream_buffer", "H2StreamMaxMemSize"),
];

fn start(ctx: &StartContext) -> Result<Box<dyn ServerUnderTest>> {
    let site = Site::for_server(ctx, SERVER.speaks)?;
    if site.h3 {
        bail!("--servers apache: {}", SERVER.cannot_serve);
    }
    let user = nix::unistd::User::from_name(USER)
        .ok()
        .flatten()
        .with_context(|| format!("--servers apache: no user {USER} (Debian's apache2 package makes it; ./setup.sh installs it)"))?;
    let knobs = ctx.knobs.clone();
    let child = ChildServer::start(SERVER.name, "apache2", ctx.ns, site, |ns, site| {
        let path = site.work.join("apache2.conf");
        std::fs::write(&path, apache_conf(site, &knobs))?;
        for f in [&site.work, &site.log] {
            nix::unistd::chown(f.as_path(), Some(user.uid), Some(user.gid))
                .with_context(|| format!("cannot give {} to {USER}", f.display()))?;
        }
        let mut c = ns.command("setpriv");
        c.args([
            &format!("--reuid={USER}"),
            &format!("--regid={USER}"),
            "--clear-groups",
            "--inh-caps=+net_bind_service,+dac_read_search",
            "--ambient-caps=+net_bind_service,+dac_read_search",
            "apache2",
            "-DFOREGROUND",
            "-f",
        ])
        .arg(&path);
        Ok(c)
    })?;
    let mut description = child.describe_directives(
        &version_line("apache2", &["-v"]),
        Some(LogFormat::Nginx),
        KNOBS,
        ctx.namespace_tcp,
    );
    description.windows = windows(ctx.knobs);
    description.note = Some(format!(
        "mod_http2 with {}; runs as {USER} with CAP_NET_BIND_SERVICE and CAP_DAC_READ_SEARCH",
        directives(ctx.knobs).join(", ")
    ));
    Ok(Box::new(ReferenceServer::new(
        child,
        Some(LogFormat::Nginx),
        description,
    )))
}

/// The mod_http2 directives in force: the knobs', else Apache's defaults.
pub fn directives(k: &ServerKnobs) -> Vec<String> {
    vec![
        format!(
            "H2MaxSessionStreams {}",
            k.h2_max_concurrent_streams
                .map_or(DEFAULT_H2_MAX_SESSION_STREAMS, u64::from)
        ),
        format!(
            "H2WindowSize {}",
            k.h2_initial_stream_window
                .map_or(DEFAULT_H2_WINDOW_SIZE, |b| b.0)
        ),
        format!(
            "H2StreamMaxMemSize {}",
            k.h2_stream_buffer
                .map_or(DEFAULT_H2_STREAM_MAX_MEM_SIZE, |b| b.0)
        ),
    ]
}

/// The window that bounds an h2 upload to Apache: `H2WindowSize`, the stream window it grants
/// (measured: `H2StreamMaxMemSize` does not move an upload, see `docs/servers.md`).
pub fn windows(k: &ServerKnobs) -> Vec<ConfiguredWindow> {
    let window = k
        .h2_initial_stream_window
        .map_or(DEFAULT_H2_WINDOW_SIZE, |b| b.0);
    vec![ConfiguredWindow {
        protocol: Protocol::H2,
        upload: true,
        bytes: window,
        knob: "--h2-initial-stream-window".into(),
        setting: format!("Apache's H2WindowSize {window}"),
    }]
}

/// The config of a foreground Apache with one event-MPM child.
pub fn apache_conf(s: &Site, k: &ServerKnobs) -> String {
    let mut protocols = Vec::new();
    if s.h2 {
        protocols.push("h2");
    }
    if s.h1 {
        protocols.push("http/1.1");
    }
    let mut h2 = String::new();
    if let Some(n) = k.h2_max_concurrent_streams {
        h2.push_str(&format!("H2MaxSessionStreams {n}\n"));
    }
    if let Some(b) = k.h2_initial_stream_window {
        h2.push_str(&format!("H2WindowSize {}\n", b.0));
    }
    if let Some(b) = k.h2_stream_buffer {
        h2.push_str(&format!("H2StreamMaxMemSize {}\n", b.0));
    }
    let modules: String = [
        ("mpm_event_module", "mod_mpm_event.so"),
        ("authz_core_module", "mod_authz_core.so"),
        ("mime_module", "mod_mime.so"),
        ("dir_module", "mod_dir.so"),
        ("headers_module", "mod_headers.so"),
        ("ssl_module", "mod_ssl.so"),
        ("http2_module", "mod_http2.so"),
        ("proxy_module", "mod_proxy.so"),
        ("proxy_http_module", "mod_proxy_http.so"),
    ]
    .iter()
    .map(|(m, f)| format!("LoadModule {m} {MODULES}/{f}\n"))
    .collect();
    // pagebench's content types (workload::content_type_for).
    let types: String = [
        ("text/html; charset=utf-8", ".html .htm"),
        ("text/css; charset=utf-8", ".css"),
        ("text/javascript; charset=utf-8", ".js .mjs"),
        ("image/png", ".png"),
        ("font/ttf", ".ttf"),
        ("application/json", ".json"),
        ("image/svg+xml", ".svg"),
        ("image/jpeg", ".jpg .jpeg"),
        ("font/woff2", ".woff2"),
        ("text/plain; charset=utf-8", ".txt .md"),
        ("application/octet-stream", ".bin"),
    ]
    .iter()
    .map(|(t, ext)| format!("AddType \"{t}\" {ext}\n"))
    .collect();
    format!(
        "ServerRoot {work}\n\
         DefaultRuntimeDir {work}\n\
         PidFile {work}/apache2.pid\n\
         Mutex file:{work} default\n\
         ErrorLog {work}/error.log\n\
         LogLevel warn\n\
         {modules}\
         ServerName {host}\n\
         Listen {ip}:{port} https\n\
         StartServers 1\n\
         ServerLimit 1\n\
         ThreadLimit 64\n\
         ThreadsPerChild 64\n\
         MaxRequestWorkers 64\n\
         MinSpareThreads 16\n\
         MaxSpareThreads 64\n\
         TypesConfig /dev/null\n\
         {types}\
         Protocols {protocols}\n\
         {h2}\
         SSLEngine on\n\
         SSLCertificateFile {cert}\n\
         SSLCertificateKeyFile {key}\n\
         SSLProtocol TLSv1.3\n\
         DocumentRoot {root}\n\
         <Directory {root}>\n\
         \tRequire all granted\n\
         </Directory>\n\
         DirectoryIndex index.html\n\
         Header always set Cache-Control no-store\n\
         ProxyPass /upload http://127.0.0.1:{sink}/upload\n\
         LogFormat \"{{\\\"proto\\\":\\\"%H\\\",\\\"method\\\":\\\"%m\\\",\\\"uri\\\":\\\"%<U\\\",\\\"status\\\":%>s,\\\"bytes_sent\\\":%B}}\" pagebench\n\
         CustomLog {log} pagebench\n",
        work = p(&s.work),
        host = crate::config::workload::PAGE_HOST,
        ip = s.ip,
        port = s.port,
        protocols = protocols.join(" "),
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
    use crate::embedded_server::ByteSize;
    use crate::servers::reference::access_log::parse_line;
    use crate::servers::reference::config_file::test_site;

    #[test]
    fn apache_conf_maps_the_h2_knobs() {
        let k = ServerKnobs {
            h2_initial_stream_window: Some(ByteSize(1 << 20)),
            h2_stream_buffer: Some(ByteSize(16 << 20)),
            h2_max_concurrent_streams: Some(50),
            ..Default::default()
        };
        let c = apache_conf(&test_site(), &k);
        assert!(c.contains("Listen 10.9.0.2:443 https\n"), "{c}");
        assert!(c.contains("Protocols h2 http/1.1\n"));
        assert!(c.contains("H2WindowSize 1048576\n"));
        assert!(c.contains("H2StreamMaxMemSize 16777216\n"));
        assert!(c.contains("H2MaxSessionStreams 50\n"));
        assert!(c.contains("ProxyPass /upload http://127.0.0.1:18080/upload\n"));
        // Unset knobs leave Apache's own defaults (no directive), which the metadata states.
        let c = apache_conf(&test_site(), &ServerKnobs::default());
        assert!(!c.contains("H2WindowSize"), "{c}");
        assert_eq!(
            directives(&ServerKnobs::default()),
            [
                "H2MaxSessionStreams 100",
                "H2WindowSize 65535",
                "H2StreamMaxMemSize 65536"
            ]
        );
        let mut s = test_site();
        s.h2 = false;
        assert!(apache_conf(&s, &k).contains("Protocols http/1.1\n"));
    }

    #[test]
    fn its_log_lines_are_read_as_json() {
        // The LogFormat above, as Apache 2.4.71 wrote it for an h2 request of a directory.
        let l = r#"{"proto":"HTTP/2.0","method":"GET","uri":"/page10/","status":200,"bytes_sent":1061}"#;
        let v = parse_line(LogFormat::Nginx, l).unwrap();
        assert_eq!(
            (v.protocol.as_str(), v.path.as_str(), v.bytes_sent),
            ("h2", "/page10/", 1061)
        );
        let c = apache_conf(&test_site(), &ServerKnobs::default());
        assert!(c.contains(r#"LogFormat "{\"proto\":\"%H\",\"method\":\"%m\",\"uri\":\"%<U\",\"status\":%>s,\"bytes_sent\":%B}" pagebench"#), "{c}");
    }
}
