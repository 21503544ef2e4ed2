//! HAR 1.2 export (pure): a run's CDP Network events (Chromium) or BiDi network events
//! (Firefox) as the archive format DevTools and WebPageTest read.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::probe::metrics::{BidiEvent, CdpEvent, EntryTiming, Observation};

fn iso(wall_seconds: f64) -> String {
    let ms = (wall_seconds * 1000.0).round() as i64;
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn http_version(protocol: &str) -> String {
    match protocol {
        "http/1.1" => "HTTP/1.1".into(),
        "http/1.0" => "HTTP/1.0".into(),
        "h2" => "HTTP/2".into(),
        "h3" => "HTTP/3".into(),
        other => other.to_uppercase(),
    }
}

/// CDP's header object as HAR headers: a repeated header (CDP joins the values with `\n`)
/// becomes one header per value, as DevTools writes it.
fn headers(v: &Value) -> Vec<Value> {
    v.as_object()
        .map(|m| {
            m.iter()
                .flat_map(|(k, v)| {
                    v.as_str()
                        .unwrap_or_default()
                        .split('\n')
                        .map(move |v| json!({ "name": k, "value": v }))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn query_string(url: &str) -> Vec<Value> {
    url.split_once('?')
        .map(|(_, q)| q.split('#').next().unwrap_or(""))
        .map(|q| {
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (n, v) = p.split_once('=').unwrap_or((p, ""));
                    json!({ "name": n, "value": v })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A HAR phase from two CDP offsets; -1 when it does not apply.
fn phase(start: Option<f64>, end: Option<f64>) -> f64 {
    match (start, end) {
        (Some(s), Some(e)) if s >= 0.0 && e >= s => e - s,
        _ => -1.0,
    }
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
}

/// Builds the HAR document of one run, from the events of whichever engine made it;
/// `browser` names the engine and its version (`Chromium 156…`, `Firefox 153.8.0`).
pub fn build(obs: &Observation, page_url: &str, browser: &str) -> Value {
    let entries = if obs.bidi_events.is_empty() {
        cdp_entries(obs)
    } else {
        bidi_entries(&obs.bidi_events)
    };
    let (name, version) = match browser.split_once(' ') {
        Some((name @ ("Chromium" | "Firefox"), version)) => (name, version),
        _ => ("Chromium", browser),
    };
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
    json!({
        "log": {
            "version": "1.2",
            "creator": { "name": "pagebench", "version": env!("CARGO_PKG_VERSION") },
            "browser": { "name": name, "version": version },
            "pages": [{
                "startedDateTime": started,
                "id": "page_1",
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

/// BiDi's header list (`[{name, value: {type: "string", value}}]`) as HAR headers.
fn bidi_headers(v: &Value) -> Vec<Value> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|h| json!({ "name": h["name"], "value": h.pointer("/value/value").cloned().unwrap_or(json!("")) }))
                .collect()
        })
        .unwrap_or_default()
}

/// One HAR entry per response (each hop of a redirect is one) or failed request, from
/// Firefox's `network.responseCompleted` and `network.fetchError`: BiDi's timings are wall
/// clock ms, 0 where a phase did not happen (a request on an open connection has no connect).
/// Without the body, content.size is the body's wire size.
fn bidi_entries(events: &[BidiEvent]) -> Vec<Value> {
    let mut entries = Vec::new();
    for BidiEvent { method, params } in events {
        let failed = method == "network.fetchError";
        if method != "network.responseCompleted" && !failed {
            continue;
        }
        let request = &params["request"];
        let url = request["url"].as_str().unwrap_or_default();
        if url.starts_with("data:") {
            continue;
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
        let location = resp
            .and_then(|r| r["headers"].as_array())
            .and_then(|h| {
                h.iter().find(|h| {
                    h["name"]
                        .as_str()
                        .is_some_and(|n| n.eq_ignore_ascii_case("location"))
                })
            })
            .and_then(|h| h.pointer("/value/value").and_then(Value::as_str))
            .unwrap_or("");
        let body_size = resp.and_then(|r| r["bodySize"].as_f64()).unwrap_or(-1.0);
        let mut entry = json!({
            "pageref": "page_1",
            "startedDateTime": iso(start / 1000.0),
            "time": at("responseEnd").map_or(0.0, |e| (e - start).max(0.0)),
            "request": {
                "method": request["method"].as_str().unwrap_or("GET"),
                "url": url,
                "httpVersion": http_version(protocol),
                "cookies": [],
                "headers": bidi_headers(&request["headers"]),
                "queryString": query_string(url),
                "headersSize": request["headersSize"].as_f64().unwrap_or(-1.0),
                "bodySize": request["bodySize"].as_f64().unwrap_or(0.0),
            },
            "response": {
                "status": resp.and_then(|r| r["status"].as_u64()).unwrap_or(0),
                "statusText": resp.and_then(|r| r["statusText"].as_str()).unwrap_or(""),
                "httpVersion": http_version(protocol),
                "cookies": [],
                "headers": resp.map(|r| bidi_headers(&r["headers"])).unwrap_or_default(),
                "content": {
                    "size": body_size.max(0.0),
                    "mimeType": resp.and_then(|r| r["mimeType"].as_str()).unwrap_or("x-unknown"),
                },
                "redirectURL": location,
                "headersSize": resp.and_then(|r| r["headersSize"].as_f64()).unwrap_or(-1.0),
                "bodySize": body_size,
            },
            "cache": {},
            "timings": {
                "blocked": first.map_or(-1.0, |f| (f - start).max(0.0)),
                "dns": span("dnsStart", "dnsEnd"),
                "connect": span("connectStart", "connectEnd"),
                "ssl": span("tlsStart", "connectEnd"),
                "send": 0.0,
                "wait": span("requestStart", "responseStart").max(0.0),
                "receive": span("responseStart", "responseEnd").max(0.0),
            },
        });
        if let Some(n) = resp.and_then(|r| r["bytesReceived"].as_f64()) {
            entry["_transferSize"] = json!(n);
        }
        if failed {
            entry["_error"] = params["errorText"].clone();
        }
        entries.push(entry);
    }
    entries
}

/// One HAR entry per request hop, from Chromium's CDP Network events (with the body when the
/// run kept it).
fn cdp_entries(obs: &Observation) -> Vec<Value> {
    let (hops, latest) = cdp_hops(obs);
    let mut entries = Vec::new();
    for (i, r) in hops.iter().enumerate() {
        let url = r.sent["request"]["url"].as_str().unwrap_or_default();
        if url.starts_with("data:") {
            continue;
        }
        let times = HopTimes::of(r);
        let mut entry = cdp_entry(r, url, &times);
        // The body belongs to the last hop of its request id.
        if latest.get(r.id) == Some(&i) {
            add_body(obs, r.id, &mut entry);
        }
        add_extras(obs, r, times.transfer_size, &mut entry);
        entries.push(entry);
    }
    entries
}

/// Each request hop (a redirect ends one and starts the next), and each request id's latest.
fn cdp_hops(obs: &Observation) -> (Vec<Hop<'_>>, BTreeMap<&str, usize>) {
    let mut hops: Vec<Hop> = Vec::new();
    // Request id → its latest hop.
    let mut latest: BTreeMap<&str, usize> = BTreeMap::new();
    for CdpEvent { method, params } in &obs.cdp_events {
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
            });
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
fn cdp_entry(r: &Hop, url: &str, times: &HopTimes) -> Value {
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
    let HopTimes {
        total,
        blocked,
        wait,
        receive,
        transfer_size,
        body_size,
    } = *times;
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
    json!({
        "pageref": "page_1",
        "startedDateTime": iso(sent["wallTime"].as_f64().unwrap_or(0.0)),
        "time": total,
        "request": {
            "method": request["method"].as_str().unwrap_or("GET"),
            "url": url,
            "httpVersion": http_version(protocol),
            "cookies": [],
            "headers": headers(&request["headers"]),
            "queryString": query_string(url),
            "headersSize": -1,
            "bodySize": post_size,
        },
        "response": {
            "status": resp.and_then(|r| r["status"].as_u64()).unwrap_or(0),
            "statusText": resp.and_then(|r| r["statusText"].as_str()).unwrap_or(""),
            "httpVersion": http_version(protocol),
            "cookies": [],
            "headers": resp.map(|r| headers(&r["headers"])).unwrap_or_default(),
            "content": {
                // Without the body, its wire size stands in (an upper bound: decoded ≥ wire
                // but for the headers a total may include).
                "size": if body_size >= 0.0 { body_size } else { transfer_size.unwrap_or(0.0) },
                "mimeType": resp.and_then(|r| r["mimeType"].as_str()).unwrap_or("x-unknown"),
            },
            "redirectURL": location,
            "headersSize": -1,
            "bodySize": body_size,
        },
        "cache": {},
        "timings": {
            "blocked": blocked,
            "dns": phase(f("dnsStart"), f("dnsEnd")),
            "connect": phase(f("connectStart"), f("connectEnd")),
            "ssl": phase(f("sslStart"), f("sslEnd")),
            "send": phase(f("sendStart"), f("sendEnd")).max(0.0),
            "wait": wait.max(0.0),
            "receive": receive,
        },
    })
}

/// "With content", as DevTools saves it: the decoded body, base64 for binary ones.
fn add_body(obs: &Observation, id: &str, entry: &mut Value) {
    if let Some(b) = obs.bodies.get(id) {
        let content = &mut entry["response"]["content"];
        let decoded = if b.base64 {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(&b.body)
                .map(|d| d.len())
                .unwrap_or(0)
        } else {
            b.body.len()
        };
        content["size"] = json!(decoded);
        content["text"] = json!(b.body);
        if b.base64 {
            content["encoding"] = json!("base64");
        }
    }
}

/// The server's address and port, the connection, the transfer size, the priority after its
/// last change and the error.
fn add_extras(obs: &Observation, r: &Hop, transfer_size: Option<f64>, entry: &mut Value) {
    let resp = r.response;
    let request = &r.sent["request"];
    if let Some(r) = resp {
        if let Some(ip) = r["remoteIPAddress"].as_str() {
            entry["serverIPAddress"] = json!(ip);
        }
        // HAR has no field for the port; `_serverPort` keeps it (import reads it).
        if let Some(p) = r["remotePort"].as_u64().filter(|p| *p > 0) {
            entry["_serverPort"] = json!(p);
        }
        if let Some(c) = r["connectionId"].as_f64() {
            entry["connection"] = json!((c as u64).to_string());
        }
    }
    if let Some(t) = transfer_size {
        entry["_transferSize"] = json!(t);
    }
    // As DevTools writes it: the priority after its last change.
    let changed = obs
        .cdp_events
        .iter()
        .filter(|e| e.method == "Network.resourceChangedPriority")
        .filter(|e| e.params["requestId"].as_str() == Some(r.id))
        .filter_map(|e| e.params["newPriority"].as_str())
        .next_back();
    if let Some(p) = changed.or(request["initialPriority"].as_str()) {
        entry["_priority"] = json!(p);
    }
    if let Some(fail) = r.failed {
        entry["_error"] = fail["errorText"].clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn har_of_a_recorded_firefox_h3_load_from_bidi_events() {
        let path = format!(
            "{}/tests/fixtures/browser/firefox-h3-page10.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let obs = Observation {
            time_origin: v["perf"]["timeOrigin"].as_f64(),
            navigation: Some(v["perf"]["nav"].clone()),
            bidi_events: serde_json::from_value(v["bidi_events"].clone()).unwrap(),
            ..Default::default()
        };
        let har = build(
            &obs,
            "https://pagebench.test/page10/index.html",
            "Firefox 153.8.0",
        );
        let log = &har["log"];
        assert_eq!(
            log["browser"],
            json!({"name": "Firefox", "version": "153.8.0"})
        );
        let entries = log["entries"].as_array().unwrap();
        // The page and its 10 files; the favicon's `data:,` is left out.
        assert_eq!(entries.len(), 11);
        assert!(entries[0]["request"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/page10/index.html"));
        for e in entries {
            assert_eq!(e["response"]["httpVersion"], "HTTP/3");
            assert_eq!(e["response"]["status"], 200);
            assert!(e["response"]["bodySize"].as_f64().unwrap() > 0.0);
            assert!(e["request"]["headers"].as_array().unwrap().len() > 5);
            let t = &e["timings"];
            assert!(t["wait"].as_f64().unwrap() > 0.0, "{t}");
            // HAR's total is the sum of its phases (those that apply).
            let sum: f64 = ["blocked", "dns", "connect", "send", "wait", "receive"]
                .iter()
                .map(|k| t[k].as_f64().unwrap().max(0.0))
                .sum();
            assert!((sum - e["time"].as_f64().unwrap()).abs() < 1.0, "{e}");
        }
        // Only the page opened the connection: DNS, connect and TLS are on its entry alone.
        assert!(entries[0]["timings"]["connect"].as_f64().unwrap() > 20.0);
        assert!(entries[1..]
            .iter()
            .all(|e| e["timings"]["connect"].as_f64() == Some(-1.0)));
        assert!(log["pages"][0]["pageTimings"]["onLoad"].as_f64().unwrap() > 0.0);
    }

    #[test]
    fn har_of_a_recorded_h2_load() {
        let path = format!(
            "{}/tests/fixtures/browser/h2-page10.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let obs = Observation {
            time_origin: v["perf"]["timeOrigin"].as_f64(),
            navigation: Some(v["perf"]["nav"].clone()),
            resources: vec![],
            page_result: None,
            cdp_events: serde_json::from_value(v["events"].clone()).unwrap(),
            ..Default::default()
        };
        let har = build(&obs, "https://pagebench.test/page10/index.html", "156");
        let log = &har["log"];
        assert_eq!(log["version"], "1.2");
        let entries = log["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 11);
        // Chromium's priorities, as DevTools writes them: the document first and highest.
        assert_eq!(entries[0]["_priority"], "VeryHigh");
        assert!(entries.iter().all(|e| e["_priority"].is_string()));
        for e in entries {
            assert_eq!(e["request"]["httpVersion"], "HTTP/2");
            assert_eq!(e["response"]["status"], 200);
            assert!(e["time"].as_f64().unwrap() > 0.0);
            for k in [
                "blocked", "dns", "connect", "ssl", "send", "wait", "receive",
            ] {
                let t = e["timings"][k].as_f64().unwrap();
                assert!(t == -1.0 || t >= 0.0, "{k} = {t}");
            }
            assert!(e["startedDateTime"].as_str().unwrap().ends_with('Z'));
        }
        // The navigation opened the connection: it has connect and TLS time.
        assert!(entries[0]["timings"]["connect"].as_f64().unwrap() > 0.0);
        assert!(log["pages"][0]["pageTimings"]["onLoad"].as_f64().unwrap() > 0.0);
    }

    #[test]
    fn kept_bodies_make_a_har_with_content_that_imports() {
        let path = format!(
            "{}/tests/fixtures/browser/h2-page10.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut obs = Observation {
            time_origin: v["perf"]["timeOrigin"].as_f64(),
            navigation: Some(v["perf"]["nav"].clone()),
            cdp_events: serde_json::from_value(v["events"].clone()).unwrap(),
            ..Observation::default()
        };
        let ids: Vec<String> = obs
            .cdp_events
            .iter()
            .filter(|e| e.method == "Network.loadingFinished")
            .filter_map(|e| e.params["requestId"].as_str().map(String::from))
            .collect();
        assert_eq!(ids.len(), 11);
        for (i, id) in ids.iter().enumerate() {
            let body = if i == 0 {
                crate::probe::metrics::ResponseBody {
                    body: "<html>".into(),
                    base64: false,
                }
            } else {
                crate::probe::metrics::ResponseBody {
                    body: "iVBORw0KGgo=".into(),
                    base64: true,
                }
            };
            obs.bodies.insert(id.clone(), body);
        }
        let har = build(&obs, "https://pagebench.test/page10/index.html", "156");
        let entries = har["log"]["entries"].as_array().unwrap();
        let with_text = entries
            .iter()
            .filter(|e| e["response"]["content"]["text"].is_string())
            .count();
        assert_eq!(with_text, 11);
        let b64 = entries
            .iter()
            .filter(|e| e["response"]["content"]["encoding"] == "base64")
            .count();
        assert_eq!(b64, 10);
        // And it imports whole: no missing bodies.
        let out = tempfile::tempdir().unwrap();
        let (a, summary) = crate::config::site::har_import::import(
            &har.to_string(),
            std::path::Path::new("run.har"),
            out.path(),
            true,
        )
        .unwrap();
        assert!(summary.missing.is_empty(), "{:?}", summary.missing);
        assert_eq!(a.entries.len(), 11);
        assert!(a.entries[1..].iter().all(|e| e.decoded_size == 8));
    }
}
