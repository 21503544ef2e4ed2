//! Firefox's HAR entries: one per response (each hop of a redirect is one) or failed request,
//! from its BiDi `network.responseCompleted` and `network.fetchError` events. BiDi's timings
//! are wall clock ms, 0 where a phase did not happen (a request on an open connection has no
//! connect); BiDi hands out no bodies, so content.size is the body's wire size.

use serde_json::Value;

use crate::evidence::har_document::{
    http_version, iso, query_string, Cache, Content, Entry, NameValue, Request, Response, Timings,
    PAGE_ID,
};
use crate::evidence::metrics::{DevtoolsEvent, Observation};

/// BiDi's header list (`[{name, value: {type: "string", value}}]`) as HAR headers.
fn headers(v: &Value) -> Vec<NameValue> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|h| NameValue {
                    name: h["name"].as_str().unwrap_or_default().to_string(),
                    value: h
                        .pointer("/value/value")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The HAR entries of a load, from its BiDi events.
pub fn entries(obs: &Observation) -> Vec<Entry> {
    obs.network.events.iter().filter_map(entry).collect()
}

/// The entry of one completed or failed request; None for other events and `data:` URLs.
fn entry(e: &DevtoolsEvent) -> Option<Entry> {
    let DevtoolsEvent { method, params } = e;
    let failed = method == "network.fetchError";
    if method != "network.responseCompleted" && !failed {
        return None;
    }
    let request = &params["request"];
    let url = request["url"].as_str().unwrap_or_default();
    if url.starts_with("data:") {
        return None;
    }
    let t = &request["timings"];
    let at = |k: &str| t[k].as_f64().filter(|v| *v > 0.0);
    let span = |a: &str, b: &str| match (at(a), at(b)) {
        (Some(a), Some(b)) if b >= a => b - a,
        _ => -1.0,
    };
    let start = at("requestTime").or(at("fetchStart")).unwrap_or(0.0);
    let first = ["dnsStart", "connectStart", "requestStart"]
        .into_iter()
        .find_map(at);
    let resp = (!failed).then(|| &params["response"]);
    let protocol = resp
        .and_then(|r| r["protocol"].as_str())
        .unwrap_or("http/1.1");
    let text = |k: &str, or: &str| resp.and_then(|r| r[k].as_str()).unwrap_or(or).to_string();
    let body_size = resp.and_then(|r| r["bodySize"].as_f64()).unwrap_or(-1.0);
    Some(Entry {
        pageref: PAGE_ID,
        started_date_time: iso(start / 1000.0),
        time: at("responseEnd").map_or(0.0, |e| (e - start).max(0.0)),
        request: Request {
            method: request["method"].as_str().unwrap_or("GET").to_string(),
            url: url.to_string(),
            http_version: http_version(protocol),
            cookies: vec![],
            headers: headers(&request["headers"]),
            query_string: query_string(url),
            headers_size: request["headersSize"].as_f64().unwrap_or(-1.0),
            body_size: request["bodySize"].as_f64().unwrap_or(0.0),
        },
        response: Response {
            status: resp.and_then(|r| r["status"].as_u64()).unwrap_or(0),
            status_text: text("statusText", ""),
            http_version: http_version(protocol),
            cookies: vec![],
            headers: resp.map(|r| headers(&r["headers"])).unwrap_or_default(),
            content: Content {
                size: body_size.max(0.0),
                mime_type: text("mimeType", "x-unknown"),
                text: None,
                encoding: None,
            },
            redirect_url: location(resp),
            headers_size: resp.and_then(|r| r["headersSize"].as_f64()).unwrap_or(-1.0),
            body_size,
        },
        cache: Cache {},
        timings: Timings {
            blocked: first.map_or(-1.0, |f| (f - start).max(0.0)),
            dns: span("dnsStart", "dnsEnd"),
            connect: span("connectStart", "connectEnd"),
            ssl: span("tlsStart", "connectEnd"),
            send: 0.0,
            wait: span("requestStart", "responseStart").max(0.0),
            receive: span("responseStart", "responseEnd").max(0.0),
        },
        server_ip_address: None,
        server_port: None,
        connection: None,
        transfer_size: resp.and_then(|r| r["bytesReceived"].as_f64()),
        priority: None,
        error: failed.then(|| params["errorText"].as_str().unwrap_or("failed").to_string()),
        initiator: None,
        resource_type: None,
    })
}

/// A redirect's target (its `Location` header).
fn location(resp: Option<&Value>) -> String {
    resp.and_then(|r| r["headers"].as_array())
        .and_then(|h| {
            h.iter().find(|h| {
                h["name"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case("location"))
            })
        })
        .and_then(|h| h.pointer("/value/value").and_then(Value::as_str))
        .unwrap_or("")
        .to_string()
}
