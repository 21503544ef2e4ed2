//! A device's CPU cap on a launch's accounting group ([`CpuGroup`]): one core (`cpuset`) and a
//! quota per period (`cpu.max`, or `cpu.cfs_quota_us` / `cpu.cfs_period_us`) for every process
//! of the launch. Where the cgroup2 group can have the `cpu` and `cpuset` controllers it gets
//! the cap itself; on a machine whose cgroup2 mount lacks them (a hybrid hierarchy) the launch
//! also joins groups of its own on the cgroup v1 `cpu` and `cpuset` hierarchies, removed with
//! it. And a fixed native CPU benchmark, run in a forked child inside such a group: what a
//! device's cap achieves, measured.
//!
//! The device's core is never a link emulator's where there is another: a SCHED_FIFO emulator
//! pinned to the phone's one core would take the phone's CPU for the network and preempt it at
//! every due packet (measured: Chromium's h3 at 100 Mbit/s on phone-low, 93 Mbit/s with the
//! emulator on the other core, 48–62 with it on the device's).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::support::cgroup::CpuGroup;

/// The prefix of a cap group on a v1 hierarchy; this process's pid and a counter follow.
const V1_PREFIX: &str = "pagebench-";
static NEXT_CAP: AtomicU64 = AtomicU64::new(1);
static ORPHANS_REMOVED: Once = Once::new();
/// The CPUs this process's link emulators are pinned to, one entry per emulator.
static EMULATOR_CPUS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// An emulator's CPU, kept from devices' caps until this drops.
#[derive(Debug)]
pub struct EmulatorCpu(usize);

/// Marks `cpu` as a link emulator's while the returned guard lives.
pub fn reserve_for_emulator(cpu: usize) -> EmulatorCpu {
    EMULATOR_CPUS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(cpu);
    EmulatorCpu(cpu)
}

impl Drop for EmulatorCpu {
    fn drop(&mut self) {
        let mut cpus = EMULATOR_CPUS.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = cpus.iter().position(|c| *c == self.0) {
            cpus.swap_remove(i);
        }
    }
}

/// A quota of `quota_us` per `period_us` of CPU time for the whole group, on one core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuShare {
    pub period_us: u64,
    pub quota_us: u64,
}

impl CpuShare {
    /// The share of one core it allows.
    pub fn cores(&self) -> f64 {
        self.quota_us as f64 / self.period_us as f64
    }
}

/// Where a cap was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hierarchy {
    Cgroup2,
    CgroupV1,
}

/// Caps `group` (before any process joins it) at `share` on one core ([`device_core`]).
/// Returns where it was applied and the core.
pub fn apply(group: &mut CpuGroup, share: CpuShare) -> Result<(Hierarchy, usize)> {
    let emulators = EMULATOR_CPUS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let cpu =
        device_core(&allowed_cpus()?, &emulators).context("this process may run on no CPU")?;
    if try_cgroup2(group.dir(), share, cpu) {
        return Ok((Hierarchy::Cgroup2, cpu));
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let own = std::fs::read_to_string("/proc/self/cgroup")?;
    let dirs = ["cpu", "cpuset"].map(|c| v1_own_dir(&mountinfo, &own, c));
    let [Some(cpu_base), Some(cpuset_base)] = dirs else {
        anyhow::bail!(
            "cannot cap the browser's CPU: the cgroup2 group {} has no cpu and cpuset \
             controllers and no cgroup v1 cpu and cpuset hierarchies are mounted; enable them \
             (`echo +cpu +cpuset > …/cgroup.subtree_control` of its parent) or run on desktop",
            group.dir().display()
        );
    };
    ORPHANS_REMOVED.call_once(|| {
        remove_orphans(&cpu_base);
        remove_orphans(&cpuset_base);
    });
    let name = format!(
        "{V1_PREFIX}{}-c{}",
        std::process::id(),
        NEXT_CAP.fetch_add(1, Ordering::SeqCst)
    );
    let quota = make_v1(&cpu_base.join(&name), |d| {
        write(d, "cpu.cfs_period_us", &share.period_us.to_string())?;
        write(d, "cpu.cfs_quota_us", &share.quota_us.to_string())
    });
    group.also_join(quota?)?;
    let mems = std::fs::read_to_string(cpuset_base.join("cpuset.mems"))
        .with_context(|| format!("reading {}", cpuset_base.join("cpuset.mems").display()))?;
    let cores = make_v1(&cpuset_base.join(&name), |d| {
        write(d, "cpuset.cpus", &cpu.to_string())?;
        write(d, "cpuset.mems", mems.trim())
    });
    group.also_join(cores?)?;
    Ok((Hierarchy::CgroupV1, cpu))
}

/// Spawns `cmd` as `cgroup::spawn_counted_as` does, its group capped at `cap` (None: as it
/// is). A cap that cannot be applied is an error, never an uncapped run.
pub fn spawn_capped_as(
    cmd: &mut std::process::Command,
    user: Option<crate::support::unprivileged::UserIds>,
    cap: Option<CpuShare>,
) -> Result<(std::process::Child, Option<CpuGroup>)> {
    let Some(share) = cap else {
        return Ok(crate::support::cgroup::spawn_counted_as(cmd, user)?);
    };
    let mut group = CpuGroup::create()
        .context("a device's CPU cap needs a writable cgroup2 mount for the browser's group")?;
    apply(&mut group, share)?;
    Ok(crate::support::cgroup::spawn_in(cmd, user, Some(group))?)
}

/// The cap on the cgroup2 group itself, when its parent can give it the controllers.
fn try_cgroup2(dir: &Path, share: CpuShare, cpu: usize) -> bool {
    if let Some(parent) = dir.parent() {
        let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+cpu +cpuset");
    }
    if !dir.join("cpu.max").exists() || !dir.join("cpuset.cpus").exists() {
        return false;
    }
    let max = format!("{} {}", share.quota_us, share.period_us);
    write(dir, "cpu.max", &max).is_ok() && write(dir, "cpuset.cpus", &cpu.to_string()).is_ok()
}

/// Makes a v1 group and sets it up; removed again when setting it up fails.
fn make_v1(dir: &Path, set_up: impl Fn(&Path) -> Result<()>) -> Result<PathBuf> {
    std::fs::create_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    if let Err(e) = set_up(dir) {
        let _ = std::fs::remove_dir(dir);
        return Err(e);
    }
    Ok(dir.to_path_buf())
}

fn write(dir: &Path, file: &str, value: &str) -> Result<()> {
    let path = dir.join(file);
    std::fs::write(&path, value)
        .with_context(|| format!("cannot write {value} to {}", path.display()))
}

/// This process's group on the v1 hierarchy of `controller` (pure): its mount point (a
/// `cgroup` mount whose options name the controller) joined with the process's path there.
fn v1_own_dir(mountinfo: &str, proc_self_cgroup: &str, controller: &str) -> Option<PathBuf> {
    let path = proc_self_cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then_some(path.trim())
    })?;
    mountinfo.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        let mut fs = fs.split_whitespace();
        if fs.next()? != "cgroup" {
            return None;
        }
        let options = fs.nth(1)?;
        if !options.split(',').any(|o| o == controller) {
            return None;
        }
        let fields: Vec<&str> = mount.split_whitespace().collect();
        crate::support::cgroup::below_mount(fields.get(3)?, fields.get(4)?, path)
    })
}

/// Removes the cap groups of pagebench processes that are gone.
fn remove_orphans(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(V1_PREFIX))
            .and_then(|n| n.split_once("-c"))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            crate::support::cgroup::remove_when_empty(&entry.path());
        }
    }
}

/// The core a device runs on: the highest of the `allowed` ones that no link emulator is pinned
/// to (`emulators`), or the highest if every one has an emulator.
pub fn device_core(allowed: &[usize], emulators: &[usize]) -> Option<usize> {
    let free = allowed.iter().rev().find(|c| !emulators.contains(c));
    free.or(allowed.iter().max()).copied()
}

/// A wait on a browser's start-up (its DevTools or BiDi session, its first answers) under
/// `cap`, stretched by the cap's slowdown: the start-up runs capped too, and Firefox on a sixth
/// of a core took over 30 s to open its BiDi session on an Intel Xeon VM (39 of 62 attempts at
/// `phone-low` failed so). A start-up that only took longer is not a failed run.
pub fn startup_wait(base: Duration, cap: Option<CpuShare>) -> Duration {
    let slowdown = cap.map_or(1.0, |c| 1.0 / c.cores().clamp(1e-3, 1.0));
    base.mul_f64(slowdown)
}

/// The CPUs this process may run on, in order.
fn allowed_cpus() -> Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t filled by sched_getaffinity for this process.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error()).context("sched_getaffinity");
        }
        set
    };
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: reading a bit of an initialised set, index within its size.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_up_wait_is_stretched_by_the_cap_s_slowdown_only() {
        let sixth = CpuShare {
            period_us: 10_000,
            quota_us: 1_667,
        };
        let base = Duration::from_secs(30);
        assert_eq!(startup_wait(base, None), base);
        let stretched = startup_wait(base, Some(sixth)).as_secs_f64();
        assert!((179.0..181.0).contains(&stretched), "{stretched}");
        let whole = CpuShare {
            period_us: 10_000,
            quota_us: 20_000,
        };
        assert_eq!(startup_wait(base, Some(whole)), base);
    }

    #[test]
    fn a_device_s_core_is_never_an_emulator_s_where_there_is_another() {
        assert_eq!(device_core(&[0, 1], &[]), Some(1));
        assert_eq!(device_core(&[0, 1], &[1]), Some(0));
        assert_eq!(device_core(&[0, 1, 2, 3], &[3, 2]), Some(1));
        // Every core has an emulator (one CPU): the highest, shared.
        assert_eq!(device_core(&[0], &[0]), Some(0));
        assert_eq!(device_core(&[], &[]), None);
        // The registry holds a core while its guard lives.
        let guard = reserve_for_emulator(7);
        assert!(EMULATOR_CPUS.lock().unwrap().contains(&7));
        drop(guard);
        assert!(!EMULATOR_CPUS.lock().unwrap().contains(&7));
    }

    #[test]
    fn the_own_v1_group_is_found_by_controller() {
        let mountinfo = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
             34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n\
             36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
             41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let own = "3:cpuset:/\n1:cpu:/lxc/a\n0::/\n";
        assert_eq!(
            v1_own_dir(mountinfo, own, "cpu"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu/lxc/a"))
        );
        assert_eq!(
            v1_own_dir(mountinfo, own, "cpuset"),
            Some(PathBuf::from("/sys/fs/cgroup/cpuset"))
        );
        let combined = "2:cpu,cpuacct:/x\n";
        assert_eq!(
            v1_own_dir(
                "36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
                combined,
                "cpu"
            ),
            Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/x"))
        );
        assert_eq!(v1_own_dir(mountinfo, "0::/\n", "cpu"), None);
    }
}
