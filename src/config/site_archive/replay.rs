//! A site archive made ready to serve: every body in memory, every recorded header checked
//! once, and the think time of each response. The embedded server asks it for the answer to
//! each request ([`ReplaySite::answer`]); what it answers is the recording, bytes as recorded,
//! with only the framing (length), `Alt-Svc` and `Timing-Allow-Origin` being pagebench's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::StatusCode;
use serde::{Deserialize, Serialize};

use super::har_import::origin;
use super::matching::{replayed_headers, Match, Matcher};
use super::SiteArchive;
use crate::config::protocol::Protocol;

/// `--think-time`: whether a replayed response waits as long as the recorded server did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThinkTime {
    /// Answer at once: the comparison is of the network and the protocols only.
    #[default]
    None,
    /// Wait the recorded wait (request sent → first byte) minus the recording's round trip to
    /// that origin (taken as the origin's shortest recorded wait).
    Recorded,
}

impl FromStr for ThinkTime {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<ThinkTime> {
        match s.trim() {
            "none" => Ok(ThinkTime::None),
            "recorded" => Ok(ThinkTime::Recorded),
            other => bail!("unknown --think-time {other:?}: use recorded or none"),
        }
    }
}

/// How a replayed request found its response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayMatch {
    Exact,
    /// Same path, another query string.
    SamePath,
    /// Not in the archive: answered 404.
    Miss,
}

/// One response as it is served.
#[derive(Debug)]
struct Prepared {
    status: StatusCode,
    headers: Arc<[(HeaderName, HeaderValue)]>,
    body: Bytes,
    think: Duration,
}

/// What the server sends for one request.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: StatusCode,
    /// The recorded headers to send (not the length: the server frames the body).
    pub headers: Arc<[(HeaderName, HeaderValue)]>,
    pub body: Bytes,
    pub matched: ReplayMatch,
    /// How long to wait before answering.
    pub think: Duration,
}

/// A site being replayed, and for its `as-recorded` arm each host's recorded protocol (the
/// server then offers an HTTP/1.1 origin HTTP/1.1 only, and advertises HTTP/3 only for the
/// origins that used it).
#[derive(Debug, Clone)]
pub struct Replay {
    pub site: Arc<ReplaySite>,
    pub as_recorded: Option<Arc<BTreeMap<String, Protocol>>>,
}

impl Replay {
    /// The protocol `host` (`host[:port]`, any case) used when recorded, on the `as-recorded`
    /// arm.
    pub fn recorded_protocol(&self, host: &str) -> Option<Protocol> {
        let map = self.as_recorded.as_ref()?;
        let host = host
            .rsplit_once(':')
            .map_or(host, |(h, _)| h)
            .to_ascii_lowercase();
        map.get(&host).copied()
    }
}

/// An archive ready to serve.
#[derive(Debug)]
pub struct ReplaySite {
    dir: PathBuf,
    page_url: String,
    matcher: Matcher,
    prepared: Vec<Prepared>,
}

/// `https://authority` + `target`, the way recorded URLs are written: the host in lower case,
/// the default port left out.
pub fn request_url(authority: &str, target: &str) -> String {
    request_url_over(true, authority, target)
}

/// [`request_url`] of a request that came over TLS (`https://`, default port 443) or not
/// (`http://`, default port 80).
pub fn request_url_over(tls: bool, authority: &str, target: &str) -> String {
    let (scheme, default_port) = if tls {
        ("https", ":443")
    } else {
        ("http", ":80")
    };
    let authority = authority.trim().to_ascii_lowercase();
    let authority = authority.strip_suffix(default_port).unwrap_or(&authority);
    let target = if target.starts_with('/') {
        target.to_string()
    } else {
        format!("/{target}")
    };
    format!("{scheme}://{authority}{target}")
}

/// The script `--deterministic` runs before a replayed page's own: `Date` starts at the
/// recording's start and advances with the page's clock, `Math.random` is a seeded generator
/// (the same sequence on every load), and `performance.timeOrigin` is that start too — so a
/// page that builds URLs from the time or from random numbers asks for the recorded ones.
pub fn deterministic_script(start_unix_ms: f64) -> String {
    format!(
        r#"(function () {{
  var start = {start_unix_ms:.0}, now = performance.now.bind(performance), RealDate = Date;
  var seed = 0x2545f491;
  Math.random = function () {{
    seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5;
    return (seed >>> 0) / 4294967296;
  }};
  function FixedDate(a, b, c, d, e, f, g) {{
    if (!(this instanceof FixedDate)) return new RealDate(start + now()).toString();
    switch (arguments.length) {{
      case 0: return new RealDate(start + now());
      case 1: return new RealDate(a);
      default: return new RealDate(a, b, c === undefined ? 1 : c, d || 0, e || 0, f || 0, g || 0);
    }}
  }}
  FixedDate.prototype = RealDate.prototype;
  FixedDate.now = function () {{ return Math.floor(start + now()); }};
  FixedDate.UTC = RealDate.UTC;
  FixedDate.parse = RealDate.parse;
  Date = FixedDate;
  try {{ Object.defineProperty(performance, 'timeOrigin', {{ get: function () {{ return start; }} }}); }} catch (e) {{}}
}})();"#
    )
}

/// When the recording started (unix ms), from its `started` time, else a fixed day.
pub fn recording_start_ms(archive: &SiteArchive) -> f64 {
    archive
        .source
        .started
        .as_deref()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.timestamp_millis() as f64)
        .unwrap_or(1_767_225_600_000.0)
}

/// The recording's round trip to each origin, the base of its think times: as `--distances
/// recorded` reads it (a raw wait can be shorter than the round trip — the recording browser's
/// request-sent time can come late: a redirect's 8 ms wait on a 10 ms path made every page
/// of one recording 8 ms slower on replay), else its shortest wait.
fn origin_rtts(archive: &SiteArchive) -> BTreeMap<String, f64> {
    let mut by_origin: BTreeMap<String, Vec<&super::Entry>> = BTreeMap::new();
    for e in &archive.entries {
        if let Some(o) = origin(&e.url) {
            by_origin.entry(o).or_default().push(e);
        }
    }
    by_origin
        .into_iter()
        .map(|(o, entries)| {
            let rtt = super::distances::recorded_rtt(&entries).map_or_else(
                || {
                    entries
                        .iter()
                        .map(|e| e.timings.wait_ms.max(0.0))
                        .fold(f64::INFINITY, f64::min)
                },
                |r| r.rtt_ms,
            );
            (o, rtt)
        })
        .collect()
}

impl ReplaySite {
    /// Loads every body of `archive` (read from `dir`) and prepares its responses.
    pub fn load(dir: &Path, archive: &SiteArchive, think: ThinkTime) -> Result<ReplaySite> {
        let rtt = origin_rtts(archive);
        let mut bodies: BTreeMap<String, Bytes> = BTreeMap::new();
        let mut prepared = Vec::with_capacity(archive.entries.len());
        for (i, e) in archive.entries.iter().enumerate() {
            let at = || format!("{}: entry {i} ({})", dir.display(), e.url);
            let status = StatusCode::from_u16(e.status)
                .with_context(|| format!("{}: status {} is not an HTTP status", at(), e.status))?;
            let mut headers = Vec::new();
            for (n, v) in replayed_headers(e) {
                let name = HeaderName::from_bytes(n.as_bytes())
                    .with_context(|| format!("{}: header name {n:?} is not valid", at()))?;
                let value = HeaderValue::from_str(v)
                    .with_context(|| format!("{}: header {n} value {v:?} is not valid", at()))?;
                headers.push((name, value));
            }
            let body = match &e.body {
                None => Bytes::new(),
                Some(b) => match bodies.get(&b.sha256) {
                    Some(bytes) => bytes.clone(),
                    None => {
                        let bytes = Bytes::from(super::body(dir, e).with_context(at)?);
                        bodies.insert(b.sha256.clone(), bytes.clone());
                        bytes
                    }
                },
            };
            let think = match think {
                ThinkTime::None => Duration::ZERO,
                ThinkTime::Recorded => {
                    let base = origin(&e.url)
                        .and_then(|o| rtt.get(&o).copied())
                        .unwrap_or(0.0);
                    // `wait`, not the first byte from the request's start: where the two
                    // differ, the request left somewhere between its start and its late
                    // stamped end; `wait` is the lower bound of the server's time (the
                    // replay's own handling adds to it anyway).
                    Duration::from_secs_f64((e.timings.wait_ms - base).max(0.0) / 1e3)
                }
            };
            prepared.push(Prepared {
                status,
                headers: headers.into(),
                body,
                think,
            });
        }
        Ok(ReplaySite {
            dir: dir.to_path_buf(),
            page_url: archive.page_url.clone(),
            matcher: Matcher::new(&archive.entries),
            prepared,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn page_url(&self) -> &str {
        &self.page_url
    }

    /// The answer to `method` `url` (see [`request_url`]): the recorded response, or a 404 for
    /// a request the archive does not have.
    pub fn answer(&self, method: &str, url: &str) -> Answer {
        match self.matcher.find(method, url) {
            Some(m) => {
                let p = &self.prepared[m.entry()];
                Answer {
                    status: p.status,
                    headers: p.headers.clone(),
                    body: p.body.clone(),
                    matched: match m {
                        Match::Exact(_) => ReplayMatch::Exact,
                        Match::SamePath(_) => ReplayMatch::SamePath,
                    },
                    think: p.think,
                }
            }
            None => Answer {
                status: StatusCode::NOT_FOUND,
                headers: Arc::new([(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                )]),
                body: Bytes::from_static(b"not in the site archive\n"),
                matched: ReplayMatch::Miss,
                think: Duration::ZERO,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::site_archive::{Builder, Source};

    fn archive(dir: &Path) -> SiteArchive {
        let mut b = Builder::default();
        let mut page = crate::config::site_archive::tests::entry("https://www.a.test/", 200);
        page.headers = vec![
            ("Content-Type".into(), "text/html".into()),
            ("Content-Length".into(), "5".into()),
            ("Alt-Svc".into(), "h3=\":443\"".into()),
            ("Set-Cookie".into(), "a=1".into()),
        ];
        page.timings.wait_ms = 30.0;
        b.push(page, Some(b"<html".to_vec()));
        let mut css =
            crate::config::site_archive::tests::entry("https://cdn.a.test/s.css?v=1", 200);
        css.timings.wait_ms = 20.0;
        b.push(css, Some(b"body{}".to_vec()));
        let mut slow = crate::config::site_archive::tests::entry("https://cdn.a.test/slow.js", 200);
        slow.timings.wait_ms = 120.0;
        b.push(slow, Some(b"1".to_vec()));
        let mut moved = crate::config::site_archive::tests::entry("https://www.a.test/old", 301);
        moved.headers = vec![("Location".into(), "https://cdn.a.test/s.css?v=1".into())];
        moved.timings.wait_ms = 45.0;
        b.push(moved, None);
        b.write(
            dir,
            Source {
                kind: "import".into(),
                from: "t.har".into(),
                creator: String::new(),
                started: None,
                browser_confinement: None,
                load_ms: None,
            },
            "https://www.a.test/".into(),
        )
        .unwrap()
    }

    #[test]
    fn answers_are_the_recording_and_misses_are_404() {
        let tmp = tempfile::tempdir().unwrap();
        let a = archive(tmp.path());
        let site = ReplaySite::load(tmp.path(), &a, ThinkTime::None).unwrap();
        assert_eq!(
            request_url_over(false, "Plain.a.test:80", "x?y"),
            "http://plain.a.test/x?y"
        );
        assert_eq!(
            request_url_over(true, "a.test:8443", "/"),
            "https://a.test:8443/"
        );
        let page = site.answer("GET", &request_url("WWW.a.test:443", "/"));
        assert_eq!(page.status, 200);
        assert_eq!(&page.body[..], b"<html");
        assert_eq!(page.matched, ReplayMatch::Exact);
        let names: Vec<&str> = page.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["content-type", "set-cookie"],
            "no length, no Alt-Svc"
        );
        assert_eq!(page.think, Duration::ZERO);

        let css = site.answer("GET", &request_url("cdn.a.test", "/s.css?v=2"));
        assert_eq!(
            (css.matched, &css.body[..]),
            (ReplayMatch::SamePath, &b"body{}"[..])
        );
        let moved = site.answer("GET", "https://www.a.test/old");
        assert_eq!(moved.status, 301);
        assert!(moved.body.is_empty());
        let miss = site.answer("GET", "https://www.a.test/nope");
        assert_eq!(
            (miss.status.as_u16(), miss.matched),
            (404, ReplayMatch::Miss)
        );
        assert_eq!(
            site.answer("GET", "https://other.test/").matched,
            ReplayMatch::Miss
        );
    }

    #[test]
    fn recorded_think_time_is_the_wait_above_the_origins_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let a = archive(tmp.path());
        let site = ReplaySite::load(tmp.path(), &a, ThinkTime::Recorded).unwrap();
        let ms = |url: &str| site.answer("GET", url).think.as_secs_f64() * 1e3;
        // www: waits 30 and 45 → RTT 30; cdn: 20 and 120 → RTT 20.
        assert!((ms("https://www.a.test/") - 0.0).abs() < 1e-9);
        assert!((ms("https://www.a.test/old") - 15.0).abs() < 1e-9);
        assert!((ms("https://cdn.a.test/s.css?v=1") - 0.0).abs() < 1e-9);
        assert!((ms("https://cdn.a.test/slow.js") - 100.0).abs() < 1e-9);
        // A wait below the origin's round trip (its TCP handshake: 40 ms) is not its base.
        let mut a = a;
        a.entries[0].timings.connect_ms = Some(80.0);
        a.entries[0].timings.ssl_ms = Some(40.0);
        a.entries[0].timings.wait_ms = 50.0;
        a.entries[3].timings.wait_ms = 31.0;
        let site = ReplaySite::load(tmp.path(), &a, ThinkTime::Recorded).unwrap();
        let ms = |url: &str| site.answer("GET", url).think.as_secs_f64() * 1e3;
        assert!((ms("https://www.a.test/") - 10.0).abs() < 1e-9);
        assert!((ms("https://www.a.test/old") - 0.0).abs() < 1e-9);
        assert_eq!(
            "recorded".parse::<ThinkTime>().unwrap(),
            ThinkTime::Recorded
        );
        assert!("sometimes"
            .parse::<ThinkTime>()
            .unwrap_err()
            .to_string()
            .contains("recorded or none"));
    }
}
