//! Reference servers' JSON access logs → the server view a run is cross-checked against
//! (pure parsing; reading "what was appended since a mark" is a file offset).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::Value;

use crate::metrics::url_path;
use crate::validate::ServerView;

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

/// Which server wrote the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Caddy,
    Nginx,
}

/// Parses one log line; lines that are not access entries give `None`.
pub fn parse_line(format: LogFormat, line: &str) -> Option<ServerView> {
    let v: Value = serde_json::from_str(line).ok()?;
    match format {
        LogFormat::Caddy => {
            let r = v.get("request")?;
            Some(ServerView {
                protocol: alpn_of(r.get("proto")?.as_str()?),
                method: r.get("method")?.as_str()?.to_string(),
                path: url_path(&format!("https://x{}", r.get("uri")?.as_str()?)),
                status: v.get("status")?.as_u64()? as u16,
                bytes_sent: v.get("size").and_then(Value::as_u64).unwrap_or(0),
                bytes_received: v.get("bytes_read").and_then(Value::as_u64).unwrap_or(0),
            })
        }
        LogFormat::Nginx => Some(ServerView {
            protocol: alpn_of(v.get("proto")?.as_str()?),
            method: v.get("method")?.as_str()?.to_string(),
            path: v.get("uri")?.as_str()?.to_string(),
            status: v.get("status")?.as_u64()? as u16,
            bytes_sent: v.get("bytes_sent").and_then(Value::as_u64).unwrap_or(0),
            bytes_received: 0,
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
    fn reads_only_new_complete_lines() {
        let dir = crate::browser::launch::make_temp_dir("pagebench-log-test").unwrap();
        let p = dir.join("a.log");
        std::fs::write(&p, "one\ntwo\n").unwrap();
        let m = mark(&p);
        std::fs::write(&p, "one\ntwo\nthree\nfour-partial").unwrap();
        let (lines, m2) = lines_since(&p, m);
        assert_eq!(lines, ["three"]);
        assert_eq!(m2, 14);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
