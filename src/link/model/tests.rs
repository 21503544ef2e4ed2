use super::*;
use std::collections::BTreeMap;

const PEER: Ipv4Addr = Ipv4Addr::new(10, 9, 8, 2);

/// A minimal IPv4 packet of `len` bytes to `dst`.
fn packet_to(dst: Ipv4Addr, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(20)];
    p[0] = 0x45;
    p[16..20].copy_from_slice(&dst.octets());
    p
}

fn pkt(len: usize) -> Vec<u8> {
    packet_to(PEER, len)
}

fn cfg(delay_ms: u64) -> DirectionConfig {
    DirectionConfig {
        delay: Duration::from_millis(delay_ms),
        peers: vec![PEER],
        ..DirectionConfig::transparent()
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Releases everything due up to `until`, each packet exactly at its deadline (an ideal
/// clock), and returns (seq, release time offset) pairs. A deadline may be a dequeue of the
/// bottleneck that releases nothing.
fn drain(d: &mut LinkDirection, t0: Instant, until: Duration) -> Vec<(u64, Duration)> {
    let mut out = Vec::new();
    while let Some(due) = d.next_deadline() {
        if due > t0 + until {
            break;
        }
        while let Some(p) = d.poll_release(due) {
            assert_eq!(p.due, due, "released exactly at its deadline");
            out.push((p.seq, due - t0));
        }
    }
    out
}

#[test]
fn releases_exactly_at_due_time_not_before() {
    let t0 = Instant::now();
    let mut d = LinkDirection::new(cfg(20), 1);
    assert_eq!(d.offer(t0, pkt(100)), Verdict::Queued);
    assert_eq!(d.next_deadline(), Some(t0 + ms(20)));
    assert!(d
        .poll_release(t0 + ms(20) - Duration::from_nanos(1))
        .is_none());
    let p = d
        .poll_release(t0 + ms(20) + Duration::from_micros(30))
        .unwrap();
    assert_eq!(p.data.len(), 100);
    assert_eq!(p.due, t0 + ms(20));
    let c = d.counters();
    assert_eq!((c.packets_in, c.packets_out, c.bytes_out), (1, 1, 100));
    assert_eq!(c.lateness.max_ns(), 30_000);
    assert_eq!(d.next_deadline(), None);
}

#[test]
fn a_chosen_drop_takes_exactly_the_nth_large_packet_and_hands_it_back() {
    let t0 = Instant::now();
    let mut d = LinkDirection::new(cfg(5), 1);
    d.drop_chosen(ChosenDrop {
        skip: 2,
        min_len: 1000,
    });
    let mut fates = Vec::new();
    for len in [60, 1200, 60, 1300, 1400, 1500, 1200] {
        fates.push(match d.offer_keeping_drops(t0, pkt(len)) {
            Ok(()) => None,
            Err((cause, data)) => Some((cause, data.len())),
        });
    }
    // Small packets are not counted; the third large one (1400 bytes) goes, once.
    assert_eq!(
        fates,
        [
            None,
            None,
            None,
            None,
            Some((DropCause::Injected, 1400)),
            None,
            None
        ]
    );
    let c = d.counters();
    assert_eq!((c.dropped_injected, c.dropped_loss), (1, 0));
}

#[test]
fn not_for_peer_is_dropped_and_counted() {
    let t0 = Instant::now();
    let mut d = LinkDirection::new(cfg(0), 1);
    let other = packet_to(Ipv4Addr::new(8, 8, 8, 8), 60);
    assert_eq!(d.offer(t0, other), Verdict::Dropped(DropCause::NotForPeer));
    let mut v6 = vec![0u8; 60];
    v6[0] = 0x60;
    assert_eq!(d.offer(t0, v6), Verdict::Dropped(DropCause::NotForPeer));
    assert_eq!(d.counters().dropped_not_for_peer, 2);
    assert_eq!(d.in_flight(), 0);
}

#[test]
fn a_reseeded_direction_draws_as_a_fresh_one_with_that_seed() {
    let c = || DirectionConfig {
        loss: 0.3,
        jitter: ms(5),
        jitter_model: JitterModel::Fifo,
        ..cfg(20)
    };
    let t0 = Instant::now();
    // 300 packets 1 ms apart: which were lost, and when the others came out.
    let draws = |d: &mut LinkDirection, from: Instant| {
        let verdicts: Vec<Verdict> = (0..300u64)
            .map(|i| d.offer(from + ms(i), pkt(100)))
            .collect();
        let times: Vec<Duration> = drain(d, from, Duration::from_secs(1))
            .into_iter()
            .map(|(_, at)| at)
            .collect();
        (verdicts, times)
    };
    let mut fresh = LinkDirection::new(c(), 77);
    let mut used = LinkDirection::new(c(), 5);
    draws(&mut used, t0);
    used.reseed(77);
    let later = t0 + Duration::from_secs(10);
    assert_eq!(
        draws(&mut used, later),
        draws(&mut fresh, later),
        "history no longer matters"
    );
}

#[test]
fn loss_rate_is_within_binomial_interval_and_seeded() {
    let n = 100_000u64;
    let run = |seed| {
        let t0 = Instant::now();
        let mut d = LinkDirection::new(
            DirectionConfig {
                loss: 0.05,
                ..cfg(0)
            },
            seed,
        );
        let verdicts: Vec<Verdict> = (0..n).map(|_| d.offer(t0, pkt(40))).collect();
        (d.counters().dropped_loss, verdicts)
    };
    let (lost, v1) = run(7);
    // 99 % interval of Binomial(100000, 0.05): 5000 ± 2.576·√(4750) ≈ ±178.
    assert!((4822..=5178).contains(&lost), "lost {lost}");
    let (_, v2) = run(7);
    assert_eq!(v1, v2, "same seed, same draws");
    let (_, v3) = run(8);
    assert_ne!(v1, v3, "another seed, other draws");
}

#[test]
fn fifo_jitter_stays_in_range_never_reorders_and_skews_the_mean() {
    let t0 = Instant::now();
    let c = DirectionConfig {
        jitter: ms(5),
        jitter_model: JitterModel::Fifo,
        ..cfg(20)
    };
    let mut d = LinkDirection::new(c, 3);
    // One packet every 100 µs: far closer than the 10 ms jitter range.
    for i in 0..2000u64 {
        d.offer(t0 + Duration::from_micros(100 * i), pkt(1200));
    }
    let out = drain(&mut d, t0, Duration::from_secs(1));
    assert_eq!(out.len(), 2000);
    for w in out.windows(2) {
        assert!(w[0].0 < w[1].0, "FIFO order kept");
    }
    for (seq, at) in &out {
        let own = *at - Duration::from_micros(100 * seq);
        assert!(own >= ms(15), "{own:?}");
        assert!(own <= ms(25) + Duration::from_micros(100), "{own:?}");
    }
    let c = d.counters();
    assert_eq!(c.reorders, 0);
    // The documented skew: at this rate FIFO holds packets back (mean well above 0).
    assert!(
        c.fifo_hold_sum_ns / 2000 > 1_000_000,
        "{:?}",
        c.fifo_hold_sum_ns
    );
}

#[test]
fn netem_style_jitter_reorders_and_counts_it_but_keeps_mean_delay() {
    let t0 = Instant::now();
    let c = DirectionConfig {
        jitter: ms(5),
        jitter_model: JitterModel::Reorder,
        ..cfg(20)
    };
    let mut d = LinkDirection::new(c, 3);
    for i in 0..2000u64 {
        d.offer(t0 + Duration::from_micros(1000 * i), pkt(1200));
    }
    let out = drain(&mut d, t0, Duration::from_secs(10));
    assert_eq!(out.len(), 2000);
    let reordered = d.counters().reorders;
    assert!(reordered > 100, "reorders {reordered}");
    let mean_ns: f64 = out
        .iter()
        .map(|(seq, at)| (*at - Duration::from_micros(1000 * seq)).as_nanos() as f64)
        .sum::<f64>()
        / 2000.0;
    // Uniform ±5 ms: the mean of 2000 draws is within ±0.2 ms of 20 ms (σ ≈ 0.065 ms).
    assert!((mean_ns - 20e6).abs() < 0.2e6, "{mean_ns}");
    assert_eq!(d.counters().fifo_hold_sum_ns, 0);
}

/// The `mobile` profile's direction: 30 ms one-way, ±15 ms, varying, knots every 60 ms.
fn mobile(model: JitterModel) -> DirectionConfig {
    let p = Profile {
        jitter_model: model,
        ..Profile::simple("mobile", 60.0, 15.0, 0.0)
    };
    DirectionConfig::from_profile(&p, Direction::Up, vec![PEER], &[PEER], 1)
}

/// Offers a packet at every offset (ns from `t0`), releases each at its due time and
/// returns the delays the model intended, in ms, with the direction's counters.
fn intended_delays(
    cfg: DirectionConfig,
    seed: u64,
    offsets_ns: impl Iterator<Item = u64>,
) -> (Vec<f64>, Counters) {
    let t0 = Instant::now();
    let mut d = LinkDirection::new(cfg, seed);
    let mut delays = Vec::new();
    let mut release = |d: &mut LinkDirection, until: Instant| {
        while let Some(due) = d.next_deadline().filter(|due| *due <= until) {
            while let Some(p) = d.poll_release(due) {
                delays.push((p.due - p.wire_exit).as_nanos() as f64 / 1e6);
            }
        }
    };
    for off in offsets_ns {
        let at = t0 + Duration::from_nanos(off);
        release(&mut d, at);
        d.offer(at, pkt(1200));
    }
    release(&mut d, t0 + Duration::from_secs(1 << 20));
    (delays, d.counters())
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn p5_p95_spread(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    at(0.95) - at(0.05)
}

#[test]
fn varying_jitter_keeps_mean_order_and_spread_at_any_packet_rate() {
    // Uniform ±15 ms implies a p5–p95 spread of 0.9 × 30 = 27 ms.
    let implied = 0.9 * 2.0 * 15.0;
    for (rate, packets) in [(10u64, 20_000u64), (1000, 200_000), (10_000, 200_000)] {
        let gap = 1_000_000_000 / rate;
        let (delays, c) = intended_delays(
            mobile(JitterModel::Varying),
            rate,
            (0..packets).map(|i| i * gap),
        );
        assert_eq!(delays.len() as u64, packets);
        let m = mean(&delays);
        assert!((m - 30.0).abs() < 0.3, "{rate}/s: mean {m}");
        assert_eq!(c.reorders, 0, "{rate}/s");
        assert_eq!(
            c.fifo_held, 0,
            "{rate}/s: order kept without holding anyone"
        );
        let spread = p5_p95_spread(&delays);
        assert!(
            (spread / implied - 1.0).abs() < 0.2,
            "{rate}/s: p5–p95 {spread} vs {implied}"
        );
        assert!(delays.iter().all(|d| (15.0..=45.0).contains(d)));
    }
}

#[test]
fn fifo_jitter_raises_the_mean_with_the_packet_rate_varying_does_not() {
    let at = |model, rate: u64| {
        let gap = 1_000_000_000 / rate;
        mean(&intended_delays(mobile(model), 9, (0..20_000u64).map(|i| i * gap)).0)
    };
    let (slow, fast) = (at(JitterModel::Fifo, 10), at(JitterModel::Fifo, 10_000));
    assert!((slow - 30.0).abs() < 0.5, "{slow}");
    assert!(
        fast > 40.0,
        "FIFO at 10 000/s tends to delay + jitter: {fast}"
    );
    let fast = at(JitterModel::Varying, 10_000);
    assert!((fast - 30.0).abs() < 1.0, "{fast}");
}

#[test]
fn the_mean_over_one_page_load_span_is_within_five_percent_in_most_seeds() {
    // ~1.5 s of a page50 load on `mobile`, packets spread over it; both directions.
    let span = (0..1500u64).map(|i| i * 1_000_000);
    let seeds = 1000;
    let within = (0..seeds)
        .filter(|&seed| {
            let up = mean(&intended_delays(mobile(JitterModel::Varying), seed, span.clone()).0);
            let down =
                mean(&intended_delays(mobile(JitterModel::Varying), seed + 10_000, span.clone()).0);
            ((up + down) / 60.0 - 1.0).abs() <= 0.05
        })
        .count();
    assert!(within * 100 >= seeds as usize * 95, "{within} of {seeds}");
}

#[test]
fn the_offered_delay_is_the_profiles_even_when_the_traffic_follows_it() {
    // A window-limited flow sends faster while the delay is low (rate ∝ 1/delay): its
    // packets' mean delay falls below the profile's, the delay the link offered does not.
    let t0 = Instant::now();
    let mut d = LinkDirection::new(mobile(JitterModel::Varying), 21);
    let (mut t, mut sum, mut n) = (t0, 0.0, 0u64);
    while t < t0 + Duration::from_secs(300) {
        d.offer(t, pkt(1200));
        while let Some(due) = d.next_deadline() {
            let p = d.poll_release(due).unwrap();
            let delay = p.due - p.wire_exit;
            sum += delay.as_nanos() as f64 / 1e6;
            n += 1;
            // The next packet after a twentieth of this packet's delay.
            t = p.wire_exit + delay / 20;
        }
    }
    d.account_offered(t);
    let c = d.counters();
    let offered = c.offered_integral / c.offered_span_ns / 1e6;
    let packets = sum / n as f64;
    assert!((offered - 30.0).abs() < 0.3, "offered {offered}");
    assert!(
        packets < offered - 1.0,
        "packets {packets}, offered {offered}"
    );
    // Without jitter there is nothing to follow: both are the configured delay.
    let mut flat = LinkDirection::new(cfg(30), 1);
    flat.offer(t0, pkt(100));
    flat.account_offered(t0 + Duration::from_secs(1));
    let c = flat.counters();
    assert!((c.offered_integral / c.offered_span_ns / 1e6 - 30.0).abs() < 1e-9);
}

/// Real page50 loads on `mobile` (tests/fixtures/netem): arrival times per direction.
fn recorded_loads() -> Vec<(String, Vec<u64>, Vec<u64>)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/netem/page50-mobile-timelines.json"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let times = |x: &serde_json::Value| -> Vec<u64> {
        x.as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_u64().unwrap() * 1000)
            .collect()
    };
    let mut out = Vec::new();
    for (proto, loads) in v["loads"].as_object().unwrap() {
        for l in loads.as_array().unwrap() {
            out.push((proto.clone(), times(&l["up"]), times(&l["down"])));
        }
    }
    out
}

/// Mean model RTT over the recorded loads of each protocol, averaged over seeds, minus 60.
fn rtt_bias_by_protocol(model: JitterModel, seeds: u64) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for seed in 0..seeds {
        for (i, (proto, up, down)) in recorded_loads().into_iter().enumerate() {
            let s = seed * 1000 + i as u64 * 2;
            let rtt = mean(&intended_delays(mobile(model), s, up.into_iter()).0)
                + mean(&intended_delays(mobile(model), s + 1, down.into_iter()).0);
            let e = sums.entry(proto).or_default();
            e.0 += rtt - 60.0;
            e.1 += 1.0;
        }
    }
    sums.into_iter().map(|(k, (s, n))| (k, s / n)).collect()
}

#[test]
fn recorded_page_loads_see_the_profile_rtt_whatever_the_protocol() {
    // The bias that made h1, h2 and h3 meet different links: FIFO's skew follows each
    // protocol's packet rate.
    let fifo = rtt_bias_by_protocol(JitterModel::Fifo, 20);
    assert!(fifo.values().all(|b| *b > 4.0), "{fifo:?}");
    let varying = rtt_bias_by_protocol(JitterModel::Varying, 200);
    assert_eq!(varying.len(), 3);
    for (proto, bias) in &varying {
        assert!(
            bias.abs() < 0.5,
            "{proto}: model RTT off by {bias} ms: {varying:?}"
        );
    }
}

#[test]
fn rate_limit_serialises_back_to_back_and_queue_drops_tail() {
    let t0 = Instant::now();
    let c = DirectionConfig {
        rate_bps: Some(1e6), // 1250 B = 10 ms on the wire
        queue: Some(QueueLimit::Packets(3)),
        ..cfg(5)
    };
    let mut d = LinkDirection::new(c, 1);
    let verdicts: Vec<Verdict> = (0..6).map(|_| d.offer(t0, pkt(1250))).collect();
    // One on the wire, three waiting, the rest dropped at the tail.
    assert_eq!(&verdicts[..4], &[Verdict::Queued; 4]);
    assert_eq!(&verdicts[4..], &[Verdict::Dropped(DropCause::Queue); 2]);
    let out = drain(&mut d, t0, Duration::from_secs(1));
    let times: Vec<Duration> = out.iter().map(|x| x.1).collect();
    assert_eq!(times, vec![ms(15), ms(25), ms(35), ms(45)]);
    let c = d.counters();
    assert_eq!(c.dropped_queue, 2);
    assert_eq!(c.max_backlog_packets, 3);
    // Achieved rate while saturated: 3 × 1250 B in 30 ms = 1 Mbit/s.
    assert_eq!((c.busy_bytes, c.busy_ns), (3750, 30_000_000));
    // Once the wire drained, the queue accepts again.
    assert_eq!(d.offer(t0 + ms(40), pkt(1250)), Verdict::Queued);
}

#[test]
fn byte_queue_limit_counts_waiting_bytes() {
    let t0 = Instant::now();
    let c = DirectionConfig {
        rate_bps: Some(1e6),
        queue: Some(QueueLimit::Bytes(3000)),
        ..cfg(0)
    };
    let mut d = LinkDirection::new(c, 1);
    let v: Vec<Verdict> = (0..4).map(|_| d.offer(t0, pkt(1000))).collect();
    // First on the wire, then 1000 + 1000 + 1000 ≤ 3000 waiting.
    assert!(v.iter().all(|x| *x == Verdict::Queued));
    assert_eq!(d.offer(t0, pkt(1000)), Verdict::Dropped(DropCause::Queue));
    // A small packet still fits? No: 3000 + 40 > 3000.
    assert_eq!(d.offer(t0, pkt(40)), Verdict::Dropped(DropCause::Queue));
    assert_eq!(d.counters().max_backlog_bytes, 3000);
}

#[test]
fn saturated_rate_is_measured_at_release() {
    let t0 = Instant::now();
    let c = DirectionConfig {
        rate_bps: Some(10e6),
        queue: Some(QueueLimit::Packets(1000)),
        jitter: ms(2),
        ..cfg(10)
    };
    let mut d = LinkDirection::new(c, 9);
    // Offer 20 Mbit/s worth into a 10 Mbit/s link for 1 s (queue grows but does not fill).
    for i in 0..1666u64 {
        d.offer(t0 + Duration::from_micros(600 * i), pkt(1500));
    }
    drain(&mut d, t0, Duration::from_secs(10));
    let c = d.counters();
    let rate = c.busy_bytes as f64 * 8.0 / (c.busy_ns as f64 / 1e9);
    assert!((rate / 10e6 - 1.0).abs() < 0.01, "{rate}");
    assert_eq!(c.dropped_queue, 0);
}

#[test]
fn counters_balance_and_take_resets() {
    let t0 = Instant::now();
    let c = DirectionConfig {
        loss: 0.3,
        ..cfg(10)
    };
    let mut d = LinkDirection::new(c, 5);
    for i in 0..1000u64 {
        d.offer(t0 + Duration::from_micros(50 * i), pkt(500));
    }
    drain(&mut d, t0, ms(20));
    let c = d.take_counters();
    assert_eq!(
        c.packets_in,
        c.packets_out + c.dropped_loss + d.in_flight() as u64
    );
    assert_eq!(c.bytes_in, 500 * 1000);
    assert_eq!(c.lateness.count(), c.packets_out);
    let again = d.counters();
    assert_eq!((again.packets_in, again.packets_out), (0, 0));
    assert_eq!(again.lateness.count(), 0);
}

#[test]
fn reconfigure_applies_to_new_packets_only() {
    let t0 = Instant::now();
    let mut d = LinkDirection::new(cfg(20), 1);
    d.offer(t0, pkt(100));
    d.reconfigure(cfg(75));
    d.offer(t0 + ms(1), pkt(100));
    // Shorter delay again: FIFO keeps the new packet behind the 75 ms one.
    d.reconfigure(cfg(0));
    d.offer(t0 + ms(2), pkt(100));
    let out = drain(&mut d, t0, Duration::from_secs(1));
    let times: Vec<Duration> = out.iter().map(|x| x.1).collect();
    assert_eq!(times, vec![ms(20), ms(76), ms(76)]);
    assert_eq!(d.config().delay, Duration::ZERO);
}

#[test]
fn same_seed_same_schedule() {
    let schedule = |seed| {
        let t0 = Instant::now();
        let c = DirectionConfig {
            jitter: ms(10),
            loss: 0.1,
            jitter_model: JitterModel::Reorder,
            ..cfg(30)
        };
        let mut d = LinkDirection::new(c, seed);
        for i in 0..500u64 {
            d.offer(t0 + Duration::from_micros(700 * i), pkt(64));
        }
        drain(&mut d, t0, Duration::from_secs(5))
    };
    assert_eq!(schedule(42), schedule(42));
    assert_ne!(schedule(42), schedule(43));
}

#[test]
fn from_profile_halves_rtt_and_maps_rates() {
    let mut p = Profile::simple("x", 40.0, 5.0, 1.0);
    p.down_mbit = Some(12.0);
    p.queue_packets = Some(100);
    let down = DirectionConfig::from_profile(&p, Direction::Down, vec![PEER], &[PEER], 1);
    assert_eq!(down.delay, ms(20));
    assert_eq!(down.jitter, ms(5));
    assert!((down.loss - 0.01).abs() < 1e-12);
    assert_eq!(down.rate_bps, Some(12e6));
    assert_eq!(down.queue, Some(QueueLimit::Packets(100)));
    let up = DirectionConfig::from_profile(&p, Direction::Up, vec![], &[PEER], 1);
    assert_eq!((up.rate_bps, up.queue), (None, None));
}

/// A direction served by `trace` (no delay): every packet leaves at an opportunity.
fn traced(trace: &str, queue: u32) -> DirectionConfig {
    DirectionConfig {
        trace: Some(Arc::new(CapacityTrace::parse(trace).unwrap())),
        queue: Some(QueueLimit::Packets(queue)),
        ..cfg(0)
    }
}

#[test]
fn a_trace_s_delivery_opportunities_are_reproduced_exactly() {
    // The first 3 s of the shipped T-Mobile downlink, saturated with 1500-byte packets:
    // one packet per opportunity, each at its own sub-millisecond time.
    let (trace, _) = crate::config::capacity::built_in("TMobile-LTE-short.down").unwrap();
    let t0 = Instant::now();
    let mut d = LinkDirection::new(
        DirectionConfig {
            trace: Some(trace.clone()),
            queue: Some(QueueLimit::Packets(100_000)),
            ..cfg(0)
        },
        1,
    );
    d.start_timeline(t0, TraceStart::default());
    let span_ns = 3_000_000_000u64;
    let expected: Vec<u64> = trace
        .offsets_ns()
        .iter()
        .copied()
        .take_while(|o| *o < span_ns)
        .collect();
    for _ in 0..expected.len() + 100 {
        assert_eq!(d.offer(t0, pkt(1500)), Verdict::Queued);
    }
    let out = drain(&mut d, t0, Duration::from_nanos(span_ns - 1));
    let times: Vec<u64> = out.iter().map(|(_, at)| at.as_nanos() as u64).collect();
    assert_eq!(times.len(), expected.len(), "one packet per opportunity");
    assert_eq!(times, expected, "at exactly the opportunities' times");
    // Sub-millisecond: the opportunities of a busy millisecond are spread over it.
    let within_ms: std::collections::BTreeSet<u64> = times.iter().map(|t| t % 1_000_000).collect();
    assert!(within_ms.len() > 10, "{within_ms:?}");
    // In arrival order, and the achieved rate is the trace's over the span.
    assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
    let rate = trace.rate_between_bps(0, span_ns);
    let got = out.len() as f64 * 1500.0 * 8.0 / 3.0;
    assert!((got / rate - 1.0).abs() < 0.001, "{got} vs {rate}");
    // The saturated period's rate matches what the trace offered in it.
    let c = d.counters();
    let offered = c.busy_capacity_bytes / (c.busy_exit_ns as f64 / 1e9);
    let achieved = c.busy_bytes as f64 / (c.busy_ns as f64 / 1e9);
    assert!(
        (achieved / offered - 1.0).abs() < 0.01,
        "{achieved} vs {offered}"
    );
}

#[test]
fn an_opportunity_carries_1500_bytes_of_small_packets_and_a_trace_repeats() {
    let t0 = Instant::now();
    // Opportunities at 0, 1 and 4 ms of every 10 ms.
    let mut d = LinkDirection::new(traced("0\n1\n4\n10\n", 100), 1);
    d.start_timeline(t0, TraceStart::default());
    // Queued just before the first opportunity (stamps 0 and 10 share millisecond 0: at 0
    // and 0.5 ms): 3 × 500 B share the first; 1000 B leaves at the second, and the next
    // 1000 B spans it and the one at 1 ms.
    for len in [500, 500, 500, 1000, 1000] {
        d.offer(t0 - Duration::from_micros(1), pkt(len));
    }
    let out = drain(&mut d, t0, ms(100));
    let at: Vec<Duration> = out.iter().map(|x| x.1).collect();
    assert_eq!(at, [ms(0), ms(0), ms(0), Duration::from_micros(500), ms(1)]);
    // Opportunities pass unused while the queue is empty: a packet at 5 ms waits for the
    // next repetition's first one (10 ms, which also holds the stamp 10).
    d.offer(t0 + ms(5), pkt(1500));
    let out = drain(&mut d, t0, ms(100));
    assert_eq!(out.iter().map(|x| x.1).collect::<Vec<_>>(), [ms(10)]);
    // A new timeline (the next run's mark) restarts the trace.
    d.start_timeline(t0 + ms(13), TraceStart::default());
    d.offer(t0 + ms(13), pkt(1500));
    let out = drain(&mut d, t0, ms(100));
    assert_eq!(out.iter().map(|x| x.1).collect::<Vec<_>>(), [ms(13)]);
}

#[test]
fn a_trace_start_moves_the_mark_into_the_trace() {
    let t0 = Instant::now();
    // Opportunities at 0, 1 and 4 ms of every 10 ms; the mark at 4 ms into it (40 %).
    let mut d = LinkDirection::new(traced("0\n1\n4\n10\n", 100), 1);
    d.start_timeline(t0, TraceStart(400_000));
    for _ in 0..3 {
        d.offer(t0, pkt(1500));
    }
    let out = drain(&mut d, t0, ms(100));
    let at: Vec<Duration> = out.iter().map(|x| x.1).collect();
    // 4 ms → 0; the next repetition's 0 (and its second stamp at 0.5 ms) → 6 and 6.5 ms.
    assert_eq!(at, [ms(0), ms(6), Duration::from_micros(6_500)]);
}

/// A window-limited sender (Reno-like: slow start to the first drop, then +1 packet per
/// window, halved at most once per round trip on a drop) saturating a 10 Mbit/s
/// bottleneck, 20 ms base RTT, for 20 s. Returns the queue delays of the last 10 s.
fn saturate(
    aqm: crate::config::profile::Aqm,
    queue: u32,
) -> crate::link::histogram::LatencySummary {
    let t0 = Instant::now();
    let mut d = LinkDirection::new(
        DirectionConfig {
            rate_bps: Some(10e6),
            queue: Some(QueueLimit::Packets(queue)),
            aqm: AqmConfig {
                kind: aqm,
                ..AqmConfig::default()
            },
            ..cfg(10)
        },
        3,
    );
    d.start_timeline(t0, TraceStart::default());
    d.keep_late_drops(true);
    let return_path = ms(10);
    let (mut cwnd, mut inflight, mut slow_start) = (10.0f64, 0u64, true);
    let mut acks: std::collections::VecDeque<Instant> = Default::default();
    let mut last_cut = t0;
    let mut now = t0;
    let mut measured = false;
    let end = t0 + Duration::from_secs(20);
    while now < end {
        let mut lost = 0;
        while (inflight as f64) < cwnd {
            if d.offer(now, pkt(1500)) != Verdict::Queued {
                // Dropped on arrival: a loss, and no more sending until the next event.
                lost += 1;
                break;
            }
            inflight += 1;
        }
        // Dropped inside (CoDel): in flight until now.
        let late = d.take_late_drops().len() as u64;
        inflight -= late;
        lost += late;
        if lost > 0 && now - last_cut > ms(30) {
            cwnd = (cwnd / 2.0).max(2.0);
            last_cut = now;
            slow_start = false;
        }
        if !measured && now >= t0 + Duration::from_secs(10) {
            d.take_counters();
            measured = true;
        }
        // The next event: a release (its ack comes back later) or an ack.
        let next = [d.next_deadline(), acks.front().copied()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(end);
        now = next;
        while let Some(p) = d.poll_release(now) {
            acks.push_back(p.due + return_path);
        }
        while acks.front().is_some_and(|a| *a <= now) {
            acks.pop_front();
            inflight -= 1;
            cwnd += if slow_start { 1.0 } else { 1.0 / cwnd };
        }
    }
    d.counters().sojourn.summary()
}

#[test]
fn codel_keeps_the_standing_queue_near_its_target_where_droptail_grows_with_the_queue() {
    use crate::config::profile::Aqm;
    let codel = saturate(Aqm::Codel, 1000);
    let fq = saturate(Aqm::FqCodel, 1000);
    let (tail_small, tail_big) = (saturate(Aqm::Droptail, 250), saturate(Aqm::Droptail, 1000));
    // 5 ms target: the median queue delay stays near it (a few ms above while drops act).
    for q in [&codel, &fq] {
        assert!(q.median_us > 1_000.0 && q.median_us < 15_000.0, "{q:?}");
    }
    // Drop-tail fills its buffer, then saws between half and all of it (1.2 ms per packet
    // at 10 Mbit/s): the standing delay grows with the buffer.
    assert!(tail_small.median_us > 100_000.0, "{tail_small:?}");
    assert!(
        tail_big.median_us > 2.5 * tail_small.median_us,
        "{tail_big:?} vs {tail_small:?}"
    );
    assert!(tail_big.median_us > 40.0 * codel.median_us);
}

#[test]
fn fq_codel_keeps_a_sparse_flow_out_of_a_bulk_flow_s_queue() {
    use crate::config::profile::Aqm;
    let run = |aqm| {
        let t0 = Instant::now();
        let mut d = LinkDirection::new(
            DirectionConfig {
                rate_bps: Some(10e6),
                queue: Some(QueueLimit::Packets(1000)),
                aqm: AqmConfig {
                    kind: aqm,
                    ..AqmConfig::default()
                },
                ..cfg(0)
            },
            3,
        );
        d.start_timeline(t0, TraceStart::default());
        // A bulk flow 300 packets ahead, then a small packet of another flow.
        for _ in 0..300 {
            d.offer(t0, udp_pkt(1500, 1000));
        }
        d.offer(t0 + ms(1), udp_pkt(100, 2000));
        let mut sparse_at = None;
        while let Some(due) = d.next_deadline() {
            while let Some(p) = d.poll_release(due) {
                if p.data.len() == 100 {
                    sparse_at = Some(due - t0);
                }
            }
        }
        sparse_at.unwrap()
    };
    // Drop-tail: behind 300 × 1.2 ms. FQ-CoDel: next in turn (a new flow goes first).
    assert!(run(Aqm::Droptail) > ms(350), "{:?}", run(Aqm::Droptail));
    assert!(run(Aqm::FqCodel) < ms(4), "{:?}", run(Aqm::FqCodel));
}

/// A UDP packet of `len` bytes to the peer from client port `sport`.
fn udp_pkt(len: usize, sport: u16) -> Vec<u8> {
    let mut p = pkt(len.max(28));
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 9, 8, 1]);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&443u16.to_be_bytes());
    p
}

fn events(outages: &[(u64, u64)], mode: OutageMode) -> EventsConfig {
    EventsConfig {
        outages: outages.iter().map(|(s, d)| (ms(*s), ms(*d))).collect(),
        mode,
        ..EventsConfig::default()
    }
}

#[test]
fn a_drop_outage_loses_what_arrives_during_it_in_both_directions_alike() {
    let t0 = Instant::now();
    let c = DirectionConfig {
        events: events(&[(100, 50)], OutageMode::Drop),
        ..cfg(10)
    };
    let mut up = LinkDirection::new(c.clone(), 1);
    let mut down = LinkDirection::new(
        DirectionConfig {
            way: Direction::Down,
            ..c
        },
        2,
    );
    up.start_timeline(t0, TraceStart::default());
    down.start_timeline(t0, TraceStart::default());
    for d in [&mut up, &mut down] {
        let fates: Vec<Verdict> = [99, 100, 149, 150]
            .iter()
            .map(|t| d.offer(t0 + ms(*t), pkt(100)))
            .collect();
        assert_eq!(
            fates,
            [
                Verdict::Queued,
                Verdict::Dropped(DropCause::Outage),
                Verdict::Dropped(DropCause::Outage),
                Verdict::Queued
            ]
        );
        d.account_offered(t0 + ms(1000));
        let c = d.counters();
        assert_eq!((c.dropped_outage, c.outage_ns), (2, 50_000_000));
        // The packet already in flight at 100 ms still arrives (it left before).
        let out = drain(d, t0, Duration::from_secs(1));
        assert_eq!(
            out.iter().map(|x| x.1).collect::<Vec<_>>(),
            [ms(109), ms(160)]
        );
    }
}

#[test]
fn outages_start_at_a_run_s_mark_not_when_the_link_starts_or_changes_profile() {
    let t0 = Instant::now();
    let c = DirectionConfig {
        events: events(&[(100, 50)], OutageMode::Drop),
        ..cfg(10)
    };
    let mut d = LinkDirection::new(c, 1);
    d.start_idle_timeline(t0);
    assert_eq!(d.offer(t0 + ms(120), pkt(100)), Verdict::Queued);
    d.account_offered(t0 + ms(300));
    d.start_timeline(t0 + ms(300), TraceStart::default());
    assert_eq!(
        d.offer(t0 + ms(420), pkt(100)),
        Verdict::Dropped(DropCause::Outage)
    );
    d.account_offered(t0 + ms(1000));
    assert_eq!(d.counters().outage_ns, 50_000_000);
}

#[test]
fn a_hold_outage_queues_until_the_link_is_back_also_on_a_rate_limit() {
    let t0 = Instant::now();
    // Without a rate limit: held packets leave together when it ends.
    let mut d = LinkDirection::new(
        DirectionConfig {
            events: events(&[(100, 50)], OutageMode::Hold),
            ..cfg(10)
        },
        1,
    );
    d.start_timeline(t0, TraceStart::default());
    for t in [90, 120, 140] {
        assert_eq!(d.offer(t0 + ms(t), pkt(100)), Verdict::Queued);
    }
    let out = drain(&mut d, t0, Duration::from_secs(1));
    assert_eq!(
        out.iter().map(|x| x.1).collect::<Vec<_>>(),
        [ms(100), ms(160), ms(160)]
    );
    // With 1 Mbit/s (1250 B = 10 ms), the queue drains from the outage's end, in order.
    let mut d = LinkDirection::new(
        DirectionConfig {
            rate_bps: Some(1e6),
            queue: Some(QueueLimit::Packets(10)),
            events: events(&[(100, 50)], OutageMode::Hold),
            ..cfg(0)
        },
        1,
    );
    d.start_timeline(t0, TraceStart::default());
    for t in [95, 110, 120] {
        d.offer(t0 + ms(t), pkt(1250));
    }
    let out = drain(&mut d, t0, Duration::from_secs(1));
    // The first began at 95 ms and finishes; the others wait for 150 ms.
    assert_eq!(
        out.iter().map(|x| x.1).collect::<Vec<_>>(),
        [ms(105), ms(160), ms(170)]
    );
    // A saturated period does not run through an outage.
    assert_eq!(d.counters().busy_bytes, 1250);
}

#[test]
fn nat_rebinding_rewrites_the_client_port_both_ways_from_its_time() {
    let t0 = Instant::now();
    let ev = EventsConfig {
        rebind_at: Some(ms(50)),
        ..EventsConfig::default()
    };
    let mut up = LinkDirection::new(
        DirectionConfig {
            events: ev.clone(),
            ..cfg(10)
        },
        1,
    );
    let mut down = LinkDirection::new(
        DirectionConfig {
            way: Direction::Down,
            events: ev,
            ..cfg(10)
        },
        2,
    );
    up.start_timeline(t0, TraceStart::default());
    down.start_timeline(t0, TraceStart::default());
    let port = |p: &[u8], at: usize| u16::from_be_bytes([p[20 + at], p[21 + at]]);
    up.offer(t0 + ms(49), udp_pkt(100, 40_000));
    up.offer(t0 + ms(50), udp_pkt(100, 40_000));
    let to = |dport: u16| {
        let mut p = udp_pkt(100, 443);
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p
    };
    down.offer(t0 + ms(35), to(40_000)); // released at 45 ms: before
    down.offer(t0 + ms(45), to(40_000 ^ 0x8000)); // at 55 ms, to the new mapping
    down.offer(t0 + ms(46), to(40_000)); // at 56 ms, to the old one: dropped
    let mut sources = Vec::new();
    while let Some(due) = up.next_deadline() {
        while let Some(p) = up.poll_release(due) {
            sources.push(port(&p.data, 0));
        }
    }
    assert_eq!(sources, [40_000, 40_000 ^ 0x8000]);
    let mut dests = Vec::new();
    while let Some(due) = down.next_deadline() {
        while let Some(p) = down.poll_release(due) {
            dests.push(port(&p.data, 2));
        }
    }
    assert_eq!(dests, [40_000, 40_000]);
    let c = down.counters();
    assert_eq!((c.nat_rewritten, c.dropped_nat, c.packets_out), (1, 1, 2));
    assert_eq!(up.counters().nat_rewritten, 1);
}

#[test]
fn each_server_address_gets_its_extra_delay_and_keeps_its_own_order() {
    let t0 = Instant::now();
    let far = Ipv4Addr::new(10, 250, 0, 1);
    let mut d = LinkDirection::new(
        DirectionConfig {
            extra_delay: vec![(far, ms(30))],
            peers: vec![PEER, far],
            ..cfg(10)
        },
        1,
    );
    d.offer(t0, packet_to(far, 100));
    d.offer(t0 + ms(1), pkt(100));
    let out = drain(&mut d, t0, Duration::from_secs(1));
    // The near origin's packet is not held behind the far one's.
    assert_eq!(out, [(1, ms(11)), (0, ms(40))]);
    let p = Profile {
        origin_delay_ms: vec![0.0, 30.0],
        ..Profile::simple("x", 20.0, 0.0, 0.0)
    };
    let c = DirectionConfig::from_profile(&p, Direction::Down, vec![PEER], &[PEER, far], 1);
    assert_eq!(c.extra_delay, [(far, ms(30))]);
}
