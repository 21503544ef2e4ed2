//! NAT rebinding (pure): from the rebinding time on, the client's NAT maps every client port
//! `p` to a new public port `p ^ 0x8000` — the source port of packets from the client, the
//! destination port of packets to it — and fixes the TCP or UDP checksum (RFC 1624's
//! incremental update; the IPv4 header does not change, the address stays). The server then
//! sees every client flow come from a new port; what it still sends to an old port finds no
//! mapping and is dropped, as by a real NAT:
//!
//! - a TCP connection hears nothing more: it breaks when the client next sends (a delayed ACK,
//!   a keep-alive — Chromium's comes after 45 s idle) from the new port and the server, which
//!   has no connection there, answers with a reset;
//! - a QUIC connection migrates: the server validates the new path and goes on.
//!
//! A stateless bijection keeps both directions consistent without shared state. It relies on
//! the client's ports being ephemeral (32768–60999, the namespace default: the top bit set), so
//! a packet to a port with the top bit set after the rebinding is for an old mapping. The
//! competing flows' sink port is left alone ([`SINK_PORT`]): they are
//! pagebench's own and not part of the measured client.

/// The competing flows' sink port (TCP and UDP), in the receiving namespace ([`super::cross`]
/// opens it). Defined here, below `cross`, so that the pure NAT needs none of the flows' IO.
pub const SINK_PORT: u16 = 5201;

/// The bit the rebinding flips in every client port.
pub const REBIND_XOR: u16 = 0x8000;

const TCP: u8 = 6;
const UDP: u8 = 17;

/// Which port of a packet is the client's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientPort {
    /// Packets from the client: its source port.
    Source,
    /// Packets to the client: its destination port.
    Destination,
}

/// The transport header's offset and protocol of an unfragmented IPv4 TCP or UDP packet.
fn transport(packet: &[u8]) -> Option<(usize, u8)> {
    if packet.len() < 20 || packet[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(packet[0] & 0x0f) * 4;
    let fragment_offset = u16::from_be_bytes([packet[6], packet[7]]) & 0x1fff;
    let proto = packet[9];
    let min = match proto {
        TCP => 20,
        UDP => 8,
        _ => return None,
    };
    (ihl >= 20 && fragment_offset == 0 && packet.len() >= ihl + min).then_some((ihl, proto))
}

/// The client's port of a TCP/UDP packet (`None` for anything else).
pub fn client_port(packet: &[u8], side: ClientPort) -> Option<u16> {
    let (off, _) = transport(packet)?;
    let at = off
        + match side {
            ClientPort::Source => 0,
            ClientPort::Destination => 2,
        };
    Some(u16::from_be_bytes([packet[at], packet[at + 1]]))
}

/// What the NAT did to a packet to the client after the rebinding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inbound {
    /// Not a rewritten flow (not TCP/UDP, or the competing flows' sink).
    Unchanged,
    /// Its public port mapped back to the client's.
    Rewritten,
    /// Addressed to a mapping the rebinding ended: to be dropped.
    Unmapped,
}

/// A packet from the client after the rebinding: its source port mapped to the new public one
/// (checksum fixed). False when it is not a rewritten flow.
pub fn outbound(packet: &mut [u8]) -> bool {
    match client_port(packet, ClientPort::Source) {
        Some(p) if p != SINK_PORT => rebind(packet, ClientPort::Source),
        _ => false,
    }
}

/// A packet to the client after the rebinding: mapped back, or unmapped (an old public port).
pub fn inbound(packet: &mut [u8]) -> Inbound {
    match client_port(packet, ClientPort::Destination) {
        None => Inbound::Unchanged,
        Some(SINK_PORT) => Inbound::Unchanged,
        Some(p) if p & REBIND_XOR != 0 => Inbound::Unmapped,
        Some(_) => {
            rebind(packet, ClientPort::Destination);
            Inbound::Rewritten
        }
    }
}

/// Flips the client's port of a TCP/UDP packet and fixes its checksum; false (unchanged) for
/// any other packet.
pub fn rebind(packet: &mut [u8], side: ClientPort) -> bool {
    let Some((off, proto)) = transport(packet) else {
        return false;
    };
    let at = off
        + match side {
            ClientPort::Source => 0,
            ClientPort::Destination => 2,
        };
    let old = u16::from_be_bytes([packet[at], packet[at + 1]]);
    set_port(packet, off, proto, at, old ^ REBIND_XOR);
    true
}

/// A server port the client knows by another number: a replayed site's pages name port 443,
/// and each arm of `--servers` listens on a port of its own. The link delivers what the client
/// sends to `public` at `server`, and the server's answers come from `public`, so the client,
/// the captures and the analyses see `public` alone (checksums fixed as for the rebinding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortMap {
    pub public: u16,
    pub server: u16,
}

impl PortMap {
    /// A packet from the client, about to reach the server: `public` → `server`.
    pub fn to_server(self, packet: &mut [u8]) -> bool {
        self.replace(packet, 2, self.public, self.server)
    }

    /// The same packet back as the client sent it (for the tap): `server` → `public`.
    pub fn as_sent(self, packet: &mut [u8]) -> bool {
        self.replace(packet, 2, self.server, self.public)
    }

    /// A packet from the server, entering the link: its source `server` → `public`.
    pub fn from_server(self, packet: &mut [u8]) -> bool {
        self.replace(packet, 0, self.server, self.public)
    }

    /// The port at `field` (0 source, 2 destination) from `from` to `to`; false when it is not
    /// `from` or the packet is not TCP/UDP.
    fn replace(self, packet: &mut [u8], field: usize, from: u16, to: u16) -> bool {
        let Some((off, proto)) = transport(packet) else {
            return false;
        };
        let at = off + field;
        if u16::from_be_bytes([packet[at], packet[at + 1]]) != from {
            return false;
        }
        set_port(packet, off, proto, at, to);
        true
    }
}

/// Writes port `new` at byte `at` of the TCP/UDP header at `off` and fixes its checksum.
fn set_port(packet: &mut [u8], off: usize, proto: u8, at: usize, new: u16) {
    let old = u16::from_be_bytes([packet[at], packet[at + 1]]);
    packet[at..at + 2].copy_from_slice(&new.to_be_bytes());
    let sum_at = off + if proto == TCP { 16 } else { 6 };
    let sum = u16::from_be_bytes([packet[sum_at], packet[sum_at + 1]]);
    // A UDP checksum of 0 means "none": leave it.
    if proto == UDP && sum == 0 {
        return;
    }
    let mut fixed = update_checksum(sum, old, new);
    if proto == UDP && fixed == 0 {
        fixed = 0xffff;
    }
    packet[sum_at..sum_at + 2].copy_from_slice(&fixed.to_be_bytes());
}

/// RFC 1624 eq. 3: HC' = ~(~HC + ~m + m'), in one's complement arithmetic.
fn update_checksum(hc: u16, old: u16, new: u16) -> u16 {
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one's complement checksum over the pseudo-header and the segment.
    fn transport_checksum(p: &[u8]) -> u16 {
        let ihl = usize::from(p[0] & 0x0f) * 4;
        let len = p.len() - ihl;
        let mut sum: u32 = 0;
        let mut add = |b: &[u8]| {
            for c in b.chunks(2) {
                sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
            }
        };
        add(&p[12..20]);
        add(&[0, p[9]]);
        add(&(len as u16).to_be_bytes());
        add(&p[ihl..]);
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    /// An IPv4 packet of `proto` with a correct transport checksum.
    fn packet(proto: u8, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let hdr = if proto == TCP { 20 } else { 8 };
        let mut p = vec![0u8; 20 + hdr + payload.len()];
        p[0] = 0x45;
        let total = p.len() as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p[6] = 0x40; // DF
        p[9] = proto;
        p[12..16].copy_from_slice(&[10, 1, 2, 1]);
        p[16..20].copy_from_slice(&[10, 1, 2, 2]);
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        if proto == TCP {
            p[32] = 0x50;
        } else {
            p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        }
        p[20 + hdr..].copy_from_slice(payload);
        let at = 20 + if proto == TCP { 16 } else { 6 };
        let sum = transport_checksum(&p);
        p[at..at + 2].copy_from_slice(&sum.to_be_bytes());
        p
    }

    #[test]
    fn rebinding_flips_the_client_port_and_keeps_checksums_valid() {
        for proto in [TCP, UDP] {
            for (sport, payload) in [(43_211u16, &b"hello"[..]), (50_000, &[0xff; 1001][..])] {
                let mut up = packet(proto, sport, 443, payload);
                assert!(rebind(&mut up, ClientPort::Source));
                assert_eq!(client_port(&up, ClientPort::Source), Some(sport ^ 0x8000));
                // A packet with a valid checksum sums to 0 when its checksum is included.
                assert_eq!(transport_checksum(&up), 0, "proto {proto}");
                let ip_header = up[..20].to_vec();
                let mut down = packet(proto, 443, sport ^ 0x8000, payload);
                assert!(rebind(&mut down, ClientPort::Destination));
                assert_eq!(client_port(&down, ClientPort::Destination), Some(sport));
                assert_eq!(transport_checksum(&down), 0);
                assert_eq!(&up[..20], &ip_header[..], "the IPv4 header is untouched");
                // Twice is the identity.
                let orig = packet(proto, sport, 443, payload);
                let mut twice = orig.clone();
                rebind(&mut twice, ClientPort::Source);
                rebind(&mut twice, ClientPort::Source);
                assert_eq!(twice, orig);
            }
        }
    }

    #[test]
    fn a_port_map_moves_the_servers_port_both_ways_with_valid_checksums() {
        let map = PortMap {
            public: 443,
            server: 8443,
        };
        for proto in [TCP, UDP] {
            let sent = packet(proto, 40_000, 443, b"client hello");
            let mut p = sent.clone();
            assert!(map.to_server(&mut p));
            assert_eq!(u16::from_be_bytes([p[22], p[23]]), 8443);
            assert_eq!(transport_checksum(&p), 0, "proto {proto}");
            assert!(map.as_sent(&mut p));
            assert_eq!(p, sent, "the tap keeps what the client sent");
            let mut reply = packet(proto, 8443, 40_000, b"server hello");
            assert!(map.from_server(&mut reply));
            assert_eq!(reply, packet(proto, 443, 40_000, b"server hello"));
        }
        // Another port, another protocol: untouched.
        let mut other = packet(TCP, 40_000, 5201, b"x");
        let before = other.clone();
        assert!(!map.to_server(&mut other));
        assert!(!map.from_server(&mut other));
        assert_eq!(other, before);
    }

    #[test]
    fn after_rebinding_old_mappings_are_unmapped_and_the_sink_is_left_alone() {
        let mut up = packet(TCP, 40_000, 443, b"x");
        assert!(outbound(&mut up));
        assert_eq!(client_port(&up, ClientPort::Source), Some(40_000 ^ 0x8000));
        let mut new_mapping = packet(TCP, 443, 40_000 ^ 0x8000, b"x");
        assert_eq!(inbound(&mut new_mapping), Inbound::Rewritten);
        assert_eq!(
            client_port(&new_mapping, ClientPort::Destination),
            Some(40_000)
        );
        assert_eq!(transport_checksum(&new_mapping), 0);
        let mut old_mapping = packet(TCP, 443, 40_000, b"x");
        assert_eq!(inbound(&mut old_mapping), Inbound::Unmapped);
        let mut sink_up = packet(TCP, SINK_PORT, 40_000, b"x");
        assert!(!outbound(&mut sink_up));
        let mut sink_down = packet(UDP, 40_000, SINK_PORT, b"x");
        assert_eq!(inbound(&mut sink_down), Inbound::Unchanged);
    }

    #[test]
    fn only_unfragmented_tcp_and_udp_are_rewritten() {
        let mut icmp = packet(TCP, 1, 2, b"x");
        icmp[9] = 1;
        let before = icmp.clone();
        assert!(!rebind(&mut icmp, ClientPort::Source));
        assert_eq!(icmp, before);
        let mut frag = packet(UDP, 40_000, 443, b"abc");
        frag[7] = 8; // fragment offset 8
        assert!(!rebind(&mut frag, ClientPort::Source));
        let mut no_sum = packet(UDP, 40_000, 443, b"abc");
        no_sum[26..28].copy_from_slice(&[0, 0]);
        assert!(rebind(&mut no_sum, ClientPort::Source));
        assert_eq!(&no_sum[26..28], &[0, 0], "no UDP checksum stays none");
    }
}
