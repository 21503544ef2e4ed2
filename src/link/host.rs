//! What the emulator needs from the host: privileges (checked once, up front, with one error
//! that says what is missing and how to get it), CPU steal from `/proc/stat`, and the thread
//! tuning of the emulator (timer slack, SCHED_FIFO, thread CPU time).

use std::path::Path;

use crate::support::procfs;

/// `CAP_NET_ADMIN`: create TUN devices, configure addresses and links.
const CAP_NET_ADMIN: u32 = 12;
/// `CAP_SYS_ADMIN`: create, enter (`setns`) and mount network namespaces.
const CAP_SYS_ADMIN: u32 = 21;

/// Where TUN devices come from.
pub const TUN_PATH: &str = "/dev/net/tun";

/// The emulated link cannot be built on this host: every missing piece, with how to get it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot build the emulated link: {}", .missing.join("; "))]
pub struct PreflightError {
    /// One sentence per missing piece.
    pub missing: Vec<String>,
}

/// Checks privileges, `/dev/net/tun` and the `ip` tool, reporting all that is missing at once.
pub fn preflight() -> Result<(), PreflightError> {
    let mut missing = Vec::new();
    let caps = effective_capabilities();
    let lacking: Vec<&str> = [
        (CAP_NET_ADMIN, "CAP_NET_ADMIN"),
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"),
    ]
    .into_iter()
    .filter(|(bit, _)| caps.is_some_and(|c| c & (1u64 << bit) == 0))
    .map(|(_, name)| name)
    .collect();
    if !lacking.is_empty() {
        missing.push(format!(
            "this process lacks {} (needed to create network namespaces and TUN devices); run \
             pagebench as root (e.g. `sudo pagebench …`), or in a container started with \
             `--cap-add NET_ADMIN --cap-add SYS_ADMIN --device /dev/net/tun`",
            lacking.join(" and ")
        ));
    }
    if !Path::new(TUN_PATH).exists() {
        missing.push(format!(
            "{TUN_PATH} does not exist (no TUN driver); load it with `sudo modprobe tun`, or \
             start the container with `--device /dev/net/tun`"
        ));
    } else if lacking.is_empty() {
        if let Err(e) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(TUN_PATH)
        {
            missing.push(format!(
                "cannot open {TUN_PATH}: {e}; check its permissions (crw-rw-rw- root) or the \
                 container's device rules (`--device /dev/net/tun`)"
            ));
        }
    }
    if which("ip").is_none() {
        missing.push(
            "the `ip` tool (iproute2) is not on PATH; install it (`apt-get install iproute2`)"
                .into(),
        );
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(PreflightError { missing })
    }
}

/// The effective capability set of this process (`None` if `/proc` does not say).
fn effective_capabilities() -> Option<u64> {
    procfs::effective_capabilities().ok()
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Total CPU steal of the machine so far, in milliseconds (all CPUs summed), from `/proc/stat`
/// (0 if it cannot be read).
pub fn cpu_steal_ms() -> f64 {
    machine_ms(|c| c.steal)
}

/// CPU time the whole machine spent busy so far (user, nice, system, irq, softirq; all CPUs),
/// in milliseconds (0 if `/proc/stat` cannot be read).
pub fn machine_busy_ms() -> f64 {
    machine_ms(|c| c.busy())
}

fn machine_ms(field: impl Fn(&procfs::CpuTicks) -> u64) -> f64 {
    procfs::cpu_ticks()
        .map(|c| field(&c) as f64 * 1000.0 / procfs::clock_ticks_per_second())
        .unwrap_or(0.0)
}

/// CPU time used by this process (all threads) so far, in milliseconds.
pub fn process_cpu_ms() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// While alive, asks the kernel (PM QoS, `/dev/cpu_dma_latency` = 0) to keep idle CPUs in
/// their polling state instead of halting. On a VM a halted vCPU takes 50–100 µs to wake
/// (every packet arrival and every timer); a polling one wakes at once. Idle CPUs then burn
/// host CPU time, and any runnable task still preempts the polling at once. Released when
/// dropped (the kernel also drops it if the process dies).
pub struct CpuWakeLatencyHold {
    _file: std::fs::File,
}

impl CpuWakeLatencyHold {
    pub fn acquire() -> std::io::Result<CpuWakeLatencyHold> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")?;
        file.write_all(&0i32.to_ne_bytes())?;
        Ok(CpuWakeLatencyHold { _file: file })
    }
}

/// Number of online CPUs.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The CPUs this process may run on (its affinity mask; every online CPU if it cannot be read).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set that sched_getaffinity fills; CPU_ISSET
    // reads inside it; pid 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect();
            if !cpus.is_empty() {
                return cpus;
            }
        }
    }
    (0..cpu_count()).collect()
}

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it; pid 0 is the
    // calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

/// Lets this thread's timers fire at their exact time (default slack is 50 µs).
pub fn set_timer_slack_1ns() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Puts this thread under SCHED_FIFO at `priority`.
pub fn set_sched_fifo(priority: i32) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sets the nice value of the calling thread.
pub fn set_nice(nice: i32) -> std::io::Result<()> {
    // SAFETY: gettid/setpriority have no memory arguments; on Linux PRIO_PROCESS with a thread
    // id affects only that thread.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// CPU time used by the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_real_counters() {
        assert!(cpu_steal_ms() >= 0.0);
        assert!(machine_busy_ms() > 0.0);
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > a);
    }

    #[test]
    fn preflight_error_lists_everything() {
        let e = PreflightError {
            missing: vec!["a missing".into(), "b missing".into()],
        };
        assert_eq!(
            e.to_string(),
            "cannot build the emulated link: a missing; b missing"
        );
    }
}
