//! The headers the analysis needs from a raw IPv4 packet: addresses, ports, and for TCP the
//! sequence number, flags and payload (pure; anything else is `None`).

use std::net::{Ipv4Addr, SocketAddrV4};

/// A TCP segment's or UDP datagram's place in its flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport<'a> {
    Tcp {
        seq: u32,
        syn: bool,
        fin: bool,
        payload: &'a [u8],
    },
    Udp {
        payload: &'a [u8],
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub transport: Transport<'a>,
}

/// DNS's port: UDP to or from it is a name lookup, which the transport analyses leave out.
pub const DNS_PORT: u16 = 53;

/// Parses an IPv4 TCP or UDP packet (not a fragment, not DNS over UDP); `None` for anything
/// else.
pub fn parse(p: &[u8]) -> Option<Parsed<'_>> {
    if p.len() < 20 || p[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([p[2], p[3]])).min(p.len());
    let frag = u16::from_be_bytes([p[6], p[7]]);
    // A fragment (offset or more-fragments set) has no complete transport header to read.
    if ihl < 20 || total < ihl || frag & 0x3fff != 0 {
        return None;
    }
    let src_ip = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
    let dst_ip = Ipv4Addr::new(p[16], p[17], p[18], p[19]);
    let l4 = &p[ihl..total];
    let ports = |b: &[u8]| {
        (
            u16::from_be_bytes([b[0], b[1]]),
            u16::from_be_bytes([b[2], b[3]]),
        )
    };
    let (transport, sp, dp) = match p[9] {
        6 => {
            if l4.len() < 20 {
                return None;
            }
            let doff = usize::from(l4[12] >> 4) * 4;
            if doff < 20 || doff > l4.len() {
                return None;
            }
            let (sp, dp) = ports(l4);
            let flags = l4[13];
            (
                Transport::Tcp {
                    seq: u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]),
                    syn: flags & 0x02 != 0,
                    fin: flags & 0x01 != 0,
                    payload: &l4[doff..],
                },
                sp,
                dp,
            )
        }
        17 => {
            if l4.len() < 8 {
                return None;
            }
            let (sp, dp) = ports(l4);
            // A lookup (`--dns resolver`) is no HTTP transport: not QUIC, not a connection.
            if sp == DNS_PORT || dp == DNS_PORT {
                return None;
            }
            (Transport::Udp { payload: &l4[8..] }, sp, dp)
        }
        _ => return None,
    };
    Some(Parsed {
        src: SocketAddrV4::new(src_ip, sp),
        dst: SocketAddrV4::new(dst_ip, dp),
        transport,
    })
}

/// Test fixtures: minimal IPv4 TCP and UDP packets.
#[cfg(test)]
pub mod build {
    use std::net::SocketAddrV4;

    fn ip(src: SocketAddrV4, dst: SocketAddrV4, proto: u8, l4: Vec<u8>) -> Vec<u8> {
        let total = 20 + l4.len();
        let mut p = vec![
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            0,
            0x40,
            0,
            64,
            proto,
            0,
            0,
        ];
        p.extend_from_slice(&src.ip().octets());
        p.extend_from_slice(&dst.ip().octets());
        p.extend(l4);
        p
    }

    pub fn tcp(
        src: SocketAddrV4,
        dst: SocketAddrV4,
        seq: u32,
        flags: u8,
        payload: usize,
    ) -> Vec<u8> {
        tcp_with(src, dst, seq, flags, &vec![0xab; payload])
    }

    /// A TCP segment carrying `payload`.
    pub fn tcp_with(
        src: SocketAddrV4,
        dst: SocketAddrV4,
        seq: u32,
        flags: u8,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut l4 = Vec::new();
        l4.extend_from_slice(&src.port().to_be_bytes());
        l4.extend_from_slice(&dst.port().to_be_bytes());
        l4.extend_from_slice(&seq.to_be_bytes());
        l4.extend_from_slice(&[0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        l4.extend_from_slice(payload);
        ip(src, dst, 6, l4)
    }

    pub fn udp(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
        let mut l4 = Vec::new();
        l4.extend_from_slice(&src.port().to_be_bytes());
        l4.extend_from_slice(&dst.port().to_be_bytes());
        l4.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        l4.extend_from_slice(&[0, 0]);
        l4.extend_from_slice(payload);
        ip(src, dst, 17, l4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tcp_and_udp_and_refuses_the_rest() {
        let a: SocketAddrV4 = "10.1.0.1:40000".parse().unwrap();
        let b: SocketAddrV4 = "10.1.0.2:443".parse().unwrap();
        let p = build::tcp(a, b, 7, 0x02, 3);
        let got = parse(&p).unwrap();
        assert_eq!((got.src, got.dst), (a, b));
        assert_eq!(
            got.transport,
            Transport::Tcp {
                seq: 7,
                syn: true,
                fin: false,
                payload: &[0xab; 3]
            }
        );
        let u = build::udp(b, a, b"hi");
        assert_eq!(
            parse(&u).unwrap().transport,
            Transport::Udp { payload: b"hi" }
        );
        assert_eq!(parse(&p[..10]), None);
        let mut v6 = p.clone();
        v6[0] = 0x60;
        assert_eq!(parse(&v6), None);
        let mut frag = p;
        frag[6] = 0x20; // more fragments
        assert_eq!(parse(&frag), None);
    }

    #[test]
    fn a_lookup_over_udp_is_left_out_either_way() {
        let client: SocketAddrV4 = "10.1.0.1:40000".parse().unwrap();
        let resolver: SocketAddrV4 = "10.1.0.9:53".parse().unwrap();
        assert_eq!(parse(&build::udp(client, resolver, b"q")), None);
        assert_eq!(parse(&build::udp(resolver, client, b"a")), None);
    }
}
