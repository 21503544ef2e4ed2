//! Firefox's network view: its WebDriver BiDi `network.*` events of a load typed into the
//! engine-neutral [`NetworkView`] (the request, its response's protocol, status and bytes
//! received, failures; BiDi tells no connection ids, priorities or request timing).

use serde_json::Value;

use crate::evidence::metrics::{DevtoolsEvent, NetworkRequest, NetworkView};
use crate::measure::browser::requests::join_by_request;

/// What WebDriver BiDi is called where this viewpoint is named.
pub const PROTOCOL: &str = "BiDi";

/// The view of a load from its BiDi events (kept in it as sent).
pub fn view(events: Vec<DevtoolsEvent>) -> NetworkView {
    NetworkView::typed(PROTOCOL, events, requests)
}

/// Joins BiDi network events by request id, in the order requests were sent (Firefox).
pub fn requests(events: &[DevtoolsEvent]) -> Vec<NetworkRequest> {
    join_by_request(
        events,
        |e| e.params.pointer("/request/request").and_then(Value::as_str),
        |entry, e| {
            let p = &e.params;
            let text = |ptr: &str| p.pointer(ptr).and_then(Value::as_str).map(String::from);
            if entry.url.is_empty() {
                entry.url = text("/request/url").unwrap_or_default();
                entry.method = text("/request/method").unwrap_or_default();
            }
            match e.method.as_str() {
                "network.beforeRequestSent" => {
                    // Firefox says `other` as BiDi's initiator of every request; the request's
                    // own `initiatorType` is Resource Timing's (`link`, `img`; none for a font).
                    entry.initiator = text("/request/initiatorType");
                    entry.document = p.get("navigation").is_some_and(|n| !n.is_null());
                }
                "network.responseCompleted" => {
                    entry.url = text("/response/url").unwrap_or(std::mem::take(&mut entry.url));
                    entry.protocol = text("/response/protocol");
                    entry.status = p
                        .pointer("/response/status")
                        .and_then(Value::as_f64)
                        .map(|s| s as u16);
                    entry.encoded_data_length =
                        p.pointer("/response/bytesReceived").and_then(Value::as_f64);
                    entry.from_cache = p
                        .pointer("/response/fromCache")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                }
                "network.fetchError" => {
                    entry.failed = Some(text("/errorText").unwrap_or_else(|| "failed".into()));
                }
                _ => {}
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(method: &str, params: Value) -> DevtoolsEvent {
        DevtoolsEvent {
            method: method.into(),
            params,
        }
    }

    #[test]
    fn a_response_from_the_cache_is_marked_so() {
        let url = "https://static.docs.test/py.svg";
        let events = [
            event(
                "network.beforeRequestSent",
                json!({"request": {"request": "15", "url": url, "method": "GET", "initiatorType": "img"}}),
            ),
            event(
                "network.responseCompleted",
                json!({"request": {"request": "15", "url": url},
                       "response": {"url": url, "protocol": "h2", "status": 200, "bytesReceived": 1269, "fromCache": false}}),
            ),
            event(
                "network.responseCompleted",
                json!({"request": {"request": "2", "url": url},
                       "response": {"url": url, "protocol": "http/1.1", "status": 200, "bytesReceived": 0, "fromCache": true}}),
            ),
        ];
        let r = requests(&events);
        let seen: Vec<(&str, Option<&str>, bool)> = r
            .iter()
            .map(|q| (q.request_id.as_str(), q.protocol.as_deref(), q.from_cache))
            .collect();
        assert_eq!(
            seen,
            [("15", Some("h2"), false), ("2", Some("http/1.1"), true)]
        );
    }
}
