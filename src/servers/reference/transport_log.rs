//! The transport statistics a child HTTP/3 server writes (the quiche and aioquic helpers): JSON
//! lines, each a [`ConnectionStats`] — final when the connection closed, a snapshot (no
//! `closed_unix_ms`) of one still open when pagebench asked with SIGUSR1 — or the
//! `{"snapshot": N, "open": M}` line that ends the snapshot it asked for (pure parsing).

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;

use crate::embedded_server::ConnectionStats;

/// One line of the statistics file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum StatsLine {
    /// The end of snapshot `snapshot`, with how many connections were open.
    Snapshot {
        snapshot: u64,
        open: u64,
    },
    Connection(Box<ConnectionStats>),
}

/// Parses a line (None: not a line of this file, e.g. a partial write).
pub fn parse(line: &str) -> Option<StatsLine> {
    serde_json::from_str(line).ok()
}

/// The end of the newest snapshot in `lines`: (number, connections open).
pub fn last_snapshot(lines: &[StatsLine]) -> Option<(u64, u64)> {
    lines.iter().rev().find_map(|l| match l {
        StatsLine::Snapshot { snapshot, open } => Some((*snapshot, *open)),
        StatsLine::Connection(_) => None,
    })
}

/// The connections of one run from its lines: each connection's last line (its final
/// statistics, or its newest snapshot if it is still open), leaving out connections an earlier
/// run already reported (`reported`, which this extends).
pub fn connections(lines: &[StatsLine], reported: &mut HashSet<u64>) -> Vec<ConnectionStats> {
    let mut latest: BTreeMap<u64, &ConnectionStats> = BTreeMap::new();
    for l in lines {
        if let StatsLine::Connection(c) = l {
            if !reported.contains(&c.connection_id) {
                latest.insert(c.connection_id, c);
            }
        }
    }
    reported.extend(latest.keys().copied());
    latest.into_values().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // As the quiche helper writes them (quiche's own counters beside pagebench's shape).
    const CLOSED: &str = r#"{"client":"10.0.0.1:34666","closed_unix_ms":1796172628352,"connection_id":1,"error":null,"handshake_ms":7.9,"opened_unix_ms":1796172627787,"protocol":"h3","quic":{"black_holes_detected":0,"congestion_controller":"cubic","congestion_events":0,"current_mtu":1350,"cwnd":35413,"lost_bytes":172112,"lost_packets":221,"min_rtt_us":331,"rtt_us":16096,"sent_packets":4679,"udp_rx_bytes":3131156,"udp_rx_datagrams":2736,"udp_tx_bytes":3328128,"udp_tx_datagrams":4679,"udp_tx_ios":4679},"quiche":{"retrans":129},"requests":4,"tcp":null,"transport":"quic"}"#;

    #[test]
    fn lines_parse_into_connections_and_snapshot_marks() {
        let c = parse(CLOSED).unwrap();
        let StatsLine::Connection(c) = c else {
            panic!("{c:?}")
        };
        let q = c.quic.as_ref().unwrap();
        assert_eq!((q.lost_packets, q.cwnd, q.rtt_us), (221, 35413, 16096));
        assert_eq!(c.closed_unix_ms, Some(1796172628352));
        assert_eq!(
            parse(r#"{"snapshot": 3, "open": 1}"#),
            Some(StatsLine::Snapshot {
                snapshot: 3,
                open: 1
            })
        );
        assert!(parse(r#"{"connection_id": 1"#).is_none());
    }

    #[test]
    fn a_connection_counts_once_with_its_last_line() {
        let open = CLOSED.replace(
            "\"closed_unix_ms\":1796172628352",
            "\"closed_unix_ms\":null",
        );
        let second = CLOSED.replace("\"connection_id\":1", "\"connection_id\":2");
        let run1: Vec<StatsLine> = [open.as_str(), r#"{"snapshot":1,"open":1}"#]
            .iter()
            .filter_map(|l| parse(l))
            .collect();
        assert_eq!(last_snapshot(&run1), Some((1, 1)));
        let mut reported = HashSet::new();
        let c = connections(&run1, &mut reported);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].closed_unix_ms, None);
        // The next run: connection 1 closes late (already reported), connection 2 is new and
        // has a snapshot and then its final line.
        let run2: Vec<StatsLine> = [CLOSED, second.as_str(), second.as_str()]
            .iter()
            .filter_map(|l| parse(l))
            .collect();
        let c = connections(&run2, &mut reported);
        assert_eq!(c.iter().map(|c| c.connection_id).collect::<Vec<_>>(), [2]);
    }
}
