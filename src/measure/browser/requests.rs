//! What the engines' adapters share to type their DevTools events: joining the events of a
//! load into one [`NetworkRequest`] per request id.

use std::collections::BTreeMap;

use crate::evidence::metrics::NetworkRequest;

/// Joins events by request id into requests, in the order requests were first seen: `id_of`
/// names an event's request, `apply` takes what the event says into it.
pub fn join_by_request<'e, E>(
    events: &'e [E],
    id_of: impl Fn(&'e E) -> Option<&'e str>,
    mut apply: impl FnMut(&mut NetworkRequest, &'e E),
) -> Vec<NetworkRequest> {
    let mut order: Vec<String> = Vec::new();
    let mut map: BTreeMap<String, NetworkRequest> = BTreeMap::new();
    for e in events {
        let Some(id) = id_of(e) else {
            continue;
        };
        let entry = map.entry(id.to_string()).or_insert_with(|| {
            order.push(id.to_string());
            NetworkRequest {
                request_id: id.to_string(),
                ..Default::default()
            }
        });
        apply(entry, e);
    }
    order.into_iter().filter_map(|id| map.remove(&id)).collect()
}
