//! `pagebench record URL --out DIR`: loads a real site in Chromium as a normal browser would
//! (no protocol forced, the system resolver but for `--resolve` mappings) and writes its every
//! response as a site archive. The only command that reaches beyond the emulated link:
//! Chromium runs where pagebench runs.
//!
//! A record is `run --har` without the forcing, then `import`: the load keeps every response
//! body (CDP `Network.getResponseBody` after the load), [`crate::evidence::har_document::build`] makes a HAR with
//! content of it (redirect hops, the server's IP and port, the protocol, timings), and
//! [`crate::config::site_archive::har_import`] turns that into the archive. CDP hands bodies out decoded, so the wire
//! bytes are the decoded body encoded again with the recorded `Content-Encoding`
//! ([`crate::config::site_archive::encoding`]): the decoded bytes are the server's to the byte, the encoded ones are
//! the same format at our compressor level, not the server's bytes (a server compressing at
//! another level sends a few bytes or percent more or fewer). The summary compares our wire
//! bytes with what Chromium counted (`loadingFinished.encodedDataLength` less the bytes counted
//! by `responseReceived`; unknown when headers and body came in one read) and says the
//! difference; the archive keeps ours, since only those decode to the recorded body. On h2
//! Chromium's count includes each DATA frame's 9-byte header: an identity body reads 9 bytes
//! more per frame than the body (Caddy fixture: 268 vs 277 per image, gzip text 2–3 bytes
//! either way beyond that). Response headers are those of `Network.responseReceived`
//! (repeated ones split again), and its `Set-Cookie`, which that event leaves out, from the raw
//! headers of `Network.responseReceivedExtraInfo`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use base64::Engine;

use crate::config::site_archive::har_import::{self, ImportSummary};
use crate::config::site_archive::{SiteArchive, Source};
use crate::evidence::metrics::Observation;
use crate::evidence::validate::LoadEnd;
use crate::measure::browser::engines::chromium::launch::{
    ChromiumProcess, NaturalOptions, CHROMIUM,
};
use crate::measure::browser::engines::chromium::load::{load_until, LoadExtras, WaitFor};
use crate::support::unprivileged::Confinement;

/// How long the network must be quiet after the load for `--wait idle`.
pub const IDLE_QUIET: Duration = Duration::from_millis(500);

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub url: String,
    pub out: PathBuf,
    pub wait: WaitFor,
    pub network: NaturalOptions,
    pub timeout: Duration,
}

/// `--wait load|idle|<duration>`.
pub fn parse_wait(s: &str) -> Result<WaitFor> {
    match s.trim() {
        "load" => Ok(WaitFor::Resources {
            expected: 0,
            transfer: false,
        }),
        "idle" => Ok(WaitFor::NetworkIdle { quiet: IDLE_QUIET }),
        d => match humantime::parse_duration(d) {
            Ok(d) if !d.is_zero() => Ok(WaitFor::Elapsed(d)),
            _ => bail!(
                "--wait {s:?}: give load (the load event), idle (no request for {} ms after it) or a time after the navigation starts, like 2s",
                IDLE_QUIET.as_millis()
            ),
        },
    }
}

/// `--resolve HOST=IP`.
pub fn parse_resolve(s: &str) -> Result<(String, IpAddr)> {
    let Some((host, ip)) = s.split_once('=') else {
        bail!("--resolve {s:?}: expected HOST=IP, e.g. www.example.com=192.0.2.10");
    };
    let host = host.trim();
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '*'))
    {
        bail!("--resolve {s:?}: {host:?} is not a host name");
    }
    let ip = ip.trim();
    let ip = ip
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .with_context(|| format!("--resolve {s:?}: {ip:?} is not an IP address"))?;
    Ok((host.to_string(), ip))
}

/// `--force-quic HOST[:PORT]`: an origin Chromium reaches over QUIC from its first request
/// (`host:port`, port 443 unless given).
pub fn parse_force_quic(s: &str) -> Result<String> {
    let s = s.trim();
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => match p.parse::<u16>() {
            Ok(port) if port > 0 => (h, port),
            _ => bail!("--force-quic {s:?}: {p:?} is not a port (1–65535)"),
        },
        None => (s, 443),
    };
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        bail!("--force-quic {s:?}: {host:?} is not a host name (HOST or HOST:PORT, e.g. www.example.com:443)");
    }
    Ok(format!("{}:{port}", host.to_ascii_lowercase()))
}

/// `--ignore-cert-spki BASE64`: a base64 SHA-256 (32 bytes).
pub fn parse_spki(s: &str) -> Result<String> {
    let s = s.trim();
    match base64::engine::general_purpose::STANDARD.decode(s) {
        Ok(d) if d.len() == 32 => Ok(s.to_string()),
        _ => bail!(
            "--ignore-cert-spki {s:?}: expected the base64 SHA-256 of the certificate's public key (44 characters), e.g. from `openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`"
        ),
    }
}

/// Checks the inputs before Chromium starts: an http(s) URL, a writable `--out`, a fixed wait
/// shorter than the timeout.
pub fn check(o: &RecordOptions) -> Result<()> {
    if har_import::origin(&o.url).is_none() {
        bail!(
            "URL {:?} is not an http(s) URL: give it with its scheme, e.g. https://www.example.com/",
            o.url
        );
    }
    if let WaitFor::Elapsed(d) = o.wait {
        if d >= o.timeout {
            bail!(
                "--wait {} is not shorter than --timeout {}: raise --timeout",
                humantime::format_duration(d),
                humantime::format_duration(o.timeout)
            );
        }
    }
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("--out {}: cannot create the directory", o.out.display()))?;
    let probe = o.out.join(".pagebench-write-test");
    std::fs::write(&probe, b"")
        .with_context(|| format!("--out {}: cannot write there", o.out.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Records `o.url` into `o.out`.
pub fn record(o: &RecordOptions) -> Result<(SiteArchive, ImportSummary)> {
    check(o)?;
    let chromium = crate::measure::browser::engines::chromium::installed()?;
    let mut browser = ChromiumProcess::launch_natural(Command::new(CHROMIUM), &o.network)
        .context("Chromium did not start")?;
    let (obs, end) = load_until(
        &mut browser,
        &o.url,
        o.wait,
        o.timeout,
        LoadExtras {
            keep_bodies: true,
            ..Default::default()
        },
    )?;
    let confinement = browser.confinement.clone();
    browser.close();
    match end {
        LoadEnd::Completed => {}
        LoadEnd::TimedOut(why) => bail!(
            "recording {}: {why} (raise --timeout, or use --wait load or a fixed time)",
            o.url
        ),
        LoadEnd::NavigationFailed(why) => bail!(
            "recording {}: {why} (does the host resolve from here? --resolve HOST=IP maps it; a self-signed certificate needs --ignore-cert-errors)",
            o.url
        ),
        LoadEnd::Crashed(why) => bail!("recording {}: {why}", o.url),
    }
    write_archive(&obs, &o.url, &chromium, confinement, &o.out)
}

/// The archive of one observed load (pure but for writing `out`): its HAR with content,
/// imported as a recording.
pub fn write_archive(
    obs: &Observation,
    url: &str,
    chromium: &str,
    confinement: Option<Confinement>,
    out: &Path,
) -> Result<(SiteArchive, ImportSummary)> {
    let entries = crate::measure::browser::engines::chromium::har::entries(obs);
    let har = crate::evidence::har_document::build(obs, entries, url, "Chromium", chromium);
    let creator = format!("pagebench {} / {chromium}", env!("CARGO_PKG_VERSION"));
    har_import::import_as(&har.to_string(), Path::new(url), out, false, |s| Source {
        kind: "record".into(),
        from: url.to_string(),
        creator,
        browser_confinement: confinement,
        ..s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::site_archive::encoding::Coding;
    use crate::evidence::metrics::{DevtoolsEvent, ResponseBody};
    use crate::measure::browser::engines::chromium::load::EXTRA_INFO;
    use serde_json::{json, Value};

    #[test]
    fn wait_resolve_and_spki_parse_or_name_the_flag() {
        assert_eq!(
            parse_wait("idle").unwrap(),
            WaitFor::NetworkIdle { quiet: IDLE_QUIET }
        );
        assert!(matches!(
            parse_wait("load").unwrap(),
            WaitFor::Resources { expected: 0, .. }
        ));
        assert_eq!(
            parse_wait("2s").unwrap(),
            WaitFor::Elapsed(Duration::from_secs(2))
        );
        for bad in ["soon", "0s", ""] {
            let e = parse_wait(bad).unwrap_err().to_string();
            assert!(e.starts_with("--wait") && e.contains("like 2s"), "{e}");
        }
        assert_eq!(
            parse_resolve("www.site.test=10.0.0.1").unwrap(),
            ("www.site.test".to_string(), "10.0.0.1".parse().unwrap())
        );
        assert_eq!(
            parse_resolve("a.test=[2001:db8::1]").unwrap().1,
            "2001:db8::1".parse::<IpAddr>().unwrap()
        );
        let e = parse_resolve("www.site.test").unwrap_err().to_string();
        assert!(e.contains("--resolve") && e.contains("HOST=IP"), "{e}");
        let e = format!(
            "{:#}",
            parse_resolve("www.site.test=10.0.0.300").unwrap_err()
        );
        assert!(e.contains("\"10.0.0.300\" is not an IP address"), "{e}");
        let e = parse_resolve("a b=10.0.0.1").unwrap_err().to_string();
        assert!(e.contains("not a host name"), "{e}");
        let spki = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert_eq!(parse_spki(&spki).unwrap(), spki);
        assert!(parse_spki("abc=")
            .unwrap_err()
            .to_string()
            .starts_with("--ignore-cert-spki"));
        assert_eq!(
            parse_force_quic("WWW.site.test").unwrap(),
            "www.site.test:443"
        );
        assert_eq!(
            parse_force_quic("cdn.site.test:8443").unwrap(),
            "cdn.site.test:8443"
        );
        for (bad, says) in [
            ("cdn.site.test:0", "is not a port"),
            ("cdn.site.test:https", "is not a port"),
            ("a b:443", "is not a host name"),
            (":443", "is not a host name"),
        ] {
            let e = parse_force_quic(bad).unwrap_err().to_string();
            assert!(e.starts_with("--force-quic") && e.contains(says), "{e}");
        }
    }

    #[test]
    fn bad_urls_outs_and_waits_are_refused_before_chromium_starts() {
        let dir = tempfile::tempdir().unwrap();
        let opts = |url: &str, out: PathBuf, wait: WaitFor| RecordOptions {
            url: url.into(),
            out,
            wait,
            network: NaturalOptions::default(),
            timeout: Duration::from_secs(10),
        };
        let idle = WaitFor::NetworkIdle { quiet: IDLE_QUIET };
        let e = check(&opts("ftp://a.test/", dir.path().into(), idle)).unwrap_err();
        assert!(e.to_string().contains("not an http(s) URL"), "{e}");
        let e = check(&opts("www.a.test", dir.path().into(), idle)).unwrap_err();
        assert!(e.to_string().contains("with its scheme"), "{e}");
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let e = check(&opts("https://a.test/", file.join("sub"), idle)).unwrap_err();
        assert!(e.to_string().starts_with("--out"), "{e}");
        let long = WaitFor::Elapsed(Duration::from_secs(30));
        let e = check(&opts("https://a.test/", dir.path().into(), long)).unwrap_err();
        assert!(e.to_string().contains("raise --timeout"), "{e}");
        check(&opts("https://a.test/", dir.path().join("new"), idle)).unwrap();
        assert!(
            std::fs::read_dir(dir.path().join("new")).unwrap().count() == 0,
            "the write probe is removed"
        );
    }

    fn event(method: &str, params: Value) -> DevtoolsEvent {
        DevtoolsEvent {
            method: method.into(),
            params,
        }
    }

    fn response(url: &str, status: u16, headers: Value, ip: &str, header_bytes: u64) -> Value {
        json!({"url": url, "status": status, "statusText": "", "headers": headers,
               "mimeType": "text/css", "protocol": "h2", "remoteIPAddress": ip, "remotePort": 443,
               "connectionId": 7, "encodedDataLength": header_bytes,
               "timing": {"requestTime": 100.0, "dnsStart": -1, "dnsEnd": -1, "connectStart": -1,
                          "connectEnd": -1, "sslStart": -1, "sslEnd": -1, "sendStart": 1.0,
                          "sendEnd": 1.5, "receiveHeadersEnd": 21.5}})
    }

    fn sent(id: &str, url: &str, ts: f64, redirect: Option<Value>) -> DevtoolsEvent {
        let mut p = json!({"requestId": id, "request": {"url": url, "method": "GET", "headers": {}},
                           "timestamp": ts, "wallTime": 1_800_000_000.0 + ts});
        if let Some(r) = redirect {
            p["redirectResponse"] = r;
        }
        event("Network.requestWillBeSent", p)
    }

    /// CDP events of a page whose stylesheet is redirected to another origin: the redirect is
    /// its own entry (3xx, Location, no body), the gzip CSS is gzip again and decodes to what
    /// Chromium handed out, and every entry keeps its server's IP and port.
    #[test]
    fn cdp_events_of_a_redirected_gzip_load_become_an_archive() {
        let css = "body { font-family: Fixture; }\n".repeat(100);
        let gz = Coding::Gzip.encode(css.as_bytes()).unwrap();
        let html_headers = json!({"content-type": "text/html", "set-cookie": "a=1\nb=2"});
        let css_headers = json!({"content-type": "text/css", "content-encoding": "gzip"});
        let moved = json!({"location": "https://static.a.test/new.css"});
        let events = vec![
            sent("1", "https://www.a.test/", 100.0, None),
            event(
                "Network.responseReceived",
                json!({"requestId": "1", "response": response("https://www.a.test/", 200, html_headers, "192.0.2.1", 100)}),
            ),
            event(
                "Network.loadingFinished",
                json!({"requestId": "1", "timestamp": 100.05, "encodedDataLength": 106}),
            ),
            sent("2", "https://www.a.test/old.css", 100.06, None),
            sent(
                "2",
                "https://static.a.test/new.css",
                100.08,
                Some(response(
                    "https://www.a.test/old.css",
                    301,
                    moved,
                    "192.0.2.1",
                    60,
                )),
            ),
            event(
                "Network.responseReceived",
                json!({"requestId": "2", "response": response("https://static.a.test/new.css", 200, css_headers, "192.0.2.2", 80)}),
            ),
            // Set-Cookie comes only with the raw headers, after or before its response event.
            event(
                EXTRA_INFO,
                json!({"requestId": "2", "statusCode": 200, "headers": {"set-cookie": "c=3; Secure\nd=4"}}),
            ),
            event(
                EXTRA_INFO,
                json!({"requestId": "2", "statusCode": 301, "headers": {"set-cookie": "r=1"}}),
            ),
            event(
                "Network.loadingFinished",
                json!({"requestId": "2", "timestamp": 100.2, "encodedDataLength": 80 + gz.len()}),
            ),
        ];
        let mut obs = Observation {
            network: crate::measure::browser::engines::chromium::network::view(events),
            ..Observation::default()
        };
        obs.bodies.insert(
            "1".into(),
            ResponseBody {
                body: "<html>".into(),
                base64: false,
            },
        );
        obs.bodies.insert(
            "2".into(),
            ResponseBody {
                body: css.clone(),
                base64: false,
            },
        );
        let out = tempfile::tempdir().unwrap();
        let (a, s) = write_archive(
            &obs,
            "https://www.a.test/",
            "Chromium 156.0.1",
            None,
            out.path(),
        )
        .unwrap();
        assert_eq!(crate::config::site_archive::read(out.path()).unwrap(), a);
        assert_eq!(a.source.kind, "record");
        assert_eq!(a.source.from, "https://www.a.test/");
        assert!(
            a.source.creator.ends_with("/ Chromium 156.0.1"),
            "{:?}",
            a.source
        );
        assert_eq!(a.entries.len(), 3);
        let [page, redirect, target] = &a.entries[..] else {
            unreachable!()
        };
        assert_eq!(page.server_address.as_deref(), Some("192.0.2.1:443"));
        let cookies: Vec<_> = page
            .headers
            .iter()
            .filter(|(n, _)| n == "set-cookie")
            .collect();
        assert_eq!(cookies.len(), 2, "a repeated header stays repeated");
        assert_eq!(
            (redirect.url.as_str(), redirect.status),
            ("https://www.a.test/old.css", 301)
        );
        assert_eq!(
            redirect.header("location"),
            Some("https://static.a.test/new.css")
        );
        assert!(redirect.body.is_none() && redirect.missing.is_none());
        let set_cookie = |e: &crate::config::site_archive::Entry| -> Vec<String> {
            e.headers
                .iter()
                .filter(|(n, _)| n == "set-cookie")
                .map(|(_, v)| v.clone())
                .collect()
        };
        assert_eq!(set_cookie(redirect), ["r=1"]);
        assert_eq!(set_cookie(target), ["c=3; Secure", "d=4"]);
        assert_eq!(target.url, "https://static.a.test/new.css");
        assert_eq!(target.server_address.as_deref(), Some("192.0.2.2:443"));
        assert_eq!(target.protocol.as_deref(), Some("h2"));
        assert_eq!(target.content_encoding.as_deref(), Some("gzip"));
        let wire = crate::config::site_archive::body(out.path(), target).unwrap();
        assert_eq!(Coding::Gzip.decode(&wire).unwrap(), css.as_bytes());
        assert!(
            (target.timings.wait_ms - 20.0).abs() < 1e-6,
            "{:?}",
            target.timings
        );
        assert!(target.timings.start_ms > 0.0 && target.timings.receive_ms > 0.0);
        assert_eq!(s.redirects, 1);
        assert_eq!(s.encodings.get("gzip"), Some(&1));
        assert_eq!(s.encodings.get("identity"), Some(&1));
        // Our gzip is the server's here: the comparison with Chromium's count is exact.
        assert_eq!(s.compared_wire_bytes, s.recorded_wire_bytes);
        let text = s.text_as("recorded", out.path());
        assert!(
            text.starts_with("recorded 3 responses from 2 origin(s)"),
            "{text}"
        );
        assert!(text.contains("redirects: 1"), "{text}");
    }
}
