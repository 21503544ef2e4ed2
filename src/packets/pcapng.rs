//! pcapng files of what the link saw, one per vantage point: `client.pcapng` is what a capture
//! on the client's TUN device would show (its own packets when they entered the link, the
//! server's when they left it), `server.pcapng` the same for the server. A packet the link
//! dropped appears on its sender's side only, with a comment giving the cause; every other
//! packet's comment gives the time it spent in the link.
//!
//! Pure: [`write`] turns a [`PacketTrace`] into the bytes of one file (pcapng 1.0, little
//! endian, raw IPv4 link type, nanosecond timestamps).

use std::io::Write;

use crate::link::{Direction, DropCause, PacketTrace};

/// Which endpoint's view a file shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vantage {
    Client,
    Server,
}

impl Vantage {
    pub fn file_name(self) -> &'static str {
        match self {
            Vantage::Client => "client.pcapng",
            Vantage::Server => "server.pcapng",
        }
    }

    /// The direction this endpoint sends.
    fn sends(self) -> Direction {
        match self {
            Vantage::Client => Direction::Up,
            Vantage::Server => Direction::Down,
        }
    }
}

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const EPB: u32 = 6;
/// LINKTYPE_RAW: the packet starts with its IP header (TUN devices without packet info).
const LINKTYPE_RAW: u16 = 101;
const OPT_END: u16 = 0;
const OPT_COMMENT: u16 = 1;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_DESCRIPTION: u16 = 3;
const IF_TSRESOL: u16 = 9;
const EPB_FLAGS: u16 = 2;
/// epb_flags direction bits.
const INBOUND: u32 = 1;
const OUTBOUND: u32 = 2;

/// The file `vantage` would have captured.
pub fn write(trace: &PacketTrace, vantage: Vantage, description: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut opts = Vec::new();
    option(
        &mut opts,
        SHB_USERAPPL,
        format!("pagebench {}", env!("CARGO_PKG_VERSION")).as_bytes(),
    );
    opts_end(&mut opts);
    let mut body = Vec::new();
    body.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&(-1i64).to_le_bytes());
    body.extend_from_slice(&opts);
    block(&mut out, SHB, &body);

    let mut body = Vec::new();
    body.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&0u32.to_le_bytes());
    let name = match vantage {
        Vantage::Client => "client side of the emulated link",
        Vantage::Server => "server side of the emulated link",
    };
    option(&mut body, IF_NAME, name.as_bytes());
    option(&mut body, IF_DESCRIPTION, description.as_bytes());
    option(&mut body, IF_TSRESOL, &[9]);
    opts_end(&mut body);
    block(&mut out, IDB, &body);

    // What this endpoint saw, in the order it saw it.
    let mut seen: Vec<(u64, usize)> = trace
        .packets
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            if p.dir == vantage.sends() {
                Some((p.entered_ns, i))
            } else {
                p.left_ns.map(|t| (t, i))
            }
        })
        .collect();
    seen.sort_unstable();
    for (t, i) in seen {
        let p = &trace.packets[i];
        let outbound = p.dir == vantage.sends();
        let comment = match (p.dropped, p.left_ns) {
            (Some(cause), _) => format!("dropped by the link: {}", cause_name(cause)),
            (None, Some(left)) => format!(
                "{:.3} ms in the link",
                left.saturating_sub(p.entered_ns) as f64 / 1e6
            ),
            (None, None) => String::new(),
        };
        let ts = trace.start_unix_ns + t;
        let len = p.data.len() as u32;
        let mut body = Vec::with_capacity(p.data.len() + 64);
        body.extend_from_slice(&0u32.to_le_bytes());
        body.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        body.extend_from_slice(&(ts as u32).to_le_bytes());
        body.extend_from_slice(&len.to_le_bytes());
        body.extend_from_slice(&len.to_le_bytes());
        body.extend_from_slice(&p.data);
        pad(&mut body);
        option(&mut body, OPT_COMMENT, comment.as_bytes());
        let flags = if outbound { OUTBOUND } else { INBOUND };
        option(&mut body, EPB_FLAGS, &flags.to_le_bytes());
        opts_end(&mut body);
        block(&mut out, EPB, &body);
    }
    out
}

/// The cause as the comment and the reports name it.
pub fn cause_name(cause: DropCause) -> &'static str {
    match cause {
        DropCause::Loss => "loss",
        DropCause::Queue => "queue",
        DropCause::NotForPeer => "not for the peer",
        DropCause::Injected => "injected",
        DropCause::Aqm => "aqm",
        DropCause::Outage => "outage",
        DropCause::Nat => "NAT rebinding (old mapping)",
    }
}

/// gzip, fast: Wireshark and tshark read `.pcapng.gz` as they are.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(bytes);
    enc.finish().unwrap_or_default()
}

fn block(out: &mut Vec<u8>, kind: u32, body: &[u8]) {
    let total = (12 + body.len()) as u32;
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&total.to_le_bytes());
}

fn option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    if value.is_empty() {
        return;
    }
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
    pad(out);
}

fn opts_end(out: &mut Vec<u8>) {
    out.extend_from_slice(&OPT_END.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
}

fn pad(out: &mut Vec<u8>) {
    while out.len() % 4 != 0 {
        out.push(0);
    }
}

/// Reading a server-side file back into a trace (tests replay recorded runs with it).
#[cfg(test)]
pub mod read {
    use super::*;
    use crate::link::TracedPacket;

    fn u32_at(b: &[u8], i: usize) -> Option<u32> {
        Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?))
    }

    /// The packet's comment: its time in the link (ms), or the cause of its drop.
    fn comment(options: &[u8]) -> Option<String> {
        let mut i = 0;
        while i + 4 <= options.len() {
            let code = u16::from_le_bytes([options[i], options[i + 1]]);
            let len = usize::from(u16::from_le_bytes([options[i + 2], options[i + 3]]));
            let value = options.get(i + 4..i + 4 + len)?;
            if code == OPT_COMMENT {
                return Some(String::from_utf8_lossy(value).into_owned());
            }
            i += 4 + len.div_ceil(4) * 4;
        }
        None
    }

    /// The trace `server.pcapng` (what [`write`] made for [`Vantage::Server`]) shows: the
    /// server's packets as they entered the link, the client's as they left it, each other
    /// time from the comment (to the µs); times from the first packet. The client's dropped
    /// packets are not in it.
    pub fn server_side(file: &[u8]) -> PacketTrace {
        let mut packets = Vec::new();
        let mut i = 0;
        while let (Some(kind), Some(len)) = (u32_at(file, i), u32_at(file, i + 4)) {
            let body = &file[i + 8..i + len as usize - 4];
            i += len as usize;
            if kind != EPB {
                continue;
            }
            let ts =
                u64::from(u32_at(body, 4).unwrap()) << 32 | u64::from(u32_at(body, 8).unwrap());
            let caplen = u32_at(body, 12).unwrap() as usize;
            let data = body[20..20 + caplen].to_vec();
            let note = comment(&body[20 + caplen.div_ceil(4) * 4..]).unwrap_or_default();
            let link_ns = note
                .strip_suffix(" ms in the link")
                .and_then(|ms| ms.parse::<f64>().ok())
                .map(|ms| (ms * 1e6).round() as u64);
            let flags = u32_at(body, body.len().saturating_sub(8)).unwrap_or(0);
            let outbound = note.starts_with("dropped") || flags == OUTBOUND;
            let p = match (outbound, link_ns) {
                (true, _) => TracedPacket {
                    dir: Direction::Down,
                    entered_ns: ts,
                    left_ns: link_ns.map(|l| ts + l),
                    dropped: link_ns.is_none().then_some(DropCause::Loss),
                    data,
                },
                (false, l) => TracedPacket {
                    dir: Direction::Up,
                    entered_ns: ts - l.unwrap_or(0),
                    left_ns: Some(ts),
                    dropped: None,
                    data,
                },
            };
            packets.push(p);
        }
        packets.sort_by_key(|p| p.entered_ns);
        let start = packets.first().map_or(0, |p| p.entered_ns);
        for p in &mut packets {
            p.entered_ns -= start;
            p.left_ns = p.left_ns.map(|l| l - start);
        }
        PacketTrace {
            start_unix_ns: start,
            packets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::TracedPacket;

    fn pkt(dir: Direction, entered: u64, left: Option<u64>, len: usize) -> TracedPacket {
        TracedPacket {
            dir,
            entered_ns: entered,
            left_ns: left,
            dropped: left.is_none().then_some(DropCause::Loss),
            data: vec![0x45; len],
        }
    }

    /// (block type, body) of every block.
    fn blocks(b: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let kind = u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
            let len = u32::from_le_bytes(b[i + 4..i + 8].try_into().unwrap()) as usize;
            assert_eq!(len % 4, 0, "block lengths are multiples of 4");
            let trailer = u32::from_le_bytes(b[i + len - 4..i + len].try_into().unwrap());
            assert_eq!(
                trailer as usize, len,
                "the trailing length repeats the leading one"
            );
            out.push((kind, b[i + 8..i + len - 4].to_vec()));
            i += len;
        }
        out
    }

    #[test]
    fn each_side_sees_its_own_packets_entering_and_the_others_leaving() {
        let trace = PacketTrace {
            start_unix_ns: 1_000_000_000_000,
            packets: vec![
                pkt(Direction::Up, 10, Some(5_000_010), 60),
                pkt(Direction::Down, 20, None, 1400),
                pkt(Direction::Down, 30, Some(5_000_030), 1401),
            ],
        };
        let client = blocks(&write(&trace, Vantage::Client, "test"));
        let kinds: Vec<u32> = client.iter().map(|b| b.0).collect();
        // The dropped down packet never reached the client.
        assert_eq!(kinds, [SHB, IDB, EPB, EPB]);
        let ts = |b: &[u8]| {
            (u64::from(u32::from_le_bytes(b[4..8].try_into().unwrap())) << 32)
                | u64::from(u32::from_le_bytes(b[8..12].try_into().unwrap()))
        };
        assert_eq!(ts(&client[2].1), 1_000_000_000_010, "sent: when it entered");
        assert_eq!(
            ts(&client[3].1),
            1_000_005_000_030,
            "received: when it left"
        );
        let caplen = u32::from_le_bytes(client[3].1[12..16].try_into().unwrap());
        assert_eq!(caplen, 1401);

        let server = blocks(&write(&trace, Vantage::Server, "test"));
        assert_eq!(server.len(), 2 + 3);
        let dropped = &server[2].1;
        let text = String::from_utf8_lossy(dropped);
        assert!(text.contains("dropped by the link: loss"), "{text}");
        let kept = String::from_utf8_lossy(&server[3].1);
        assert!(kept.contains("5.000 ms in the link"), "{kept}");
    }

    #[test]
    fn a_server_side_file_reads_back_into_its_trace() {
        let trace = PacketTrace {
            start_unix_ns: 1_000_000_000_000,
            packets: vec![
                pkt(Direction::Up, 1_000, Some(5_001_000), 60),
                pkt(Direction::Down, 2_000, None, 1400),
                pkt(Direction::Down, 3_000, Some(5_003_000), 1401),
            ],
        };
        let back = read::server_side(&write(&trace, Vantage::Server, "test"));
        assert_eq!(back.start_unix_ns, 1_000_000_001_000);
        let shifted: Vec<TracedPacket> = trace
            .packets
            .iter()
            .map(|p| TracedPacket {
                entered_ns: p.entered_ns - 1_000,
                left_ns: p.left_ns.map(|l| l - 1_000),
                ..p.clone()
            })
            .collect();
        assert_eq!(back.packets, shifted);
    }

    #[test]
    fn gzip_round_trips() {
        use std::io::Read;
        let data = write(&PacketTrace::default(), Vantage::Client, "x");
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gzip(&data)[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, data);
    }
}
