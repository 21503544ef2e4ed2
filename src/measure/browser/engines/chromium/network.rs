//! Chromium's network view: its CDP `Network.*` events of a load typed into the engine-neutral
//! [`NetworkView`] (the request, its response's protocol, status and connection, CDP's request
//! timing, the bytes on the wire, priorities and their changes, failures).

use serde_json::Value;

use crate::evidence::metrics::{DevtoolsEvent, NetworkRequest, NetworkView};
use crate::measure::browser::requests::join_by_request;

/// What CDP's protocol is called where this viewpoint is named.
pub const PROTOCOL: &str = "CDP";

/// The view of a load from its CDP events (kept in it as sent).
pub fn view(events: Vec<DevtoolsEvent>) -> NetworkView {
    NetworkView::typed(PROTOCOL, events, requests)
}

/// Joins CDP events by request id, in the order requests were sent.
pub fn requests(events: &[DevtoolsEvent]) -> Vec<NetworkRequest> {
    join_by_request(
        events,
        |e| e.params.get("requestId").and_then(Value::as_str),
        |entry, e| {
            let p = &e.params;
            match e.method.as_str() {
                "Network.requestWillBeSent" => {
                    if let Some(r) = p.get("request") {
                        entry.url = r.get("url").and_then(Value::as_str).unwrap_or("").into();
                        entry.method = r.get("method").and_then(Value::as_str).unwrap_or("").into();
                        entry.initial_priority = r
                            .get("initialPriority")
                            .and_then(Value::as_str)
                            .map(String::from);
                    }
                    entry.initiator = p
                        .pointer("/initiator/type")
                        .and_then(Value::as_str)
                        .map(String::from);
                    entry.document = p.get("type").and_then(Value::as_str) == Some("Document");
                }
                "Network.responseReceived" => {
                    let r = &p["response"];
                    if entry.url.is_empty() {
                        entry.url = r.get("url").and_then(Value::as_str).unwrap_or("").into();
                    }
                    entry.protocol = r.get("protocol").and_then(Value::as_str).map(String::from);
                    entry.status = r.get("status").and_then(Value::as_f64).map(|s| s as u16);
                    entry.connection_id = r
                        .get("connectionId")
                        .and_then(Value::as_f64)
                        .map(|c| c as u64);
                    entry.connection_reused = r.get("connectionReused").and_then(Value::as_bool);
                    let flag = |k: &str| r.get(k).and_then(Value::as_bool).unwrap_or(false);
                    entry.from_cache |= flag("fromDiskCache") || flag("fromPrefetchCache");
                    let t = &r["timing"];
                    entry.send_start_ms = t.get("sendStart").and_then(Value::as_f64);
                    entry.request_time = t.get("requestTime").and_then(Value::as_f64);
                    entry.receive_headers_end_ms =
                        t.get("receiveHeadersEnd").and_then(Value::as_f64);
                }
                "Network.loadingFinished" => {
                    entry.encoded_data_length = p.get("encodedDataLength").and_then(Value::as_f64);
                }
                "Network.resourceChangedPriority" => {
                    if let (Some(t), Some(to)) = (
                        p.get("timestamp").and_then(Value::as_f64),
                        p.get("newPriority").and_then(Value::as_str),
                    ) {
                        entry.priority_changes.push((t, to.to_string()));
                    }
                }
                "Network.requestServedFromCache" => entry.from_cache = true,
                "Network.loadingFailed" => {
                    entry.failed = Some(
                        p.get("errorText")
                            .and_then(Value::as_str)
                            .unwrap_or("failed")
                            .to_string(),
                    );
                }
                _ => {}
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::metrics::tests::fixture;

    #[test]
    fn cdp_events_join_into_one_request_each() {
        let obs = fixture("h3-page10");
        let reqs = &obs.network.requests;
        assert_eq!(obs.network.protocol, "CDP");
        assert_eq!(reqs.len(), 11);
        assert!(reqs.iter().all(|r| r.protocol.as_deref() == Some("h3")));
        assert!(reqs.iter().all(|r| r.encoded_data_length.is_some()));
        assert!(reqs.iter().all(|r| r.initial_priority.is_some()));
        assert!(reqs
            .iter()
            .all(|r| r.request_time.is_some() && r.send_start_ms.is_some()));
    }

    #[test]
    fn a_priority_change_and_a_failure_are_typed() {
        let ev = |method: &str, params: Value| DevtoolsEvent {
            method: method.into(),
            params,
        };
        let events = vec![
            ev(
                "Network.requestWillBeSent",
                serde_json::json!({"requestId": "1", "request": {"url": "https://h/a.css",
                    "method": "GET", "initialPriority": "VeryHigh"}}),
            ),
            ev(
                "Network.resourceChangedPriority",
                serde_json::json!({"requestId": "1", "newPriority": "Low", "timestamp": 12.5}),
            ),
            ev(
                "Network.loadingFailed",
                serde_json::json!({"requestId": "1", "errorText": "net::ERR_ABORTED"}),
            ),
        ];
        let v = view(events);
        assert_eq!(v.events.len(), 3, "the events are kept as sent");
        let r = &v.requests[0];
        assert_eq!(
            (r.url.as_str(), r.method.as_str()),
            ("https://h/a.css", "GET")
        );
        assert_eq!(r.initial_priority.as_deref(), Some("VeryHigh"));
        assert_eq!(r.priority_changes, [(12.5, "Low".to_string())]);
        assert_eq!(r.failed.as_deref(), Some("net::ERR_ABORTED"));
    }
}
