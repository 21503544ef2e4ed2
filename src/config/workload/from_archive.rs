//! A site archive as a workload (`site:DIR`): what a replay run loads and checks — the page's
//! URL, its origins with their replay addresses, and every recorded resource the page loads
//! (keyed by URL, sized by its bytes on the wire) — built from the archive (pure once read).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Result};

use super::site_plan::{request_key, url_key, SiteOptions, SiteOrigin, SitePlan};
use super::{FileEntry, FileKind, Manifest, Workload};
use crate::config::site_archive::distances;
use crate::config::site_archive::origins;
use crate::config::site_archive::{Entry, SiteArchive};

fn kind_of(content_type: &str) -> FileKind {
    let ct = content_type.to_ascii_lowercase();
    if ct.contains("html") {
        FileKind::Html
    } else if ct.contains("css") {
        FileKind::Css
    } else if ct.contains("javascript") || ct.contains("ecmascript") {
        FileKind::Js
    } else if ct.starts_with("image/") {
        FileKind::Image
    } else if ct.starts_with("font/") || ct.contains("woff") || ct.contains("opentype") {
        FileKind::Font
    } else {
        FileKind::Binary
    }
}

/// Where a redirect (3xx with `Location`) of `e` points, as an absolute URL.
fn redirect_target(e: &Entry) -> Option<String> {
    if !(300..400).contains(&e.status) {
        return None;
    }
    let loc = e.header("location")?;
    if loc.contains("://") {
        return Some(loc.to_string());
    }
    let origin = crate::config::site_archive::har_import::origin(&e.url)?;
    Some(if loc.starts_with('/') {
        format!("{origin}{loc}")
    } else {
        let base = e.url.rsplit_once('/').map(|(b, _)| b).unwrap_or(&origin);
        format!("{base}/{loc}")
    })
}

/// How many connections carried `entries` when recorded (None: the recording names none).
fn recorded_connections<E: std::borrow::Borrow<Entry>>(entries: &[E]) -> Option<usize> {
    let ids: std::collections::BTreeSet<&str> = entries
        .iter()
        .filter_map(|e| e.borrow().connection.as_deref())
        .collect();
    (!ids.is_empty()).then_some(ids.len())
}

/// The URLs of the recorded load's critical path, the page (`doc`) first: the chain of
/// responses that ended last before the load event (or the last response, without one).
fn recorded_critical_path(archive: &SiteArchive, doc: &Entry) -> Vec<String> {
    let mut steps: Vec<&Entry> = vec![doc];
    steps.extend(archive.entries.iter().filter(|e| !std::ptr::eq(*e, doc)));
    let spans: Vec<(f64, f64)> = steps
        .iter()
        .map(|e| (e.timings.start_ms, e.timings.end()))
        .collect();
    let headline = archive
        .source
        .load_ms
        .unwrap_or_else(|| spans.iter().map(|s| s.1).fold(0.0, f64::max));
    crate::support::critical_path::chain(&spans, headline)
        .into_iter()
        .map(|i| steps[i].url.clone())
        .collect()
}

/// A recorded body's size on the wire (0 without a body).
fn body_size(e: &Entry) -> u64 {
    e.body.as_ref().map_or(0, |b| b.size)
}

/// The files the page (`page`, its URL key) loads: every other recorded GET that is not a
/// redirect, named by its URL, with the redirects that lead to it as its aliases.
fn recorded_files(archive: &SiteArchive, page: &str) -> Vec<FileEntry> {
    let mut files: Vec<FileEntry> = Vec::new();
    for e in &archive.entries {
        let key = url_key(&e.url);
        if key == page || !e.method.eq_ignore_ascii_case("GET") {
            continue;
        }
        // A redirect is one Resource Timing entry under its first URL with the final body;
        // its target is then named after either.
        if redirect_target(e).is_some() {
            continue;
        }
        let aliases: Vec<String> = archive
            .entries
            .iter()
            .filter(|r| redirect_target(r).map(|t| url_key(&t)) == Some(key.clone()))
            .map(|r| url_key(&r.url))
            .collect();
        let content_type = e.header("content-type").unwrap_or("").to_string();
        files.push(FileEntry {
            path: key,
            kind: kind_of(&content_type),
            content_type,
            size: body_size(e),
            sha256: e
                .body
                .as_ref()
                .map(|b| b.sha256.clone())
                .unwrap_or_default(),
            status: e.status,
            aliases,
        });
    }
    files
}

/// One origin of the site as the recording saw it: its replay slot (`s`), the protocol most
/// of its responses came over, its responses and bytes, its distance and its connections.
fn site_origin(archive: &SiteArchive, s: &origins::OriginSlot) -> SiteOrigin {
    let mine: Vec<&Entry> = archive
        .entries
        .iter()
        .filter(|e| {
            crate::config::site_archive::har_import::origin(&e.url).as_deref() == Some(&s.origin)
        })
        .collect();
    // The recording browser's own requests (a favicon) are no part of the page's.
    let pages: Vec<&&Entry> = mine.iter().filter(|e| e.is_the_pages()).collect();
    let mut protocols: Vec<&str> = mine.iter().filter_map(|e| e.protocol.as_deref()).collect();
    protocols.sort_unstable();
    let recorded_protocol = protocols
        .chunk_by(|a, b| a == b)
        .max_by_key(|c| c.len())
        .map(|c| c[0].to_string());
    SiteOrigin {
        origin: s.origin.clone(),
        host: s.host.clone(),
        port: s.port,
        address: s.address,
        recorded_protocol,
        responses: pages.len(),
        bytes: pages.iter().map(|e| body_size(e)).sum(),
        recorded_rtt: distances::recorded_rtt(&mine),
        recorded_lookup_ms: distances::recorded_lookup(&mine),
        recorded_connections: recorded_connections(&mine),
    }
}

/// The manifest of `workload` replaying `archive` (read from `dir`).
pub fn manifest(
    workload: &Workload,
    dir: &Path,
    archive: &SiteArchive,
    options: SiteOptions,
) -> Result<Manifest> {
    let (slots, addresses) = origins::plan(&archive.entries, options.addresses)?;
    let page = url_key(&archive.page_url);
    let Some(doc) = archive.entries.iter().find(|e| url_key(&e.url) == page) else {
        bail!(
            "{}: the page {} has no recorded response",
            dir.display(),
            archive.page_url
        );
    };
    let files = recorded_files(archive, &page);
    let origins = slots.iter().map(|s| site_origin(archive, s)).collect();
    let subresource_bytes = files.iter().map(|f| f.size).sum();
    let entry = url_key(&archive.page_url);
    Ok(Manifest {
        workload: workload.clone(),
        generator_version: 0,
        seed: 0,
        entry,
        entry_size: body_size(doc),
        files,
        subresource_bytes,
        upload_bytes: None,
        site: Some(SitePlan {
            dir: dir.to_path_buf(),
            page_url: archive.page_url.clone(),
            origins,
            addresses,
            options,
            recorded_start_ms: crate::config::site_archive::replay::recording_start_ms(archive),
            recorded_load_ms: archive.source.load_ms,
            recorded_connections: recorded_connections(&archive.entries),
            recorded_critical_path: recorded_critical_path(archive, doc),
            // The recording browser's own requests (a favicon) are no part of the page.
            recorded_requests: archive.entries.iter().filter(|e| e.is_the_pages()).fold(
                BTreeMap::new(),
                |mut m, e| {
                    *m.entry(request_key(&e.url)).or_insert(0) += 1;
                    m
                },
            ),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::profile::Profile;
    use crate::config::site_archive::distances::Distances;
    use crate::config::site_archive::origins::AddressMode;
    use crate::config::site_archive::tests::entry;
    use crate::config::site_archive::BodyRef;

    fn with_body(url: &str, size: u64, ip: &str, proto: &str) -> Entry {
        let mut e = entry(url, 200);
        e.body = Some(BodyRef {
            sha256: format!("{size:064x}"),
            size,
        });
        e.server_address = Some(ip.into());
        e.protocol = Some(proto.into());
        e
    }

    fn archive() -> SiteArchive {
        let mut moved = entry("https://www.a.test/old.css", 301);
        moved.headers = vec![("Location".into(), "https://cdn.a.test/new.css".into())];
        moved.server_address = Some("192.0.2.1".into());
        SiteArchive {
            format: 1,
            source: crate::config::site_archive::Source {
                kind: "import".into(),
                from: "x.har".into(),
                creator: String::new(),
                started: None,
                browser_confinement: None,
                load_ms: None,
            },
            page_url: "https://www.a.test/#top".into(),
            entries: vec![
                with_body("https://www.a.test/", 1000, "192.0.2.1", "h2"),
                moved,
                with_body("https://cdn.a.test/new.css", 300, "192.0.2.2", "h2"),
                with_body("https://cdn.a.test/i.png?v=2", 5000, "192.0.2.2", "h3"),
                with_body("https://cdn.a.test/j.png", 7000, "192.0.2.2", "h3"),
                with_body("https://fonts.a.test/f.woff2", 20000, "192.0.2.1", "h2"),
            ],
        }
    }

    #[test]
    fn files_are_keyed_by_url_and_redirects_fold_into_their_target() {
        let w = Workload {
            name: "site-a".into(),
            kind: super::super::WorkloadKind::Site {
                dir: "/tmp/a".into(),
            },
        };
        let m = manifest(&w, Path::new("/tmp/a"), &archive(), SiteOptions::default()).unwrap();
        assert_eq!(m.entry, "https://www.a.test/");
        assert_eq!(m.entry_size, 1000);
        let keys: Vec<&str> = m.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            keys,
            [
                "https://cdn.a.test/new.css",
                "https://cdn.a.test/i.png?v=2",
                "https://cdn.a.test/j.png",
                "https://fonts.a.test/f.woff2"
            ]
        );
        assert_eq!(m.files[0].aliases, ["https://www.a.test/old.css"]);
        assert_eq!(m.subresource_bytes, 300 + 5000 + 7000 + 20000);
        let site = m.site.as_ref().unwrap();
        // www and fonts shared 192.0.2.1 in the recording: one address.
        let addr: Vec<(&str, usize)> = site
            .origins
            .iter()
            .map(|o| (o.host.as_str(), o.address))
            .collect();
        assert_eq!(
            addr,
            [("www.a.test", 0), ("cdn.a.test", 1), ("fonts.a.test", 0)]
        );
        assert_eq!(site.addresses, 2);
        let cdn = site.origin_of_host("CDN.a.test").unwrap();
        assert_eq!(cdn.recorded_protocol.as_deref(), Some("h3"));
        assert_eq!((cdn.responses, cdn.bytes), (3, 12300));
        assert_eq!(m.files[0].kind, FileKind::Css);
    }

    #[test]
    fn recorded_distances_delay_each_address_to_its_origins_round_trip() {
        let w = Workload {
            name: "site-a".into(),
            kind: super::super::WorkloadKind::Site {
                dir: "/tmp/a".into(),
            },
        };
        let mut a = archive();
        // www (and fonts, on its address) 12 ms away; cdn 80 ms, read off its handshake.
        a.entries[0].timings.wait_ms = 12.0;
        a.entries[5].timings.wait_ms = 12.0;
        a.entries[2].timings.connect_ms = Some(160.0);
        a.entries[2].timings.ssl_ms = Some(80.0);
        a.entries[2].timings.wait_ms = 85.0;
        a.entries[2].timings.dns_ms = Some(45.0);
        let recorded = SiteOptions {
            distances: Distances::Recorded,
            ..SiteOptions::default()
        };
        let m = manifest(&w, Path::new("/tmp/a"), &a, recorded).unwrap();
        let site = m.site.unwrap();
        let cdn = site
            .origin_of_host("cdn.a.test")
            .unwrap()
            .recorded_rtt
            .unwrap();
        assert_eq!(
            (cdn.rtt_ms, cdn.basis),
            (80.0, distances::RttBasis::Handshake)
        );
        let near = Profile::simple("near", 2.0, 0.0, 0.0);
        let p = site.profile_for(&near).unwrap();
        assert_eq!(p.origin_delay_ms, [5.0, 39.0]);
        assert!(site.nearer_than(&near).is_empty());
        let far = Profile::simple("far", 40.0, 0.0, 0.0);
        assert_eq!(
            site.nearer_than(&far),
            ["https://www.a.test", "https://fonts.a.test"]
        );
        let applied = site.applied_distances(&p, false).unwrap();
        let rtts: Vec<f64> = applied.iter().map(|d| d.replay_rtt_ms).collect();
        assert_eq!(rtts, [12.0, 80.0, 12.0]);
        // cdn's 45 ms lookup: a resolver at the profile's 2 ms holds its answer 43 ms; a run
        // that asked no resolver says nothing of lookups.
        assert_eq!(site.lookup_holds(&p), [("cdn.a.test".to_string(), 43.0)]);
        let looked_up = site.applied_distances(&p, true).unwrap();
        let lookups: Vec<_> = looked_up
            .iter()
            .map(|d| (d.recorded_lookup_ms, d.replay_lookup_ms))
            .collect();
        assert_eq!(
            lookups,
            [(None, None), (Some(45.0), Some(45.0)), (None, None)]
        );
        assert!(applied.iter().all(|d| d.replay_lookup_ms.is_none()));
        // A profile that delays addresses itself, or one address for all: refused.
        let own = Profile {
            origin_delay_ms: vec![0.0, 10.0],
            ..near.clone()
        };
        let e = site.profile_for(&own).unwrap_err().to_string();
        assert!(e.contains("origin_delay_ms"), "{e}");
        let single = SiteOptions {
            addresses: AddressMode::Single,
            ..recorded
        };
        let m = manifest(&w, Path::new("/tmp/a"), &a, single).unwrap();
        let e = m.site.unwrap().profile_for(&near).unwrap_err().to_string();
        assert!(e.contains("--origin-addresses single"), "{e}");
        // At the profile's distances nothing changes.
        let m = manifest(&w, Path::new("/tmp/a"), &a, SiteOptions::default()).unwrap();
        let site = m.site.unwrap();
        assert_eq!(site.profile_for(&near).unwrap(), near);
        assert_eq!(site.applied_distances(&near, false), None);
    }

    #[test]
    fn other_ports_and_plain_http_are_served() {
        let w = Workload {
            name: "site-a".into(),
            kind: super::super::WorkloadKind::Site {
                dir: "/tmp/a".into(),
            },
        };
        let mut a = archive();
        a.entries
            .push(with_body("https://x.a.test:8443/y", 1, "192.0.2.9", "h2"));
        a.entries.push(with_body(
            "http://plain.a.test/z",
            1,
            "192.0.2.10",
            "http/1.1",
        ));
        let site = manifest(&w, Path::new("/tmp/a"), &a, SiteOptions::default())
            .unwrap()
            .site
            .unwrap();
        assert_eq!(site.ports(), [80, 443, 8443]);
        let tls = site.tls_origins();
        assert!(tls.contains(&("x.a.test".to_string(), 8443)), "{tls:?}");
        assert!(!tls.iter().any(|(h, _)| h == "plain.a.test"), "{tls:?}");
        let plain = site.origin_of_url("http://plain.a.test/z?q").unwrap();
        assert!(!plain.is_tls() && plain.port == 80);
        assert_eq!(
            site.origin_of_url("https://x.a.test:8443/y").unwrap().port,
            8443
        );
        let mut a = archive();
        a.page_url = "https://www.a.test/missing".into();
        let e = manifest(&w, Path::new("/tmp/a"), &a, SiteOptions::default()).unwrap_err();
        assert!(e.to_string().contains("no recorded response"), "{e}");
    }
}
