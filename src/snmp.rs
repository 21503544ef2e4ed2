//! Kernel protocol counters (`/proc/net/snmp`): UDP receive-buffer overflows and TCP
//! retransmissions, read per network namespace before and after a run. Parsing and deltas are
//! pure; reading must happen on a thread inside the namespace (`/proc/thread-self/net/snmp`:
//! `/proc/net` follows the process's main thread, not the calling thread).

use std::collections::BTreeMap;

/// Counters by `Proto.Field`, e.g. `Udp.RcvbufErrors`.
pub type Counters = BTreeMap<String, i64>;

/// Parses the header/value line pairs of `/proc/net/snmp`.
pub fn parse(text: &str) -> Counters {
    let mut out = Counters::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((proto, names)), Some((proto2, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if proto != proto2 {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse::<i64>() {
                out.insert(format!("{proto}.{n}"), v);
            }
        }
    }
    out
}

/// The counters of interest that changed between two readings (after − before).
pub fn delta(before: &Counters, after: &Counters) -> Counters {
    const KEEP: [&str; 12] = [
        "Udp.InDatagrams",
        "Udp.OutDatagrams",
        "Udp.InErrors",
        "Udp.RcvbufErrors",
        "Udp.SndbufErrors",
        "Udp.MemErrors",
        "Tcp.OutSegs",
        "Tcp.InSegs",
        "Tcp.RetransSegs",
        "Tcp.InErrs",
        "Tcp.ActiveOpens",
        "Tcp.PassiveOpens",
    ];
    KEEP.iter()
        .filter_map(|k| {
            let d = after.get(*k)? - before.get(*k).copied().unwrap_or(0);
            Some((k.to_string(), d))
        })
        .collect()
}

/// Reads the calling thread's namespace's counters.
pub fn read_thread() -> Counters {
    std::fs::read_to_string("/proc/thread-self/net/snmp")
        .map(|t| parse(&t))
        .unwrap_or_default()
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
        let a = parse(SAMPLE);
        assert_eq!(a["Udp.RcvbufErrors"], 7);
        assert_eq!(a["Tcp.RetransSegs"], 3);
        let mut b = a.clone();
        b.insert("Udp.RcvbufErrors".into(), 19);
        let d = delta(&a, &b);
        assert_eq!(d["Udp.RcvbufErrors"], 12);
        assert_eq!(d["Tcp.RetransSegs"], 0);
        assert!(!d.contains_key("Ip.Forwarding"));
    }

    #[test]
    fn reads_this_namespace() {
        assert!(read_thread().contains_key("Udp.InDatagrams"));
    }
}
