use super::*;

#[test]
fn names_are_unique_and_headlines_are_times() {
    let mut names: Vec<&str> = ALL.iter().map(|m| m.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), ALL.len(), "a metric name is listed twice");
    for m in ALL.iter().filter(|m| m.headline) {
        assert_eq!((m.unit, m.better), (Unit::Ms, Better::Lower), "{}", m.name);
    }
    assert!(by_name("completion_ms").is_some_and(|m| *m == COMPLETION_MS));
    assert!(by_name("nope").is_none());
}

#[test]
fn fields_are_written_in_their_format_and_missing_ones_empty() {
    let mut rec = crate::evidence::run_record::RunRecord::fixture("r1");
    rec.metrics.completion_ms = Some(412.34567);
    rec.metrics.onwire_peak = Some(7);
    rec.link = None;
    assert_eq!(COMPLETION_MS.csv_field(&rec), "412.346");
    assert_eq!(ONWIRE_PEAK.csv_field(&rec), "7");
    assert_eq!(GOODPUT_MBIT.csv_field(&rec), "");
    assert_eq!(
        BYTES_DOWN.csv_field(&rec),
        "",
        "no link figures without a link"
    );
    rec.machine.load1 = 1.234;
    assert_eq!(LOAD1.csv_field(&rec), "1.23");
}

#[test]
fn breakdown_metrics_have_a_scope_and_come_in_column_order() {
    let pages: Vec<&str> = breakdown_for(Scope::Pages).map(|m| m.name).collect();
    assert_eq!(
        pages,
        [
            "queueing_median_ms",
            "queueing_p95_ms",
            "ttfb_median_ms",
            "connect_ms",
            "dns_ms",
            "handshake_rtts",
            "onwire_mid",
            "onwire_peak"
        ]
    );
    let paint: Vec<&str> = breakdown_for(Scope::Paint).map(|m| m.name).collect();
    assert_eq!(
        paint,
        [
            "fcp_ms",
            "lcp_ms",
            "hero_ms",
            "speed_index_ms",
            "visual_complete_ms",
            "first_visual_change_ms",
            "cls"
        ]
    );
    let transfers: Vec<&str> = breakdown_for(Scope::Transfers).map(|m| m.name).collect();
    assert_eq!(transfers, ["goodput_mbit"]);
    let hol: Vec<&str> = breakdown_for(Scope::HeadOfLine).map(|m| m.name).collect();
    assert_eq!(
        hol,
        [
            "hol_blocked_bytes",
            "hol_blocked_ms",
            "hol_wall_ms",
            "hol_unblocked_bytes"
        ]
    );
    let round_trips: Vec<&str> = breakdown_for(Scope::RoundTrips).map(|m| m.name).collect();
    assert_eq!(
        round_trips,
        [
            "critical_rtts",
            "critical_rtt_ms",
            "critical_setup_rtts",
            "critical_lookups",
            "critical_requests",
            "critical_flight_rtts",
            "critical_server_ms",
            "critical_behind_ms",
            "critical_wire_ms",
            "critical_queue_ms",
            "critical_browser_ms",
            "critical_remainder_ms"
        ]
    );
    let order: Vec<&str> = breakdown_for(Scope::ResponseOrder)
        .map(|m| m.name)
        .collect();
    assert_eq!(
        order,
        [
            "order_inverted_pct",
            "order_contested_bytes",
            "urgent_done_ms"
        ]
    );
    let handshakes: Vec<&str> = breakdown_for(Scope::Handshakes).map(|m| m.name).collect();
    assert_eq!(
        handshakes,
        [
            "first_byte_rtts",
            "resumed_connections",
            "zero_rtt_connections",
            "early_requests"
        ]
    );
    let contention: Vec<&str> = breakdown_for(Scope::Contention).map(|m| m.name).collect();
    assert_eq!(
        contention,
        [
            "browser_cpu_ms",
            "browser_runq_ms",
            "server_cpu_ms",
            "server_runq_ms",
            "emulator_cpu_ms",
            "emulator_runq_ms",
            "others_cpu_ms",
            "siblings_cpu_ms"
        ]
    );
    let replay: Vec<&str> = breakdown_for(Scope::Replay).map(|m| m.name).collect();
    assert_eq!(
        replay,
        [
            "replay_replayed",
            "replay_missing",
            "replay_extra",
            "replay_connections",
            "replay_bytes",
            "replay_path",
            "replay_fidelity"
        ]
    );
    assert_eq!(breakdown().count(), 76);
}
