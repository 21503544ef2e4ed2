//! How busy each side's machine was. Two matrices compared by `compare` were not interleaved,
//! so a machine that was busy for one and quiet for the other moves every series: the page
//! says so, with both sides' figures, instead of letting the change under test take the blame
//! (or the credit).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::results::attempts::{Attempts, BUSY_WARNING_PCT};
use crate::results::summary::SeriesKey;
use crate::support::machine_check::MachineCheck;

/// One side's machine: its measured attempts that met a busy machine, and its checks before
/// the runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Busyness {
    pub disturbed: usize,
    pub attempts: usize,
    pub checks: usize,
    pub checks_not_quiet: usize,
    /// The most CPU time other processes used in a check, as a share of the machine's.
    pub worst_check_busy_pct: f64,
}

impl Busyness {
    pub fn of(accounts: &BTreeMap<SeriesKey, Attempts>, checks: &[MachineCheck]) -> Busyness {
        Busyness {
            disturbed: accounts.values().map(|a| a.disturbed).sum(),
            attempts: accounts.values().map(|a| a.attempts).sum(),
            checks: checks.len(),
            checks_not_quiet: checks.iter().filter(|c| !c.quiet()).count(),
            worst_check_busy_pct: checks.iter().map(|c| c.busy_pct).fold(0.0, f64::max),
        }
    }

    /// Busy as the matrix's own warning has it: enough attempts disturbed, or a check that
    /// found the machine not quiet.
    pub fn busy(&self) -> bool {
        let share = BUSY_WARNING_PCT / 100.0 * self.attempts as f64;
        (self.disturbed > 0 && self.disturbed as f64 >= share) || self.checks_not_quiet > 0
    }

    fn describe(&self) -> String {
        let checks = match (self.checks, self.checks_not_quiet) {
            (0, _) => "no machine check".to_string(),
            (n, 0) => format!("{n} machine check(s) quiet"),
            (n, k) => format!(
                "{k} of {n} machine checks not quiet (other processes used up to {:.0} % of the CPU)",
                self.worst_check_busy_pct
            ),
        };
        format!(
            "{} of {} measured attempts met a busy machine, {checks}",
            self.disturbed, self.attempts
        )
    }
}

/// A line for the page when either side ran on a busy machine (None when both were quiet).
pub fn difference(base: &Busyness, new: &Busyness) -> Option<String> {
    let why = match (base.busy(), new.busy()) {
        (false, false) => return None,
        (false, true) => "new ran on a busy machine and base did not: a slowdown in many series may be the machine, not the change",
        (true, false) => "base ran on a busy machine and new did not: a speed-up in many series may be the machine, not the change",
        (true, true) => "both ran on a busy machine: their differences are the change and how busy each was",
    };
    Some(format!(
        "busy machine: base {}; new {} — {why}",
        base.describe(),
        new.describe()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::identity::{BrowserId, ServerId, View};
    use crate::config::protocol::Variant;

    fn side(disturbed: usize, attempts: usize, not_quiet: usize) -> Busyness {
        Busyness {
            disturbed,
            attempts,
            checks: 4,
            checks_not_quiet: not_quiet,
            worst_check_busy_pct: if not_quiet > 0 { 99.0 } else { 1.0 },
        }
    }

    #[test]
    fn a_busy_new_side_is_named_with_both_sides_figures() {
        let line = difference(&side(0, 81, 0), &side(80, 80, 4)).unwrap();
        assert!(
            line.contains(
                "base 0 of 81 measured attempts met a busy machine, 4 machine check(s) quiet"
            ),
            "{line}"
        );
        assert!(line.contains("new 80 of 80 measured attempts met a busy machine, 4 of 4 machine checks not quiet (other processes used up to 99 %"), "{line}");
        assert!(
            line.contains("new ran on a busy machine and base did not"),
            "{line}"
        );
    }

    #[test]
    fn quiet_sides_say_nothing_and_the_threshold_is_the_matrix_warning_s() {
        assert_eq!(difference(&side(0, 80, 0), &side(3, 80, 0)), None);
        assert!(side(4, 80, 0).busy(), "5 % of the attempts is busy");
        assert!(side(0, 80, 1).busy(), "a check that was not quiet is busy");
        let both = difference(&side(40, 80, 0), &side(4, 80, 0)).unwrap();
        assert!(both.contains("both ran on a busy machine"), "{both}");
    }

    #[test]
    fn it_is_counted_from_the_series_accounts_and_the_checks() {
        let mut acc = BTreeMap::new();
        let key = |variant| SeriesKey {
            profile: "wired".into(),
            workload: "page10".into(),
            server: ServerId::new("embedded"),
            browser: BrowserId::default(),
            view: View::First,
            device: Default::default(),
            variant,
        };
        acc.insert(
            key(Variant::H2),
            Attempts {
                attempts: 11,
                disturbed: 2,
                ..Attempts::default()
            },
        );
        acc.insert(
            key(Variant::H3),
            Attempts {
                attempts: 10,
                disturbed: 1,
                ..Attempts::default()
            },
        );
        let busy = MachineCheck {
            busy_pct: 97.0,
            problems: vec!["busy".into()],
            ..MachineCheck::default()
        };
        let b = Busyness::of(&acc, &[MachineCheck::default(), busy]);
        assert_eq!(
            (b.disturbed, b.attempts, b.checks, b.checks_not_quiet),
            (3, 21, 2, 1)
        );
        assert_eq!(b.worst_check_busy_pct, 97.0);
    }
}
