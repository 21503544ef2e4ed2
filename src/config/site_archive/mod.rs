//! Site archives: a real page's every response, kept so it can be replayed from many origins
//! over h1, h2 and h3. On disk a directory:
//!
//! - `site.json` — the manifest ([`SiteArchive`]): where it came from, the page's URL, and per
//!   request ([`Entry`]): method, URL, status, response headers (as recorded, in order), the
//!   body's content address, its `Content-Encoding`, the server address it came from, the
//!   protocol it used and its timings;
//! - `bodies/<sha256>` — each body exactly as it went over the wire (still encoded), named by the
//!   SHA-256 of those bytes, stored once however many responses share it.
//!
//! An entry whose body was not available (a HAR without content, a truncated body, a 304) says
//! so in `missing`; replay serves its recorded size of filler bytes, and the import listed it.
//! [`write`] puts the bodies first and the manifest last (atomically), so a directory with a
//! `site.json` is complete; [`read`] checks every body against its address and size.

pub mod distances;
pub mod encoding;
pub mod har_import;
pub mod matching;
pub mod origins;
pub mod replay;

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Version of the manifest's layout.
pub const SITE_FORMAT: u32 = 1;
pub const MANIFEST: &str = "site.json";
pub const BODIES: &str = "bodies";
/// [`Source::kind`] of an archive pagebench generated (a sharded page, `pageNsK`).
pub const SOURCE_GENERATED: &str = "generated";

/// A recorded or imported site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteArchive {
    pub format: u32,
    /// How the archive was made: `import` of a HAR file, `record` of a URL, or `generated` by
    /// `pagebench pages` (a sharded page).
    pub source: Source,
    /// The page the browser loads (the first document request).
    pub page_url: String,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// `import`, `record` or `generated`.
    pub kind: String,
    /// The HAR file, the recorded URL, or what was generated.
    pub from: String,
    /// The tool that made the recording (HAR `creator`, or pagebench with Chromium's version).
    #[serde(default)]
    pub creator: String,
    /// When the recording started (RFC 3339), if known.
    #[serde(default)]
    pub started: Option<String>,
    /// `record`: who the recording browser's processes ran as and whether its sandbox was on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_confinement: Option<crate::support::unprivileged::Confinement>,
    /// The recorded page's load event, ms from its navigation (HAR `pageTimings.onLoad`): what a
    /// replay at the recording's own distances is compared with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_ms: Option<f64>,
}

/// One request and its recorded response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub method: String,
    pub url: String,
    pub status: u16,
    /// Response headers as recorded, in order (names as recorded; replay drops hop-by-hop ones
    /// and `Alt-Svc`).
    pub headers: Vec<(String, String)>,
    /// The body over the wire: content address and size (`None`: no body, e.g. a 204 or a
    /// redirect without one).
    pub body: Option<BodyRef>,
    /// The `Content-Encoding` the body is in (`None`: identity).
    #[serde(default)]
    pub content_encoding: Option<String>,
    /// Size of the decoded body, bytes.
    #[serde(default)]
    pub decoded_size: u64,
    /// The server address the response came from (`IP` or `IP:port`), if recorded.
    #[serde(default)]
    pub server_address: Option<String>,
    /// The protocol it used (`http/1.1`, `h2`, `h3`), if recorded.
    #[serde(default)]
    pub protocol: Option<String>,
    pub timings: Timings,
    /// Why the body is not the recorded one, if it is not.
    #[serde(default)]
    pub missing: Option<Missing>,
    /// The recording browser's id of the connection that carried it (HAR `connection`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
    /// The recording browser asked for it on its own (a favicon: HAR `_initiator` `other`,
    /// not a document), not the page: no replay needs to make it again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub browser_initiated: bool,
}

impl Entry {
    /// Whether the page asked for it, not the browser on its own: marked so when recorded,
    /// and `/favicon.ico` always (Chromium fetches it by itself, named by the page or not;
    /// archives recorded before the mark have it unmarked).
    pub fn is_the_pages(&self) -> bool {
        !self.browser_initiated && url_path_of(&self.url) != "/favicon.ico"
    }
}

/// `https://host/a/b?q` → `/a/b`.
fn url_path_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = rest.find('/').map_or("/", |i| &rest[i..]);
    path.split(['?', '#']).next().unwrap_or(path)
}

/// Where a body's wire bytes are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BodyRef {
    /// Hex SHA-256 of the wire bytes: the file `bodies/<sha256>`.
    pub sha256: String,
    pub size: u64,
}

/// The recorded timings (ms), for think time and each origin's distance on replay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timings {
    /// Since the page's first request.
    pub start_ms: f64,
    /// Request sent → first response byte (the server's think time plus one RTT).
    pub wait_ms: f64,
    /// Sending the request (HAR `send`; archives from before it: None).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_ms: Option<f64>,
    /// First → last response byte.
    pub receive_ms: f64,
    /// When this request opened its connection: the set-up, TLS included (HAR `connect`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<f64>,
    /// Its TLS part (HAR `ssl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssl_ms: Option<f64>,
    /// When this request looked its host up: the lookup's time (HAR `dns`; a cache hit's
    /// 0 is kept, unknown is None).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_ms: Option<f64>,
    /// When its last byte arrived, since the page's first request (HAR `startedDateTime` +
    /// `time`; archives from before it: None, `wait_ms` + `receive_ms` stand in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<f64>,
}

impl Timings {
    /// From the request's first byte sent to the response's first byte: one round trip and the
    /// server's think time at least. `wait` alone can be less: Chromium stamps a request's
    /// end when its write completes, and a busy network thread stamps it after the request
    /// left (first bytes 3.3 ms short of a 40 ms path's round trip in `tests/site_record.rs`).
    pub fn first_byte_ms(&self) -> f64 {
        self.wait_ms + self.send_ms.unwrap_or(0.0)
    }

    /// When its last byte arrived, since the page's first request.
    pub fn end(&self) -> f64 {
        self.end_ms.unwrap_or(
            self.start_ms + self.connect_ms.unwrap_or(0.0) + self.wait_ms + self.receive_ms,
        )
    }
}

/// Why an entry's body was not available, and what stands in for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Missing {
    /// The recording kept no body: filler bytes of the recorded size stand in.
    NoBody,
    /// The recorded body is shorter than the size the recording gives: filler makes up the rest.
    Truncated,
    /// A 304: the body came from the recording browser's cache (served as recorded, empty).
    NotModified,
}

impl Missing {
    pub fn describe(self) -> &'static str {
        match self {
            Missing::NoBody => "no body recorded",
            Missing::Truncated => "body truncated",
            Missing::NotModified => "304 (body from the recording browser's cache)",
        }
    }
}

impl Entry {
    /// A response header's value (case-insensitive name), the first if repeated.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The content address of `wire`.
pub fn address(wire: &[u8]) -> String {
    crate::support::digest::sha256_hex(wire)
}

/// An archive being assembled: entries and the bodies they refer to.
#[derive(Debug, Default)]
pub struct Builder {
    entries: Vec<Entry>,
    bodies: std::collections::BTreeMap<String, Vec<u8>>,
}

impl Builder {
    /// Adds `entry` with its wire body (stored once per content).
    pub fn push(&mut self, mut entry: Entry, wire: Option<Vec<u8>>) {
        entry.body = wire.map(|w| {
            let r = BodyRef {
                sha256: address(&w),
                size: w.len() as u64,
            };
            self.bodies.entry(r.sha256.clone()).or_insert(w);
            r
        });
        self.entries.push(entry);
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Writes the archive to `dir`: bodies, then the manifest (atomically).
    pub fn write(self, dir: &Path, source: Source, page_url: String) -> Result<SiteArchive> {
        let archive = SiteArchive {
            format: SITE_FORMAT,
            source,
            page_url,
            entries: self.entries,
        };
        check(&archive).with_context(|| format!("archive for {}", dir.display()))?;
        let bodies = dir.join(BODIES);
        std::fs::create_dir_all(&bodies)
            .with_context(|| format!("cannot create {}", bodies.display()))?;
        for (sha, wire) in &self.bodies {
            let path = bodies.join(sha);
            if !path.exists() {
                crate::support::atomic::write_file(&path, wire)?;
            }
        }
        let json = serde_json::to_string_pretty(&archive)? + "\n";
        crate::support::atomic::write_file(&dir.join(MANIFEST), json.as_bytes())?;
        Ok(archive)
    }
}

/// The manifest's own consistency (no files read): the format, a page among the entries,
/// well-formed URLs, statuses and addresses.
fn check(a: &SiteArchive) -> Result<()> {
    if a.format != SITE_FORMAT {
        bail!(
            "format {} (this pagebench reads format {SITE_FORMAT}): make the archive again with this version",
            a.format
        );
    }
    if a.entries.is_empty() {
        bail!("no entries: the recording holds no responses");
    }
    if !a.entries.iter().any(|e| e.url == a.page_url) {
        bail!("page_url {:?} is not among the entries", a.page_url);
    }
    for (i, e) in a.entries.iter().enumerate() {
        let at = || format!("entry {i} ({} {})", e.method, e.url);
        let rest = e
            .url
            .strip_prefix("https://")
            .or_else(|| e.url.strip_prefix("http://"))
            .with_context(|| format!("{}: url is not http(s)", at()))?;
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        if host.is_empty() {
            bail!("{}: url has no host", at());
        }
        if !(100..=599).contains(&e.status) {
            bail!("{}: status {} is not an HTTP status", at(), e.status);
        }
        if let Some(b) = &e.body {
            if b.sha256.len() != 64 || !b.sha256.bytes().all(|c| c.is_ascii_hexdigit()) {
                bail!("{}: body.sha256 {:?} is not a SHA-256", at(), b.sha256);
            }
        }
        encoding::Coding::parse(e.content_encoding.as_deref()).with_context(at)?;
    }
    Ok(())
}

/// Reads and checks the archive in `dir`: the manifest, and every body's size and address.
pub fn read(dir: &Path) -> Result<SiteArchive> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {} (a site archive is made by `pagebench import FILE.har --out DIR`)",
            path.display()
        )
    })?;
    let a: SiteArchive = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a site archive manifest (format {SITE_FORMAT})",
            path.display()
        )
    })?;
    check(&a).with_context(|| path.display().to_string())?;
    for (i, e) in a.entries.iter().enumerate() {
        let Some(b) = &e.body else { continue };
        let body = dir.join(BODIES).join(&b.sha256);
        let wire = std::fs::read(&body).with_context(|| {
            format!(
                "{}: entry {i} ({}): its body {} is missing",
                path.display(),
                e.url,
                body.display()
            )
        })?;
        if wire.len() as u64 != b.size || address(&wire) != b.sha256 {
            bail!(
                "{}: entry {i} ({}): {} is not the recorded body ({} bytes, expected {} with that address)",
                path.display(),
                e.url,
                body.display(),
                wire.len(),
                b.size
            );
        }
    }
    Ok(a)
}

/// The wire bytes of `entry`'s body in the archive at `dir`.
pub fn body(dir: &Path, entry: &Entry) -> Result<Vec<u8>> {
    match &entry.body {
        None => Ok(Vec::new()),
        Some(b) => {
            let p = dir.join(BODIES).join(&b.sha256);
            std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn entry(url: &str, status: u16) -> Entry {
        Entry {
            method: "GET".into(),
            url: url.into(),
            status,
            headers: vec![("Content-Type".into(), "text/css".into())],
            body: None,
            content_encoding: None,
            decoded_size: 0,
            server_address: Some("127.0.0.1:443".into()),
            protocol: Some("h2".into()),
            timings: Timings::default(),
            missing: None,
            browser_initiated: false,
            connection: None,
        }
    }

    fn source() -> Source {
        Source {
            kind: "import".into(),
            from: "test.har".into(),
            creator: "test".into(),
            started: None,
            browser_confinement: None,
            load_ms: None,
        }
    }

    #[test]
    fn a_favicon_or_a_marked_request_is_not_the_page_s() {
        let mut e = Entry {
            method: "GET".into(),
            url: "https://docs.test/favicon.ico".into(),
            status: 200,
            headers: vec![],
            body: None,
            content_encoding: None,
            decoded_size: 0,
            server_address: None,
            protocol: None,
            timings: Timings::default(),
            missing: None,
            connection: None,
            browser_initiated: false,
        };
        assert!(
            !e.is_the_pages(),
            "Chromium fetches /favicon.ico on its own"
        );
        e.url = "https://docs.test/favicon.ico?v=2".into();
        assert!(!e.is_the_pages());
        e.url = "https://docs.test/logo.png".into();
        assert!(e.is_the_pages());
        e.browser_initiated = true;
        assert!(!e.is_the_pages());
    }

    #[test]
    fn written_archives_read_back_with_shared_bodies_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Builder::default();
        b.push(entry("https://a.test/", 200), Some(b"<html>".to_vec()));
        b.push(entry("https://a.test/x.css", 200), Some(b"same".to_vec()));
        b.push(entry("https://cdn.test/y.css", 200), Some(b"same".to_vec()));
        b.push(entry("https://a.test/gone", 204), None);
        let written = b
            .write(dir.path(), source(), "https://a.test/".into())
            .unwrap();
        assert_eq!(read(dir.path()).unwrap(), written);
        let files = std::fs::read_dir(dir.path().join(BODIES)).unwrap().count();
        assert_eq!(files, 2, "the shared body is stored once");
        let css = &written.entries[2];
        assert_eq!(body(dir.path(), css).unwrap(), b"same");
        assert_eq!(css.header("content-type"), Some("text/css"));
        assert_eq!(body(dir.path(), &written.entries[3]).unwrap(), b"");
    }

    #[test]
    fn a_damaged_archive_names_the_entry_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Builder::default();
        b.push(entry("https://a.test/", 200), Some(b"<html>".to_vec()));
        let a = b
            .write(dir.path(), source(), "https://a.test/".into())
            .unwrap();
        let file = dir
            .path()
            .join(BODIES)
            .join(&a.entries[0].body.as_ref().unwrap().sha256);
        std::fs::write(&file, b"<html>changed").unwrap();
        let e = format!("{:#}", read(dir.path()).unwrap_err());
        assert!(
            e.contains("entry 0 (https://a.test/)") && e.contains("not the recorded body"),
            "{e}"
        );
        std::fs::remove_file(&file).unwrap();
        let e = format!("{:#}", read(dir.path()).unwrap_err());
        assert!(e.contains("is missing"), "{e}");
        let e = format!("{:#}", read(&dir.path().join("nope")).unwrap_err());
        assert!(e.contains("pagebench import"), "{e}");
    }

    #[test]
    fn manifest_errors_name_the_field() {
        let mut a = SiteArchive {
            format: SITE_FORMAT,
            source: source(),
            page_url: "https://a.test/".into(),
            entries: vec![entry("https://a.test/", 200)],
        };
        assert!(check(&a).is_ok());
        a.entries[0].status = 42;
        assert!(format!("{:#}", check(&a).unwrap_err()).contains("status 42"));
        a.entries[0].status = 200;
        a.entries[0].content_encoding = Some("zstd".into());
        assert!(format!("{:#}", check(&a).unwrap_err()).contains("zstd"));
        a.entries[0].content_encoding = None;
        a.page_url = "https://b.test/".into();
        assert!(format!("{:#}", check(&a).unwrap_err()).contains("page_url"));
        a.page_url = "https://a.test/".into();
        a.format = 9;
        assert!(format!("{:#}", check(&a).unwrap_err()).contains("format 9"));
    }
}
