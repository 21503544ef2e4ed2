//! `pagebench import FILE.har` (pure, but for reading the file): a HAR 1.2 with content —
//! Chromium DevTools' "Save all as HAR with content", or `pagebench run --har` — becomes a site
//! archive. A HAR keeps bodies decoded (`content.text`, base64 for binary ones): each is encoded
//! again with the coding its `Content-Encoding` names, so the bytes on the emulated wire are
//! the recording's kind of bytes. What the HAR lacks (no body, a truncated one, the body of a
//! 304) is listed in one [`ImportSummary`]; such entries get filler bytes of the recorded size
//! (and lose their `Content-Encoding`: filler is not encoded), or the import is refused with
//! `--strict`.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{bail, Context, Result};
use base64::Engine;
use serde::Deserialize;

use super::encoding::Coding;
use super::{Builder, Entry, Missing, SiteArchive, Source, Timings};
use crate::support::textfmt::few;

/// The part of HAR 1.2 an archive needs (unknown fields, `_`-prefixed extensions included,
/// are ignored).
#[derive(Debug, Deserialize)]
struct Har {
    log: Log,
}

#[derive(Debug, Deserialize)]
struct Log {
    #[serde(default)]
    creator: Option<Creator>,
    #[serde(default)]
    pages: Vec<Page>,
    entries: Vec<HarEntry>,
}

#[derive(Debug, Deserialize)]
struct Creator {
    name: String,
    #[serde(default)]
    version: String,
}

#[derive(Debug, Deserialize)]
struct Page {
    #[serde(rename = "startedDateTime", default)]
    started: Option<String>,
    #[serde(rename = "pageTimings", default)]
    timings: Option<PageTimings>,
}

#[derive(Debug, Deserialize)]
struct PageTimings {
    /// -1 or absent: unknown.
    #[serde(rename = "onLoad", default = "unknown")]
    on_load: f64,
}

#[derive(Debug, Deserialize)]
struct HarEntry {
    #[serde(rename = "startedDateTime")]
    started: String,
    request: Request,
    response: Response,
    #[serde(rename = "serverIPAddress", default)]
    server_ip: Option<String>,
    /// The server's port (`pagebench run --har` and `record` write it; HAR 1.2 has no field).
    #[serde(rename = "_serverPort", default)]
    server_port: Option<u16>,
    #[serde(default)]
    timings: Option<HarTimings>,
    /// Its total time, ms (-1 or absent: unknown).
    #[serde(default = "unknown")]
    time: f64,
    /// Why the request got no response (DevTools writes `net::ERR_…`), if it did not.
    #[serde(rename = "_error", default)]
    error: Option<String>,
    /// The connection's id (a string in HAR 1.2; some tools write a number).
    #[serde(default)]
    connection: Option<serde_json::Value>,
    /// Who asked for it (DevTools: `{"type": "parser" | "script" | "other" …}`).
    #[serde(rename = "_initiator", default)]
    initiator: Option<serde_json::Value>,
    /// What it loads (DevTools: `document`, `image`, `other` …).
    #[serde(rename = "_resourceType", default)]
    resource_type: Option<String>,
}

impl HarEntry {
    /// The browser asked for it on its own: initiator `other` on a request for no document.
    fn browser_initiated(&self) -> bool {
        let other = self
            .initiator
            .as_ref()
            .and_then(|i| i["type"].as_str())
            .is_some_and(|t| t == "other");
        let document = self
            .resource_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("document"));
        other && !document && self.resource_type.is_some()
    }
}

#[derive(Debug, Deserialize)]
struct Request {
    method: String,
    url: String,
}

#[derive(Debug, Deserialize)]
struct Response {
    status: f64,
    #[serde(rename = "httpVersion", default)]
    http_version: String,
    #[serde(default)]
    headers: Vec<Header>,
    content: Content,
    /// Body bytes over the wire (-1: unknown). Numbers may be written as floats.
    #[serde(rename = "bodySize", default = "unknown")]
    body_size: f64,
}

fn unknown() -> f64 {
    -1.0
}

#[derive(Debug, Deserialize)]
struct Header {
    name: String,
    value: String,
}

#[derive(Debug, Deserialize)]
struct Content {
    /// Decoded size (-1 or absent: unknown).
    #[serde(default = "unknown")]
    size: f64,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    encoding: Option<String>,
}

#[derive(Debug, Deserialize)]
struct HarTimings {
    /// -1 or absent: unknown.
    #[serde(default = "unknown")]
    send: f64,
    #[serde(default)]
    wait: f64,
    #[serde(default)]
    receive: f64,
    /// -1 or absent: no connection opened (HAR 1.2).
    #[serde(default = "unknown")]
    connect: f64,
    #[serde(default = "unknown")]
    ssl: f64,
    /// -1 or absent: no lookup (HAR 1.2).
    #[serde(default = "unknown")]
    dns: f64,
}

/// What an import did, for the one summary it prints.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportSummary {
    pub entries: usize,
    /// Distinct `scheme://host[:port]` origins.
    pub origins: Vec<String>,
    /// Bytes of bodies as they will go over the wire (re-encoded where the HAR kept them
    /// decoded).
    pub wire_bytes: u64,
    /// For the entries whose HAR says what went over the wire (`bodySize`) and whose body is
    /// whole: our wire bytes, and the recording's.
    pub compared_wire_bytes: u64,
    pub recorded_wire_bytes: u64,
    /// Entries whose body is not the recorded one: URL and why.
    pub missing: Vec<(String, Missing)>,
    /// Entries left out (not http(s): `data:`, `blob:`, extensions…).
    pub skipped: Vec<String>,
    /// Requests that got no response (status 0: blocked, cancelled or failed), left out (a
    /// replay answers them 404): URL and why, as the HAR says.
    pub failed: Vec<(String, String)>,
    /// Bodies per `Content-Encoding` on the wire (`identity` for none).
    pub encodings: std::collections::BTreeMap<String, usize>,
    /// Redirect responses (3xx with a `Location`).
    pub redirects: usize,
}

impl ImportSummary {
    /// The summary as printed.
    pub fn text(&self, out: &Path) -> String {
        self.text_as("imported", out)
    }

    /// The summary as printed, saying what was done (`imported`, `recorded`).
    pub fn text_as(&self, done: &str, out: &Path) -> String {
        let mut s = format!(
            "{done} {} responses from {} origin(s) into {}: {} body bytes on the wire",
            self.entries,
            self.origins.len(),
            out.display(),
            self.wire_bytes
        );
        if self.recorded_wire_bytes > 0 {
            s.push_str(&format!(
                " (where the recording says: {} vs its {}, {:+.1} %)",
                self.compared_wire_bytes,
                self.recorded_wire_bytes,
                (self.compared_wire_bytes as f64 / self.recorded_wire_bytes as f64 - 1.0) * 100.0
            ));
        }
        s.push('\n');
        for o in &self.origins {
            s.push_str(&format!("  origin {o}\n"));
        }
        if !self.encodings.is_empty() {
            let list: Vec<String> = self
                .encodings
                .iter()
                .map(|(c, n)| format!("{c} {n}"))
                .collect();
            s.push_str(&format!("  bodies by encoding: {}\n", list.join(", ")));
        }
        if self.redirects > 0 {
            s.push_str(&format!("  redirects: {}\n", self.redirects));
        }
        if !self.missing.is_empty() {
            s.push_str(&format!(
                "warning: {} response(s) without their recorded body are served as filler bytes of the recorded size (--strict refuses them):\n",
                self.missing.len()
            ));
            s.push_str(&missing_list(&self.missing));
        }
        if !self.skipped.is_empty() {
            s.push_str(&format!(
                "skipped {} request(s) that are not http(s): {}\n",
                self.skipped.len(),
                few(&self.skipped)
            ));
        }
        if !self.failed.is_empty() {
            let list: Vec<String> = self
                .failed
                .iter()
                .map(|(u, why)| format!("{u} ({why})"))
                .collect();
            s.push_str(&format!(
                "warning: left out {} request(s) that got no response (a replay answers them 404): {}\n",
                self.failed.len(),
                few(&list)
            ));
        }
        s
    }
}

fn missing_list(missing: &[(String, Missing)]) -> String {
    missing
        .iter()
        .map(|(u, m)| format!("  {u}: {}\n", m.describe()))
        .collect()
}

/// `scheme://host[:port]` of an http(s) URL.
pub fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let host = rest.split(['/', '?', '#']).next()?;
    (!host.is_empty()).then(|| format!("{scheme}://{host}"))
}

/// The protocol a HAR's `httpVersion` names, in the ALPN spelling the records use.
fn protocol(http_version: &str) -> Option<String> {
    match http_version.trim().to_ascii_lowercase().as_str() {
        "http/1.1" | "http/1.0" | "h1" => Some("http/1.1".into()),
        "h2" | "http/2" | "http/2.0" => Some("h2".into()),
        "h3" | "http/3" | "h3-29" | "http/3.0" => Some("h3".into()),
        _ => None,
    }
}

/// Deterministic stand-in bytes for a body the recording did not keep.
fn filler(size: usize) -> Vec<u8> {
    const PATTERN: &[u8] = b"pagebench: body not in the recording\n";
    PATTERN.iter().copied().cycle().take(size).collect()
}

fn ms_between(a: &chrono::DateTime<chrono::FixedOffset>, b: &str) -> f64 {
    chrono::DateTime::parse_from_rfc3339(b)
        .map(|t| (t - *a).num_microseconds().unwrap_or(0) as f64 / 1000.0)
        .unwrap_or(0.0)
}

/// Imports the HAR text `har` (read from `from`) into an archive at `out`.
pub fn import(
    har: &str,
    from: &Path,
    out: &Path,
    strict: bool,
) -> Result<(SiteArchive, ImportSummary)> {
    import_as(har, from, out, strict, |source| source)
}

/// [`import`], with the archive's [`Source`] as `source` makes it of the HAR's (a recording
/// names itself).
pub fn import_as(
    har: &str,
    from: &Path,
    out: &Path,
    strict: bool,
    source: impl FnOnce(Source) -> Source,
) -> Result<(SiteArchive, ImportSummary)> {
    let har: Har = serde_json::from_str(har).with_context(|| {
        format!(
            "{}: not a HAR 1.2 file (an object with log.entries)",
            from.display()
        )
    })?;
    let log = har.log;
    let first_start = log
        .entries
        .first()
        .and_then(|e| chrono::DateTime::parse_from_rfc3339(&e.started).ok());
    let mut summary = ImportSummary::default();
    let mut origins = BTreeSet::new();
    let mut builder = Builder::default();
    for (i, h) in log.entries.iter().enumerate() {
        let Some(o) = origin(&h.request.url) else {
            summary.skipped.push(h.request.url.clone());
            continue;
        };
        if h.response.status == 0.0 {
            let why = h.error.clone().unwrap_or_else(|| "no reason given".into());
            summary.failed.push((h.request.url.clone(), why));
            continue;
        }
        origins.insert(o);
        let at = || format!("{}: entry {i} ({})", from.display(), h.request.url);
        let (entry, wire) = import_entry(h, &at, first_start.as_ref(), &mut summary)?;
        builder.push(entry, wire);
    }
    summary.entries = builder.entries().len();
    summary.origins = origins.into_iter().collect();
    let Some(page_url) = builder.entries().first().map(|e| e.url.clone()) else {
        bail!(
            "{}: no http(s) responses to import ({} entries, all skipped)",
            from.display(),
            log.entries.len()
        );
    };
    if strict && !summary.missing.is_empty() {
        bail!(
            "{}: {} response(s) lack their recorded body (--strict):\n{}save the HAR \"with content\", or import without --strict to serve filler bytes",
            from.display(),
            summary.missing.len(),
            missing_list(&summary.missing)
        );
    }
    let source = source(Source {
        kind: "import".into(),
        from: from.display().to_string(),
        creator: log
            .creator
            .map(|c| format!("{} {}", c.name, c.version).trim().to_string())
            .unwrap_or_default(),
        started: log.pages.first().and_then(|p| p.started.clone()),
        browser_confinement: None,
        load_ms: log
            .pages
            .first()
            .and_then(|p| p.timings.as_ref())
            .map(|t| t.on_load)
            .filter(|l| *l > 0.0),
    });
    let archive = builder.write(out, source, page_url)?;
    Ok((archive, summary))
}

/// One HAR entry as an archive entry and its wire bytes, counted into `summary`.
fn import_entry(
    h: &HarEntry,
    at: &dyn Fn() -> String,
    first_start: Option<&chrono::DateTime<chrono::FixedOffset>>,
    summary: &mut ImportSummary,
) -> Result<(Entry, Option<Vec<u8>>)> {
    let status = Some(h.response.status)
        .filter(|s| s.fract() == 0.0 && (100.0..=599.0).contains(s))
        .map(|s| s as u16)
        .with_context(|| {
            format!(
                "{}: response.status {} is not an HTTP status",
                at(),
                h.response.status
            )
        })?;
    let headers: Vec<(String, String)> = h
        .response
        .headers
        .iter()
        .map(|x| (x.name.clone(), x.value.clone()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let mut coding_header = header("content-encoding").map(str::to_string);
    let coding = Coding::parse(coding_header.as_deref()).with_context(at)?;
    if (300..400).contains(&status) && header("location").is_some() {
        summary.redirects += 1;
    }
    let recorded_wire =
        (h.response.body_size >= 0.0).then_some(h.response.body_size.round() as u64);
    let (wire, missing) = wire_body(h, status, coding, &mut coding_header, at)?;
    let headers = if coding_header.is_none() {
        headers
            .into_iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("content-encoding"))
            .collect()
    } else {
        headers
    };
    summary.count(
        h,
        &wire,
        recorded_wire,
        missing,
        coding,
        coding_header.as_deref(),
    );
    let decoded_size = match (&wire, Coding::parse(coding_header.as_deref())) {
        (Some(w), Ok(c)) => c.decode(w).map(|d| d.len() as u64).unwrap_or(0),
        _ => 0,
    };
    let timings = h.timings.as_ref();
    let start_ms = first_start.map_or(0.0, |t| ms_between(t, &h.started));
    let entry = Entry {
        method: h.request.method.clone(),
        url: h.request.url.clone(),
        status,
        headers,
        body: None,
        content_encoding: coding_header.filter(|c| !c.eq_ignore_ascii_case("identity")),
        decoded_size,
        server_address: server_address(h),
        protocol: protocol(&h.response.http_version),
        timings: Timings {
            start_ms,
            wait_ms: timings.map_or(0.0, |t| t.wait.max(0.0)),
            send_ms: timings.map(|t| t.send).filter(|s| *s >= 0.0),
            receive_ms: timings.map_or(0.0, |t| t.receive.max(0.0)),
            connect_ms: timings.map(|t| t.connect).filter(|c| *c > 0.0),
            ssl_ms: timings.map(|t| t.ssl).filter(|s| *s >= 0.0),
            dns_ms: timings.map(|t| t.dns).filter(|d| *d >= 0.0),
            end_ms: (h.time >= 0.0).then_some(start_ms + h.time),
        },
        missing,
        connection: match &h.connection {
            Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => None,
        },
        browser_initiated: h.browser_initiated(),
    };
    Ok((entry, wire))
}

/// The body as the HAR keeps it: decoded, base64 or text.
fn decoded_body(h: &HarEntry, at: &dyn Fn() -> String) -> Result<Option<Vec<u8>>> {
    Ok(
        match (
            &h.response.content.text,
            h.response.content.encoding.as_deref(),
        ) {
            (None, _) => None,
            (Some(t), Some("base64")) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(t.trim())
                    .with_context(|| {
                        format!("{}: response.content.text is not valid base64", at())
                    })?,
            ),
            (Some(_), Some(other)) => bail!(
                "{}: response.content.encoding {other:?} is not supported (base64 or none)",
                at()
            ),
            (Some(t), None) => Some(t.as_bytes().to_vec()),
        },
    )
}

/// The body as it goes over the wire (encoded again with its coding), and what the HAR lacked:
/// a truncated body is padded to its recorded size, a missing one is filler of its size sent
/// without a coding (`coding_header` is then cleared).
fn wire_body(
    h: &HarEntry,
    status: u16,
    coding: Coding,
    coding_header: &mut Option<String>,
    at: &dyn Fn() -> String,
) -> Result<(Option<Vec<u8>>, Option<Missing>)> {
    if status == 304 {
        return Ok((None, Some(Missing::NotModified)));
    }
    let recorded_size =
        (h.response.content.size > 0.0).then_some(h.response.content.size.round() as u64);
    let recorded_wire =
        (h.response.body_size >= 0.0).then_some(h.response.body_size.round() as u64);
    Ok(match decoded_body(h, at)? {
        Some(mut d) if recorded_size.is_some_and(|s| (d.len() as u64) < s) => {
            let want = recorded_size.unwrap_or(0) as usize;
            d.extend(filler(want - d.len()));
            (
                Some(coding.encode(&d).with_context(at)?),
                Some(Missing::Truncated),
            )
        }
        Some(d) if d.is_empty() && (300..400).contains(&status) => (None, None),
        Some(d) => (Some(coding.encode(&d).with_context(at)?), None),
        None => {
            let size = recorded_wire
                .filter(|s| *s > 0)
                .or(recorded_size)
                .unwrap_or(0);
            if size == 0 {
                (None, None)
            } else {
                // Filler is sent as it is: the entry loses its coding.
                *coding_header = None;
                (Some(filler(size as usize)), Some(Missing::NoBody))
            }
        }
    })
}

/// The server's address as the HAR names it. `connection` is Chromium's socket id, not a
/// port: the address is the IP alone.
fn server_address(h: &HarEntry) -> Option<String> {
    h.server_ip
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|ip| match h.server_port {
            Some(port) if ip.contains(':') && !ip.starts_with('[') => format!("[{ip}]:{port}"),
            Some(port) => format!("{ip}:{port}"),
            None => ip.to_string(),
        })
}

impl ImportSummary {
    /// Counts one imported entry: what it lacked, its wire bytes against the recording's,
    /// its coding.
    fn count(
        &mut self,
        h: &HarEntry,
        wire: &Option<Vec<u8>>,
        recorded_wire: Option<u64>,
        missing: Option<Missing>,
        coding: Coding,
        coding_header: Option<&str>,
    ) {
        if let Some(m) = missing {
            self.missing.push((h.request.url.clone(), m));
        }
        if let (Some(w), Some(r), None) = (wire, recorded_wire.filter(|r| *r > 0), missing) {
            if w.len() as u64 != r {
                tracing::debug!(
                    "{}: {} wire bytes here, {r} in the recording ({:?})",
                    h.request.url,
                    w.len(),
                    coding
                );
            }
            self.compared_wire_bytes += w.len() as u64;
            self.recorded_wire_bytes += r;
        }
        self.wire_bytes += wire.as_ref().map_or(0, |w| w.len() as u64);
        if wire.is_some() {
            let coding = coding_header.unwrap_or("identity");
            *self
                .encodings
                .entry(coding.to_ascii_lowercase())
                .or_default() += 1;
        }
    }
}

/// Reads `file` and imports it into `out`.
pub fn import_file(file: &Path, out: &Path, strict: bool) -> Result<(SiteArchive, ImportSummary)> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    import(&text, file, out, strict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A HAR as Chromium DevTools writes it ("Save all as HAR with content"): decoded bodies,
    /// base64 for binary ones, the coding in the response headers, `bodySize` the wire bytes.
    fn har() -> String {
        let css = "body { background: url(/bg.png); }\n".repeat(100);
        let gz = Coding::Gzip.encode(css.as_bytes()).unwrap();
        let png = [0x89u8, b'P', b'N', b'G', 0, 1, 2, 3];
        let entry = |url: &str,
                     status: i64,
                     headers: serde_json::Value,
                     content: serde_json::Value,
                     body_size: i64,
                     ip: &str| {
            json!({
                "startedDateTime": "2026-12-01T10:00:00.100Z",
                "time": 50.0,
                "request": {"method": "GET", "url": url, "httpVersion": "h2", "headers": []},
                "response": {"status": status, "statusText": "", "httpVersion": "h2", "headers": headers,
                             "content": content, "redirectURL": "", "headersSize": -1, "bodySize": body_size},
                "serverIPAddress": ip, "connection": "443",
                "timings": {"blocked": 1.0, "dns": -1, "connect": -1, "ssl": -1, "send": 0.1, "wait": 40.5, "receive": 2.5}
            })
        };
        let mut first = entry(
            "https://www.a.test/",
            200,
            json!([{"name": "content-type", "value": "text/html"}]),
            json!({"size": 6, "mimeType": "text/html", "text": "<html>"}),
            6,
            "192.0.2.1",
        );
        first["startedDateTime"] = json!("2026-12-01T10:00:00.000Z");
        first["timings"]["connect"] = json!(82.5);
        first["timings"]["ssl"] = json!(41.0);
        first["timings"]["dns"] = json!(23.5);
        json!({"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"},
            "pages": [{"startedDateTime": "2026-12-01T10:00:00.000Z", "id": "page_1", "title": "https://www.a.test/",
                       "pageTimings": {"onContentLoad": 300.5, "onLoad": 412.25}}],
            "entries": [
                first,
                entry("https://cdn.a.test/site.css", 200,
                    json!([{"name": "Content-Encoding", "value": "gzip"}, {"name": "content-type", "value": "text/css"}]),
                    json!({"size": css.len(), "mimeType": "text/css", "text": css}), gz.len() as i64, "192.0.2.2"),
                entry("https://cdn.a.test/bg.png", 200,
                    json!([{"name": "content-type", "value": "image/png"}]),
                    json!({"size": 8, "mimeType": "image/png", "text": base64::engine::general_purpose::STANDARD.encode(png), "encoding": "base64"}), 8, "192.0.2.2"),
                entry("https://fonts.b.test/old", 301,
                    json!([{"name": "location", "value": "https://fonts.b.test/f.woff2"}]),
                    json!({"size": 0, "mimeType": "x-unknown", "text": ""}), 0, "192.0.2.3"),
                entry("https://fonts.b.test/f.woff2", 200,
                    json!([{"name": "content-type", "value": "font/woff2"}, {"name": "content-encoding", "value": "br"}]),
                    json!({"size": 5000, "mimeType": "font/woff2"}), 4000, "192.0.2.3"),
                entry("https://www.a.test/app.js", 200,
                    json!([{"name": "content-type", "value": "text/javascript"}]),
                    json!({"size": 100, "mimeType": "text/javascript", "text": "var a = 1;"}), 100, "192.0.2.1"),
                entry("https://www.a.test/cached.js", 304, json!([]),
                    json!({"size": 0, "mimeType": "text/javascript"}), 0, "192.0.2.1"),
                entry("data:image/gif;base64,R0lGODlh", 200, json!([]), json!({"size": 10, "mimeType": "image/gif"}), 0, ""),
            ]}})
        .to_string()
    }

    #[test]
    fn a_devtools_har_becomes_an_archive_with_wire_bodies_and_one_summary() {
        let out = tempfile::tempdir().unwrap();
        let (a, s) = import(&har(), Path::new("site.har"), out.path(), false).unwrap();
        assert_eq!(
            super::super::read(out.path()).unwrap(),
            a,
            "what was written reads back"
        );
        assert_eq!(a.page_url, "https://www.a.test/");
        assert_eq!(a.source.creator, "WebInspector 537.36");
        assert_eq!(s.entries, 7);
        assert_eq!(
            s.origins,
            [
                "https://cdn.a.test",
                "https://fonts.b.test",
                "https://www.a.test"
            ]
        );
        assert_eq!(s.skipped, ["data:image/gif;base64,R0lGODlh"]);
        // The gzip CSS is gzip again on the wire, and decodes to the recorded text.
        let css = &a.entries[1];
        assert_eq!(css.content_encoding.as_deref(), Some("gzip"));
        let wire = super::super::body(out.path(), css).unwrap();
        assert_eq!(
            Coding::Gzip.decode(&wire).unwrap().len() as u64,
            css.decoded_size
        );
        assert_eq!(css.decoded_size, 3500);
        assert_eq!(css.server_address.as_deref(), Some("192.0.2.2"));
        assert_eq!(css.protocol.as_deref(), Some("h2"));
        assert!((css.timings.start_ms - 100.0).abs() < 1e-9);
        assert!((css.timings.wait_ms - 40.5).abs() < 1e-9);
        assert_eq!(css.timings.send_ms, Some(0.1));
        // Connection set-up where a request opened one (-1: none); the page's load event.
        assert_eq!(css.timings.connect_ms, None);
        let page = &a.entries[0].timings;
        assert_eq!((page.connect_ms, page.ssl_ms), (Some(82.5), Some(41.0)));
        // The page's lookup kept; -1 (no lookup) is none.
        assert_eq!((page.dns_ms, css.timings.dns_ms), (Some(23.5), None));
        assert_eq!(a.source.load_ms, Some(412.25));
        // Base64 bodies are bytes; a redirect has no body.
        let png = super::super::body(out.path(), &a.entries[2]).unwrap();
        assert_eq!(&png[..4], b"\x89PNG");
        assert_eq!(a.entries[3].status, 301);
        assert!(a.entries[3].body.is_none() && a.entries[3].missing.is_none());
        // A missing body is filler of the wire size, sent without its coding.
        let font = &a.entries[4];
        assert_eq!(font.missing, Some(Missing::NoBody));
        assert_eq!(font.body.as_ref().unwrap().size, 4000);
        assert!(font.content_encoding.is_none() && font.header("content-encoding").is_none());
        // A truncated body is made up to its recorded size; a 304 keeps no body.
        assert_eq!(a.entries[5].missing, Some(Missing::Truncated));
        assert_eq!(a.entries[5].body.as_ref().unwrap().size, 100);
        assert_eq!(a.entries[6].missing, Some(Missing::NotModified));
        assert_eq!(s.missing.len(), 3);
        let text = s.text(out.path());
        assert!(text.contains("7 responses from 3 origin(s)"), "{text}");
        assert!(text.contains("f.woff2: no body recorded"), "{text}");
        assert!(text.contains("skipped 1 request(s)"), "{text}");
        // Re-encoded bodies against the recording's wire bytes (whole bodies only).
        assert!(s.recorded_wire_bytes > 0);
        let ratio = s.compared_wire_bytes as f64 / s.recorded_wire_bytes as f64;
        assert!((0.9..1.1).contains(&ratio), "{ratio}");
    }

    #[test]
    fn strict_refuses_missing_bodies_and_bad_input_names_the_entry() {
        let out = tempfile::tempdir().unwrap();
        let e = format!(
            "{:#}",
            import(&har(), Path::new("site.har"), out.path(), true).unwrap_err()
        );
        assert!(
            e.contains("3 response(s) lack their recorded body (--strict)"),
            "{e}"
        );
        assert!(
            e.contains("https://fonts.b.test/f.woff2: no body recorded"),
            "{e}"
        );
        assert!(
            !out.path().join("site.json").exists(),
            "nothing written when refused"
        );

        let e = format!(
            "{:#}",
            import("{}", Path::new("x.har"), out.path(), false).unwrap_err()
        );
        assert!(e.contains("x.har: not a HAR 1.2 file"), "{e}");
        let mut bad: serde_json::Value = serde_json::from_str(&har()).unwrap();
        bad["log"]["entries"][1]["response"]["headers"][0]["value"] = json!("zstd");
        let e = format!(
            "{:#}",
            import(&bad.to_string(), Path::new("x.har"), out.path(), false).unwrap_err()
        );
        assert!(
            e.contains("entry 1 (https://cdn.a.test/site.css)") && e.contains("zstd"),
            "{e}"
        );
        let only_data = json!({"log": {"entries": [{"startedDateTime": "2026-12-01T10:00:00Z",
            "request": {"method": "GET", "url": "data:,x"},
            "response": {"status": 200, "content": {"size": 1}}}]}});
        let e = format!(
            "{:#}",
            import(
                &only_data.to_string(),
                Path::new("x.har"),
                out.path(),
                false
            )
            .unwrap_err()
        );
        assert!(e.contains("no http(s) responses"), "{e}");
        // A status that is not one (not 0, which is no response) names the entry.
        let mut bad: serde_json::Value = serde_json::from_str(&har()).unwrap();
        bad["log"]["entries"][2]["response"]["status"] = json!(999);
        let e = format!(
            "{:#}",
            import(&bad.to_string(), Path::new("x.har"), out.path(), false).unwrap_err()
        );
        assert!(
            e.contains("entry 2 (https://cdn.a.test/bg.png): response.status 999"),
            "{e}"
        );
    }

    #[test]
    fn a_request_that_got_no_response_is_left_out_and_said() {
        // DevTools writes a blocked or failed request with status 0 and its error.
        let out = tempfile::tempdir().unwrap();
        let mut har: serde_json::Value = serde_json::from_str(&har()).unwrap();
        har["log"]["entries"][2]["response"]["status"] = json!(0);
        har["log"]["entries"][2]["_error"] = json!("net::ERR_BLOCKED_BY_CLIENT");
        let (a, s) = import(&har.to_string(), Path::new("x.har"), out.path(), false).unwrap();
        assert_eq!(s.entries, 6);
        assert!(!a
            .entries
            .iter()
            .any(|e| e.url == "https://cdn.a.test/bg.png"));
        assert_eq!(
            s.failed,
            [(
                "https://cdn.a.test/bg.png".to_string(),
                "net::ERR_BLOCKED_BY_CLIENT".to_string()
            )]
        );
        let text = s.text(out.path());
        assert!(
            text.contains("left out 1 request(s) that got no response")
                && text.contains("bg.png (net::ERR_BLOCKED_BY_CLIENT)"),
            "{text}"
        );
    }

    #[test]
    fn the_browser_s_own_request_is_marked_from_devtools_initiator_and_type() {
        let mut v: serde_json::Value = serde_json::from_str(&har()).unwrap();
        let entries = v["log"]["entries"].as_array_mut().unwrap();
        entries[5]["_initiator"] = json!({"type": "other"});
        entries[5]["_resourceType"] = json!("other");
        entries[0]["_initiator"] = json!({"type": "other"});
        entries[0]["_resourceType"] = json!("document");
        entries[1]["_initiator"] = json!({"type": "parser"});
        entries[1]["_resourceType"] = json!("stylesheet");
        let out = tempfile::tempdir().unwrap();
        let (a, _) = import(&v.to_string(), Path::new("site.har"), out.path(), false).unwrap();
        let own = |url: &str| {
            a.entries
                .iter()
                .find(|e| e.url == url)
                .unwrap()
                .browser_initiated
        };
        assert!(
            own("https://www.a.test/app.js"),
            "initiator other, no document"
        );
        assert!(!own("https://www.a.test/"), "the navigation is the page's");
        assert!(!own("https://cdn.a.test/site.css"));
        assert!(
            !own("https://cdn.a.test/bg.png"),
            "no initiator written: the page's"
        );
    }

    #[test]
    fn origins_and_protocols_read_as_the_records_spell_them() {
        assert_eq!(
            origin("https://a.test:8443/x?y").as_deref(),
            Some("https://a.test:8443")
        );
        assert_eq!(origin("blob:https://a.test/1"), None);
        assert_eq!(protocol("HTTP/1.1").as_deref(), Some("http/1.1"));
        assert_eq!(protocol("h3").as_deref(), Some("h3"));
        assert_eq!(protocol("unknown"), None);
        assert_eq!(filler(5), b"pageb");
    }
}
