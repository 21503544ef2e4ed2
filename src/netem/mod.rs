//! The link emulator: two network namespaces (client, server), each with a TUN device, joined by
//! a userspace packet scheduler that applies a [`Profile`](crate::profile::Profile) per
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
//! - [`histogram`], [`stats`]: counters, lateness summary, the self-check (pure);
//! - [`emulator`]: the IO loop (epoll, TUN fds, timer slack, SCHED_FIFO);
//! - [`netns`], [`tun`], [`host`]: namespaces, TUN devices, privileges, CPU steal;
//! - [`Link`]: all of it put together; [`cleanup`]: leftovers of dead processes;
//! - [`bench`], [`shell`]: the `pagebench bench netem` and `pagebench shell` commands.
//!
//! **Jitter and order.** Jitter keeps FIFO order by default: a packet never overtakes the one
//! before it. This avoids the heavy reordering of netem-style independent jitter (17–76 % of
//! packets, which sends TCP and QUIC into loss recovery), at a price: when packets arrive closer
//! together than the jitter range (bulk transfers), each one waits for the slowest draw before
//! it, so the delay is skewed upwards — towards `delay + jitter` at high packet rates. The skew
//! is measured (`mean_fifo_hold_ms` in [`LinkStats`]) and noted by the self-check above
//! 0.5 ms. Profiles with `reorder = true` get independent jitter instead.
//!
//! **Precision.** Arrival is stamped when the emulator reads the packet; a packet is written at
//! its due time ± the wake-up latency (see `pagebench bench netem` for figures). If the emulator
//! stalls (CPU steal on a VM), the kernel queues up to [`link::TUN_QUEUE_LEN`] packets per device
//! and then drops; those drops are in `tun_tx_dropped`.
//!
//! **Safety.** Each namespace has only its /30 route (no default route), so traffic can only go
//! to the peer; every namespace is deleted on Drop, on panic unwinding and by the emergency
//! cleanup on a forced exit; [`cleanup::remove_stale`] removes what a killed process left.

pub mod bench;
pub mod cleanup;
pub mod emulator;
pub mod histogram;
pub mod host;
pub mod link;
pub mod model;
pub mod netns;
pub mod shell;
pub mod stats;
pub mod tun;

pub use host::PreflightError;
pub use link::{Link, LinkOptions};
pub use model::{Direction, DirectionConfig, DropCause, LinkDirection, Packet, Verdict};
pub use netns::Namespace;
pub use stats::{self_check, DirectionCheck, DirectionStats, LinkStats, SelfCheck};
