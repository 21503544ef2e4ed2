//! How far each recorded origin was (pure): its round trip estimated from the recording's
//! timings, and the extra delay per server address that puts each origin back at its distance
//! on replay (`--distances recorded`).
//!
//! Each request tells one or two upper bounds of its origin's round trip: its TCP connection's
//! set-up when it opened one (the handshake is one round trip: HAR `connect` less its `ssl`
//! part, which TLS 1.3 adds as a second) and its first byte (`send` and `wait`: one round
//! trip plus the server's think time; see [`super::Timings::first_byte_ms`]). A busy moment
//! only ever lengthens either (a second connection to a 40 ms origin, opened while the page's
//! images were decoding, took 53 ms), so the estimate is the quickest of them — first bytes far
//! below the handshakes excepted (see [`FIRST_BYTE_FLOOR`]). A QUIC set-up is not one round
//! trip (see [`QUIC_SETUP_RTTS`]): it only bounds the first bytes from below.

use std::str::FromStr;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::Entry;

/// `--distances`: where a replayed site's origins are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Distances {
    /// Every origin at the profile's round trip.
    #[default]
    Profile,
    /// Each origin at its recorded round trip instead of the profile's, never nearer than it
    /// (its server address delayed by the difference); rate, loss and the rest stay the
    /// profile's.
    Recorded,
}

impl FromStr for Distances {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Distances> {
        match s.trim() {
            "profile" => Ok(Distances::Profile),
            "recorded" => Ok(Distances::Recorded),
            other => bail!("unknown --distances {other:?}: use profile or recorded"),
        }
    }
}

/// What an origin's round trip was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RttBasis {
    /// A connection set-up was the quickest.
    Handshake,
    /// A request → first byte was the quickest.
    FirstByte,
}

impl RttBasis {
    pub fn describe(self) -> &'static str {
        match self {
            RttBasis::Handshake => "a connection set-up",
            RttBasis::FirstByte => "a first byte",
        }
    }
}

/// Where one origin sat on a replay at its recorded distance (a run's record says it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedDistance {
    /// `https://host[:port]`.
    pub origin: String,
    /// What the recording told (None: nothing, the profile's round trip).
    pub recorded: Option<RecordedRtt>,
    /// The round trip the link gave it: the profile's plus twice its address's extra delay.
    pub replay_rtt_ms: f64,
    /// Its host's recorded lookup, ms, and what the replay's resolver was set to take for it
    /// (its round trip and the hold; None: no resolver asked, or nothing recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_lookup_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_lookup_ms: Option<f64>,
}

/// One origin's recorded round trip.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RecordedRtt {
    pub rtt_ms: f64,
    pub basis: RttBasis,
    /// How many requests the estimate is read from.
    pub samples: usize,
}

/// The round trips Chromium's QUIC set-up time (HAR `connect`) spanned in a recording over
/// h3 (`tests/site_record.rs`: Caddy, origins at 10, 40 and 120 ms read 34, 123–129 and
/// 363–365 ms): the server's first flight outgrows the 3× anti-amplification limit and waits
/// for the client's acknowledgement, and the set-up ends when the handshake is confirmed. A
/// server whose first flight fits takes two; so a QUIC set-up ÷ 3 is at most one round trip.
pub const QUIC_SETUP_RTTS: f64 = 3.0;

fn is_quic(e: &Entry) -> bool {
    e.protocol.as_deref() == Some("h3")
}

/// One request's round trip from its TCP connection's set-up, when it opened one.
fn handshake_rtt(e: &Entry) -> Option<f64> {
    let connect = e.timings.connect_ms.filter(|c| *c > 0.0)?;
    if is_quic(e) {
        return None;
    }
    match e.timings.ssl_ms {
        Some(ssl) if ssl > 0.0 && ssl < connect => Some(connect - ssl),
        // Plain http, or a set-up whose TLS part is unknown: all of it.
        _ => Some(connect),
    }
}

/// A first byte shorter than this share of the quickest handshake is not a round trip: the
/// recording browser's request-sent time can come after the request left (waits of 32 ms were
/// recorded on a 40 ms path, and of 2.5 ms on a 10 ms one). Counted from the request's start
/// (`send` kept) a first byte is never that short; archives from before it, and HARs without
/// `send`, still need the floor.
const FIRST_BYTE_FLOOR: f64 = 0.9;

/// The round trip of the origin whose recorded requests are `entries`, if they tell any: the
/// quickest of their handshakes and first bytes (each is one round trip plus what delayed it:
/// a busy moment, the server's think time), first bytes only of responses that came over the
/// network (a server address recorded: no cache hits) and not far below the handshakes.
pub fn recorded_rtt(entries: &[&Entry]) -> Option<RecordedRtt> {
    let handshakes: Vec<f64> = entries.iter().filter_map(|e| handshake_rtt(e)).collect();
    // A QUIC set-up's share of one round trip bounds the first bytes as a handshake does.
    let quic_bounds = entries
        .iter()
        .filter(|e| is_quic(e))
        .filter_map(|e| e.timings.connect_ms.filter(|c| *c > 0.0))
        .map(|c| c / QUIC_SETUP_RTTS);
    let quickest_handshake = handshakes
        .iter()
        .copied()
        .chain(quic_bounds)
        .min_by(f64::total_cmp);
    let floor = quickest_handshake.map_or(0.0, |h| h * FIRST_BYTE_FLOOR);
    let first_bytes = entries
        .iter()
        .filter(|e| e.server_address.is_some())
        .map(|e| e.timings.first_byte_ms())
        .filter(|w| *w > 0.0 && *w >= floor);
    let samples: Vec<(f64, RttBasis)> = handshakes
        .iter()
        .map(|h| (*h, RttBasis::Handshake))
        .chain(first_bytes.map(|w| (w, RttBasis::FirstByte)))
        .collect();
    let (rtt_ms, basis) = samples.iter().copied().min_by(|a, b| a.0.total_cmp(&b.0))?;
    Some(RecordedRtt {
        rtt_ms,
        basis,
        samples: samples.len(),
    })
}

/// The name lookup of the origin whose recorded requests are `entries`, ms: the longest of
/// their recorded lookups (the first request to a host looks it up, later ones find it
/// cached: 0), if any took time.
pub fn recorded_lookup(entries: &[&Entry]) -> Option<f64> {
    entries
        .iter()
        .filter_map(|e| e.timings.dns_ms)
        .filter(|d| *d > 0.0)
        .max_by(f64::total_cmp)
}

/// How long the resolver holds each name's answer so a lookup takes its recorded time on a
/// replay whose resolver sits at `resolver_rtt_ms`: the recorded lookup less that round
/// trip (none when the resolver alone takes as long), per host (`origins`: host and recorded
/// lookup; a host on several ports gets its longest).
pub fn lookup_holds(origins: &[(&str, Option<f64>)], resolver_rtt_ms: f64) -> Vec<(String, f64)> {
    let mut holds: Vec<(String, f64)> = Vec::new();
    for (host, lookup) in origins {
        let Some(lookup) = lookup else { continue };
        let hold = (lookup - resolver_rtt_ms).max(0.0);
        let host = host.to_ascii_lowercase();
        match holds.iter_mut().find(|(h, _)| *h == host) {
            Some((_, h)) => *h = h.max(hold),
            None => holds.push((host, hold)),
        }
    }
    holds
}

/// The extra one-way delay of each of `addresses` server addresses (the profile's
/// `origin_delay_ms`) that puts each origin at its recorded round trip instead of the
/// profile's `profile_rtt_ms`; `origins` gives each origin's address and recorded round trip.
/// Origins sharing an address get their mean. An origin nearer than the profile stays at the
/// profile's round trip (the link cannot take delay away).
pub fn address_delays(
    addresses: usize,
    origins: &[(usize, Option<f64>)],
    profile_rtt_ms: f64,
) -> Vec<f64> {
    let mut delays = vec![0.0; addresses];
    for (a, delay) in delays.iter_mut().enumerate() {
        let rtts: Vec<f64> = origins
            .iter()
            .filter(|(address, _)| *address == a)
            .filter_map(|(_, rtt)| *rtt)
            .collect();
        if rtts.is_empty() {
            continue;
        }
        let rtt = rtts.iter().sum::<f64>() / rtts.len() as f64;
        *delay = ((rtt - profile_rtt_ms) / 2.0).max(0.0);
    }
    delays
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::site_archive::tests::entry;

    fn timed(protocol: &str, connect: Option<f64>, ssl: Option<f64>, wait: f64) -> Entry {
        let mut e = entry("https://a.test/x", 200);
        e.protocol = Some(protocol.into());
        e.timings.connect_ms = connect;
        e.timings.ssl_ms = ssl;
        e.timings.wait_ms = wait;
        e.server_address = Some("192.0.2.1:443".into());
        e
    }

    #[test]
    fn tcp_counts_the_handshake_without_tls_and_quic_only_bounds_first_bytes() {
        let tcp = timed("h2", Some(82.0), Some(41.0), 50.0);
        let reused = timed("h2", None, None, 45.0);
        let r = recorded_rtt(&[&tcp, &reused]).unwrap();
        assert_eq!(
            (r.rtt_ms, r.basis, r.samples),
            (41.0, RttBasis::Handshake, 3)
        );
        // As recorded over h3 from a 120 ms origin: a 364 ms set-up, first bytes from 121 ms.
        let quic = timed("h3", Some(364.0), Some(364.0), 124.8);
        let next = timed("h3", None, None, 121.1);
        let r = recorded_rtt(&[&quic, &next]).unwrap();
        assert_eq!(
            (r.rtt_ms, r.basis, r.samples),
            (121.1, RttBasis::FirstByte, 2)
        );
        // A first byte far below a third of the set-up is not a round trip.
        let early = timed("h3", None, None, 80.0);
        assert_eq!(recorded_rtt(&[&quic, &early, &next]).unwrap().rtt_ms, 121.1);
        // A QUIC set-up alone says no round trip.
        let mut alone = quic.clone();
        alone.server_address = None;
        assert_eq!(recorded_rtt(&[&alone]), None);
        let plain = timed("http/1.1", Some(40.0), None, 45.0);
        assert_eq!(recorded_rtt(&[&plain]).unwrap().rtt_ms, 40.0);
    }

    #[test]
    fn the_quickest_handshake_or_first_byte_from_the_network() {
        let a = timed("h2", Some(80.0), Some(40.0), 50.0);
        let b = timed("h2", Some(93.0), Some(40.0), 50.0);
        let c = timed("h2", Some(200.0), Some(40.0), 50.0);
        let r = recorded_rtt(&[&c, &b, &a]).unwrap();
        assert_eq!(
            (r.rtt_ms, r.basis, r.samples),
            (40.0, RttBasis::Handshake, 6)
        );
        let quick = timed("h2", None, None, 38.5);
        let r = recorded_rtt(&[&a, &quick]).unwrap();
        assert_eq!((r.rtt_ms, r.basis), (38.5, RttBasis::FirstByte));
        // Far below the handshake: the browser's send time came late, not a round trip.
        let early = timed("h2", None, None, 32.3);
        assert_eq!(recorded_rtt(&[&a, &early]).unwrap().rtt_ms, 40.0);
        // Without a handshake, the quickest first byte.
        assert_eq!(recorded_rtt(&[&early, &quick]).unwrap().rtt_ms, 32.3);
        // A first byte counts from the request's start: a late-stamped request end (a long
        // `send`) makes no round trip shorter than the path's.
        let mut stamped_late = timed("h2", None, None, 36.5);
        stamped_late.timings.send_ms = Some(10.3);
        let r = recorded_rtt(&[&a, &stamped_late]).unwrap();
        assert_eq!((r.rtt_ms, r.basis), (40.0, RttBasis::Handshake));
        stamped_late.timings.send_ms = Some(0.25);
        assert_eq!(recorded_rtt(&[&stamped_late]).unwrap().rtt_ms, 36.75);
        // A response from the cache (no server address) says nothing of the distance.
        let mut cached = timed("h2", None, None, 0.4);
        cached.server_address = None;
        assert_eq!(recorded_rtt(&[&a, &cached]).unwrap().rtt_ms, 40.0);
        let nothing = timed("h2", None, None, 0.0);
        assert_eq!(recorded_rtt(&[&nothing]), None);
    }

    #[test]
    fn each_address_gets_half_its_round_trip_above_the_profile_s() {
        let origins = [
            (0, Some(10.0)),
            (1, Some(40.0)),
            (2, Some(120.0)),
            (2, Some(100.0)),
        ];
        let d = address_delays(3, &origins, 4.0);
        assert_eq!(d, [3.0, 18.0, 53.0]);
        // On a 20 ms profile the 10 ms origin cannot come nearer: it stays at 20 ms.
        let d = address_delays(3, &origins, 20.0);
        assert_eq!(d, [0.0, 10.0, 45.0]);
        // An address whose origins tell no round trip keeps the profile's.
        let d = address_delays(2, &[(0, None), (1, Some(30.0))], 10.0);
        assert_eq!(d, [0.0, 10.0]);
    }

    #[test]
    fn a_lookup_is_the_longest_recorded_and_the_resolver_holds_what_its_distance_lacks() {
        let mut first = timed("h2", Some(82.0), Some(41.0), 50.0);
        first.timings.dns_ms = Some(31.5);
        let mut cached = timed("h2", None, None, 45.0);
        cached.timings.dns_ms = Some(0.0);
        let unknown = timed("h2", None, None, 45.0);
        assert_eq!(recorded_lookup(&[&cached, &first, &unknown]), Some(31.5));
        assert_eq!(recorded_lookup(&[&cached, &unknown]), None);
        // 31.5 ms recorded, a resolver at 10 ms: held 21.5 ms; one recorded at 4 ms stays at
        // the resolver's; a host on two ports gets its longest; none recorded, no hold.
        let holds = lookup_holds(
            &[
                ("WWW.a.test", Some(31.5)),
                ("cdn.a.test", Some(4.0)),
                ("www.a.test", Some(12.0)),
                ("api.a.test", None),
            ],
            10.0,
        );
        assert_eq!(
            holds,
            [
                ("www.a.test".to_string(), 21.5),
                ("cdn.a.test".to_string(), 0.0)
            ]
        );
    }
}
