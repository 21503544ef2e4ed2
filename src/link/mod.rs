//! The link emulator: two network namespaces (client, server), each with a TUN device, joined by
//! a userspace packet scheduler that applies a [`Profile`](crate::config::profile::Profile) per
//! direction — loss, optional rate limit with a drop-tail queue, one-way delay and jitter — and
//! releases every packet at its own due time.
//!
//! ```text
//!  client ns                                                         server ns
//!  app ── pbtun-c ──read──► [up:   loss → rate/queue → delay±jitter] ──write──► pbtun-s ── app
//!                ◄──write── [down: loss → rate/queue → delay±jitter] ◄──read──
//!                           (one emulator thread holds both TUN fds)
//! ```
//!
//! Layers, pure core first:
//! - [`model`]: one direction as a deterministic state machine (time passed in, seeded RNG);
//! - [`bottleneck`], [`aqm`]: its queue (drop-tail, CoDel, FQ-CoDel) served by a rate or a
//!   recorded capacity trace ([`crate::config::capacity`]); [`events`]: outages and NAT rebinding on
//!   the run's timeline; [`nat`]: the rebinding's port rewrite (all pure);
//! - [`jitter`]: the time-varying delay of the default jitter model (pure);
//! - [`histogram`], [`link_stats`], [`io_counters`]: counters, lateness summary, the self-check
//!   (pure);
//! - [`emulator`]: the IO loop (epoll, TUN fds, timer slack, SCHED_FIFO);
//! - [`netns`], [`netns_dir`], [`tun`], [`host`]: namespaces (their names and files under
//!   /run/netns), TUN devices, privileges, CPU steal;
//! - [`Link`] ([`emulated`]): all of it put together; [`cross`]: competing flows through it;
//!   [`cleanup`]: leftovers of dead processes;
//! - [`precision`]: how precise and fast the emulator is on this machine (`pagebench bench
//!   netem`, a shard's calibration); `pagebench shell` is `cli::shell_cmd`.
//!
//! **Jitter and order.** By default jitter is a delay that varies smoothly over time
//! ([`jitter`]): packets close together see nearly the same delay, a later packet is never due
//! before an earlier one, and the mean delay is the profile's at every packet rate — so h1, h2
//! and h3, which send at different packet rates, meet the same link. Two older models stay
//! available per profile (`jitter_model`): `fifo` (an independent draw per packet held behind
//! the one before: at high packet rates each packet waits for the slowest recent draw and the
//! mean delay rises towards `delay + jitter`) and `reorder` (independent draws as in netem,
//! 17–76 % of packets reordered, which sends TCP and QUIC into loss recovery).
//!
//! **Precision.** Arrival is stamped when the emulator reads the packet; a packet is written at
//! its due time plus the emulator's wake-up latency. On a VM that latency is dominated by waking
//! a halted vCPU (50–100 µs here, nested virtualisation, guest halt-polling off), so by default
//! a [`Link`] holds the PM QoS CPU latency at 0 µs while it exists (idle CPUs poll instead of
//! halting: fast wake-ups for the emulator and the endpoints, at the price of host CPU time) and
//! runs the emulator under SCHED_FIFO (releases stay on time when Chromium loads both cores).
//! On this machine, quiet: median RTT error 0.03–0.06 ms, p99 0.1–0.23 ms, release lateness
//! p99 16–40 µs; see `pagebench bench netem` for figures on yours. If the emulator stalls (CPU
//! steal on a VM), the kernel queues up to [`emulated::TUN_QUEUE_LEN`] packets per device and then
//! drops; those drops are in `tun_tx_dropped`. At 0 ms without a rate limit the emulator itself
//! is the bottleneck of a bulk flow (~3–4 Gbit/s here), so a queue forms in front of it.
//!
//! **Safety.** Each namespace has only its /30 route (no default route), so traffic can only go
//! to the peer; every namespace is deleted on Drop, on panic unwinding and by the emergency
//! cleanup on a forced exit; [`cleanup::remove_stale`] removes what a killed process left.

pub mod aqm;
pub mod behind;
pub mod bottleneck;
pub mod cleanup;
pub mod cross;
pub mod emulated;
pub mod emulator;
pub mod events;
pub mod fair_share;
pub mod histogram;
pub mod host;
pub mod io_counters;
pub mod jitter;
pub mod link_stats;
pub mod model;
pub mod nat;
pub mod netns;
pub mod netns_dir;
pub mod precision;
pub mod trace;
pub mod tun;

pub use emulated::{Link, LinkOptions, Tap};
pub use host::PreflightError;
pub use link_stats::{self_check, DirectionCheck, DirectionStats, LinkFault, LinkStats, SelfCheck};
pub use model::{
    ChosenDrop, Direction, DirectionConfig, DropCause, LinkDirection, Packet, Verdict,
};
pub use netns::Namespace;
pub use trace::{PacketTrace, TracedPacket};
