//! Reference servers' access logs → the server view a run is cross-checked against (pure
//! parsing; reading "what was appended since a mark" is a file offset). Formats: Caddy's JSON
//! access log, the JSON lines pagebench's nginx, Apache and h2o configs write, the NCSA
//! common/combined format (Apache's and nginx's default, and most others), whose request line
//! carries the protocol (`"GET /x HTTP/2.0"`), and pagebench's own request log (the embedded
//! server's, which the quiche and aioquic helpers write too).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::Value;

use crate::config::site_archive::replay::request_url_over;
use crate::config::workload::url_path;
use crate::embedded_server::RequestRecord;
use crate::servers::ServerView;

/// `HTTP/2.0` → `h2`: the names Chromium uses in nextHopProtocol.
pub fn alpn_of(proto: &str) -> String {
    match proto {
        "HTTP/1.1" => "http/1.1".into(),
        "HTTP/1.0" => "http/1.0".into(),
        "HTTP/2.0" | "HTTP/2" => "h2".into(),
        "HTTP/3.0" | "HTTP/3" => "h3".into(),
        other => other.to_ascii_lowercase(),
    }
}

/// Which format the log is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Caddy's JSON access log (`request.proto`, `request.uri`, `status`, `size`).
    Caddy,
    /// JSON lines with `proto`, `method`, `uri`, `status`, `bytes_sent` (pagebench's nginx
    /// `log_format`, see `servers::nginx`).
    Nginx,
    /// NCSA common/combined: `… "METHOD URI PROTO" STATUS BYTES …`.
    Combined,
    /// pagebench's request log: one [`RequestRecord`] per line.
    Pagebench,
}

impl LogFormat {
    /// The names `--server-log-format` takes.
    pub const NAMES: &'static str = "caddy-json, nginx-json, combined or pagebench-json";

    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Caddy => "caddy-json",
            LogFormat::Nginx => "nginx-json",
            LogFormat::Combined => "combined",
            LogFormat::Pagebench => "pagebench-json",
        }
    }
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "caddy-json" => Ok(LogFormat::Caddy),
            "nginx-json" => Ok(LogFormat::Nginx),
            "combined" | "common" | "combined-h" => Ok(LogFormat::Combined),
            "pagebench-json" => Ok(LogFormat::Pagebench),
            other => Err(format!(
                "--server-log-format {other:?}: use {}",
                LogFormat::NAMES
            )),
        }
    }
}

/// `… "METHOD URI PROTO" STATUS BYTES …` → the server view.
fn parse_combined(line: &str) -> Option<ServerView> {
    let start = line.find('"')?;
    let rest = &line[start + 1..];
    let end = rest.find('"')?;
    let mut request = rest[..end].split_whitespace();
    let (method, uri, proto) = (request.next()?, request.next()?, request.next()?);
    let mut after = rest[end + 1..].split_whitespace();
    let status: u16 = after.next()?.parse().ok()?;
    let bytes_sent = after.next().and_then(|b| b.parse().ok()).unwrap_or(0);
    Some(ServerView::logged(
        alpn_of(proto),
        method,
        url_path(&format!("https://x{uri}")),
        status,
        bytes_sent,
    ))
}

/// What the server view of a request is, from pagebench's own request record.
pub fn record_view(r: &RequestRecord) -> ServerView {
    ServerView {
        protocol: r.protocol.clone(),
        method: r.method.clone(),
        path: url_path(&format!("https://x{}", r.path)),
        url: r
            .authority
            .as_deref()
            .map(|a| request_url_over(!r.plain, a, &r.path)),
        replay: r.replay,
        status: r.status,
        bytes_sent: r.bytes_sent,
        bytes_received: r.bytes_received,
        // The embedded server's and the h3 helpers' logs do not carry it: their transport
        // records say per connection.
        tls_resumed: None,
        server_ms: r.answer_ms,
        priority: r.priority.clone(),
        received_unix_ms: Some(r.time_unix_ms),
        stream_id: r.stream_id,
        early_hints: r.early_hints.clone(),
    }
}

/// Parses one log line; lines that are not access entries give `None`.
pub fn parse_line(format: LogFormat, line: &str) -> Option<ServerView> {
    match format {
        LogFormat::Combined => return parse_combined(line),
        LogFormat::Pagebench => {
            return serde_json::from_str::<RequestRecord>(line)
                .ok()
                .map(|r| record_view(&r))
        }
        _ => {}
    }
    let v: Value = serde_json::from_str(line).ok()?;
    match format {
        LogFormat::Caddy => {
            let r = v.get("request")?;
            Some(ServerView {
                bytes_received: v.get("bytes_read").and_then(Value::as_u64).unwrap_or(0),
                // Caddy 2.6 logs zeros for HTTP/3's TLS state: trusted only with a version.
                tls_resumed: r
                    .get("tls")
                    .filter(|t| t.get("version").and_then(Value::as_u64).unwrap_or(0) != 0)
                    .and_then(|t| t.get("resumed"))
                    .and_then(Value::as_bool),
                ..ServerView::logged(
                    alpn_of(r.get("proto")?.as_str()?),
                    r.get("method")?.as_str()?,
                    url_path(&format!("https://x{}", r.get("uri")?.as_str()?)),
                    v.get("status")?.as_u64()? as u16,
                    v.get("size").and_then(Value::as_u64).unwrap_or(0),
                )
            })
        }
        LogFormat::Combined | LogFormat::Pagebench => None,
        LogFormat::Nginx => Some(ServerView {
            bytes_received: v.get("bytes_received").and_then(Value::as_u64).unwrap_or(0),
            ..ServerView::logged(
                alpn_of(v.get("proto")?.as_str()?),
                v.get("method")?.as_str()?,
                v.get("uri")?.as_str()?,
                v.get("status")?.as_u64()? as u16,
                v.get("bytes_sent").and_then(Value::as_u64).unwrap_or(0),
            )
        }),
    }
}

/// Current size of the log (a mark before a run).
pub fn mark(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Raw lines appended since `mark` (complete lines only) and the new mark.
pub fn lines_since(path: &Path, mark: u64) -> (Vec<String>, u64) {
    let Ok(mut f) = std::fs::File::open(path) else {
        return (Vec::new(), mark);
    };
    if f.seek(SeekFrom::Start(mark)).is_err() {
        return (Vec::new(), mark);
    }
    let mut s = String::new();
    let _ = f.read_to_string(&mut s);
    let complete = s.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let lines = s[..complete].lines().map(str::to_string).collect();
    (lines, mark + complete as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caddy_lines() {
        // Recorded from Caddy 2.6.2 (headers trimmed).
        let h3 = r#"{"level":"info","ts":1796018172.826,"logger":"http.log.access.log0","msg":"handled request","request":{"remote_ip":"127.0.0.1","remote_port":"39472","proto":"HTTP/3.0","method":"GET","host":"pagebench.test:8443","uri":"/page10/img/image006.png","headers":{},"tls":{"resumed":false,"version":0,"cipher_suite":0,"proto":"","server_name":""}},"user_id":"","duration":0.000156028,"size":11059,"status":200,"resp_headers":{}}"#;
        let v = parse_line(LogFormat::Caddy, h3).unwrap();
        assert_eq!(v.protocol, "h3");
        // HTTP/3's TLS state is logged as zeros: unknown, not "not resumed".
        assert_eq!(v.tls_resumed, None);
        let h2 = r#"{"request":{"proto":"HTTP/2.0","method":"GET","uri":"/","tls":{"resumed":true,"version":772,"cipher_suite":4865,"proto":"h2","server_name":"pagebench.test"}},"size":5,"status":200}"#;
        assert_eq!(
            parse_line(LogFormat::Caddy, h2).unwrap().tls_resumed,
            Some(true)
        );
        assert_eq!(v.path, "/page10/img/image006.png");
        assert_eq!((v.status, v.bytes_sent), (200, 11059));
        let h1 = r#"{"request":{"proto":"HTTP/1.1","method":"GET","uri":"/a.css?x=1"},"size":5,"status":200}"#;
        let v = parse_line(LogFormat::Caddy, h1).unwrap();
        assert_eq!(
            (v.protocol.as_str(), v.path.as_str()),
            ("http/1.1", "/a.css")
        );
        assert!(parse_line(
            LogFormat::Caddy,
            r#"{"msg":"serving initial configuration"}"#
        )
        .is_none());
        assert!(parse_line(LogFormat::Caddy, "not json").is_none());
    }

    #[test]
    fn nginx_lines() {
        let l = r#"{"ts":1796018171.123,"remote":"10.0.0.1:5555","proto":"HTTP/2.0","method":"GET","uri":"/page10/index.html","status":200,"bytes_sent":915,"request_length":40,"request_time":0.001,"connection":3}"#;
        let v = parse_line(LogFormat::Nginx, l).unwrap();
        assert_eq!((v.protocol.as_str(), v.bytes_sent), ("h2", 915));
    }

    #[test]
    fn combined_lines() {
        // Apache 2.4 with mod_http2, and nginx's default `combined`.
        let a = r#"10.0.0.1 - - [01/Dec/2026:09:12:06 +0000] "GET /page10/img/image006.png?v=1 HTTP/2.0" 200 11059 "https://pagebench.test/page10/" "Mozilla/5.0""#;
        let v = parse_line(LogFormat::Combined, a).unwrap();
        assert_eq!(
            (v.protocol.as_str(), v.method.as_str(), v.path.as_str()),
            ("h2", "GET", "/page10/img/image006.png")
        );
        assert_eq!((v.status, v.bytes_sent), (200, 11059));
        let n =
            r#"10.0.0.1 - - [01/Dec/2026:09:12:06 +0000] "POST /upload HTTP/3.0" 204 - "-" "-""#;
        let v = parse_line(LogFormat::Combined, n).unwrap();
        assert_eq!(
            (v.protocol.as_str(), v.status, v.bytes_sent),
            ("h3", 204, 0)
        );
        assert!(parse_line(LogFormat::Combined, "garbage without quotes").is_none());
        assert!(parse_line(LogFormat::Combined, r#"x "GET /a HTTP/1.1" notanumber"#).is_none());
        assert_eq!("combined".parse(), Ok(LogFormat::Combined));
        assert!("xml"
            .parse::<LogFormat>()
            .unwrap_err()
            .contains("caddy-json"));
    }

    #[test]
    fn pagebench_lines() {
        // As the quiche helper writes it (src/servers/helpers/quiche-server).
        let l = r#"{"authority":"pagebench.test","bytes_received":0,"bytes_sent":11059,"client":"10.0.0.1:5555","connection_id":1,"duration_ms":0.07,"error":null,"method":"GET","path":"/page10/img/i.png?x=1","protocol":"h3","seq_on_connection":0,"status":200,"stream_id":0,"time_unix_ms":1796172627796}"#;
        let v = parse_line(LogFormat::Pagebench, l).unwrap();
        assert_eq!(
            (v.protocol.as_str(), v.path.as_str(), v.bytes_sent),
            ("h3", "/page10/img/i.png", 11059)
        );
        assert_eq!(
            v.url.as_deref(),
            Some("https://pagebench.test/page10/img/i.png?x=1")
        );
        assert!(parse_line(LogFormat::Pagebench, r#"{"snapshot":1}"#).is_none());
        assert_eq!("pagebench-json".parse(), Ok(LogFormat::Pagebench));
    }

    #[test]
    fn reads_only_new_complete_lines() {
        let tmp = crate::support::tempdir::create("log-test").unwrap();
        let dir = tmp.path();
        let p = dir.join("a.log");
        std::fs::write(&p, "one\ntwo\n").unwrap();
        let m = mark(&p);
        std::fs::write(&p, "one\ntwo\nthree\nfour-partial").unwrap();
        let (lines, m2) = lines_since(&p, m);
        assert_eq!(lines, ["three"]);
        assert_eq!(m2, 14);
    }
}
