//! CPU accounting groups (cgroup v2): every browser and reference server pagebench starts runs
//! in a group of its own below one group per pagebench process, so the CPU of all its processes
//! is counted, even of helpers that outlive their parent and are reaped by init (a closing
//! Chromium's GPU and network processes), and the CPU of other lanes' processes is told apart
//! from everything else's.
//!
//! The groups are created below this process's own group on the cgroup2 mount; no controller
//! is enabled (`cpu.stat` counts in every group). Where there is no writable cgroup2 mount the
//! groups are simply absent ([`CpuGroup::create`] returns None, said once) and contention falls
//! back to reading processes. Every group is removed when its processes are gone; the
//! process's group when its last one is, or on a forced exit; groups left by a pagebench that
//! was killed are removed by the next one.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use crate::support::signals::{self, CleanupGuard};
use crate::support::unprivileged::{self, UserIds};

/// The prefix of a pagebench process's group; its pid follows.
const SESSION_PREFIX: &str = "pagebench-";

/// This process's group of groups, alive while one of its groups is.
struct Session {
    dir: PathBuf,
    live: usize,
    /// Counts the sessions made, so a reading can tell whether two of them saw the same one.
    generation: u64,
    _cleanup: CleanupGuard,
}

static SESSION: Mutex<Option<Session>> = Mutex::new(None);
static GENERATION: AtomicU64 = AtomicU64::new(0);
static NEXT_GROUP: AtomicU64 = AtomicU64::new(1);
/// The group each process group (by its id) was started in.
static BY_PROCESS_GROUP: Mutex<BTreeMap<i32, PathBuf>> = Mutex::new(BTreeMap::new());
static UNAVAILABLE: Once = Once::new();

/// One accounting group, for one browser or server launch; removed on drop (after its
/// processes are gone).
pub struct CpuGroup {
    dir: PathBuf,
    /// The `cgroup.procs` files a process of this launch joins: this group's, then a device's
    /// cap groups' on a cgroup v1 machine ([`CpuGroup::also_join`]).
    procs: Vec<CString>,
    pgid: Option<i32>,
    /// A device's cap groups on cgroup v1 hierarchies, removed with this one.
    caps: Vec<PathBuf>,
    cleanups: Vec<CleanupGuard>,
    _cleanup: CleanupGuard,
}

impl CpuGroup {
    /// A new empty group, or None where groups cannot be made here (said once, with why).
    pub fn create() -> Option<CpuGroup> {
        match Self::try_create() {
            Ok(g) => Some(g),
            Err(why) => {
                UNAVAILABLE.call_once(|| {
                    tracing::warn!(
                        "no CPU accounting groups ({why}): the CPU of a browser's helpers that \
                         outlive it counts as other processes'"
                    )
                });
                None
            }
        }
    }

    fn try_create() -> Result<CpuGroup, String> {
        let mut session = lock(&SESSION);
        if session.is_none() {
            *session = Some(open_session()?);
        }
        let s = session.as_mut().expect("just made");
        let dir = s
            .dir
            .join(format!("g{}", NEXT_GROUP.fetch_add(1, Ordering::SeqCst)));
        if let Err(e) = std::fs::create_dir(&dir) {
            if s.live == 0 {
                let _ = std::fs::remove_dir(&s.dir);
                *session = None;
            }
            return Err(format!("cannot create {}: {e}", dir.display()));
        }
        s.live += 1;
        let procs = procs_file(&dir).map_err(|e| e.to_string())?;
        let for_cleanup = dir.clone();
        Ok(CpuGroup {
            dir,
            procs: vec![procs],
            pgid: None,
            caps: Vec::new(),
            cleanups: Vec::new(),
            _cleanup: signals::register_cleanup(move || remove_when_empty(&for_cleanup)),
        })
    }

    /// Makes `cmd`'s process start in this group (its children follow it).
    pub fn join_on_exec(&self, cmd: &mut Command) {
        let procs = self.procs.clone();
        // SAFETY: `join_now` is async-signal-safe (open, write, close on paths made before
        // the fork; no allocation).
        unsafe {
            cmd.pre_exec(move || join_now(&procs));
        }
    }

    /// The group's directory (on the cgroup2 mount).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Processes of this launch also join the group `dir` (a device's cap on a cgroup v1
    /// hierarchy, made by `cpu_cap`), which is removed with this group (or on a forced exit).
    pub fn also_join(&mut self, dir: PathBuf) -> std::io::Result<()> {
        self.procs.push(procs_file(&dir)?);
        let for_cleanup = dir.clone();
        self.cleanups.push(signals::register_cleanup(move || {
            remove_when_empty(&for_cleanup)
        }));
        self.caps.push(dir);
        Ok(())
    }

    /// The calling process joins every group of this launch now (in a forked child: only
    /// async-signal-safe calls).
    pub fn join_from_child(&self) -> std::io::Result<()> {
        join_now(&self.procs)
    }

    /// Names the process group started in this group, for [`usage_of_process_group`].
    pub fn attach(&mut self, pgid: i32) {
        self.pgid = Some(pgid);
        lock(&BY_PROCESS_GROUP).insert(pgid, self.dir.clone());
    }
}

fn procs_file(dir: &Path) -> std::io::Result<CString> {
    CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
}

/// Writes "0" (the calling process) to each `cgroup.procs` file: async-signal-safe, so a
/// forked child may call it before exec.
fn join_now(procs: &[CString]) -> std::io::Result<()> {
    for p in procs {
        // SAFETY: open(2), write(2) and close(2) on a NUL-terminated path made earlier.
        unsafe {
            let fd = libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let written = libc::write(fd, b"0".as_ptr().cast(), 1);
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if written != 1 {
                return Err(err);
            }
        }
    }
    Ok(())
}

/// Spawns `cmd` with its process (group) in a new accounting group, when groups can be made.
pub fn spawn_counted(cmd: &mut Command) -> std::io::Result<(Child, Option<CpuGroup>)> {
    spawn_counted_as(cmd, None)
}

/// As [`spawn_counted`], the process dropping to `user` once it joined its group (joining
/// needs root).
pub fn spawn_counted_as(
    cmd: &mut Command,
    user: Option<UserIds>,
) -> std::io::Result<(Child, Option<CpuGroup>)> {
    spawn_in(cmd, user, CpuGroup::create())
}

/// Spawns `cmd` (dropping to `user` once it joined) with its process (group) in `group`.
pub fn spawn_in(
    cmd: &mut Command,
    user: Option<UserIds>,
    mut group: Option<CpuGroup>,
) -> std::io::Result<(Child, Option<CpuGroup>)> {
    if let Some(g) = &group {
        g.join_on_exec(cmd);
    }
    if let Some(user) = user {
        unprivileged::drop_on_exec(cmd, user);
    }
    let child = cmd.spawn()?;
    if let Some(g) = &mut group {
        g.attach(child.id() as i32);
    }
    Ok((child, group))
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid {
            lock(&BY_PROCESS_GROUP).remove(&pgid);
        }
        remove_when_empty(&self.dir);
        // After this group's processes are gone, so are the caps'.
        for cap in self.caps.drain(..) {
            remove_when_empty(&cap);
        }
        self.cleanups.clear();
        let mut session = lock(&SESSION);
        if let Some(s) = session.as_mut() {
            s.live = s.live.saturating_sub(1);
            if s.live == 0 {
                let _ = std::fs::remove_dir(&s.dir);
                *session = None;
            }
        }
    }
}

/// The CPU time (ns) of every process that ever ran in the group a process group was started
/// in; None when it was started in none.
pub fn usage_of_process_group(pgid: i32) -> Option<u64> {
    let dir = lock(&BY_PROCESS_GROUP).get(&pgid).cloned()?;
    usage_ns(&dir)
}

/// The CPU time (ns) of everything this process started in groups since its session began,
/// and which session that was; None without one.
pub fn session_usage() -> Option<(u64, u64)> {
    let session = lock(&SESSION);
    let s = session.as_ref()?;
    usage_ns(&s.dir).map(|ns| (s.generation, ns))
}

fn usage_ns(dir: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join("cpu.stat")).ok()?;
    parse_usage_usec(&text).map(|us| us * 1000)
}

/// `usage_usec` of a `cpu.stat` (pure).
fn parse_usage_usec(cpu_stat: &str) -> Option<u64> {
    cpu_stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
}

fn open_session() -> Result<Session, String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let parent = own_group_dir(&mountinfo, &own).ok_or("no cgroup2 mount with this process")?;
    remove_orphaned_sessions(&parent);
    let dir = parent.join(format!("{SESSION_PREFIX}{}", std::process::id()));
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    let for_cleanup = dir.clone();
    Ok(Session {
        dir,
        live: 0,
        generation: GENERATION.fetch_add(1, Ordering::SeqCst) + 1,
        _cleanup: signals::register_cleanup(move || {
            let _ = std::fs::remove_dir(&for_cleanup);
        }),
    })
}

/// This process's own group's directory (pure): the cgroup2 mount whose root holds the
/// process's path (`0::PATH` of `/proc/self/cgroup`), joined with what is below that root.
pub(crate) fn own_group_dir(mountinfo: &str, proc_self_cgroup: &str) -> Option<PathBuf> {
    let path = proc_self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))?
        .trim();
    mountinfo.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        if fs.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let fields: Vec<&str> = mount.split_whitespace().collect();
        below_mount(fields.get(3)?, fields.get(4)?, path)
    })
}

/// Where a group at `path` is under a cgroup mount of `root` at `point` (pure; None when the
/// path is not below the mount's root: `/a/bc` is not below `/a/b`).
pub(crate) fn below_mount(root: &str, point: &str, path: &str) -> Option<PathBuf> {
    let below = path.strip_prefix(root.trim_end_matches('/'))?;
    if !below.is_empty() && !below.starts_with('/') {
        return None;
    }
    Some(Path::new(point).join(below.trim_start_matches('/')))
}

/// Removes the groups of pagebench processes that are gone (killed before they could).
fn remove_orphaned_sessions(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SESSION_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let session = entry.path();
        if let Ok(groups) = std::fs::read_dir(&session) {
            for g in groups.flatten().filter(|g| g.path().is_dir()) {
                let _ = std::fs::remove_dir(g.path());
            }
        }
        let _ = std::fs::remove_dir(&session);
    }
}

/// Removes a group once no process is in it (they leave as they exit). Processes still in it
/// after a moment are ours (started in it, or by what was) and are ended; a group that still
/// cannot be removed is left, and said.
pub(crate) fn remove_when_empty(dir: &Path) {
    if removed_within(dir, Duration::from_millis(300)).is_ok() {
        return;
    }
    end_members(dir);
    if let Err(e) = removed_within(dir, Duration::from_secs(1)) {
        tracing::warn!("cannot remove the CPU group {}: {e}", dir.display());
    }
}

fn removed_within(dir: &Path, wait: Duration) -> std::io::Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// SIGKILL to every process in the group: by `cgroup.kill` where the kernel has it, else pid
/// by pid from `cgroup.procs`.
fn end_members(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        // SAFETY: a process of a group only our launches put processes in.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_of_pagebench_processes_that_are_gone_are_removed_and_others_kept() {
        let parent = tempfile::tempdir().unwrap();
        let gone = parent.path().join(format!("{SESSION_PREFIX}{}", i32::MAX));
        let alive = parent
            .path()
            .join(format!("{SESSION_PREFIX}{}", std::process::id()));
        let foreign = parent.path().join("user.slice");
        for d in [
            gone.join("g1"),
            gone.join("g2"),
            alive.join("g1"),
            foreign.clone(),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        remove_orphaned_sessions(parent.path());
        assert!(!gone.exists());
        assert!(alive.join("g1").exists() && foreign.exists());
    }

    /// Burns CPU in a grandchild that outlives its parent (reaped by init, as a closing
    /// browser's helpers are): the group still counts it, and is removed after.
    #[test]
    fn a_helper_that_outlives_its_parent_is_counted_and_the_group_removed() {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        if own_group_dir(&mountinfo, &own).is_none() {
            eprintln!("no cgroup2 mount here: nothing to test");
            return;
        }
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "(sleep 0.1; i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done) & exit 0",
        ])
        .process_group(0);
        let (mut child, group) = spawn_counted(&mut cmd).unwrap();
        let group = group.expect("a writable cgroup2 mount (run as root)");
        let dir = group.dir.clone();
        let pgid = child.id() as i32;
        child.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let populated = || {
            std::fs::read_to_string(dir.join("cgroup.events"))
                .unwrap()
                .contains("populated 1")
        };
        while populated() {
            assert!(Instant::now() < deadline, "the helper did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
        let used_ms = usage_of_process_group(pgid).unwrap() as f64 / 1e6;
        assert!(used_ms > 20.0, "{used_ms} ms");
        let (_, session_ns) = session_usage().unwrap();
        assert!(session_ns as f64 / 1e6 >= used_ms);
        drop(group);
        assert!(!dir.exists());
        assert_eq!(usage_of_process_group(pgid), None);
    }

    #[test]
    fn usage_is_read_from_cpu_stat() {
        let stat = "usage_usec 443175\nuser_usec 405611\nsystem_usec 37563\nnice_usec 0\n";
        assert_eq!(parse_usage_usec(stat), Some(443175));
        assert_eq!(parse_usage_usec("user_usec 5\n"), None);
    }

    #[test]
    fn the_own_group_is_found_on_a_hybrid_and_a_pure_cgroup2_machine() {
        let hybrid = "35 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let own = "2:cpuacct:/\n1:cpu:/\n0::/\n";
        assert_eq!(
            own_group_dir(hybrid, own),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let pure = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let own = "0::/user.slice/user-0.slice/session-3.scope\n";
        assert_eq!(
            own_group_dir(pure, own),
            Some(PathBuf::from(
                "/sys/fs/cgroup/user.slice/user-0.slice/session-3.scope"
            ))
        );
        // A container whose cgroup2 mount is rooted at its own group.
        let rooted = "50 40 0:26 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
        let own = "0::/docker/abc\n";
        assert_eq!(
            own_group_dir(rooted, own),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        assert_eq!(own_group_dir(hybrid, "1:cpu:/\n"), None);
        assert_eq!(own_group_dir("", "0::/\n"), None);
    }
}
