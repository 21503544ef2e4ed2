//! The testbed's resolver (`--dns resolver`): on an address of its own behind the link (the
//! last of the server namespace's), answering each run for the names that run's browser may
//! contact, with an HTTPS record per TLS origin when the run is `h3-dns`.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::Result;

use crate::config::profile::Profile;
use crate::config::protocol::{H3Mode, Protocol};
use crate::embedded_server::dns::{DnsServer, HttpsService, Lookup, Zone, ZoneName};
use crate::link::netns::Namespace;
use crate::measure::browser::LaunchOptions;

/// What an HTTPS record announces: h3 first, then h2 (what large CDNs publish).
pub const ANNOUNCED_ALPN: [&str; 2] = ["h3", "h2"];

/// The running resolver and where it sits.
pub struct TestbedResolver {
    server: DnsServer,
    /// Its address's place among the server namespace's addresses (0: the namespace's own).
    address_index: usize,
}

impl TestbedResolver {
    /// Starts the resolver on `ip` (the server namespace's address number `address_index`),
    /// answering nothing until a run's zone is set.
    pub fn start(ns: &Namespace, ip: IpAddr, address_index: usize) -> Result<TestbedResolver> {
        Ok(TestbedResolver {
            server: DnsServer::start(ns, ip, Zone::default())?,
            address_index,
        })
    }

    pub fn ip(&self) -> IpAddr {
        self.server.addr().ip()
    }

    /// `profile` as the link applies it: the resolver's address delayed so it sits at the
    /// profile's `resolver_rtt_ms` (the other addresses as the profile says).
    pub fn link_profile(&self, profile: &Profile) -> Profile {
        link_profile(profile, self.address_index)
    }

    /// Forgets the lookups so far (a browser launched ahead asks for its own names) and
    /// answers for `opts`'s run from now on, each host in `holds` after that many ms.
    pub fn prepare(&self, opts: &LaunchOptions, holds: &[(String, f64)]) -> Result<()> {
        self.server.take_lookups();
        self.server.set_zone(zone_for(opts, holds)?);
        Ok(())
    }

    /// The lookups since [`TestbedResolver::prepare`].
    pub fn lookups(&self) -> Vec<Lookup> {
        self.server.take_lookups()
    }
}

/// `profile` with the resolver's address (number `address_index`) at its round trip.
pub fn link_profile(profile: &Profile, address_index: usize) -> Profile {
    let mut p = profile.clone();
    let delay = profile.resolver_delay_ms();
    if delay > 0.0 || !p.origin_delay_ms.is_empty() {
        p.origin_delay_ms.resize(address_index + 1, 0.0);
        p.origin_delay_ms[address_index] = delay;
    }
    p
}

/// The zone of one run: each host the browser may contact at its address, answered after its
/// hold in `holds` (ms; a replay's recorded lookup costs); with `h3-dns`, an HTTPS record for
/// each TLS origin (its port, [`ANNOUNCED_ALPN`]).
pub fn zone_for(opts: &LaunchOptions, holds: &[(String, f64)]) -> Result<Zone> {
    let announce = opts.protocol == Protocol::H3 && opts.h3_mode == H3Mode::Dns;
    let services = if announce {
        opts.quic_origins()
    } else {
        Vec::new()
    };
    let names = opts
        .host_map()
        .into_iter()
        .map(|(host, ip)| ZoneName {
            https: services
                .iter()
                .filter(|(h, _)| h.eq_ignore_ascii_case(&host))
                .map(|(_, port)| HttpsService {
                    port: *port,
                    alpn: ANNOUNCED_ALPN.iter().map(|a| a.to_string()).collect(),
                })
                .collect(),
            v4: match ip {
                IpAddr::V4(v4) => Some(v4),
                IpAddr::V6(_) => None,
            },
            v6: match ip {
                IpAddr::V6(v6) => Some(v6),
                IpAddr::V4(_) => None,
            },
            hold: holds
                .iter()
                .find(|(h, _)| h.eq_ignore_ascii_case(&host))
                .map_or(Duration::ZERO, |(_, ms)| Duration::from_secs_f64(ms / 1e3)),
            host,
        })
        .collect();
    Zone::new(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site_opts(protocol: Protocol, mode: H3Mode) -> LaunchOptions {
        let mut o = LaunchOptions::fixture(protocol);
        o.h3_mode = mode;
        o.hosts = vec![
            ("www.site.test".into(), "10.1.2.2".parse().unwrap()),
            ("static.site.test".into(), "10.250.0.1".parse().unwrap()),
            ("plain.site.test".into(), "10.250.0.2".parse().unwrap()),
        ];
        o.tls_origins = vec![
            ("www.site.test".into(), 443),
            ("static.site.test".into(), 8443),
        ];
        o
    }

    #[test]
    fn h3_dns_announces_every_tls_origin_on_its_port_and_nothing_else() {
        let zone = zone_for(&site_opts(Protocol::H3, H3Mode::Dns), &[]).unwrap();
        let names: Vec<&ZoneName> = zone.names().collect();
        assert_eq!(names.len(), 3);
        let by = |h: &str| names.iter().find(|n| n.host == h).unwrap();
        assert_eq!(by("www.site.test").https[0].port, 443);
        assert_eq!(by("www.site.test").https[0].alpn, vec!["h3", "h2"]);
        assert_eq!(by("static.site.test").https[0].port, 8443);
        assert!(by("plain.site.test").https.is_empty(), "no TLS: no record");
        assert_eq!(
            by("static.site.test").v4,
            Some("10.250.0.1".parse().unwrap())
        );
    }

    #[test]
    fn a_replay_s_recorded_lookup_costs_hold_each_name_s_answer() {
        let holds = [("WWW.site.test".to_string(), 28.5)];
        let zone = zone_for(&site_opts(Protocol::H2, H3Mode::Forced), &holds).unwrap();
        let hold = |h: &str| zone.names().find(|n| n.host == h).unwrap().hold;
        assert_eq!(hold("www.site.test"), Duration::from_micros(28_500));
        assert_eq!(hold("static.site.test"), Duration::ZERO);
    }

    #[test]
    fn other_variants_get_addresses_only() {
        for (p, m) in [
            (Protocol::H2, H3Mode::Forced),
            (Protocol::H3, H3Mode::Forced),
            (Protocol::H3, H3Mode::Discovered),
        ] {
            let zone = zone_for(&site_opts(p, m), &[]).unwrap();
            assert!(zone.names().all(|n| n.https.is_empty()), "{p:?} {m:?}");
        }
    }

    #[test]
    fn the_resolver_address_is_delayed_by_half_the_extra_round_trip() {
        let mut p = Profile::simple("x", 40.0, 0.0, 0.0);
        assert!(
            link_profile(&p, 1).origin_delay_ms.is_empty(),
            "at the link's RTT"
        );
        p.resolver_rtt_ms = Some(100.0);
        assert_eq!(link_profile(&p, 2).origin_delay_ms, vec![0.0, 0.0, 30.0]);
        p.origin_delay_ms = vec![0.0, 5.0];
        assert_eq!(link_profile(&p, 2).origin_delay_ms, vec![0.0, 5.0, 30.0]);
    }

    #[test]
    fn a_generated_page_is_its_one_host() {
        let zone = zone_for(&LaunchOptions::fixture(Protocol::H2), &[]).unwrap();
        let names: Vec<&ZoneName> = zone.names().collect();
        assert_eq!(names.len(), 1);
        assert_eq!(names[0].host, "pagebench.test");
    }
}
