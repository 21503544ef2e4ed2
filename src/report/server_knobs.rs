//! The servers' settings as a table a reader can scan: per server, each knob that was asked for
//! (a flag or `--server-config`) with the value it ran with, and what the kernel answered where
//! it had a say; pagebench's defaults are folded into one note per server, and every value as
//! applied stays in `meta.json` (`servers_applied.<server>`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::doc::{Cell, Table};
use super::report_data::ReportData;
use crate::servers::ServerDescription;

/// QUIC's largest variable-length integer: a receive window "without limit".
const QUIC_VARINT_MAX: u64 = (1 << 62) - 1;

/// Flattens a server's configuration into `key=value` pairs (nested keys joined by dots).
pub fn flatten_knobs(v: &Value) -> Vec<String> {
    fn walk(prefix: &str, v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Null => {}
            Value::Object(m) => {
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                for (k, x) in entries {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, x, out);
                }
            }
            Value::Array(a) => {
                let items: Vec<String> = a
                    .iter()
                    .map(|x| match x {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect();
                out.push(format!("{prefix}=[{}]", items.join(", ")));
            }
            Value::String(s) => out.push(format!("{prefix}={s}")),
            other => out.push(format!("{prefix}={other}")),
        }
    }
    let mut out = Vec::new();
    walk("", v, &mut out);
    out
}

/// The table, when some server's settings were recorded.
pub fn table(data: &ReportData) -> Option<Table> {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for s in &data.servers {
        let Some(d) = data.meta.servers_applied.get(s) else {
            continue;
        };
        let (server_rows, note) = server(s.as_str(), d);
        rows.extend(server_rows);
        notes.extend(note);
    }
    (!rows.is_empty()).then(|| Table {
        id: "server-settings".into(),
        title: "The servers' settings".into(),
        intro: vec!["What each server was asked to change, the value it ran with, and the kernel's answer where it had a say; what nobody asked for is pagebench's default (listed under the table).".into()],
        header: ["server", "knob", "value", "from"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        rows,
        notes,
    })
}

/// One server's rows and its note (defaults, what a reference server takes).
fn server(name: &str, d: &ServerDescription) -> (Vec<Vec<Cell>>, Option<String>) {
    let asked = pairs(
        d.knobs_requested
            .as_ref()
            .and_then(|k| serde_json::to_value(k).ok()),
    );
    let applied = d.applied.as_ref().map(|a| a.to_json());
    let ran = pairs(applied.as_ref().and_then(|a| a.get("knobs").cloned()));
    let row = |knob: &str, value: &str, from: &str| {
        vec![
            Cell::label(name),
            Cell::text(knob),
            Cell::text(value),
            Cell::text(from),
        ]
    };
    let mut rows: Vec<Vec<Cell>> = asked
        .iter()
        .map(|(k, v)| {
            let value = ran.get(k).unwrap_or(v);
            let from = if k == "tcp_congestion" && v == "cubic" {
                // Filled in before the server starts (`with_default_tcp_congestion`).
                "pagebench's default (QUIC's controller), or asked".to_string()
            } else {
                asked_from(k, d)
            };
            row(k, &readable(k, value), &from)
        })
        .collect();
    if let Some(a) = &d.applied {
        for (knob, buffer) in [
            ("udp_recv_buffer", &a.udp_recv_buffer),
            ("udp_send_buffer", &a.udp_send_buffer),
        ] {
            if let Some(b) = buffer.as_ref().filter(|b| b.requested.is_some()) {
                let clamped = if b.clamped { ", clamped" } else { "" };
                let value = format!("{} B as the kernel reports it", b.applied);
                rows.push(row(
                    knob,
                    &value,
                    &format!("the kernel ({}{clamped})", b.method),
                ));
            }
        }
        if a.tcp_congestion_source.as_deref() == Some("system default") {
            let cc = a.tcp_congestion.as_deref().unwrap_or("?");
            rows.push(row("tcp_congestion", cc, "the system's default"));
        }
    }
    // A reference server runs with its namespace's TCP congestion control.
    if let (None, Some(cc)) = (&d.applied, &d.tcp_congestion) {
        if asked.get("tcp_congestion") != Some(cc) || d.tcp_congestion_note.is_some() {
            let from = d
                .tcp_congestion_note
                .as_deref()
                .unwrap_or("the namespace's default");
            rows.push(row("tcp_congestion", cc, from));
        }
    }
    if rows.is_empty() {
        rows.push(row("(none asked)", "—", "—"));
    }
    (rows, note(name, d, &asked, &ran))
}

/// Where an asked knob's value came from: the request, unless a reference server does not take
/// that knob.
fn asked_from(knob: &str, d: &ServerDescription) -> String {
    let takes = |list: &Option<Vec<String>>| {
        list.as_ref()
            .is_some_and(|l| l.iter().any(|k| k.split_whitespace().next() == Some(knob)))
    };
    if takes(&d.knobs_not_applicable) {
        "asked; this server does not take it".into()
    } else {
        "asked (flag or --server-config)".into()
    }
}

/// The defaults nobody asked for, and what a reference server takes.
fn note(
    name: &str,
    d: &ServerDescription,
    asked: &BTreeMap<String, String>,
    ran: &BTreeMap<String, String>,
) -> Option<String> {
    let defaults: Vec<String> = ran
        .iter()
        .filter(|(k, _)| !asked.contains_key(*k))
        .map(|(k, v)| format!("{k} {}", readable(k, v)))
        .collect();
    let mut parts = Vec::new();
    if !defaults.is_empty() {
        parts.push(format!("defaults, not asked: {}", defaults.join(", ")));
    }
    if let Some(takes) = d.knobs_applied.as_ref().filter(|k| !k.is_empty()) {
        parts.push(format!("takes from pagebench: {}", takes.join(", ")));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "{name} — {}; every value as applied in `meta.json` (`servers_applied.{name}`).",
            parts.join("; ")
        )
    })
}

/// `knob → value` of a JSON object of knobs (nulls left out: not set).
fn pairs(v: Option<Value>) -> BTreeMap<String, String> {
    v.map(|v| flatten_knobs(&v))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// A knob's value for people: windows and buffers in KiB/MiB, QUIC's maximum as unlimited.
fn readable(knob: &str, value: &str) -> String {
    let Ok(n) = value.parse::<u64>() else {
        return value.to_string();
    };
    if n == QUIC_VARINT_MAX {
        return "unlimited".into();
    }
    let sized = knob.contains("window") || knob.contains("buffer");
    match n {
        _ if !sized || n < 1024 => value.to_string(),
        _ if n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        _ if n % 1024 == 0 => format!("{} KiB", n >> 10),
        _ => format!("{n} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn description(json: Value) -> ServerDescription {
        serde_json::from_value(json).unwrap()
    }

    fn embedded() -> ServerDescription {
        description(serde_json::json!({
            "server": "embedded", "version": "pagebench 0.2.0",
            "knobs_requested": { "tcp_congestion": "bbr", "udp_recv_buffer": "4MiB" },
            "applied": {
                "bind": "10.100.0.2:443", "port": 443, "tcp_alpn": ["h2", "http/1.1"],
                "tcp_congestion": "bbr", "tcp_congestion_source": "knob",
                "udp_recv_buffer": { "requested": 4194304, "applied": 8388608,
                    "method": "SO_RCVBUFFORCE", "clamped": false },
                "knobs": {
                    "protocols": ["h1", "h2", "h3"], "h2_max_concurrent_streams": 200,
                    "h2_initial_stream_window": 1048576, "h2_initial_connection_window": 1048576,
                    "h3_max_concurrent_streams": 100, "h3_stream_receive_window": 1250000,
                    "h3_connection_receive_window": 4611686018427387903_u64,
                    "h3_send_buffer": null, "quic_congestion": "cubic", "tcp_congestion": "bbr",
                    "udp_recv_buffer": 4194304, "udp_send_buffer": null, "gso": true,
                    "alt_svc_over_h3": false, "tls_resumption": true, "quic_0rtt": true
                }
            }
        }))
    }

    #[test]
    fn asked_knobs_are_rows_and_defaults_a_note() {
        let (rows, note) = server("embedded", &embedded());
        let text: Vec<Vec<&str>> = rows
            .iter()
            .map(|r| r.iter().map(|c| c.text.as_str()).collect())
            .collect();
        assert_eq!(
            text,
            [
                [
                    "embedded",
                    "tcp_congestion",
                    "bbr",
                    "asked (flag or --server-config)"
                ],
                [
                    "embedded",
                    "udp_recv_buffer",
                    "4 MiB",
                    "asked (flag or --server-config)"
                ],
                [
                    "embedded",
                    "udp_recv_buffer",
                    "8388608 B as the kernel reports it",
                    "the kernel (SO_RCVBUFFORCE)"
                ],
            ]
        );
        let cubic = server(
            "embedded",
            &description(serde_json::json!({
                "server": "embedded", "version": "v", "knobs_requested": { "tcp_congestion": "cubic" }
            })),
        );
        assert_eq!(
            cubic.0[0][3].text,
            "pagebench's default (QUIC's controller), or asked"
        );
        let note = note.unwrap();
        assert!(
            note.contains("h2_initial_stream_window 1 MiB")
                && note.contains("h3_connection_receive_window unlimited")
                && note.contains("protocols [h1, h2, h3]")
                && !note.contains("tcp_congestion")
                && note.contains("`servers_applied.embedded`"),
            "{note}"
        );
    }

    #[test]
    fn a_reference_server_says_which_knobs_it_does_not_take() {
        let d = description(serde_json::json!({
            "server": "aioquic", "version": "aioquic 1.7.2",
            "knobs_requested": { "gso": false, "h3_max_concurrent_streams": 50 },
            "knobs_applied": ["protocols", "h3_max_concurrent_streams"],
            "knobs_not_applicable": ["gso"]
        }));
        let (rows, note) = server("aioquic", &d);
        let from: Vec<&str> = rows.iter().map(|r| r[3].text.as_str()).collect();
        assert_eq!(
            from,
            [
                "asked; this server does not take it",
                "asked (flag or --server-config)"
            ]
        );
        assert!(note
            .unwrap()
            .contains("takes from pagebench: protocols, h3_max_concurrent_streams"));
        let quiet = description(serde_json::json!({ "server": "nginx", "version": "nginx" }));
        let (rows, note) = server("nginx", &quiet);
        assert_eq!(rows[0][1].text, "(none asked)");
        assert_eq!(note, None);
    }

    #[test]
    fn knobs_flatten() {
        let v = serde_json::json!({"kind": "embedded", "quic": {"stream_window": 65536, "cc": "cubic"}, "x": null, "alpn": ["h2", "http/1.1"]});
        assert_eq!(
            flatten_knobs(&v),
            [
                "alpn=[h2, http/1.1]",
                "kind=embedded",
                "quic.cc=cubic",
                "quic.stream_window=65536"
            ]
        );
    }

    #[test]
    fn values_read_as_sizes_where_they_are_sizes() {
        assert_eq!(readable("h2_initial_stream_window", "1048576"), "1 MiB");
        assert_eq!(readable("h3_send_buffer", "16384"), "16 KiB");
        assert_eq!(readable("h3_stream_receive_window", "1250000"), "1250000 B");
        assert_eq!(readable("h2_max_concurrent_streams", "2048"), "2048");
        assert_eq!(
            readable("h3_connection_receive_window", &QUIC_VARINT_MAX.to_string()),
            "unlimited"
        );
        assert_eq!(readable("quic_congestion", "cubic"), "cubic");
    }
}
