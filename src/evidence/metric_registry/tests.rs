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

fn names(scope: Scope) -> Vec<&'static str> {
    breakdown_for(scope).map(|m| m.name).collect()
}

#[test]
fn the_page_s_breakdown_metrics_come_in_column_order() {
    let pages = [
        "queueing_median_ms",
        "queueing_p95_ms",
        "ttfb_median_ms",
        "connect_ms",
        "dns_ms",
        "handshake_rtts",
        "onwire_mid",
        "onwire_peak",
    ];
    assert_eq!(names(Scope::Pages), pages);
    let paint = [
        "fcp_ms",
        "lcp_ms",
        "hero_ms",
        "speed_index_ms",
        "visual_complete_ms",
        "first_visual_change_ms",
        "cls",
    ];
    assert_eq!(names(Scope::Paint), paint);
    assert_eq!(names(Scope::Transfers), ["goodput_mbit"]);
    let round_trips = [
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
        "critical_remainder_ms",
    ];
    assert_eq!(names(Scope::RoundTrips), round_trips);
    // Each paint's terms: the load's (but k and the lookups), prefixed, FCP's then LCP's,
    // then Speed Index's and visual completeness's.
    let terms = &round_trips[1..];
    let paint_terms: Vec<String> = ["fcp", "lcp", "si", "vc"]
        .iter()
        .flat_map(|p| {
            terms
                .iter()
                .filter(|t| **t != "critical_lookups")
                .map(move |t| t.replace("critical", p))
        })
        .collect();
    assert_eq!(names(Scope::PaintRoundTrips), paint_terms);
}

#[test]
fn the_wire_s_and_the_machine_s_breakdown_metrics_come_in_column_order() {
    let hol = [
        "hol_blocked_bytes",
        "hol_blocked_ms",
        "hol_wall_ms",
        "hol_unblocked_bytes",
    ];
    assert_eq!(names(Scope::HeadOfLine), hol);
    let order = [
        "order_inverted_pct",
        "order_contested_bytes",
        "urgent_done_ms",
    ];
    assert_eq!(names(Scope::ResponseOrder), order);
    let handshakes = [
        "first_byte_rtts",
        "resumed_connections",
        "zero_rtt_connections",
        "early_requests",
    ];
    assert_eq!(names(Scope::Handshakes), handshakes);
    let contention = [
        "browser_cpu_ms",
        "browser_runq_ms",
        "server_cpu_ms",
        "server_runq_ms",
        "emulator_cpu_ms",
        "emulator_runq_ms",
        "others_cpu_ms",
        "siblings_cpu_ms",
        "browser_busiest_pct",
        "server_busiest_pct",
        "emulator_busiest_pct",
        "cpu_benchmark_ms",
        "device_slowdown",
    ];
    assert_eq!(names(Scope::Contention), contention);
    let replay = [
        "replay_replayed",
        "replay_missing",
        "replay_extra",
        "replay_connections",
        "replay_bytes",
        "replay_path",
        "replay_fidelity",
    ];
    assert_eq!(names(Scope::Replay), replay);
    assert_eq!(breakdown().count(), 101);
}
