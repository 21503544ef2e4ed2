//! The terms of the round-trip accounting (`evidence::round_trips`) as metrics: the load's
//! (`critical_*`, scope `RoundTrips`) and each paint's along its render path (`fcp_*`,
//! `lcp_*`, scope `PaintRoundTrips`), Speed Index's and visual completeness's over the visual
//! changes (`si_*`, `vc_*`, the same scope).

use crate::evidence::metric::{metric, Better, CsvFormat, Metric, Precision, Scope, Unit};
use crate::evidence::run_record::RunRecord;

/// A term of the headline's round-trip accounting (`evidence::round_trips`): summarised per
/// series.
const fn round_trips(
    name: &'static str,
    label: &'static str,
    unit: Unit,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        breakdown: Some(Scope::RoundTrips),
        better: Better::Neither,
        precision: match unit {
            Unit::Rtts => Precision::Fine,
            _ => Precision::Plain,
        },
        ..metric(name, label, unit, derive)
    }
}

fn rt(r: &RunRecord, f: fn(&crate::evidence::round_trips::RoundTrips) -> f64) -> Option<f64> {
    r.round_trips.as_ref().map(f)
}

/// `k`: the round trips on the critical path (set-up, requests, flights).
pub static CRITICAL_RTTS: Metric = Metric {
    better: Better::Lower,
    ..round_trips("critical_rtts", "round trips (k)", Unit::Rtts, |r| {
        rt(r, |t| t.critical_rtts)
    })
};
/// The round trip the accounting counts in (the link's offered RTT).
pub static CRITICAL_RTT_MS: Metric = round_trips("critical_rtt_ms", "RTT (ms)", Unit::Ms, |r| {
    rt(r, |t| t.rtt_ms)
});
pub static CRITICAL_SETUP_RTTS: Metric =
    round_trips("critical_setup_rtts", "set-up RTTs", Unit::Rtts, |r| {
        rt(r, |t| t.setup_rtts)
    });
/// Name lookups on the path (`--dns resolver`), each a round trip to the resolver.
pub static CRITICAL_LOOKUPS: Metric = Metric {
    csv: CsvFormat::Int,
    ..round_trips("critical_lookups", "lookups", Unit::Count, |r| {
        rt(r, |t| t.lookups).filter(|n| *n > 0.0)
    })
};
pub static CRITICAL_REQUESTS: Metric = Metric {
    csv: CsvFormat::Int,
    ..round_trips(
        "critical_requests",
        "requests on the path",
        Unit::Count,
        |r| rt(r, |t| t.request_rtts),
    )
};
pub static CRITICAL_FLIGHT_RTTS: Metric =
    round_trips("critical_flight_rtts", "flight RTTs", Unit::Rtts, |r| {
        rt(r, |t| t.flight_rtts)
    });
pub static CRITICAL_SERVER_MS: Metric =
    round_trips("critical_server_ms", "server (ms)", Unit::Ms, |r| {
        rt(r, |t| t.server_ms)
    });
pub static CRITICAL_BEHIND_MS: Metric = round_trips(
    "critical_behind_ms",
    "behind other responses (ms)",
    Unit::Ms,
    |r| rt(r, |t| t.behind_ms),
);
pub static CRITICAL_WIRE_MS: Metric =
    round_trips("critical_wire_ms", "at the rate (ms)", Unit::Ms, |r| {
        rt(r, |t| t.wire_ms)
    });
pub static CRITICAL_QUEUE_MS: Metric =
    round_trips("critical_queue_ms", "queueing (ms)", Unit::Ms, |r| {
        rt(r, |t| t.queue_ms)
    });
pub static CRITICAL_BROWSER_MS: Metric = round_trips(
    "critical_browser_ms",
    "in the browser (ms)",
    Unit::Ms,
    |r| rt(r, |t| t.browser_ms),
);
pub static CRITICAL_REMAINDER_MS: Metric =
    round_trips("critical_remainder_ms", "unexplained (ms)", Unit::Ms, |r| {
        rt(r, |t| t.remainder_ms)
    });

/// A term of a paint's accounting (`paint_round_trips`): `$paint` is `fcp`, `lcp`,
/// `speed_index` or `visually_complete`, `$field` the [`crate::evidence::round_trips::RoundTrips`] field.
macro_rules! paint_term {
    ($static:ident, $name:literal, $label:literal, $unit:expr, $paint:ident, $field:ident) => {
        pub static $static: Metric = Metric {
            breakdown: Some(Scope::PaintRoundTrips),
            ..round_trips($name, $label, $unit, |r| {
                r.paint_round_trips
                    .as_ref()?
                    .$paint
                    .as_ref()
                    .map(|t| t.$field)
            })
        };
    };
}

paint_term!(
    FCP_RTT_MS,
    "fcp_rtt_ms",
    "FCP: RTT (ms)",
    Unit::Ms,
    fcp,
    rtt_ms
);
paint_term!(
    FCP_SETUP_RTTS,
    "fcp_setup_rtts",
    "FCP: set-up RTTs",
    Unit::Rtts,
    fcp,
    setup_rtts
);
paint_term!(
    FCP_REQUESTS,
    "fcp_requests",
    "FCP: requests on the path",
    Unit::Count,
    fcp,
    request_rtts
);
paint_term!(
    FCP_FLIGHT_RTTS,
    "fcp_flight_rtts",
    "FCP: flight RTTs",
    Unit::Rtts,
    fcp,
    flight_rtts
);
paint_term!(
    FCP_SERVER_MS,
    "fcp_server_ms",
    "FCP: server (ms)",
    Unit::Ms,
    fcp,
    server_ms
);
paint_term!(
    FCP_BEHIND_MS,
    "fcp_behind_ms",
    "FCP: behind other responses (ms)",
    Unit::Ms,
    fcp,
    behind_ms
);
paint_term!(
    FCP_WIRE_MS,
    "fcp_wire_ms",
    "FCP: at the rate (ms)",
    Unit::Ms,
    fcp,
    wire_ms
);
paint_term!(
    FCP_QUEUE_MS,
    "fcp_queue_ms",
    "FCP: queueing (ms)",
    Unit::Ms,
    fcp,
    queue_ms
);
paint_term!(
    FCP_BROWSER_MS,
    "fcp_browser_ms",
    "FCP: in the browser (ms)",
    Unit::Ms,
    fcp,
    browser_ms
);
paint_term!(
    FCP_REMAINDER_MS,
    "fcp_remainder_ms",
    "FCP: unexplained (ms)",
    Unit::Ms,
    fcp,
    remainder_ms
);
paint_term!(
    LCP_RTT_MS,
    "lcp_rtt_ms",
    "LCP: RTT (ms)",
    Unit::Ms,
    lcp,
    rtt_ms
);
paint_term!(
    LCP_SETUP_RTTS,
    "lcp_setup_rtts",
    "LCP: set-up RTTs",
    Unit::Rtts,
    lcp,
    setup_rtts
);
paint_term!(
    LCP_REQUESTS,
    "lcp_requests",
    "LCP: requests on the path",
    Unit::Count,
    lcp,
    request_rtts
);
paint_term!(
    LCP_FLIGHT_RTTS,
    "lcp_flight_rtts",
    "LCP: flight RTTs",
    Unit::Rtts,
    lcp,
    flight_rtts
);
paint_term!(
    LCP_SERVER_MS,
    "lcp_server_ms",
    "LCP: server (ms)",
    Unit::Ms,
    lcp,
    server_ms
);
paint_term!(
    LCP_BEHIND_MS,
    "lcp_behind_ms",
    "LCP: behind other responses (ms)",
    Unit::Ms,
    lcp,
    behind_ms
);
paint_term!(
    LCP_WIRE_MS,
    "lcp_wire_ms",
    "LCP: at the rate (ms)",
    Unit::Ms,
    lcp,
    wire_ms
);
paint_term!(
    LCP_QUEUE_MS,
    "lcp_queue_ms",
    "LCP: queueing (ms)",
    Unit::Ms,
    lcp,
    queue_ms
);
paint_term!(
    LCP_BROWSER_MS,
    "lcp_browser_ms",
    "LCP: in the browser (ms)",
    Unit::Ms,
    lcp,
    browser_ms
);
paint_term!(
    LCP_REMAINDER_MS,
    "lcp_remainder_ms",
    "LCP: unexplained (ms)",
    Unit::Ms,
    lcp,
    remainder_ms
);
paint_term!(
    SI_RTT_MS,
    "si_rtt_ms",
    "Speed Index: RTT (ms)",
    Unit::Ms,
    speed_index,
    rtt_ms
);
paint_term!(
    SI_SETUP_RTTS,
    "si_setup_rtts",
    "Speed Index: set-up RTTs",
    Unit::Rtts,
    speed_index,
    setup_rtts
);
paint_term!(
    SI_REQUESTS,
    "si_requests",
    "Speed Index: requests on the path",
    Unit::Count,
    speed_index,
    request_rtts
);
paint_term!(
    SI_FLIGHT_RTTS,
    "si_flight_rtts",
    "Speed Index: flight RTTs",
    Unit::Rtts,
    speed_index,
    flight_rtts
);
paint_term!(
    SI_SERVER_MS,
    "si_server_ms",
    "Speed Index: server (ms)",
    Unit::Ms,
    speed_index,
    server_ms
);
paint_term!(
    SI_BEHIND_MS,
    "si_behind_ms",
    "Speed Index: behind other responses (ms)",
    Unit::Ms,
    speed_index,
    behind_ms
);
paint_term!(
    SI_WIRE_MS,
    "si_wire_ms",
    "Speed Index: at the rate (ms)",
    Unit::Ms,
    speed_index,
    wire_ms
);
paint_term!(
    SI_QUEUE_MS,
    "si_queue_ms",
    "Speed Index: queueing (ms)",
    Unit::Ms,
    speed_index,
    queue_ms
);
paint_term!(
    SI_BROWSER_MS,
    "si_browser_ms",
    "Speed Index: in the browser (ms)",
    Unit::Ms,
    speed_index,
    browser_ms
);
paint_term!(
    SI_REMAINDER_MS,
    "si_remainder_ms",
    "Speed Index: unexplained (ms)",
    Unit::Ms,
    speed_index,
    remainder_ms
);
paint_term!(
    VC_RTT_MS,
    "vc_rtt_ms",
    "Visually Complete: RTT (ms)",
    Unit::Ms,
    visually_complete,
    rtt_ms
);
paint_term!(
    VC_SETUP_RTTS,
    "vc_setup_rtts",
    "Visually Complete: set-up RTTs",
    Unit::Rtts,
    visually_complete,
    setup_rtts
);
paint_term!(
    VC_REQUESTS,
    "vc_requests",
    "Visually Complete: requests on the path",
    Unit::Count,
    visually_complete,
    request_rtts
);
paint_term!(
    VC_FLIGHT_RTTS,
    "vc_flight_rtts",
    "Visually Complete: flight RTTs",
    Unit::Rtts,
    visually_complete,
    flight_rtts
);
paint_term!(
    VC_SERVER_MS,
    "vc_server_ms",
    "Visually Complete: server (ms)",
    Unit::Ms,
    visually_complete,
    server_ms
);
paint_term!(
    VC_BEHIND_MS,
    "vc_behind_ms",
    "Visually Complete: behind other responses (ms)",
    Unit::Ms,
    visually_complete,
    behind_ms
);
paint_term!(
    VC_WIRE_MS,
    "vc_wire_ms",
    "Visually Complete: at the rate (ms)",
    Unit::Ms,
    visually_complete,
    wire_ms
);
paint_term!(
    VC_QUEUE_MS,
    "vc_queue_ms",
    "Visually Complete: queueing (ms)",
    Unit::Ms,
    visually_complete,
    queue_ms
);
paint_term!(
    VC_BROWSER_MS,
    "vc_browser_ms",
    "Visually Complete: in the browser (ms)",
    Unit::Ms,
    visually_complete,
    browser_ms
);
paint_term!(
    VC_REMAINDER_MS,
    "vc_remainder_ms",
    "Visually Complete: unexplained (ms)",
    Unit::Ms,
    visually_complete,
    remainder_ms
);
