//! Chromium's HAR entries: one per request hop (a redirect ends one and starts the next), from
//! its CDP `Network.*` events, with the body when the run kept it.

use std::collections::BTreeMap;

use serde_json::Value;

use super::load::EXTRA_INFO;
use crate::evidence::har_document::{
    http_version, iso, phase, query_string, Cache, Content, Entry, NameValue, Request, Response,
    Timings, PAGE_ID,
};
use crate::evidence::metrics::{DevtoolsEvent, Observation};

/// CDP's header object as HAR headers: a repeated header (CDP joins the values with `\n`)
/// becomes one header per value, as DevTools writes it.
fn headers(v: &Value) -> Vec<NameValue> {
    v.as_object()
        .map(|m| {
            m.iter()
                .flat_map(|(k, v)| {
                    v.as_str()
                        .unwrap_or_default()
                        .split('\n')
                        .map(move |v| NameValue {
                            name: k.clone(),
                            value: v.to_string(),
                        })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A hop's response headers, with the `Set-Cookie` lines its extra-info event had when the
/// response event left them out.
fn response_headers(r: &Hop) -> Vec<NameValue> {
    let mut h = r
        .response
        .map(|r| headers(&r["headers"]))
        .unwrap_or_default();
    let has_cookie = h.iter().any(|n| n.name.eq_ignore_ascii_case("set-cookie"));
    if let (false, Some(cookies)) = (has_cookie, r.set_cookie) {
        h.extend(cookies.split('\n').map(|c| NameValue {
            name: "set-cookie".into(),
            value: c.to_string(),
        }));
    }
    h
}

/// One request of the page, or one hop of a redirect chain (CDP keeps the request id across
/// redirects and tells of each 3xx in the next `requestWillBeSent`'s `redirectResponse`).
struct Hop<'a> {
    id: &'a str,
    sent: &'a Value,
    /// The response object (`responseReceived.response`, or the redirect's).
    response: Option<&'a Value>,
    finished: Option<&'a Value>,
    failed: Option<&'a Value>,
    /// A redirect hop ends when the next hop is sent.
    redirected_at: Option<f64>,
    /// Its `Set-Cookie` values (joined by `\n`), from the extra-info event of its request id
    /// and status: `responseReceived` leaves them out.
    set_cookie: Option<&'a str>,
}

/// The HAR entries of a load, from its CDP events (with the bodies the run kept).
pub fn entries(obs: &Observation) -> Vec<Entry> {
    let events = &obs.network.events;
    let (hops, latest) = hops(events);
    let mut entries = Vec::new();
    for (i, r) in hops.iter().enumerate() {
        let url = r.sent["request"]["url"].as_str().unwrap_or_default();
        if url.starts_with("data:") {
            continue;
        }
        let times = HopTimes::of(r);
        let mut entry = entry(r, url, &times);
        // The body belongs to the last hop of its request id.
        if latest.get(r.id) == Some(&i) {
            if let Some(b) = obs.bodies.get(r.id) {
                entry.response.content.with_body(b);
            }
        }
        add_extras(events, r, times.transfer_size, &mut entry);
        entries.push(entry);
    }
    entries
}

/// Each request hop (a redirect ends one and starts the next), and each request id's latest.
fn hops(events: &[DevtoolsEvent]) -> (Vec<Hop<'_>>, BTreeMap<&str, usize>) {
    let mut hops: Vec<Hop> = Vec::new();
    // Request id → its latest hop.
    let mut latest: BTreeMap<&str, usize> = BTreeMap::new();
    // Extra-info events (kept only with a `Set-Cookie`), matched to hops once all are known:
    // one may come before its response event or after.
    let mut cookies: Vec<(&str, &Value)> = Vec::new();
    for DevtoolsEvent { method, params } in events {
        let Some(id) = params.get("requestId").and_then(Value::as_str) else {
            continue;
        };
        if method == "Network.requestWillBeSent" {
            if let (Some(&i), Some(redirect)) = (latest.get(id), params.get("redirectResponse")) {
                hops[i].response = Some(redirect);
                hops[i].redirected_at = params["timestamp"].as_f64();
            }
            latest.insert(id, hops.len());
            hops.push(Hop {
                id,
                sent: params,
                response: None,
                finished: None,
                failed: None,
                redirected_at: None,
                set_cookie: None,
            });
            continue;
        }
        if method == EXTRA_INFO {
            cookies.push((id, params));
            continue;
        }
        let Some(&i) = latest.get(id) else { continue };
        let hop = &mut hops[i];
        match method.as_str() {
            "Network.responseReceived" => hop.response = Some(&params["response"]),
            "Network.loadingFinished" => hop.finished = Some(params),
            "Network.loadingFailed" => hop.failed = Some(params),
            _ => {}
        }
    }
    for hop in &mut hops {
        let status = hop.response.and_then(|r| r["status"].as_u64());
        let matching = cookies
            .iter()
            .position(|(id, p)| *id == hop.id && p["statusCode"].as_u64() == status);
        if let Some(i) = matching {
            let (_, p) = cookies.remove(i);
            hop.set_cookie = p["headers"]["set-cookie"].as_str();
        }
    }
    (hops, latest)
}

/// A hop's times and sizes, as HAR counts them.
#[derive(Clone, Copy)]
struct HopTimes {
    total: f64,
    blocked: f64,
    wait: f64,
    receive: f64,
    transfer_size: Option<f64>,
    body_size: f64,
}

impl HopTimes {
    fn of(r: &Hop) -> HopTimes {
        let sent = r.sent;
        let resp = r.response;
        let t = resp.map(|r| &r["timing"]);
        let f = |k: &str| t.and_then(|t| t[k].as_f64()).filter(|v| *v >= 0.0);
        let sent_ts = sent["timestamp"].as_f64().unwrap_or(0.0);
        let end_ts = r
            .finished
            .or(r.failed)
            .and_then(|p| p["timestamp"].as_f64())
            .or(r.redirected_at);
        let total = end_ts
            .map(|e| (e - sent_ts) * 1000.0)
            .unwrap_or(0.0)
            .max(0.0);
        let request_time = t.and_then(|t| t["requestTime"].as_f64());
        let first = [f("dnsStart"), f("connectStart"), f("sendStart")]
            .into_iter()
            .flatten()
            .next();
        let blocked = match (request_time, first) {
            (Some(rt), Some(first)) => ((rt - sent_ts) * 1000.0 + first).max(0.0),
            _ => -1.0,
        };
        let wait = phase(f("sendEnd"), f("receiveHeadersEnd"));
        let receive = match (request_time, f("receiveHeadersEnd"), end_ts) {
            (Some(rt), Some(h), Some(e)) => ((e - rt) * 1000.0 - h).max(0.0),
            _ => 0.0,
        };
        // CDP's total counts the bytes received by the response event too (the headers, and
        // on h2 DATA frame headers): the body is the difference. When the body came in the
        // same read as the headers the split is unknown (-1).
        let transfer_size = r.finished.and_then(|p| p["encodedDataLength"].as_f64());
        let header_bytes = resp.and_then(|r| r["encodedDataLength"].as_f64());
        let body_size = match (transfer_size, header_bytes) {
            (Some(t), Some(h)) if t > h => t - h,
            (Some(_), Some(_)) => -1.0,
            (Some(t), None) => t,
            (None, _) if r.redirected_at.is_some() => 0.0,
            (None, _) => -1.0,
        };
        HopTimes {
            total,
            blocked,
            wait,
            receive,
            transfer_size,
            body_size,
        }
    }
}

/// The HAR entry of one hop, without its body and extras.
fn entry(r: &Hop, url: &str, times: &HopTimes) -> Entry {
    let sent = r.sent;
    let request = &sent["request"];
    let resp = r.response;
    let protocol = resp
        .and_then(|r| r["protocol"].as_str())
        .unwrap_or("http/1.1");
    let f = |k: &str| {
        resp.map(|r| &r["timing"])
            .and_then(|t| t[k].as_f64())
            .filter(|v| *v >= 0.0)
    };
    let text = |v: Option<&Value>, k: &str, or: &str| {
        v.and_then(|v| v[k].as_str()).unwrap_or(or).to_string()
    };
    let location = resp
        .and_then(|r| r["headers"].as_object())
        .and_then(|h| h.iter().find(|(k, _)| k.eq_ignore_ascii_case("location")))
        .and_then(|(_, v)| v.as_str())
        .unwrap_or("");
    let post_size = request["postData"]
        .as_str()
        .map(|s| s.len() as f64)
        .or_else(|| {
            request["hasPostData"]
                .as_bool()
                .filter(|b| *b)
                .map(|_| -1.0)
        })
        .unwrap_or(0.0);
    Entry {
        pageref: PAGE_ID,
        started_date_time: iso(sent["wallTime"].as_f64().unwrap_or(0.0)),
        time: times.total,
        request: Request {
            method: text(Some(request), "method", "GET"),
            url: url.to_string(),
            http_version: http_version(protocol),
            cookies: vec![],
            headers: headers(&request["headers"]),
            query_string: query_string(url),
            headers_size: -1.0,
            body_size: post_size,
        },
        response: Response {
            status: resp.and_then(|r| r["status"].as_u64()).unwrap_or(0),
            status_text: text(resp, "statusText", ""),
            http_version: http_version(protocol),
            cookies: vec![],
            headers: response_headers(r),
            content: Content {
                // Without the body, its wire size stands in (an upper bound: decoded ≥ wire
                // but for the headers a total may include).
                size: if times.body_size >= 0.0 {
                    times.body_size
                } else {
                    times.transfer_size.unwrap_or(0.0)
                },
                mime_type: text(resp, "mimeType", "x-unknown"),
                text: None,
                encoding: None,
            },
            redirect_url: location.to_string(),
            headers_size: -1.0,
            body_size: times.body_size,
        },
        cache: Cache {},
        timings: Timings {
            blocked: times.blocked,
            dns: phase(f("dnsStart"), f("dnsEnd")),
            connect: phase(f("connectStart"), f("connectEnd")),
            ssl: phase(f("sslStart"), f("sslEnd")),
            send: phase(f("sendStart"), f("sendEnd")).max(0.0),
            wait: times.wait.max(0.0),
            receive: times.receive,
        },
        server_ip_address: None,
        server_port: None,
        connection: None,
        transfer_size: None,
        priority: None,
        error: None,
        initiator: sent["initiator"]["type"]
            .as_str()
            .map(|t| serde_json::json!({ "type": t })),
        resource_type: sent["type"].as_str().map(str::to_ascii_lowercase),
    }
}

/// The server's address and port, the connection, the transfer size, the priority after its
/// last change and the error.
fn add_extras(events: &[DevtoolsEvent], r: &Hop, transfer_size: Option<f64>, entry: &mut Entry) {
    if let Some(resp) = r.response {
        entry.server_ip_address = resp["remoteIPAddress"].as_str().map(String::from);
        entry.server_port = resp["remotePort"].as_u64().filter(|p| *p > 0);
        entry.connection = resp["connectionId"]
            .as_f64()
            .map(|c| (c as u64).to_string());
    }
    entry.transfer_size = transfer_size;
    // As DevTools writes it: the priority after its last change.
    let changed = events
        .iter()
        .filter(|e| e.method == "Network.resourceChangedPriority")
        .filter(|e| e.params["requestId"].as_str() == Some(r.id))
        .filter_map(|e| e.params["newPriority"].as_str())
        .next_back();
    entry.priority = changed
        .or(r.sent["request"]["initialPriority"].as_str())
        .map(String::from);
    if let Some(fail) = r.failed {
        entry.error = Some(fail["errorText"].as_str().unwrap_or("failed").to_string());
    }
}
