//! What the emulator's IO did per direction, apart from the link model's own counters (plain
//! data: the emulator counts, `stats` reports, neither needs the other).

/// IO-side counters of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    pub read_errors: u64,
    pub write_errors: u64,
    pub oversize: u64,
}
