//! Contention, measured for every run and every side: how much CPU the browser, the server and
//! the link emulator used between the run's mark and the end of its load, how long their
//! threads were runnable but waiting for a CPU (the kernel's `schedstat`), how much CPU time
//! everything else on the machine took in the same window, and the hypervisor's steal.
//!
//! A busy machine (a compiler beside the matrix, a noisy neighbour VM) starves the browser,
//! the server and the emulator together; the link gate sees only the emulator. These figures
//! see all of them, so a report can say the machine was busy — and a user can read what a
//! protocol costs in CPU on each side.
//!
//! The IO shell ([`Snapshot::take`]) reads `/proc` and the CPU accounting groups;
//! [`Contention::between`] is pure.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::support::cgroup;
use crate::support::procfs::{self, CpuTicks, SchedStat};

/// Where a side's threads are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tasks {
    /// Every thread of every process of a process group (a browser, a reference server).
    Group(i32),
    /// Every thread of one process.
    Process(i32),
    /// Some threads of one process (the embedded server's runtime, the emulator thread).
    Threads { pid: i32, tids: Vec<i32> },
}

/// The threads a run's figures are summed over, per side.
#[derive(Debug, Clone, Default)]
pub struct Sides {
    pub browser: Vec<Tasks>,
    pub server: Vec<Tasks>,
    pub emulator: Vec<Tasks>,
}

impl Sides {
    /// The CPU, in clock ticks, of the processes pagebench started that are not this run's:
    /// other lanes' browsers and reference servers (`--jobs`). See [`sibling_ticks`].
    fn siblings_ticks(&self) -> u64 {
        let own: Vec<i32> = self
            .browser
            .iter()
            .chain(&self.server)
            .filter_map(|t| match t {
                Tasks::Group(g) => Some(*g),
                _ => None,
            })
            .collect();
        let stats: Vec<(i32, procfs::PidStat)> = procfs::pids()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|pid| procfs::pid_stat(pid).ok().map(|s| (pid, s)))
            .collect();
        sibling_ticks(std::process::id() as i32, &own, &stats)
    }

    /// This run's processes: the browser's and the reference server's (pagebench's own process
    /// is read whole, see [`Snapshot`]).
    fn own_groups(&self) -> Vec<Tasks> {
        self.browser
            .iter()
            .chain(&self.server)
            .filter(|t| matches!(t, Tasks::Group(_)))
            .cloned()
            .collect()
    }
}

/// The CPU ticks of every process below `me` outside the run's own process groups `own`, each
/// with its reaped children's, plus the ticks of the children `me` reaped (pure). Counted per
/// process, not per thread, and with the reaped ones, so the difference between two moments
/// loses nothing that ended between them (another lane's browser closing inside this run's
/// window): a process's CPU moves to whoever reaped it.
fn sibling_ticks(me: i32, own: &[i32], stats: &[(i32, procfs::PidStat)]) -> u64 {
    let stat = |pid: i32| stats.iter().find(|(p, _)| *p == pid).map(|(_, s)| s);
    let reaped = stat(me).map_or(0, |s| s.children_ticks);
    let alive: u64 = descendants(me, stats)
        .into_iter()
        .filter_map(stat)
        .filter(|s| !own.contains(&s.pgrp))
        .map(|s| s.cpu_ticks() + s.children_ticks)
        .sum();
    reaped + alive
}

/// The processes below `root` (its children, theirs…), from every process's parent (pure).
fn descendants(root: i32, stats: &[(i32, procfs::PidStat)]) -> Vec<i32> {
    let mut found = vec![root];
    let mut at = 0;
    while at < found.len() {
        let parent = found[at];
        let children: Vec<i32> = stats
            .iter()
            .filter(|(pid, s)| s.ppid == parent && !found.contains(pid))
            .map(|(pid, _)| *pid)
            .collect();
        found.extend(children);
        at += 1;
    }
    found.remove(0);
    found
}

/// Each thread's scheduler statistics at one moment, keyed by (pid, tid).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading(pub BTreeMap<(i32, i32), SchedStat>);

impl Reading {
    /// Reads the threads of `tasks` now (threads that vanish while being read are left out).
    pub fn take(tasks: &[Tasks]) -> Reading {
        let mut out = BTreeMap::new();
        for t in tasks {
            for (pid, tid) in threads_of(t) {
                if let Ok(s) = procfs::task_schedstat(pid, tid) {
                    out.insert((pid, tid), s);
                }
            }
        }
        Reading(out)
    }
}

fn threads_of(t: &Tasks) -> Vec<(i32, i32)> {
    let of_process = |pid: i32| -> Vec<(i32, i32)> {
        procfs::tids(pid)
            .unwrap_or_default()
            .into_iter()
            .map(|tid| (pid, tid))
            .collect()
    };
    match t {
        Tasks::Process(pid) => of_process(*pid),
        Tasks::Threads { pid, tids } => tids.iter().map(|t| (*pid, *t)).collect(),
        Tasks::Group(pgid) => procfs::pids()
            .unwrap_or_default()
            .into_iter()
            .filter(|pid| procfs::pid_stat(*pid).is_ok_and(|s| s.pgrp == *pgid))
            .flat_map(of_process)
            .collect(),
    }
}

/// What a side's threads did in a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// CPU time, summed over the threads.
    pub cpu_ms: f64,
    /// Time runnable but waiting for a CPU, summed over the threads.
    pub runq_ms: f64,
    /// Threads seen.
    pub threads: u32,
    /// The CPU time of the busiest one of them: a thread that ran nearly the whole window was
    /// what set the pace (one thread runs on one core at a time).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub busiest_thread_ms: f64,
}

impl Usage {
    /// From two readings (pure): each thread's growth; a thread born in the window counts
    /// whole, one gone by its end is lost (its last figures are not readable).
    pub fn between(a: &Reading, b: &Reading) -> Usage {
        let mut u = Usage::default();
        for (key, end) in &b.0 {
            let start = a.0.get(key).copied().unwrap_or_default();
            let cpu_ms = end.cpu_ns.saturating_sub(start.cpu_ns) as f64 / 1e6;
            u.cpu_ms += cpu_ms;
            u.runq_ms += end.wait_ns.saturating_sub(start.wait_ns) as f64 / 1e6;
            u.threads += 1;
            u.busiest_thread_ms = u.busiest_thread_ms.max(cpu_ms);
        }
        u
    }
}

/// One moment of a run: the machine's CPU times and every side's threads.
#[derive(Debug, Clone)]
pub struct Snapshot {
    at: Instant,
    cpu: CpuTicks,
    browser: Reading,
    server: Reading,
    emulator: Reading,
    /// This run's browser and reference server processes' threads.
    own_groups: Reading,
    /// pagebench's own CPU ticks (emulators, embedded servers, drivers and analysis, of every
    /// lane): the process's figure, which keeps the threads that ended.
    me: u64,
    /// See [`sibling_ticks`].
    siblings: u64,
    /// The same from the accounting groups, where every process of this run's and of pagebench's
    /// is in one ([`GroupUsage::read`]).
    groups: Option<GroupUsage>,
    /// The kind of each of the browser's processes (`support::process_kind`), by pid.
    browser_kinds: BTreeMap<i32, String>,
}

/// CPU time (ns) from the accounting groups (`support::cgroup`): of everything pagebench
/// started in them, and of this run's browser and server. Unlike reading processes, this keeps
/// the CPU of processes that ended, whoever reaped them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GroupUsage {
    /// Which of pagebench's sessions of groups was read (a new one starts from zero).
    session: u64,
    all_ns: u64,
    own_ns: u64,
}

impl GroupUsage {
    /// None unless every one of `own`'s process groups was started in a group.
    fn read(own: &[Tasks]) -> Option<GroupUsage> {
        let mut own_ns = 0;
        for t in own {
            if let Tasks::Group(pgid) = t {
                own_ns += cgroup::usage_of_process_group(*pgid)?;
            }
        }
        let (session, all_ns) = cgroup::session_usage()?;
        Some(GroupUsage {
            session,
            all_ns,
            own_ns,
        })
    }

    /// (this run's, other lanes') CPU in ms between two readings of one session (pure).
    fn between(a: &GroupUsage, b: &GroupUsage) -> Option<(f64, f64)> {
        if a.session != b.session {
            return None;
        }
        let ms = |x: u64, y: u64| y.saturating_sub(x) as f64 / 1e6;
        let own = ms(a.own_ns, b.own_ns);
        Some((own, (ms(a.all_ns, b.all_ns) - own).max(0.0)))
    }
}

impl Snapshot {
    pub fn take(sides: &Sides) -> Snapshot {
        let browser = Reading::take(&sides.browser);
        let browser_kinds = browser
            .0
            .keys()
            .map(|(pid, _)| *pid)
            .collect::<std::collections::BTreeSet<i32>>()
            .into_iter()
            .filter_map(|pid| Some((pid, crate::support::process_kind::of_pid(pid)?)))
            .collect();
        Snapshot {
            at: Instant::now(),
            cpu: procfs::cpu_ticks().unwrap_or_default(),
            browser,
            browser_kinds,
            server: Reading::take(&sides.server),
            emulator: Reading::take(&sides.emulator),
            own_groups: Reading::take(&sides.own_groups()),
            me: procfs::pid_stat(std::process::id() as i32).map_or(0, |s| s.cpu_ticks()),
            siblings: sides.siblings_ticks(),
            groups: GroupUsage::read(&sides.own_groups()),
        }
    }
}

/// What the machine did during one run's load, per side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Contention {
    /// The window: from the run's mark to the end of its load.
    pub window_ms: f64,
    pub cpus: usize,
    pub browser: Usage,
    /// None when the server's threads are not known.
    pub server: Option<Usage>,
    pub emulator: Option<Usage>,
    /// CPU time of everything of this run's (pagebench, the browser, a reference server).
    pub ours_cpu_ms: f64,
    /// CPU time the whole machine spent running something (all CPUs, `/proc/stat`, tick
    /// resolution), and the time the hypervisor stole.
    pub machine_busy_ms: f64,
    pub steal_ms: f64,
    /// CPU time of pagebench's other lanes (`--jobs`): their browsers and reference servers
    /// (their emulators and embedded servers are threads of pagebench's own process, in
    /// `ours_cpu_ms`). Read from the CPU accounting groups (`support::cgroup`) where the
    /// machine has them, else from the processes below pagebench ([`sibling_ticks`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub siblings_cpu_ms: f64,
    /// CPU time of everything else: other processes, kernel threads (never below 0).
    pub others_cpu_ms: f64,
    /// The browser's CPU by kind of process (the network service, renderers, the GPU
    /// process, …), busiest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub browser_processes: Vec<ProcessUsage>,
}

/// The CPU of a browser's processes of one kind in a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessUsage {
    pub kind: String,
    pub processes: u32,
    pub usage: Usage,
}

/// The browser's usage by kind of process (pure): each thread of `b` (with its growth since
/// `a`) under its process's kind (`kinds`, by pid; `unknown` where not read), busiest first.
pub fn by_process_kind(
    a: &Reading,
    b: &Reading,
    kinds: &BTreeMap<i32, String>,
) -> Vec<ProcessUsage> {
    let mut groups: BTreeMap<String, (Reading, Reading, std::collections::BTreeSet<i32>)> =
        BTreeMap::new();
    for (key, end) in &b.0 {
        let kind = kinds
            .get(&key.0)
            .cloned()
            .unwrap_or_else(|| "unknown".into());
        let g = groups.entry(kind).or_default();
        g.1 .0.insert(*key, *end);
        if let Some(start) = a.0.get(key) {
            g.0 .0.insert(*key, *start);
        }
        g.2.insert(key.0);
    }
    let mut out: Vec<ProcessUsage> = groups
        .into_iter()
        .map(|(kind, (x, y, pids))| ProcessUsage {
            kind,
            processes: pids.len() as u32,
            usage: Usage::between(&x, &y),
        })
        .collect();
    out.sort_by(|x, y| y.usage.cpu_ms.total_cmp(&x.usage.cpu_ms));
    out
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl Contention {
    /// The window between two snapshots (pure, given the snapshots).
    pub fn between(a: &Snapshot, b: &Snapshot, cpus: usize) -> Contention {
        let hz = procfs::clock_ticks_per_second();
        let ticks_ms = |x: u64, y: u64| y.saturating_sub(x) as f64 / hz * 1e3;
        let by_groups = a
            .groups
            .zip(b.groups)
            .and_then(|(x, y)| GroupUsage::between(&x, &y));
        let (own_ms, siblings_cpu_ms) = by_groups.unwrap_or_else(|| {
            (
                Usage::between(&a.own_groups, &b.own_groups).cpu_ms,
                ticks_ms(a.siblings, b.siblings),
            )
        });
        let ours_cpu_ms = own_ms + ticks_ms(a.me, b.me);
        let machine_busy_ms = ticks_ms(a.cpu.busy(), b.cpu.busy());
        let side = |x: &Reading, y: &Reading| (!y.0.is_empty()).then(|| Usage::between(x, y));
        Contention {
            window_ms: b.at.duration_since(a.at).as_secs_f64() * 1e3,
            cpus,
            browser: Usage::between(&a.browser, &b.browser),
            server: side(&a.server, &b.server),
            emulator: side(&a.emulator, &b.emulator),
            ours_cpu_ms,
            machine_busy_ms,
            steal_ms: ticks_ms(a.cpu.steal, b.cpu.steal),
            siblings_cpu_ms,
            others_cpu_ms: (machine_busy_ms - ours_cpu_ms - siblings_cpu_ms).max(0.0),
            browser_processes: by_process_kind(&a.browser, &b.browser, &b.browser_kinds),
        }
    }

    /// The CPU time the window offered: its length on every CPU.
    pub fn capacity_ms(&self) -> f64 {
        self.window_ms * self.cpus.max(1) as f64
    }

    /// The run's own need of the machine: the CPU its browser, server and emulator used per
    /// second of the window (CPU-seconds per second; None for an empty window).
    pub fn need(&self) -> Option<f64> {
        let own = self.browser.cpu_ms
            + self.server.map_or(0.0, |u| u.cpu_ms)
            + self.emulator.map_or(0.0, |u| u.cpu_ms);
        (self.window_ms > 0.0).then(|| own / self.window_ms)
    }

    /// Others' CPU time as a share of the window's capacity, in percent.
    pub fn others_pct(&self) -> f64 {
        pct(self.others_cpu_ms, self.capacity_ms())
    }

    /// Steal as a share of the window's capacity, in percent.
    pub fn steal_pct(&self) -> f64 {
        pct(self.steal_ms, self.capacity_ms())
    }

    /// One line: each side's CPU and wait, everything else's CPU and steal, and whether
    /// that disturbed the run.
    pub fn describe(&self) -> String {
        let side = |name: &str, u: Option<Usage>| {
            u.map(|u| format!("{name} {:.0} ms CPU (waited {:.0} ms)", u.cpu_ms, u.runq_ms))
        };
        let mut parts: Vec<String> = [
            side("browser", Some(self.browser)),
            side("server", self.server),
            side("emulator", self.emulator),
        ]
        .into_iter()
        .flatten()
        .collect();
        parts.push(format!(
            "others {:.0} ms ({:.0} % of the machine), steal {:.0} ms over {:.0} ms",
            self.others_cpu_ms,
            self.others_pct(),
            self.steal_ms,
            self.window_ms
        ));
        let verdict = self
            .disturbance()
            .map_or(String::new(), |why| format!(" — busy: {why}"));
        format!("{}{verdict}", parts.join(", "))
    }

    /// Why this run met a disturbed machine (None: it did not), by [`DISTURBED_OTHERS_PCT`]
    /// and [`DISTURBED_STEAL_PCT`].
    pub fn disturbance(&self) -> Option<String> {
        let mut why = Vec::new();
        if self.others_pct() > DISTURBED_OTHERS_PCT {
            why.push(format!(
                "other processes used {:.0} ms of CPU ({:.0} % of the machine)",
                self.others_cpu_ms,
                self.others_pct()
            ));
        }
        if self.steal_pct() > DISTURBED_STEAL_PCT {
            why.push(format!(
                "the hypervisor stole {:.0} ms ({:.1} %)",
                self.steal_ms,
                self.steal_pct()
            ));
        }
        (!why.is_empty()).then(|| why.join(", "))
    }
}

/// A run whose window saw other processes use more than this share of the machine's CPU
/// time met a busy machine.
pub const DISTURBED_OTHERS_PCT: f64 = 10.0;
/// … or whose window lost more than this share to the hypervisor.
pub const DISTURBED_STEAL_PCT: f64 = 2.0;

fn pct(x: f64, of: f64) -> f64 {
    if of > 0.0 {
        100.0 * x / of
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(cpu_ms: u64, wait_ms: u64) -> SchedStat {
        SchedStat {
            cpu_ns: cpu_ms * 1_000_000,
            wait_ns: wait_ms * 1_000_000,
            slices: 1,
        }
    }

    #[test]
    fn descendants_follow_parents_down_from_the_root_only() {
        let st = |ppid: i32| procfs::PidStat {
            state: 'S',
            ppid,
            pgrp: 0,
            utime: 0,
            stime: 0,
            children_ticks: 0,
            start_ticks: 0,
        };
        // 10 → 11 → 13, 10 → 12; 20 is someone else's, 21 its child.
        let stats = vec![
            (13, st(11)),
            (11, st(10)),
            (12, st(10)),
            (20, st(1)),
            (21, st(20)),
            (10, st(1)),
        ];
        let mut d = descendants(10, &stats);
        d.sort();
        assert_eq!(d, [11, 12, 13]);
        assert!(descendants(13, &stats).is_empty());
    }

    #[test]
    fn a_sibling_that_ends_in_the_window_is_counted_through_its_reaper() {
        // pagebench 10; this run's browser group 11 (its renderer 12); another lane's browser
        // 20 (group 20) with its renderer 21; 30 is someone else's.
        let st = |ppid: i32, pgrp: i32, own: u64, children: u64| procfs::PidStat {
            state: 'S',
            ppid,
            pgrp,
            utime: own,
            stime: 0,
            children_ticks: children,
            start_ticks: 0,
        };
        let before = [
            (10, st(1, 10, 500, 40)),
            (11, st(10, 11, 300, 0)),
            (12, st(11, 11, 200, 0)),
            (20, st(10, 20, 100, 0)),
            (21, st(20, 20, 70, 0)),
            (30, st(1, 30, 9000, 0)),
        ];
        assert_eq!(sibling_ticks(10, &[11], &before), 40 + 100 + 70);
        // The renderer 21 ended at 90 ticks, reaped by 20 (which grew to 130); then 20 ended,
        // reaped by pagebench: its 130 + 90 joined pagebench's reaped children.
        let after = [
            (10, st(1, 10, 600, 40 + 220)),
            (11, st(10, 11, 900, 0)),
            (12, st(11, 11, 700, 0)),
            (30, st(1, 30, 9500, 0)),
        ];
        assert_eq!(sibling_ticks(10, &[11], &after), 40 + 220);
        // Growth: 20's 30 ticks and 21's 20, nothing of this run's or of 30's.
        assert_eq!(
            sibling_ticks(10, &[11], &after) - sibling_ticks(10, &[11], &before),
            50
        );
    }

    #[test]
    fn the_browser_s_cpu_is_told_by_kind_of_process_with_its_busiest_thread() {
        let at = |entries: &[(i32, i32, u64)]| {
            Reading(
                entries
                    .iter()
                    .map(|&(pid, tid, ms)| {
                        let s = SchedStat {
                            cpu_ns: ms * 1_000_000,
                            ..SchedStat::default()
                        };
                        ((pid, tid), s)
                    })
                    .collect(),
            )
        };
        // The browser 10, its network service 11 (one thread ran 970 ms of the window), a
        // renderer 12 born in the window, and 13, gone before its kind was read.
        let a = at(&[(10, 10, 100), (11, 11, 0), (11, 15, 50)]);
        let b = at(&[
            (10, 10, 130),
            (11, 11, 970),
            (11, 15, 60),
            (12, 12, 200),
            (13, 13, 5),
        ]);
        let kinds: BTreeMap<i32, String> = [
            (10, "browser".to_string()),
            (11, "network service".to_string()),
            (12, "renderer".to_string()),
        ]
        .into();
        let by = by_process_kind(&a, &b, &kinds);
        let row = |k: &str| by.iter().find(|p| p.kind == k).unwrap();
        assert_eq!(by[0].kind, "network service", "busiest first");
        assert_eq!(row("network service").usage.cpu_ms, 980.0);
        assert_eq!(row("network service").usage.busiest_thread_ms, 970.0);
        assert_eq!(
            row("renderer").usage.cpu_ms,
            200.0,
            "born in the window: whole"
        );
        assert_eq!(
            (row("unknown").processes, row("unknown").usage.cpu_ms),
            (1, 5.0)
        );
        assert_eq!(Usage::between(&a, &b).busiest_thread_ms, 970.0);
    }

    #[test]
    fn groups_split_pagebench_s_cpu_into_this_run_s_and_other_lanes() {
        let at = |all_ms: u64, own_ms: u64| GroupUsage {
            session: 1,
            all_ns: all_ms * 1_000_000,
            own_ns: own_ms * 1_000_000,
        };
        // This run's browser used 300 ms, other lanes' 500 ms (whatever of theirs ended).
        assert_eq!(
            GroupUsage::between(&at(1000, 200), &at(1800, 500)),
            Some((300.0, 500.0))
        );
        // Read a moment apart, the two figures may cross by a little: never below zero.
        assert_eq!(
            GroupUsage::between(&at(1000, 200), &at(1299, 500)),
            Some((300.0, 0.0))
        );
        // A new session (every group was gone in between) is not comparable.
        let later = GroupUsage {
            session: 2,
            ..at(50, 10)
        };
        assert_eq!(GroupUsage::between(&at(1000, 200), &later), None);
    }

    #[test]
    fn a_runs_need_is_its_own_cpu_per_second_of_window() {
        let c = Contention {
            window_ms: 2000.0,
            cpus: 2,
            browser: Usage {
                cpu_ms: 300.0,
                ..Usage::default()
            },
            server: Some(Usage {
                cpu_ms: 60.0,
                ..Usage::default()
            }),
            emulator: Some(Usage {
                cpu_ms: 40.0,
                ..Usage::default()
            }),
            ..Contention::default()
        };
        assert!((c.need().unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(Contention::default().need(), None);
    }

    #[test]
    fn usage_counts_each_thread_s_growth_and_threads_born_in_the_window_whole() {
        let a = Reading(BTreeMap::from([
            ((1, 1), stat(100, 10)),
            ((1, 2), stat(50, 5)),
            ((1, 3), stat(7, 7)),
        ]));
        let b = Reading(BTreeMap::from([
            ((1, 1), stat(160, 30)),
            ((1, 2), stat(50, 5)),
            ((2, 9), stat(25, 4)),
        ]));
        let u = Usage::between(&a, &b);
        assert_eq!(u.threads, 3);
        assert!((u.cpu_ms - 85.0).abs() < 1e-9, "{}", u.cpu_ms);
        assert!((u.runq_ms - 24.0).abs() < 1e-9, "{}", u.runq_ms);
    }

    #[test]
    fn a_busy_machine_is_a_disturbance_and_a_quiet_one_is_not() {
        let quiet = Contention {
            window_ms: 1000.0,
            cpus: 2,
            others_cpu_ms: 60.0,
            steal_ms: 5.0,
            ..Contention::default()
        };
        assert!(quiet.disturbance().is_none(), "{:?}", quiet.disturbance());
        let busy = Contention {
            others_cpu_ms: 900.0,
            steal_ms: 80.0,
            ..quiet.clone()
        };
        let why = busy.disturbance().unwrap();
        assert!(why.contains("900 ms") && why.contains("45 %"), "{why}");
        assert!(why.contains("stole 80 ms"), "{why}");
    }

    #[test]
    fn this_process_s_threads_are_read() {
        let me = std::process::id() as i32;
        let sides = Sides {
            emulator: vec![Tasks::Threads {
                pid: me,
                tids: vec![procfs::thread_id()],
            }],
            ..Sides::default()
        };
        let a = Snapshot::take(&sides);
        let t = Instant::now();
        while t.elapsed().as_millis() < 100 {
            std::hint::black_box(0u64.wrapping_add(1));
        }
        let b = Snapshot::take(&sides);
        let c = Contention::between(&a, &b, 2);
        let spun = c.emulator.unwrap();
        assert_eq!(spun.threads, 1);
        assert!(spun.cpu_ms > 1.0, "{spun:?}");
        // The process's figure is read a moment after this thread's, at both ends, and in
        // whole clock ticks (10 ms): at most a tick and the reading time apart.
        assert!(c.ours_cpu_ms >= spun.cpu_ms - 15.0, "{c:?}");
        assert!(c.window_ms >= 100.0);
    }

    /// The CPU time of the calling thread, in ms.
    fn thread_cpu_ms() -> f64 {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid out-pointer for the calling thread's clock.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
    }

    #[test]
    fn a_thread_that_ends_inside_the_window_still_counts_as_ours() {
        let sides = Sides::default();
        let a = Snapshot::take(&sides);
        // Another lane's analysis, say: 60 ms of CPU on a thread gone before the window ends.
        std::thread::spawn(|| {
            let start = thread_cpu_ms();
            while thread_cpu_ms() - start < 60.0 {
                std::hint::black_box(0u64.wrapping_add(1));
            }
        })
        .join()
        .unwrap();
        let b = Snapshot::take(&sides);
        let c = Contention::between(&a, &b, 2);
        assert!(c.ours_cpu_ms >= 45.0, "{c:?}");
    }
}
