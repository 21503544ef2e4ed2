//! Concurrent lanes (`--jobs`): which parts of a plan may run at the same moment, decided from
//! what their series measured — the CPU their runs used per second of load (pure).
//!
//! The unit of work is one round of one cell ([`units`]): its runs interleave on one lane in
//! their seeded order, exactly as in a serial walk, so a comparison between the protocols (and
//! servers, browsers) of a round never spans two machine conditions. A unit whose series wait
//! on the network (a lossy download, a long-RTT load) needs little CPU and shares the machine
//! with other such units — at most `jobs` at once, their needs summed within a budget; a unit
//! that needs more, or whose need is not measured yet (a cell's first round), runs alone, and
//! nothing starts beside it. Its browser launches and settles (which burst the CPU) therefore
//! never overlap another lane's load: only light units ever share.
//!
//! On lanes the units do not wait in plan order: warm-ups first, then units still unmeasured,
//! then the light ones together, then the heavy ones, so the machine drains once between the
//! kinds instead of before every unit that runs alone. Warm-ups of unmeasured need run beside
//! one another (one per CPU): nothing they measure counts, and a need one of them measured
//! beside busy lanes is trusted only when it is heavy ([`Needs::record`]).

use std::collections::BTreeMap;

use crate::config::plan::PlannedRun;
use crate::evidence::run_record::RunRecord;

/// `--jobs`: how many lanes a plan may walk on at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jobs {
    /// At most this many (1: the serial walk); a unit shares only when its need is light.
    Fixed(usize),
    /// As many as [`auto`] gives this machine.
    Auto,
    /// This many, sharing whatever their need ([`Policy::forced`]): `bench concurrency`'s
    /// concurrent blocks (not a `--jobs` value).
    Forced(usize),
}

impl std::str::FromStr for Jobs {
    type Err = String;
    fn from_str(s: &str) -> Result<Jobs, String> {
        match s.trim() {
            "auto" => Ok(Jobs::Auto),
            n => match n.parse::<usize>() {
                Ok(n @ 1..=MAX_JOBS) => Ok(Jobs::Fixed(n)),
                _ => Err(format!(
                    "--jobs {n:?}: give 1 to {MAX_JOBS} lanes (1: one run at a time) or auto"
                )),
            },
        }
    }
}

/// The most lanes `--jobs` takes.
pub const MAX_JOBS: usize = 16;

impl Jobs {
    /// The policy on a machine of `cpus` CPUs, rounds sharing the machine when their need is
    /// at most `share_below` (`--share-below`).
    pub fn policy(self, cpus: usize, share_below: f64) -> Policy {
        match self {
            Jobs::Fixed(1) => Policy::serial(),
            Jobs::Fixed(n) => Policy {
                jobs: n,
                light: share_below,
                warmups: auto(cpus).warmups.min(n),
                ..auto(cpus)
            },
            Jobs::Auto => Policy {
                light: share_below,
                ..auto(cpus)
            },
            Jobs::Forced(n) => Policy::forced(n),
        }
    }
}

/// `--share-below`: a CPU need above 0 and at most [`MAX_SHARE_BELOW`].
pub fn parse_share_below(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= MAX_SHARE_BELOW => Ok(v),
        _ => Err(format!(
            "--share-below {s:?}: give the CPU need, in CPU-seconds per second of load, up to \
             which rounds share the machine: above 0 and at most {MAX_SHARE_BELOW} (default \
             {AUTO_LIGHT})"
        )),
    }
}

/// The largest `--share-below` (a need of one whole CPU).
pub const MAX_SHARE_BELOW: f64 = 1.0;

/// How lanes may share the machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Most units at once (1: a serial walk).
    pub jobs: usize,
    /// A unit may share the machine when its need is at most this (CPU-seconds per second of
    /// load, summed over the browser, the server and the emulator).
    pub light: f64,
    /// …and the needs of the units sharing it add up to at most this.
    pub budget: f64,
    /// Warm-ups of unmeasured need that may run at once (1: each alone).
    pub warmups: usize,
}

/// `--jobs auto`'s lanes on a machine of `cpus` CPUs: three lanes per CPU, units of at most
/// [`AUTO_LIGHT`] CPU-s/s, together within a quarter of the machine; a unit above it runs
/// alone; one warm-up of unmeasured need per CPU. The budget, not the lane count, bounds what
/// sharing costs: lossy downloads (0.03–0.08 CPU-s/s each as counted now) fill it at five to
/// six, with one 0.4 CPU-s browser start-up at a time every few seconds — less than `bench
/// concurrency`'s forced blocks, where they were shown equivalent beside page lanes of 0.2–0.8
/// CPU-s/s that started a browser every second or two.
pub fn auto(cpus: usize) -> Policy {
    Policy {
        jobs: (3 * cpus).clamp(1, 8),
        light: AUTO_LIGHT,
        budget: AUTO_BUDGET_PER_CPU * cpus.max(1) as f64,
        warmups: cpus.clamp(1, 8),
    }
}

/// The need up to which a round shares the machine by default. `bench concurrency` (24 series,
/// 10 rounds, 3 lanes sharing whatever their need) showed the lossy downloads equivalent to a
/// serial walk, needing 0.02–0.05 CPU-s/s; the lightest page series, cell-edge page50 at 0.19,
/// was not shown equivalent (90 % CIs up to 1.25×), and pages that need more were slower
/// beside other lanes (up to 1.10× [1.03–1.22]). Counted as runs are now (each browser in a CPU
/// group of its own, which keeps the CPU of its helpers), the same series need more: the lossy
/// downloads 0.03–0.08 (single runs up to 0.12), cell-edge page50 0.19–0.27. The line sits in
/// that gap: at 0.1 mobile download h3 (0.07–0.12) shared in one walk and ran alone in the next.
pub const AUTO_LIGHT: f64 = 0.15;
pub const AUTO_BUDGET_PER_CPU: f64 = 0.25;

impl Policy {
    /// One lane: the serial walk.
    pub fn serial() -> Policy {
        Policy {
            jobs: 1,
            light: 0.0,
            budget: 0.0,
            warmups: 1,
        }
    }

    /// `jobs` lanes that share whatever their need (`bench concurrency`'s concurrent blocks:
    /// it measures what sharing does, so nothing is held back).
    pub fn forced(jobs: usize) -> Policy {
        Policy {
            jobs,
            light: f64::INFINITY,
            budget: f64::INFINITY,
            warmups: 1,
        }
    }

    /// Whether a unit of `need` may share the machine (None: not measured yet, which only a
    /// forced policy lets share).
    pub fn shares(&self, need: Option<f64>) -> bool {
        self.jobs > 1 && need.map_or(self.light.is_infinite(), |n| n <= self.light)
    }

    /// Whether units leave plan order by kind (lanes deciding by need; a serial walk and
    /// `bench concurrency`'s blocks keep it).
    fn reorders(&self) -> bool {
        self.jobs > 1 && self.light.is_finite()
    }
}

/// The plan's units: runs of one cell, phase and round, in plan order (the plan lists a
/// round's runs together).
pub fn units<'a>(todo: &[&'a PlannedRun]) -> Vec<Vec<&'a PlannedRun>> {
    let mut out: Vec<Vec<&PlannedRun>> = Vec::new();
    for p in todo {
        match out.last_mut() {
            Some(u) if same_unit(u[0], p) => u.push(p),
            _ => out.push(vec![p]),
        }
    }
    out
}

fn same_unit(a: &PlannedRun, b: &PlannedRun) -> bool {
    a.profile == b.profile && a.workload == b.workload && a.phase == b.phase && a.round == b.round
}

/// What a running unit holds of the machine.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Held {
    /// The whole machine.
    Alone,
    /// A share: its need.
    Shared(f64),
    /// A place among warm-ups of unmeasured need, which run beside nothing else.
    Warmup,
}

/// The order the kinds of units start in on lanes: warm-ups, units still unmeasured (alone:
/// their need is learnt), light units, heavy units.
fn rank(held: Held, need: Option<f64>) -> u8 {
    match (held, need) {
        (Held::Warmup, _) => 0,
        (Held::Alone, None) => 1,
        (Held::Shared(_), _) => 2,
        (Held::Alone, Some(_)) => 3,
    }
}

/// Hands units to lanes ([`Scheduler::start`]), told when a lane is free again
/// ([`Scheduler::finished`]).
#[derive(Debug)]
pub struct Scheduler {
    policy: Policy,
    /// Per unit: whether it is a warm-up (none of its runs counts).
    warmup: Vec<bool>,
    /// The units not handed out yet, in plan order.
    pending: Vec<usize>,
    lanes: Vec<Option<(usize, Held)>>,
    stopped: bool,
}

impl Scheduler {
    /// A scheduler of `warmup.len()` units, `warmup[u]` telling whether unit `u` is a warm-up.
    pub fn new(policy: Policy, warmup: Vec<bool>) -> Scheduler {
        Scheduler {
            policy,
            pending: (0..warmup.len()).collect(),
            warmup,
            lanes: vec![None; policy.jobs.max(1)],
            stopped: false,
        }
    }

    /// The units to start now, each with its lane and whether it shares the machine, given
    /// each unit's measured need. A unit that must run alone waits for every lane to be free;
    /// nothing passes it: on a serial walk the next unit in plan order, on lanes the first of
    /// its kind ([`rank`]).
    pub fn start(&mut self, need: impl Fn(usize) -> Option<f64>) -> Vec<Assignment> {
        let mut out = Vec::new();
        while !self.stopped {
            let Some((at, held)) = self.next_unit(&need) else {
                break;
            };
            let free = self.lanes.iter().position(Option::is_none);
            let Some(lane) = free.filter(|_| self.fits(held)) else {
                break;
            };
            let unit = self.pending.remove(at);
            self.lanes[lane] = Some((unit, held));
            out.push(Assignment {
                lane,
                unit,
                shared: held != Held::Alone,
                then: (held == Held::Alone)
                    .then(|| self.next_alone(&need))
                    .flatten(),
            });
        }
        out
    }

    /// The unit to run alone after the one just handed out, as the needs stand now: it starts
    /// when every lane is free again, so on the first lane — the one the unit now running alone
    /// has. None when the next is not one to run alone (or there is none).
    fn next_alone(&self, need: &impl Fn(usize) -> Option<f64>) -> Option<usize> {
        match self.next_unit(need) {
            Some((at, Held::Alone)) => Some(self.pending[at]),
            _ => None,
        }
    }

    /// The next unit to hand out (its place in `pending`) and what it would hold.
    fn next_unit(&self, need: &impl Fn(usize) -> Option<f64>) -> Option<(usize, Held)> {
        let held = |u: usize| self.held_by(u, need(u));
        if !self.policy.reorders() {
            return self.pending.first().map(|&u| (0, held(u)));
        }
        self.pending
            .iter()
            .enumerate()
            .map(|(at, &u)| (at, held(u), rank(held(u), need(u))))
            .min_by_key(|&(at, _, rank)| (rank, at))
            .map(|(at, held, _)| (at, held))
    }

    fn held_by(&self, unit: usize, need: Option<f64>) -> Held {
        if self.policy.shares(need) {
            Held::Shared(need.unwrap_or(0.0))
        } else if need.is_none() && self.warmup[unit] && self.policy.warmups > 1 {
            Held::Warmup
        } else {
            Held::Alone
        }
    }

    /// Whether a unit holding `held` may start beside the running ones.
    fn fits(&self, held: Held) -> bool {
        let running: Vec<Held> = self.held().collect();
        match held {
            Held::Alone => running.is_empty(),
            Held::Warmup => {
                running.iter().all(|h| *h == Held::Warmup) && running.len() < self.policy.warmups
            }
            Held::Shared(n) => {
                let shared = running.iter().map(|h| match h {
                    Held::Shared(n) => Some(*n),
                    _ => None,
                });
                match shared.collect::<Option<Vec<f64>>>() {
                    Some(used) => {
                        used.is_empty() || used.iter().sum::<f64>() + n <= self.policy.budget
                    }
                    None => false,
                }
            }
        }
    }

    /// `lane` finished its unit.
    pub fn finished(&mut self, lane: usize) {
        if let Some(slot) = self.lanes.get_mut(lane) {
            *slot = None;
        }
    }

    /// Start nothing more (interrupted, or a lane failed).
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// Whether every unit was handed out (or the walk stopped) and every lane is free.
    pub fn is_done(&self) -> bool {
        (self.stopped || self.pending.is_empty()) && self.held().count() == 0
    }

    fn held(&self) -> impl Iterator<Item = Held> + '_ {
        self.lanes.iter().flatten().map(|(_, h)| *h)
    }
}

/// A unit handed to a lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    pub lane: usize,
    pub unit: usize,
    /// Whether it shares the machine with other lanes (else it has it alone).
    pub shared: bool,
    /// A unit that runs alone: the unit expected next on its lane (see
    /// [`Scheduler::next_alone`]), whose first browser may start once this one's last
    /// measured window has closed, as within a unit. A guess: if another unit comes, that
    /// browser is ended before its run.
    pub then: Option<usize>,
}

/// What the runs measured of each series' CPU need, as they finish.
#[derive(Debug, Clone)]
pub struct Needs {
    by_series: BTreeMap<String, Vec<f64>>,
    /// The policy's light line and budget ([`Needs::record`]).
    light: f64,
    budget: f64,
}

impl Needs {
    pub fn new(policy: &Policy) -> Needs {
        Needs {
            by_series: BTreeMap::new(),
            light: policy.light,
            budget: policy.budget,
        }
    }

    /// Notes a finished attempt's need (runs without contention figures say nothing). Lanes
    /// beside it that used more than the budget may have kept it waiting for a CPU, its load
    /// stretched and its need looking lighter than it is: a light need from such a window is
    /// no evidence (a heavy one is).
    pub fn record(&mut self, rec: &RunRecord) {
        let Some(c) = rec.contention.as_ref() else {
            return;
        };
        let Some(n) = c.need() else {
            return;
        };
        if n <= self.light && c.siblings_cpu_ms / c.window_ms > self.budget {
            return;
        }
        self.by_series
            .entry(series_key(&rec.profile, &rec.workload, &rec.plan_id))
            .or_default()
            .push(n);
    }

    /// A unit's need: the largest of its series' median needs; None while any of its series
    /// has none yet.
    pub fn of_unit(&self, unit: &[&PlannedRun]) -> Option<f64> {
        let mut most: f64 = 0.0;
        for p in unit {
            let v = self
                .by_series
                .get(&series_key(&p.profile, &p.workload, &p.id))?;
            most = most.max(crate::support::stats::median(v).ok()?);
        }
        Some(most)
    }
}

/// A series' key from a run's plan id: the id without its round (`wired-page10-r03-h2` and
/// `wired-page10-w1-h2` are one series).
fn series_key(profile: &str, workload: &str, plan_id: &str) -> String {
    let rest = plan_id
        .strip_prefix(&format!("{profile}-{workload}-"))
        .unwrap_or(plan_id);
    let after_round = rest.split_once('-').map_or(rest, |(_, r)| r);
    format!("{profile}/{workload}/{after_round}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn light(jobs: usize) -> Policy {
        Policy {
            jobs,
            light: 0.25,
            budget: 0.5,
            warmups: 2,
        }
    }

    /// A scheduler of `units` counted units.
    fn counted(policy: Policy, units: usize) -> Scheduler {
        Scheduler::new(policy, vec![false; units])
    }

    /// Starts what it can with `needs` and returns `lane:unit[s]` per assignment.
    fn step(s: &mut Scheduler, needs: &[Option<f64>]) -> Vec<String> {
        s.start(|u| needs[u])
            .into_iter()
            .map(|a| format!("{}:{}{}", a.lane, a.unit, if a.shared { "s" } else { "" }))
            .collect()
    }

    #[test]
    fn light_units_share_within_the_lanes_and_the_budget() {
        let needs = [Some(0.1), Some(0.1), Some(0.2), Some(0.1), Some(0.05)];
        let mut s = counted(light(3), needs.len());
        // 0.1 + 0.1 + 0.2 = 0.4 ≤ 0.5 with three lanes; the fourth waits for a lane.
        assert_eq!(step(&mut s, &needs), ["0:0s", "1:1s", "2:2s"]);
        assert!(step(&mut s, &needs).is_empty());
        s.finished(1);
        // 0.1 + 0.2 + 0.1 = 0.4: fits again.
        assert_eq!(step(&mut s, &needs), ["1:3s"]);
        s.finished(2);
        assert_eq!(step(&mut s, &needs), ["2:4s"]);
        for lane in 0..3 {
            s.finished(lane);
        }
        assert!(s.is_done());
    }

    #[test]
    fn unmeasured_units_then_light_ones_then_heavy_ones_each_heavy_one_alone() {
        let needs = [Some(0.1), None, Some(0.9), Some(0.1), Some(0.8)];
        let mut s = counted(light(3), needs.len());
        // The unmeasured unit first, alone: its need is learnt before the others pass it.
        assert_eq!(step(&mut s, &needs), ["0:1"]);
        assert!(step(&mut s, &needs).is_empty(), "nothing starts beside it");
        s.finished(0);
        // The light units together, the heavy ones after them, one at a time.
        assert_eq!(step(&mut s, &needs), ["0:0s", "1:3s"]);
        s.finished(0);
        assert!(
            step(&mut s, &needs).is_empty(),
            "the heavy unit waits for every lane"
        );
        s.finished(1);
        assert_eq!(step(&mut s, &needs), ["0:2"]);
        assert!(step(&mut s, &needs).is_empty());
        s.finished(0);
        assert_eq!(step(&mut s, &needs), ["0:4"]);
        s.finished(0);
        assert!(s.is_done());
        // A serial walk keeps plan order.
        let mut serial = counted(Policy::serial(), needs.len());
        assert_eq!(step(&mut serial, &needs), ["0:0"]);
    }

    #[test]
    fn a_unit_that_runs_alone_names_the_unit_that_runs_alone_after_it() {
        let needs = [Some(0.9), Some(0.1), Some(0.8), None];
        let mut s = counted(light(3), needs.len());
        let then = |a: Vec<Assignment>| a.iter().map(|a| (a.lane, a.unit, a.then)).collect();
        let got: Vec<(usize, usize, Option<usize>)> = then(s.start(|u| needs[u]));
        // The unmeasured unit alone first; a light one (unit 1) comes next, which shares:
        // nothing to launch ahead for.
        assert_eq!(got, [(0, 3, None)]);
        s.finished(0);
        let got: Vec<(usize, usize, Option<usize>)> = then(s.start(|u| needs[u]));
        assert_eq!(got, [(0, 1, None)], "a shared unit names none");
        s.finished(0);
        // The heavy ones, each alone on the first lane, each naming the next.
        let got: Vec<(usize, usize, Option<usize>)> = then(s.start(|u| needs[u]));
        assert_eq!(got, [(0, 0, Some(2))]);
        s.finished(0);
        let got: Vec<(usize, usize, Option<usize>)> = then(s.start(|u| needs[u]));
        assert_eq!(got, [(0, 2, None)], "the last names none");
    }

    #[test]
    fn warm_ups_of_unmeasured_need_run_first_one_per_cpu_beside_nothing_else() {
        // Units 0 and 2 are counted and light, 1, 3 and 4 warm-ups not measured yet.
        let needs = [Some(0.1), None, Some(0.1), None, None];
        let mut s = Scheduler::new(light(3), vec![false, true, false, true, true]);
        assert_eq!(
            step(&mut s, &needs),
            ["0:1s", "1:3s"],
            "two warm-ups: two CPUs"
        );
        s.finished(0);
        assert_eq!(step(&mut s, &needs), ["0:4s"]);
        s.finished(1);
        assert!(
            step(&mut s, &needs).is_empty(),
            "no counted unit beside a warm-up of unknown need"
        );
        s.finished(0);
        assert_eq!(step(&mut s, &needs), ["0:0s", "1:2s"]);
        // Warm-ups whose need is known are units like any other; one warm-up per CPU on one
        // CPU is each alone.
        let mut one = Scheduler::new(
            Policy {
                warmups: 1,
                ..light(3)
            },
            vec![true, true],
        );
        assert_eq!(step(&mut one, &[None, None]), ["0:0"]);
    }

    #[test]
    fn a_light_need_measured_beside_busy_lanes_is_no_evidence_a_heavy_one_is() {
        let mut needs = Needs::new(&light(3));
        let unit = PlannedRun {
            index: 0,
            id: "wired-page10-w1-h2".into(),
            profile: "wired".into(),
            workload: "page10".into(),
            server: "embedded".into(),
            browser: Default::default(),
            view: Default::default(),
            device: Default::default(),
            variant: crate::config::protocol::Variant::H2,
            phase: crate::config::identity::Phase::Warmup,
            round: 1,
            position: 1,
            trace_start: Default::default(),
        };
        let measured = |own: f64, siblings: f64| RunRecord {
            profile: "wired".into(),
            workload: "page10".into(),
            contention: Some(crate::support::contention::Contention {
                window_ms: 1000.0,
                browser: crate::support::contention::Usage {
                    cpu_ms: own * 1000.0,
                    ..Default::default()
                },
                siblings_cpu_ms: siblings * 1000.0,
                ..Default::default()
            }),
            ..RunRecord::fixture("wired-page10-w1-h2")
        };
        needs.record(&measured(0.1, 0.9));
        assert_eq!(needs.of_unit(&[&unit]), None, "light beside 0.9 of lanes");
        needs.record(&measured(0.6, 0.9));
        assert_eq!(
            needs.of_unit(&[&unit]),
            Some(0.6),
            "heavy is heavy beside anything"
        );
        let mut quiet = Needs::new(&light(3));
        quiet.record(&measured(0.1, 0.4));
        assert_eq!(
            quiet.of_unit(&[&unit]),
            Some(0.1),
            "beside lanes within the budget"
        );
    }

    #[test]
    fn the_budget_holds_back_a_unit_that_would_overfill_it_but_never_the_first() {
        let needs = [Some(0.25), Some(0.25), Some(0.25)];
        let mut s = counted(light(3), needs.len());
        assert_eq!(step(&mut s, &needs), ["0:0s", "1:1s"]);
        s.finished(0);
        s.finished(1);
        let mut lone = counted(
            Policy {
                budget: 0.1,
                ..light(2)
            },
            1,
        );
        assert_eq!(step(&mut lone, &[Some(0.2)]), ["0:0s"]);
    }

    #[test]
    fn serial_is_one_unit_at_a_time_and_stop_starts_nothing_more() {
        let needs = [Some(0.0), Some(0.0)];
        let mut s = counted(Policy::serial(), 2);
        assert_eq!(step(&mut s, &needs), ["0:0"]);
        s.stop();
        s.finished(0);
        assert!(step(&mut s, &needs).is_empty());
        assert!(s.is_done());
        let mut forced = counted(Policy::forced(2), 2);
        assert_eq!(step(&mut forced, &[Some(5.0), None]), ["0:0s", "1:1s"]);
    }

    #[test]
    fn jobs_parse_and_give_their_policy() {
        assert_eq!("auto".parse::<Jobs>(), Ok(Jobs::Auto));
        assert_eq!("3".parse::<Jobs>(), Ok(Jobs::Fixed(3)));
        for bad in ["0", "17", "two", ""] {
            let e = bad.parse::<Jobs>().unwrap_err();
            assert!(e.contains("--jobs") && e.contains("auto"), "{e}");
        }
        assert_eq!(Jobs::Fixed(1).policy(2, AUTO_LIGHT), Policy::serial());
        assert_eq!(Jobs::Fixed(4).policy(2, AUTO_LIGHT).jobs, 4);
        assert_eq!(Jobs::Fixed(4).policy(2, 0.3).light, 0.3);
        assert_eq!(Jobs::Auto.policy(2, AUTO_LIGHT).light, AUTO_LIGHT);
        assert_eq!(parse_share_below(" 0.25"), Ok(0.25));
        for bad in ["0", "-1", "1.5", "NaN", "inf", "x"] {
            let e = parse_share_below(bad).unwrap_err();
            assert!(e.contains("--share-below") && e.contains("CPU"), "{e}");
        }
    }

    #[test]
    fn auto_scales_with_the_cpus() {
        assert_eq!(auto(2).jobs, 6);
        assert_eq!(auto(1).jobs, 3);
        assert_eq!(auto(16).jobs, 8);
        assert!((auto(2).budget - 0.5).abs() < 1e-9);
    }

    #[test]
    fn series_keys_drop_the_round() {
        assert_eq!(
            series_key("wired", "page10", "wired-page10-r03-h2"),
            "wired/page10/h2"
        );
        assert_eq!(
            series_key("wired", "page10", "wired-page10-w1-embedded_x-h3-primed"),
            "wired/page10/embedded_x-h3-primed"
        );
    }
}
