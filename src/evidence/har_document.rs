//! HAR 1.2 export (pure): a load's entries, typed (each engine's adapter makes them from its own
//! events: `browser::chromium::har`, `browser::firefox::har`), in the archive format DevTools
//! and WebPageTest read.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::evidence::metrics::{EntryTiming, Observation, ResponseBody};

/// The one page of a run's HAR, which every entry belongs to.
pub const PAGE_ID: &str = "page_1";

/// One request (or one hop of a redirect chain) as HAR 1.2 writes it, with the fields
/// DevTools adds (`_transferSize`, `_priority`, `_error`) and `_serverPort`, which `import`
/// reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub pageref: &'static str,
    pub started_date_time: String,
    /// The request's total time, ms.
    pub time: f64,
    pub request: Request,
    pub response: Response,
    pub cache: Cache,
    pub timings: Timings,
    #[serde(rename = "serverIPAddress", skip_serializing_if = "Option::is_none")]
    pub server_ip_address: Option<String>,
    /// HAR has no field for the port.
    #[serde(rename = "_serverPort", skip_serializing_if = "Option::is_none")]
    pub server_port: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
    /// Bytes on the wire, headers included.
    #[serde(rename = "_transferSize", skip_serializing_if = "Option::is_none")]
    pub transfer_size: Option<f64>,
    /// The engine's priority for it after its last change, as DevTools writes it.
    #[serde(rename = "_priority", skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    #[serde(rename = "_error", skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Who asked for it, as DevTools writes it (`{"type": "parser"}`; `other` on a request
    /// for no document is the browser's own: a site archive leaves it out of the page).
    #[serde(rename = "_initiator", skip_serializing_if = "Option::is_none")]
    pub initiator: Option<serde_json::Value>,
    /// What it loads, lower case as DevTools writes it (`document`, `image`, `other` …).
    #[serde(rename = "_resourceType", skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub method: String,
    pub url: String,
    pub http_version: String,
    pub cookies: Vec<NameValue>,
    pub headers: Vec<NameValue>,
    pub query_string: Vec<NameValue>,
    /// -1: unknown.
    pub headers_size: f64,
    pub body_size: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub status: u64,
    pub status_text: String,
    pub http_version: String,
    pub cookies: Vec<NameValue>,
    pub headers: Vec<NameValue>,
    pub content: Content,
    #[serde(rename = "redirectURL")]
    pub redirect_url: String,
    /// -1: unknown.
    pub headers_size: f64,
    /// Body bytes over the wire; -1: unknown.
    pub body_size: f64,
}

/// The response's body: its decoded size and type, and with a kept body its text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    pub size: f64,
    pub mime_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
}

impl Content {
    /// "With content", as DevTools saves it: the decoded body, base64 for binary ones.
    pub fn with_body(&mut self, b: &ResponseBody) {
        self.size = if b.base64 {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(&b.body)
                .map_or(0, |d| d.len()) as f64
        } else {
            b.body.len() as f64
        };
        self.text = Some(b.body.clone());
        self.encoding = b.base64.then(|| "base64".to_string());
    }
}

/// HAR's cache object (pagebench loads in a fresh profile: nothing to say).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Cache {}

/// The phases of a request, ms; -1 where a phase does not apply.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timings {
    pub blocked: f64,
    pub dns: f64,
    pub connect: f64,
    pub ssl: f64,
    pub send: f64,
    pub wait: f64,
    pub receive: f64,
}

/// A header or query parameter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NameValue {
    pub name: String,
    pub value: String,
}

/// An ISO 8601 time of Unix seconds, as HAR's `startedDateTime`.
pub fn iso(wall_seconds: f64) -> String {
    let ms = (wall_seconds * 1000.0).round() as i64;
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A protocol as Resource Timing names it (`h2`) → HAR's `httpVersion` (`HTTP/2`).
pub fn http_version(protocol: &str) -> String {
    match protocol {
        "http/1.1" => "HTTP/1.1".into(),
        "http/1.0" => "HTTP/1.0".into(),
        "h2" => "HTTP/2".into(),
        "h3" => "HTTP/3".into(),
        other => other.to_uppercase(),
    }
}

/// A URL's query as HAR's `queryString`.
pub fn query_string(url: &str) -> Vec<NameValue> {
    url.split_once('?')
        .map(|(_, q)| q.split('#').next().unwrap_or(""))
        .map(|q| {
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (n, v) = p.split_once('=').unwrap_or((p, ""));
                    NameValue {
                        name: n.into(),
                        value: v.into(),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A phase from two offsets on one clock; -1 when it does not apply.
pub fn phase(start: Option<f64>, end: Option<f64>) -> f64 {
    match (start, end) {
        (Some(s), Some(e)) if s >= 0.0 && e >= s => e - s,
        _ => -1.0,
    }
}

/// The HAR document of one run: its `entries` (made by the engine's adapter), its page's
/// timings from the observation; `label` is the engine's name for people (`Chromium`), and
/// `version` what it reported (`Chromium 156.0.…`, or the bare number).
pub fn build(
    obs: &Observation,
    entries: Vec<Entry>,
    page_url: &str,
    label: &str,
    version: &str,
) -> Value {
    let version = version.strip_prefix(label).map_or(version, str::trim_start);
    let nav = obs.navigation.as_ref().map(EntryTiming::parse);
    let on_load = nav.as_ref().map(|n| n.load_event_end).filter(|t| *t > 0.0);
    let on_content = nav
        .as_ref()
        .map(|n| n.dom_content_loaded_event_end)
        .filter(|t| *t > 0.0);
    let started = obs
        .time_origin
        .map(|t| iso(t / 1000.0))
        .unwrap_or_else(|| iso(0.0));
    serde_json::json!({
        "log": {
            "version": "1.2",
            "creator": { "name": "pagebench", "version": env!("CARGO_PKG_VERSION") },
            "browser": { "name": label, "version": version },
            "pages": [{
                "startedDateTime": started,
                "id": PAGE_ID,
                "title": page_url,
                "pageTimings": {
                    "onContentLoad": on_content.unwrap_or(-1.0),
                    "onLoad": on_load.unwrap_or(-1.0),
                },
            }],
            "entries": entries,
        }
    })
}
