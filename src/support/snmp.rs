//! Kernel protocol counters (`/proc/net/snmp`): UDP receive-buffer overflows and TCP
//! retransmissions, read per network namespace before and after a run, and what changed. The
//! reading and parsing live in [`crate::support::procfs`] ([`procfs::thread_snmp`], on a thread inside
//! the namespace); this module keeps the record's types and the pure delta.

use serde::{Deserialize, Serialize};

use crate::support::procfs;

/// Counters by `Proto.Field`, e.g. `Udp.RcvbufErrors`, as [`procfs::parse_snmp`] reads them.
pub type Counters = procfs::SnmpCounters;

/// What changed in one namespace during a run (after − before) — the counters diagnostics
/// read. Serialized under the kernel's `Proto.Field` names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Delta {
    #[serde(rename = "Udp.InDatagrams")]
    pub udp_in_datagrams: i64,
    #[serde(rename = "Udp.OutDatagrams")]
    pub udp_out_datagrams: i64,
    #[serde(rename = "Udp.InErrors")]
    pub udp_in_errors: i64,
    /// Datagrams dropped because the socket's receive buffer was full.
    #[serde(rename = "Udp.RcvbufErrors")]
    pub udp_rcvbuf_errors: i64,
    #[serde(rename = "Udp.SndbufErrors")]
    pub udp_sndbuf_errors: i64,
    #[serde(rename = "Udp.MemErrors")]
    pub udp_mem_errors: i64,
    #[serde(rename = "Tcp.OutSegs")]
    pub tcp_out_segs: i64,
    #[serde(rename = "Tcp.InSegs")]
    pub tcp_in_segs: i64,
    #[serde(rename = "Tcp.RetransSegs")]
    pub tcp_retrans_segs: i64,
    #[serde(rename = "Tcp.InErrs")]
    pub tcp_in_errs: i64,
    /// TCP connections this namespace opened.
    #[serde(rename = "Tcp.ActiveOpens")]
    pub tcp_active_opens: i64,
    #[serde(rename = "Tcp.PassiveOpens")]
    pub tcp_passive_opens: i64,
}

/// The counters of interest, after − before (a counter missing before counts from 0; one
/// missing after stays 0).
pub fn delta(before: &Counters, after: &Counters) -> Delta {
    let d = |k: &str| {
        after
            .get(k)
            .map_or(0, |a| a - before.get(k).copied().unwrap_or(0))
    };
    Delta {
        udp_in_datagrams: d("Udp.InDatagrams"),
        udp_out_datagrams: d("Udp.OutDatagrams"),
        udp_in_errors: d("Udp.InErrors"),
        udp_rcvbuf_errors: d("Udp.RcvbufErrors"),
        udp_sndbuf_errors: d("Udp.SndbufErrors"),
        udp_mem_errors: d("Udp.MemErrors"),
        tcp_out_segs: d("Tcp.OutSegs"),
        tcp_in_segs: d("Tcp.InSegs"),
        tcp_retrans_segs: d("Tcp.RetransSegs"),
        tcp_in_errs: d("Tcp.InErrs"),
        tcp_active_opens: d("Tcp.ActiveOpens"),
        tcp_passive_opens: d("Tcp.PassiveOpens"),
    }
}

/// Both namespaces' deltas over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceDeltas {
    pub client: Delta,
    pub server: Delta,
}

impl NamespaceDeltas {
    /// UDP receive-buffer overflows in both namespaces.
    pub fn udp_rcvbuf_errors(&self) -> i64 {
        self.client.udp_rcvbuf_errors + self.server.udp_rcvbuf_errors
    }

    /// UDP send-buffer overflows in both namespaces.
    pub fn udp_sndbuf_errors(&self) -> i64 {
        self.client.udp_sndbuf_errors + self.server.udp_sndbuf_errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "Ip: Forwarding DefaultTTL InReceives\nIp: 2 64 100\n\
Tcp: RtoAlgorithm RtoMin InSegs OutSegs RetransSegs InErrs\nTcp: 1 200 50 60 3 0\n\
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
Udp: 1000 0 7 900 7 0 0 0 0\n";

    #[test]
    fn parses_and_diffs() {
        let a = procfs::parse_snmp(SAMPLE);
        assert_eq!(a["Udp.RcvbufErrors"], 7);
        assert_eq!(a["Tcp.RetransSegs"], 3);
        let mut b = a.clone();
        b.insert("Udp.RcvbufErrors".into(), 19);
        let d = delta(&a, &b);
        assert_eq!(d.udp_rcvbuf_errors, 12);
        assert_eq!(d.tcp_retrans_segs, 0);
        assert_eq!(d.udp_in_datagrams, 0);
        // The file's names: a record keeps the kernel's spelling.
        let json = serde_json::to_value(d).unwrap();
        assert_eq!(json["Udp.RcvbufErrors"], 12);
        let back: Delta = serde_json::from_value(json).unwrap();
        assert_eq!(back, d);
    }
}
