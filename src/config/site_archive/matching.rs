//! Which recorded response answers a replayed request (pure): the exact URL (and method) first,
//! then the same origin and path with the closest query string — a page that adds a cache
//! buster or a timestamp still gets its response, and the replay counts it as matched
//! approximately. Nothing else matches: a request with no recorded path is a miss (a 404 on
//! replay, counted against `--max-misses`).
//!
//! Also which recorded response headers are replayed: all but the hop-by-hop ones, the length
//! (the replaying server frames the body itself) and `Alt-Svc` (pagebench decides how HTTP/3 is
//! reached).

use std::collections::BTreeMap;

use super::Entry;

/// How a request was matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// The recorded URL, exactly.
    Exact(usize),
    /// Same method, origin and path; another query string (the closest one).
    SamePath(usize),
}

impl Match {
    pub fn entry(self) -> usize {
        match self {
            Match::Exact(i) | Match::SamePath(i) => i,
        }
    }
}

/// A query string as `key=value` pairs.
type Query = Vec<(String, String)>;

/// The recorded entries, indexed for matching: by (method, URL), and by (method, URL without
/// its query) with each entry's query.
#[derive(Debug, Default)]
pub struct Matcher {
    exact: BTreeMap<(String, String), usize>,
    by_path: BTreeMap<(String, String), Vec<(usize, Query)>>,
}

/// `https://h/p?q#f` → (`https://h/p`, the query's `k=v` pairs).
fn split(url: &str) -> (String, Query) {
    let url = url.split('#').next().unwrap_or(url);
    match url.split_once('?') {
        None => (url.to_string(), Vec::new()),
        Some((base, q)) => (
            base.to_string(),
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (k.to_string(), v.to_string()),
                    None => (p.to_string(), String::new()),
                })
                .collect(),
        ),
    }
}

/// How far two queries are apart: parameters only one has, plus values that differ.
fn distance(a: &[(String, String)], b: &[(String, String)]) -> usize {
    let mut d = 0;
    for (k, v) in a {
        match b.iter().find(|(k2, _)| k2 == k) {
            None => d += 2,
            Some((_, v2)) if v2 != v => d += 1,
            Some(_) => {}
        }
    }
    d + 2 * b
        .iter()
        .filter(|(k, _)| !a.iter().any(|(k2, _)| k2 == k))
        .count()
}

impl Matcher {
    pub fn new(entries: &[Entry]) -> Matcher {
        let mut m = Matcher::default();
        for (i, e) in entries.iter().enumerate() {
            let method = e.method.to_ascii_uppercase();
            // The first recorded response of a URL answers it (later ones were repeats).
            m.exact.entry((method.clone(), e.url.clone())).or_insert(i);
            let (base, query) = split(&e.url);
            m.by_path
                .entry((method, base))
                .or_default()
                .push((i, query));
        }
        m
    }

    /// The recorded response for `method url`, if any.
    pub fn find(&self, method: &str, url: &str) -> Option<Match> {
        let method = method.to_ascii_uppercase();
        if let Some(i) = self.exact.get(&(method.clone(), url.to_string())) {
            return Some(Match::Exact(*i));
        }
        let (base, query) = split(url);
        let candidates = self.by_path.get(&(method, base))?;
        candidates
            .iter()
            .min_by_key(|(i, q)| (distance(&query, q), *i))
            .map(|(i, _)| Match::SamePath(*i))
    }
}

/// Response headers a replaying server does not copy from the recording.
const NOT_REPLAYED: [&str; 11] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "content-length",
    "alt-svc",
    // HTTP/2 and HTTP/3 pseudo-headers and status lines some tools record as headers.
    ":status",
    "status",
];

/// The recorded headers a replay sends, in the recorded order.
pub fn replayed_headers(entry: &Entry) -> Vec<(&str, &str)> {
    entry
        .headers
        .iter()
        .filter(|(n, _)| {
            let n = n.to_ascii_lowercase();
            !NOT_REPLAYED.contains(&n.as_str()) && !n.starts_with(':')
        })
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::site_archive::tests::entry;

    #[test]
    fn exact_urls_first_then_the_closest_query_on_the_same_path() {
        let entries = vec![
            entry("https://a.test/", 200),
            entry("https://a.test/api?page=1&t=100", 200),
            entry("https://a.test/api?page=2&t=100", 200),
            entry("https://cdn.test/x.js", 200),
            entry("https://cdn.test/x.js", 200),
        ];
        let m = Matcher::new(&entries);
        assert_eq!(m.find("GET", "https://a.test/"), Some(Match::Exact(0)));
        assert_eq!(
            m.find("get", "https://cdn.test/x.js"),
            Some(Match::Exact(3)),
            "the first of repeats"
        );
        // A new timestamp: the same page parameter wins.
        assert_eq!(
            m.find("GET", "https://a.test/api?page=2&t=999"),
            Some(Match::SamePath(2))
        );
        assert_eq!(
            m.find("GET", "https://a.test/api?t=5&page=1"),
            Some(Match::SamePath(1))
        );
        assert_eq!(
            m.find("GET", "https://a.test/api"),
            Some(Match::SamePath(1)),
            "ties: the first"
        );
        assert_eq!(
            m.find("GET", "https://a.test/?utm=x"),
            Some(Match::SamePath(0))
        );
        assert_eq!(
            m.find("GET", "https://a.test/#frag"),
            Some(Match::SamePath(0))
        );
        // Another path, origin or method is a miss.
        assert_eq!(m.find("GET", "https://a.test/other"), None);
        assert_eq!(m.find("GET", "https://b.test/"), None);
        assert_eq!(m.find("POST", "https://a.test/"), None);
    }

    #[test]
    fn hop_by_hop_length_and_alt_svc_are_not_replayed() {
        let mut e = entry("https://a.test/", 200);
        e.headers = vec![
            ("Content-Type".into(), "text/html".into()),
            ("Connection".into(), "keep-alive".into()),
            ("content-length".into(), "10".into()),
            ("Alt-Svc".into(), "h3=\":443\"".into()),
            (":status".into(), "200".into()),
            ("Cache-Control".into(), "max-age=60".into()),
            ("Content-Encoding".into(), "br".into()),
        ];
        assert_eq!(
            replayed_headers(&e),
            [
                ("Content-Type", "text/html"),
                ("Cache-Control", "max-age=60"),
                ("Content-Encoding", "br")
            ]
        );
    }
}
