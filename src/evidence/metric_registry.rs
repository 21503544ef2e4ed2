//! The per-run metric registry: every number a run contributes — the page metrics, what the
//! link and the server's transport did, the machine and the browser's overhead — is one entry
//! here (name, unit, which way is better, how it is derived from the record, how it is written,
//! whether the statistics summarise it and the report shows it). The `runs.csv` metric columns,
//! the results reader's `RunRow` values, the per-series breakdown in the summary,
//! `summary.csv`, the report's breakdown table and the terminal summary all iterate this table.
//!
//! Adding a metric: its field and derivation where the evidence is (`metrics.rs` for what the
//! browser saw), then one `static` below and its place in [`ALL`].

use crate::evidence::run_record::RunRecord;

pub(crate) use crate::evidence::metric::metric;
pub use crate::evidence::metric::{Better, CsvFormat, Metric, Precision, Scope, Source, Unit};

mod round_trip_terms;
pub use round_trip_terms::*;

fn count(v: usize) -> Option<f64> {
    Some(v as f64)
}

fn link(rec: &RunRecord, f: fn(&crate::evidence::run_record::LinkSummary) -> f64) -> Option<f64> {
    rec.link.as_ref().map(f)
}

fn transport(rec: &RunRecord, f: fn(&crate::servers::TransportSummary) -> f64) -> Option<f64> {
    rec.transport.as_ref().map(f)
}

pub static COMPLETION_MS: Metric = Metric {
    headline: true,
    ..metric("completion_ms", "completion (ms)", Unit::Ms, |r| {
        r.metrics.completion_ms
    })
};
pub static LOAD_EVENT_END_MS: Metric = Metric {
    headline: true,
    ..metric("load_event_end_ms", "loadEventEnd (ms)", Unit::Ms, |r| {
        r.metrics.load_event_end_ms
    })
};
/// A paint time: may be a report's headline, summarised for pages.
const fn paint(
    name: &'static str,
    label: &'static str,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        headline: true,
        breakdown: Some(Scope::Paint),
        ..metric(name, label, Unit::Ms, derive)
    }
}

pub static FCP_MS: Metric = paint("fcp_ms", "FCP (ms)", |r| r.metrics.fcp_ms);
pub static LCP_MS: Metric = paint("lcp_ms", "LCP (ms)", |r| r.metrics.lcp_ms);
pub static HERO_MS: Metric = Metric {
    headline: false,
    ..paint("hero_ms", "hero element (ms)", |r| r.metrics.hero_ms)
};
pub static SPEED_INDEX_MS: Metric = paint("speed_index_ms", "Speed Index (ms)", |r| {
    r.metrics.speed_index_ms
});
pub static VISUAL_COMPLETE_MS: Metric = Metric {
    headline: false,
    ..paint("visual_complete_ms", "visually complete (ms)", |r| {
        r.metrics.visual_complete_ms
    })
};
pub static FIRST_VISUAL_CHANGE_MS: Metric = Metric {
    headline: false,
    ..paint("first_visual_change_ms", "first visual change (ms)", |r| {
        r.metrics.first_visual_change_ms
    })
};
pub static CLS: Metric = Metric {
    breakdown: Some(Scope::Paint),
    csv: CsvFormat::Fixed(4),
    precision: Precision::Fine,
    ..metric("cls", "CLS", Unit::Score, |r| r.metrics.cls)
};
pub static QUEUEING_MEDIAN_MS: Metric = Metric {
    breakdown: Some(Scope::Pages),
    ..metric(
        "queueing_median_ms",
        "queueing median (ms)",
        Unit::Ms,
        |r| r.metrics.queueing_median_ms,
    )
};
pub static QUEUEING_P95_MS: Metric = Metric {
    breakdown: Some(Scope::Pages),
    ..metric("queueing_p95_ms", "queueing p95 (ms)", Unit::Ms, |r| {
        r.metrics.queueing_p95_ms
    })
};
pub static TTFB_MEDIAN_MS: Metric = Metric {
    breakdown: Some(Scope::Pages),
    ..metric("ttfb_median_ms", "TTFB median (ms)", Unit::Ms, |r| {
        r.metrics.ttfb_median_ms
    })
};
pub static CONNECT_MS: Metric = Metric {
    breakdown: Some(Scope::Pages),
    ..metric("connect_ms", "connect (ms)", Unit::Ms, |r| {
        r.metrics.nav_connect_ms
    })
};
pub static DNS_MS: Metric = Metric {
    breakdown: Some(Scope::Pages),
    ..metric("dns_ms", "lookup (ms)", Unit::Ms, |r| r.metrics.nav_dns_ms)
};
pub static HANDSHAKE_RTTS: Metric = Metric {
    breakdown: Some(Scope::Pages),
    precision: Precision::Fine,
    ..metric("handshake_rtts", "handshake RTTs", Unit::Rtts, |r| {
        r.metrics.handshake_rtts
    })
};
/// In the returning visitors' table (the handshakes' scope), not in the page breakdown.
pub static FIRST_BYTE_RTTS: Metric = Metric {
    breakdown: Some(Scope::Handshakes),
    precision: Precision::Fine,
    ..metric("first_byte_rtts", "first byte RTTs", Unit::Rtts, |r| {
        r.metrics.first_byte_rtts
    })
};
pub static ONWIRE_MID: Metric = Metric {
    breakdown: Some(Scope::Pages),
    better: Better::Neither,
    csv: CsvFormat::Int,
    ..metric("onwire_mid", "on-wire at mid-window", Unit::Count, |r| {
        r.metrics.onwire_mid.map(|n| n as f64)
    })
};
pub static ONWIRE_PEAK: Metric = Metric {
    breakdown: Some(Scope::Pages),
    better: Better::Neither,
    csv: CsvFormat::Int,
    ..metric("onwire_peak", "on-wire peak", Unit::Count, |r| {
        r.metrics.onwire_peak.map(|n| n as f64)
    })
};
pub static RESOURCES: Metric = Metric {
    better: Better::Neither,
    csv: CsvFormat::Int,
    ..metric("resources", "resources", Unit::Count, |r| {
        count(r.metrics.resources)
    })
};
pub static CONNECTIONS: Metric = Metric {
    better: Better::Neither,
    csv: CsvFormat::Int,
    // Known where the engine's network view tells connections (not Firefox's BiDi).
    ..metric("connections", "connections", Unit::Count, |r| {
        r.engine_tells
            .as_ref()
            .is_some_and(|e| e.connections)
            .then_some(r.metrics.connections as f64)
    })
};
pub static GOODPUT_MBIT: Metric = Metric {
    breakdown: Some(Scope::Transfers),
    better: Better::Higher,
    ..metric("goodput_mbit", "goodput (Mbit/s)", Unit::MbitPerS, |r| {
        r.metrics.goodput_mbit
    })
};
pub static TRANSFER_MS: Metric = metric("transfer_ms", "transfer (ms)", Unit::Ms, |r| {
    r.metrics.transfer_ms
});

/// A link counter: integer, from the emulator, a description rather than a goal.
const fn link_count(
    name: &'static str,
    label: &'static str,
    unit: Unit,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        better: Better::Neither,
        source: Source::Link,
        csv: CsvFormat::Int,
        ..metric(name, label, unit, derive)
    }
}

/// A link figure with three decimals.
const fn link_figure(
    name: &'static str,
    label: &'static str,
    unit: Unit,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        better: Better::Neither,
        source: Source::Link,
        ..metric(name, label, unit, derive)
    }
}

pub static BYTES_UP: Metric = link_count("bytes_up", "bytes up", Unit::Bytes, |r| {
    link(r, |l| l.bytes_up as f64)
});
pub static BYTES_DOWN: Metric = link_count("bytes_down", "bytes down", Unit::Bytes, |r| {
    link(r, |l| l.bytes_down as f64)
});
pub static PACKETS_UP: Metric = link_count("packets_up", "packets up", Unit::Count, |r| {
    link(r, |l| l.packets_up as f64)
});
pub static PACKETS_DOWN: Metric = link_count("packets_down", "packets down", Unit::Count, |r| {
    link(r, |l| l.packets_down as f64)
});
pub static EMU_DROPS_UP: Metric =
    link_count("emu_drops_up", "emulator drops up", Unit::Count, |r| {
        link(r, |l| l.drops_up as f64)
    });
pub static EMU_DROPS_DOWN: Metric =
    link_count("emu_drops_down", "emulator drops down", Unit::Count, |r| {
        link(r, |l| l.drops_down as f64)
    });
pub static LATENESS_P99_UP_US: Metric = link_figure(
    "lateness_p99_up_us",
    "release lateness p99 up (µs)",
    Unit::Us,
    |r| link(r, |l| l.lateness_p99_up_us),
);
pub static LATENESS_P99_DOWN_US: Metric = link_figure(
    "lateness_p99_down_us",
    "release lateness p99 down (µs)",
    Unit::Us,
    |r| link(r, |l| l.lateness_p99_down_us),
);
fn behind(rec: &RunRecord, f: fn(&crate::link::behind::BehindSummary) -> f64) -> Option<f64> {
    let s = rec.link_stats.as_ref()?.stats.as_ref()?;
    Some(f(&s.up.behind).max(f(&s.down.behind)))
}

/// How long the emulator was behind its schedule during the load (the direction that was
/// behind longer): what its lateness can have added to the load (`link::behind`).
pub static BEHIND_MS: Metric = link_figure(
    "behind_ms",
    "emulator behind schedule (ms)",
    Unit::Ms,
    |r| behind(r, |b| b.ms),
);
/// Its longest spell.
pub static BEHIND_LONGEST_MS: Metric = link_figure(
    "behind_longest_ms",
    "longest spell behind schedule (ms)",
    Unit::Ms,
    |r| behind(r, |b| b.longest_ms),
);
fn offered(
    rec: &RunRecord,
    dir: fn(&crate::config::capacity::TraceWindow) -> Option<crate::config::capacity::Offered>,
) -> Option<f64> {
    rec.trace.as_ref().and_then(dir).map(|o| o.mbit)
}

/// A trace profile's: the mean capacity its downlink trace offered during the load (from the
/// round's start in the trace, `capacity::TraceStart`).
pub static OFFERED_DOWN_MBIT: Metric = Metric {
    breakdown: Some(Scope::Trace),
    ..link_figure(
        "offered_down_mbit",
        "capacity offered down (Mbit/s)",
        Unit::MbitPerS,
        |r| offered(r, |t| t.down),
    )
};
pub static OFFERED_UP_MBIT: Metric = Metric {
    breakdown: Some(Scope::Trace),
    ..link_figure(
        "offered_up_mbit",
        "capacity offered up (Mbit/s)",
        Unit::MbitPerS,
        |r| offered(r, |t| t.up),
    )
};
/// Where the load started in the trace (the downlink's, else the uplink's), ms from its start.
pub static TRACE_OFFSET_MS: Metric = link_figure(
    "trace_offset_ms",
    "start in the trace (ms)",
    Unit::Ms,
    |r| {
        let t = r.trace.as_ref()?;
        t.down.or(t.up).map(|o| o.offset_ms)
    },
);
pub static MODEL_RTT_MS: Metric = link_figure("model_rtt_ms", "model RTT (ms)", Unit::Ms, |r| {
    link(r, |l| l.model_rtt_ms)
});
pub static ACHIEVED_RTT_MS: Metric =
    link_figure("achieved_rtt_ms", "achieved RTT (ms)", Unit::Ms, |r| {
        link(r, |l| l.achieved_rtt_ms)
    });
pub static OFFERED_RTT_MS: Metric =
    link_figure("offered_rtt_ms", "offered RTT (ms)", Unit::Ms, |r| {
        r.link.as_ref().and_then(|l| l.offered_rtt_ms)
    });
pub static ACHIEVED_LOSS_UP_PCT: Metric =
    link_figure("achieved_loss_up_pct", "loss up (%)", Unit::Percent, |r| {
        link(r, |l| l.achieved_loss_up_pct)
    });
pub static ACHIEVED_LOSS_DOWN_PCT: Metric = link_figure(
    "achieved_loss_down_pct",
    "loss down (%)",
    Unit::Percent,
    |r| link(r, |l| l.achieved_loss_down_pct),
);
pub static TUN_TX_DROPPED: Metric =
    link_count("tun_tx_dropped", "TUN queue drops", Unit::Count, |r| {
        link(r, |l| l.tun_tx_dropped as f64)
    });

/// The link's direction stats of a run.
fn down_stats(r: &RunRecord) -> Option<&crate::link::DirectionStats> {
    Some(&r.link_stats.as_ref()?.stats.as_ref()?.down)
}

/// Real networks (`disruption`, the bottleneck's queue): per run, not summarised.
pub static STALL_MS: Metric = link_figure("stall_ms", "longest stall (ms)", Unit::Ms, |r| {
    r.disruption.as_ref()?.stall.map(|s| s.ms)
});
pub static QUEUE_DELAY_DOWN_MS: Metric = link_figure(
    "queue_delay_down_ms",
    "queue delay down (ms)",
    Unit::Ms,
    |r| down_stats(r)?.queue_delay.map(|q| q.median_us / 1e3),
);
pub static AQM_DROPS_DOWN: Metric =
    link_count("aqm_drops_down", "AQM drops down", Unit::Count, |r| {
        down_stats(r)
            .filter(|d| d.queue_delay.is_some())
            .map(|d| d.dropped_aqm as f64)
    });
pub static CROSS_BYTES: Metric = link_count("cross_bytes", "competing bytes", Unit::Bytes, |r| {
    let d = r.disruption.as_ref()?;
    (!d.cross.is_empty()).then(|| d.cross.iter().map(|c| c.bytes as f64).sum())
});

/// Head-of-line blocking from the link's packets (`capture::hol`): summarised per series.
const fn hol(
    name: &'static str,
    label: &'static str,
    unit: Unit,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        source: Source::Link,
        breakdown: Some(Scope::HeadOfLine),
        ..metric(name, label, unit, derive)
    }
}

/// A handshake count from the link's packets: a description, summarised per series.
const fn handshakes(
    name: &'static str,
    label: &'static str,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        source: Source::Link,
        breakdown: Some(Scope::Handshakes),
        better: Better::Neither,
        csv: CsvFormat::Int,
        ..metric(name, label, Unit::Count, derive)
    }
}

/// A replayed site's closeness to its recording (`evidence::fidelity`), per run.
const fn replay(
    name: &'static str,
    label: &'static str,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        breakdown: Some(Scope::Replay),
        better: Better::Neither,
        csv: CsvFormat::Int,
        ..metric(name, label, Unit::Count, derive)
    }
}

pub static REPLAY_REPLAYED: Metric = replay("replay_replayed", "recorded requests replayed", |r| {
    r.replay_fidelity.as_ref().map(|f| f.replayed as f64)
});
pub static REPLAY_MISSING: Metric = replay("replay_missing", "recorded requests not made", |r| {
    r.replay_fidelity.as_ref().map(|f| f.missing as f64)
});
pub static REPLAY_EXTRA: Metric = replay("replay_extra", "requests the recording lacks", |r| {
    r.replay_fidelity.as_ref().map(|f| f.extra as f64)
});
/// The engine's connections, for the replays only (beside the recording's).
pub static REPLAY_CONNECTIONS: Metric = replay("replay_connections", "connections", |r| {
    r.replay_fidelity.as_ref()?;
    (CONNECTIONS.derive)(r)
});
/// Body bytes the server sent ÷ the recording's (all origins).
pub static REPLAY_BYTES: Metric = Metric {
    unit: Unit::Score,
    csv: CsvFormat::Fixed(3),
    ..replay("replay_bytes", "bytes ÷ recorded", |r| {
        r.replay_fidelity.as_ref()?.bytes_ratio()
    })
};
/// The share of the recorded critical path's steps on the replay's.
pub static REPLAY_PATH: Metric = Metric {
    better: Better::Higher,
    unit: Unit::Score,
    csv: CsvFormat::Fixed(3),
    ..replay("replay_path", "recorded critical path shared", |r| {
        r.replay_fidelity.as_ref()?.path_share()
    })
};
pub static REPLAY_FIDELITY: Metric = Metric {
    better: Better::Higher,
    unit: Unit::Score,
    csv: CsvFormat::Fixed(3),
    ..replay("replay_fidelity", "fidelity", |r| {
        r.replay_fidelity.as_ref().map(|f| f.score())
    })
};

/// Connections whose TLS handshake resumed a session (the ServerHello took the ticket).
pub static RESUMED_CONNECTIONS: Metric =
    handshakes("resumed_connections", "resumed connections", |r| {
        r.handshakes.as_ref().map(|h| h.resumed() as f64)
    });
/// Connections whose 0-RTT data the server accepted.
pub static ZERO_RTT_CONNECTIONS: Metric =
    handshakes("zero_rtt_connections", "0-RTT connections", |r| {
        r.handshakes.as_ref().map(|h| h.zero_rtt_accepted() as f64)
    });
/// Requests sent in 0-RTT, before the handshake completed.
pub static EARLY_REQUESTS: Metric = handshakes("early_requests", "requests in 0-RTT", |r| {
    r.handshakes.as_ref().map(|h| h.early_requests() as f64)
});

pub static HOL_BLOCKED_BYTES: Metric = Metric {
    csv: CsvFormat::Int,
    ..hol("hol_blocked_bytes", "HOL-blocked bytes", Unit::Bytes, |r| {
        r.hol.as_ref().map(|h| h.blocked_bytes() as f64)
    })
};
pub static HOL_BLOCKED_MS: Metric = hol("hol_blocked_ms", "HOL stall (ms)", Unit::Ms, |r| {
    r.hol.as_ref().map(|h| h.blocked_ms())
});
/// The wall time during which any byte waited (parallel waits once).
pub static HOL_WALL_MS: Metric = hol("hol_wall_ms", "HOL wall time (ms)", Unit::Ms, |r| {
    r.hol.as_ref().map(|h| h.blocked_wall_ms())
});
/// QUIC: bytes of other streams that passed a waiting stream (TCP would have held them).
pub static HOL_UNBLOCKED_BYTES: Metric = Metric {
    csv: CsvFormat::Int,
    better: Better::Neither,
    ..hol(
        "hol_unblocked_bytes",
        "bytes past a hole",
        Unit::Bytes,
        |r| r.hol.as_ref().map(|h| h.unblocked_bytes() as f64),
    )
};

/// The server's response order from the wire (`capture::order`): summarised per series.
const fn order(
    name: &'static str,
    label: &'static str,
    unit: Unit,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        source: Source::Link,
        breakdown: Some(Scope::ResponseOrder),
        ..metric(name, label, unit, derive)
    }
}

/// Of the body bytes sent while a response of another urgency waited, the share sent while a
/// more urgent one waited (0: strictly by urgency; round-robin over n: about 1 − 1/n).
pub static ORDER_INVERTED_PCT: Metric = Metric {
    csv: CsvFormat::Fixed(1),
    ..order(
        "order_inverted_pct",
        "sent against urgency (%)",
        Unit::Percent,
        |r| r.wire.as_ref()?.order.inverted_share.map(|s| s * 100.0),
    )
};
/// The body bytes the server had a choice about (sent while a response of another urgency
/// waited).
pub static ORDER_CONTESTED_BYTES: Metric = Metric {
    csv: CsvFormat::Int,
    better: Better::Neither,
    ..order(
        "order_contested_bytes",
        "contested bytes",
        Unit::Bytes,
        |r| {
            r.wire
                .as_ref()
                .map(|w| w.order.contested_bytes as f64)
                .filter(|b| *b > 0.0)
        },
    )
};
/// When the last body byte of the most urgent responses (u=0: Chromium's render-blocking
/// stylesheets, fonts) left the server, on the navigation's clock.
pub static URGENT_DONE_MS: Metric = order(
    "urgent_done_ms",
    "most urgent sent by (ms)",
    Unit::Ms,
    |r| {
        let w = r.wire.as_ref()?;
        let u0 = w.order.by_urgency.iter().find(|u| u.urgency == 0)?;
        Some(u0.last_byte_ms? - w.navigation_ms?)
    },
);

/// A transport counter: integer, from the server.
const fn transport_count(
    name: &'static str,
    label: &'static str,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        source: Source::Transport,
        csv: CsvFormat::Int,
        ..metric(name, label, Unit::Count, derive)
    }
}

pub static TCP_RETRANSMITS: Metric = transport_count("tcp_retransmits", "TCP retransmits", |r| {
    transport(r, |t| t.tcp_retransmits as f64)
});
pub static QUIC_LOST_PACKETS: Metric =
    transport_count("quic_lost_packets", "QUIC lost packets", |r| {
        transport(r, |t| t.quic_lost_packets as f64)
    });
pub static QUIC_CONGESTION_EVENTS: Metric =
    transport_count("quic_congestion_events", "QUIC congestion events", |r| {
        transport(r, |t| t.quic_congestion_events as f64)
    });
pub static SERVER_RTT_MS: Metric = Metric {
    source: Source::Transport,
    better: Better::Neither,
    ..metric("server_rtt_ms", "server's RTT (ms)", Unit::Ms, |r| {
        r.transport.as_ref().and_then(|t| t.server_rtt_ms)
    })
};
pub static CWND_BYTES: Metric = Metric {
    better: Better::Neither,
    ..transport_count("cwnd_bytes", "cwnd (bytes)", |r| {
        r.transport
            .as_ref()
            .and_then(|t| t.cwnd_bytes)
            .map(|c| c as f64)
    })
};

/// A machine figure.
const fn machine(
    name: &'static str,
    label: &'static str,
    unit: Unit,
    decimals: usize,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        source: Source::Machine,
        csv: CsvFormat::Fixed(decimals),
        ..metric(name, label, unit, derive)
    }
}

pub static LOAD1: Metric = machine("load1", "load average", Unit::Load, 2, |r| {
    Some(r.machine.load1)
});
pub static STEAL_MS: Metric = machine("steal_ms", "CPU steal (ms)", Unit::Ms, 1, |r| {
    Some(r.machine.steal_ms)
});
pub static STEAL_PCT: Metric = machine("steal_pct", "CPU steal (%)", Unit::Percent, 3, |r| {
    Some(r.machine.steal_pct)
});
pub static LAUNCH_MS: Metric = machine("launch_ms", "browser launch (ms)", Unit::Ms, 1, |r| {
    Some(r.overhead.launch_ms)
});
pub static SETTLE_MS: Metric = machine("settle_ms", "browser settle (ms)", Unit::Ms, 1, |r| {
    Some(r.overhead.settle_ms)
});
pub static TEARDOWN_MS: Metric =
    machine("teardown_ms", "browser teardown (ms)", Unit::Ms, 1, |r| {
        Some(r.overhead.teardown_ms)
    });
pub static WALL_MS: Metric = machine("wall_ms", "run wall time (ms)", Unit::Ms, 1, |r| {
    Some(r.wall_ms)
});
/// How long the run waited for its browser: its whole launch and settle when it started at the
/// run's start, what was left of them when it started during the previous run's teardown.
pub static BROWSER_WAIT_MS: Metric = machine(
    "browser_wait_ms",
    "wait for the browser (ms)",
    Unit::Ms,
    1,
    |r| Some(r.overhead.wait_ms),
);
/// 1 when the browser ran as an unprivileged user with its sandbox on (seen in /proc after it
/// settled), 0 when not (`--no-browser-sandbox`, or a sandbox that did not come up).
pub static BROWSER_SANDBOXED: Metric = machine(
    "browser_sandboxed",
    "browser sandboxed",
    Unit::Count,
    0,
    |r| {
        r.browser_confinement
            .as_ref()
            .map(|c| f64::from(u8::from(c.sandboxed())))
    },
);

/// A contention figure: summarised per series.
const fn contention(
    name: &'static str,
    label: &'static str,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        breakdown: Some(Scope::Contention),
        ..machine(name, label, Unit::Ms, 1, derive)
    }
}

fn usage(
    rec: &RunRecord,
    side: fn(&crate::support::contention::Contention) -> Option<crate::support::contention::Usage>,
    value: fn(&crate::support::contention::Usage) -> f64,
) -> Option<f64> {
    rec.contention.as_ref().and_then(side).map(|u| value(&u))
}

/// CPU time of the browser's processes from the mark to the end of the load.
pub static BROWSER_CPU_MS: Metric = contention("browser_cpu_ms", "browser CPU (ms)", |r| {
    usage(r, |c| Some(c.browser), |u| u.cpu_ms)
});
/// Time the browser's threads were runnable but waited for a CPU (summed over threads).
pub static BROWSER_RUNQ_MS: Metric =
    contention("browser_runq_ms", "browser waited for a CPU (ms)", |r| {
        usage(r, |c| Some(c.browser), |u| u.runq_ms)
    });
pub static SERVER_CPU_MS: Metric = contention("server_cpu_ms", "server CPU (ms)", |r| {
    usage(r, |c| c.server, |u| u.cpu_ms)
});
pub static SERVER_RUNQ_MS: Metric =
    contention("server_runq_ms", "server waited for a CPU (ms)", |r| {
        usage(r, |c| c.server, |u| u.runq_ms)
    });
pub static EMULATOR_CPU_MS: Metric = contention("emulator_cpu_ms", "emulator CPU (ms)", |r| {
    usage(r, |c| c.emulator, |u| u.cpu_ms)
});
pub static EMULATOR_RUNQ_MS: Metric =
    contention("emulator_runq_ms", "emulator waited for a CPU (ms)", |r| {
        usage(r, |c| c.emulator, |u| u.runq_ms)
    });
/// CPU time of everything else on the machine (other processes, kernel threads) in the same
/// window: what a busy machine shows.
pub static OTHERS_CPU_MS: Metric = contention("others_cpu_ms", "others' CPU (ms)", |r| {
    r.contention.as_ref().map(|c| c.others_cpu_ms)
});
/// CPU time of pagebench's other lanes' browsers and reference servers in the same window
/// (`--jobs`; 0 when the run had the machine alone): what sharing it cost, kept apart from
/// others' so a shared run is not called busy for its own siblings.
pub static SIBLINGS_CPU_MS: Metric = Metric {
    better: Better::Neither,
    ..contention("siblings_cpu_ms", "other lanes' CPU (ms)", |r| {
        r.contention.as_ref().map(|c| c.siblings_cpu_ms)
    })
};
/// 1 when the run met a busy machine (`contention::Contention::disturbance`), else 0.
pub static DISTURBED: Metric = Metric {
    better: Better::Lower,
    csv: CsvFormat::Int,
    ..machine("disturbed", "met a busy machine", Unit::Count, 0, |r| {
        r.contention
            .as_ref()
            .map(|c| f64::from(u8::from(c.disturbance().is_some())))
    })
};

/// A side's busiest thread's share of the run's window (%): a thread near 100 % ran on a core
/// for the whole load and set its pace (`evidence::cpu_pace`).
const fn busiest(
    name: &'static str,
    label: &'static str,
    derive: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        better: Better::Neither,
        breakdown: Some(Scope::Contention),
        ..machine(name, label, Unit::Percent, 1, derive)
    }
}

fn busiest_pct(
    rec: &RunRecord,
    side: fn(&crate::support::contention::Contention) -> Option<f64>,
) -> Option<f64> {
    let c = rec.contention.as_ref()?;
    (c.window_ms > 0.0).then_some(())?;
    side(c).map(|ms| 100.0 * ms / c.window_ms)
}

/// The browser's busiest thread (of any of its processes).
pub static BROWSER_BUSIEST_PCT: Metric = busiest(
    "browser_busiest_pct",
    "browser's busiest thread (% of the load)",
    |r| {
        busiest_pct(r, |c| {
            c.browser_processes
                .iter()
                .map(|p| p.usage.busiest_thread_ms)
                .fold(c.browser.busiest_thread_ms, f64::max)
                .into()
        })
    },
);
pub static SERVER_BUSIEST_PCT: Metric = busiest(
    "server_busiest_pct",
    "server's busiest thread (% of the load)",
    |r| busiest_pct(r, |c| c.server.map(|u| u.busiest_thread_ms)),
);
pub static EMULATOR_BUSIEST_PCT: Metric = busiest(
    "emulator_busiest_pct",
    "emulator's thread (% of the load)",
    |r| busiest_pct(r, |c| c.emulator.map(|u| u.busiest_thread_ms)),
);
/// The page's fixed JavaScript CPU benchmark after the load (devices compared): a device's
/// slowdown in an engine is its series' median over desktop's.
pub static CPU_BENCHMARK_MS: Metric = Metric {
    better: Better::Neither,
    breakdown: Some(Scope::Contention),
    ..machine(
        "cpu_benchmark_ms",
        "page CPU benchmark (ms)",
        Unit::Ms,
        1,
        |r| r.cpu_benchmarks.as_ref().and_then(|b| b.js_ms),
    )
};
/// The native CPU benchmark on the run's device ÷ free, side by side before the run.
pub static DEVICE_SLOWDOWN: Metric = Metric {
    better: Better::Neither,
    breakdown: Some(Scope::Contention),
    ..machine(
        "device_slowdown",
        "device's native slowdown (×)",
        Unit::Score,
        2,
        |r| {
            r.cpu_benchmarks
                .as_ref()
                .and_then(|b| b.native)
                .map(|n| n.achieved_slowdown)
        },
    )
};

/// Every metric, in `runs.csv` column order.
pub static ALL: &[&Metric] = &[
    &COMPLETION_MS,
    &LOAD_EVENT_END_MS,
    &FCP_MS,
    &LCP_MS,
    &HERO_MS,
    &SPEED_INDEX_MS,
    &VISUAL_COMPLETE_MS,
    &FIRST_VISUAL_CHANGE_MS,
    &CLS,
    &QUEUEING_MEDIAN_MS,
    &QUEUEING_P95_MS,
    &TTFB_MEDIAN_MS,
    &CONNECT_MS,
    &DNS_MS,
    &HANDSHAKE_RTTS,
    &FIRST_BYTE_RTTS,
    &ONWIRE_MID,
    &ONWIRE_PEAK,
    &RESOURCES,
    &CONNECTIONS,
    &GOODPUT_MBIT,
    &TRANSFER_MS,
    &BYTES_UP,
    &BYTES_DOWN,
    &PACKETS_UP,
    &PACKETS_DOWN,
    &EMU_DROPS_UP,
    &EMU_DROPS_DOWN,
    &LATENESS_P99_UP_US,
    &LATENESS_P99_DOWN_US,
    &BEHIND_MS,
    &BEHIND_LONGEST_MS,
    &OFFERED_DOWN_MBIT,
    &OFFERED_UP_MBIT,
    &TRACE_OFFSET_MS,
    &MODEL_RTT_MS,
    &ACHIEVED_RTT_MS,
    &OFFERED_RTT_MS,
    &ACHIEVED_LOSS_UP_PCT,
    &ACHIEVED_LOSS_DOWN_PCT,
    &TUN_TX_DROPPED,
    &STALL_MS,
    &QUEUE_DELAY_DOWN_MS,
    &AQM_DROPS_DOWN,
    &CROSS_BYTES,
    &CRITICAL_RTTS,
    &CRITICAL_RTT_MS,
    &CRITICAL_SETUP_RTTS,
    &CRITICAL_LOOKUPS,
    &CRITICAL_REQUESTS,
    &CRITICAL_FLIGHT_RTTS,
    &CRITICAL_SERVER_MS,
    &CRITICAL_BEHIND_MS,
    &CRITICAL_WIRE_MS,
    &CRITICAL_QUEUE_MS,
    &CRITICAL_BROWSER_MS,
    &CRITICAL_REMAINDER_MS,
    &FCP_RTT_MS,
    &FCP_SETUP_RTTS,
    &FCP_REQUESTS,
    &FCP_FLIGHT_RTTS,
    &FCP_SERVER_MS,
    &FCP_BEHIND_MS,
    &FCP_WIRE_MS,
    &FCP_QUEUE_MS,
    &FCP_BROWSER_MS,
    &FCP_REMAINDER_MS,
    &LCP_RTT_MS,
    &LCP_SETUP_RTTS,
    &LCP_REQUESTS,
    &LCP_FLIGHT_RTTS,
    &LCP_SERVER_MS,
    &LCP_BEHIND_MS,
    &LCP_WIRE_MS,
    &LCP_QUEUE_MS,
    &LCP_BROWSER_MS,
    &LCP_REMAINDER_MS,
    &SI_RTT_MS,
    &SI_SETUP_RTTS,
    &SI_REQUESTS,
    &SI_FLIGHT_RTTS,
    &SI_SERVER_MS,
    &SI_BEHIND_MS,
    &SI_WIRE_MS,
    &SI_QUEUE_MS,
    &SI_BROWSER_MS,
    &SI_REMAINDER_MS,
    &VC_RTT_MS,
    &VC_SETUP_RTTS,
    &VC_REQUESTS,
    &VC_FLIGHT_RTTS,
    &VC_SERVER_MS,
    &VC_BEHIND_MS,
    &VC_WIRE_MS,
    &VC_QUEUE_MS,
    &VC_BROWSER_MS,
    &VC_REMAINDER_MS,
    &HOL_BLOCKED_BYTES,
    &HOL_BLOCKED_MS,
    &HOL_WALL_MS,
    &HOL_UNBLOCKED_BYTES,
    &ORDER_INVERTED_PCT,
    &ORDER_CONTESTED_BYTES,
    &URGENT_DONE_MS,
    &RESUMED_CONNECTIONS,
    &ZERO_RTT_CONNECTIONS,
    &EARLY_REQUESTS,
    &REPLAY_REPLAYED,
    &REPLAY_MISSING,
    &REPLAY_EXTRA,
    &REPLAY_CONNECTIONS,
    &REPLAY_BYTES,
    &REPLAY_PATH,
    &REPLAY_FIDELITY,
    &TCP_RETRANSMITS,
    &QUIC_LOST_PACKETS,
    &QUIC_CONGESTION_EVENTS,
    &SERVER_RTT_MS,
    &CWND_BYTES,
    &LOAD1,
    &STEAL_MS,
    &STEAL_PCT,
    &LAUNCH_MS,
    &SETTLE_MS,
    &TEARDOWN_MS,
    &BROWSER_WAIT_MS,
    &BROWSER_SANDBOXED,
    &WALL_MS,
    &BROWSER_CPU_MS,
    &BROWSER_RUNQ_MS,
    &SERVER_CPU_MS,
    &SERVER_RUNQ_MS,
    &EMULATOR_CPU_MS,
    &EMULATOR_RUNQ_MS,
    &OTHERS_CPU_MS,
    &SIBLINGS_CPU_MS,
    &BROWSER_BUSIEST_PCT,
    &SERVER_BUSIEST_PCT,
    &EMULATOR_BUSIEST_PCT,
    &CPU_BENCHMARK_MS,
    &DEVICE_SLOWDOWN,
    &DISTURBED,
];

/// The metric named `name` (a `runs.csv` column or a summary key).
pub fn by_name(name: &str) -> Option<&'static Metric> {
    ALL.iter().copied().find(|m| m.name == name)
}

/// The metrics summarised per series, in column order.
pub fn breakdown() -> impl Iterator<Item = &'static Metric> {
    ALL.iter().copied().filter(|m| m.breakdown.is_some())
}

/// The metrics summarised per series for `scope`, in column order.
pub fn breakdown_for(scope: Scope) -> impl Iterator<Item = &'static Metric> {
    ALL.iter()
        .copied()
        .filter(move |m| m.breakdown == Some(scope))
}

#[cfg(test)]
mod tests;
