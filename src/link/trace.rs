//! What the link saw, packet by packet, while a tap was on: every packet that entered the
//! emulator, when it entered and when it left (or why it was dropped), and its bytes. The
//! capture files and the head-of-line analysis are made from this (`capture`).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::model::{Direction, DropCause};

/// One packet as the emulator handled it (the IO shell's form, with its own clock).
#[derive(Debug)]
pub struct TapPacket {
    pub dir: Direction,
    pub entered: Instant,
    /// When it was written to the other device; `None` if dropped.
    pub left: Option<Instant>,
    pub dropped: Option<DropCause>,
    pub data: Vec<u8>,
}

/// One packet of a [`PacketTrace`], on the trace's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct TracedPacket {
    pub dir: Direction,
    /// Nanoseconds from the trace's start to the packet's arrival at the emulator.
    pub entered_ns: u64,
    /// …and to its release to the receiver (`None`: dropped).
    pub left_ns: Option<u64>,
    pub dropped: Option<DropCause>,
    /// The IPv4 packet as it was read from the sender's TUN device.
    pub data: Vec<u8>,
}

impl TracedPacket {
    /// The time the receiver got it, or for a dropped packet the time it was dropped.
    pub fn seen_ns(&self) -> u64 {
        self.left_ns.unwrap_or(self.entered_ns)
    }
}

/// Every packet of one tap interval (a run's load), in the order the emulator handled them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PacketTrace {
    /// Wall-clock time of the trace's start, nanoseconds since the Unix epoch (pcapng needs it).
    pub start_unix_ns: u64,
    pub packets: Vec<TracedPacket>,
}

impl PacketTrace {
    /// The packets' indices in the order they were sent (entered the link), ties by index.
    pub fn sent_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.packets.len()).collect();
        order.sort_by_key(|&i| (self.packets[i].entered_ns, i));
        order
    }

    /// Puts the IO shell's packets on a clock that starts at `start` (`start_wall` on the wall).
    pub fn from_tap(start: Instant, start_wall: SystemTime, tapped: Vec<TapPacket>) -> Self {
        let ns = |t: Instant| t.saturating_duration_since(start).as_nanos() as u64;
        PacketTrace {
            start_unix_ns: start_wall
                .duration_since(UNIX_EPOCH)
                .unwrap_or(Duration::ZERO)
                .as_nanos() as u64,
            packets: tapped
                .into_iter()
                .map(|p| TracedPacket {
                    dir: p.dir,
                    entered_ns: ns(p.entered),
                    left_ns: p.left.map(ns),
                    dropped: p.dropped,
                    data: p.data,
                })
                .collect(),
        }
    }
}
