//! Everything pagebench reads from (or writes to) `/proc`, in one place: pure parsers (the
//! file's text → typed values, unit-tested on fixture text) and thin readers around them.
//! Policy stays with the callers: a reader returns an `io::Error` (a parse failure is
//! `InvalidData`, naming the file) and the caller decides whether that is an error, a default
//! or a note.
//!
//! Namespaces: `/proc/sys/net/…` shows the network namespace of the *calling thread*, but
//! `/proc/net/…` follows the process's main thread, so per-namespace counters are read from
//! `/proc/thread-self/net/…` on a thread inside the namespace.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Clock ticks per second (`USER_HZ`), the unit of `/proc/stat` and `/proc/<pid>/stat` times.
pub fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn read(path: &str) -> io::Result<String> {
    std::fs::read_to_string(path)
}

fn invalid(path: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{path}: unexpected contents"),
    )
}

// ---------------------------------------------------------------------------------------------
// /proc/stat

/// The aggregate `cpu` line of `/proc/stat` (all CPUs summed), in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    /// Time the hypervisor ran something else while a vCPU wanted to run.
    pub steal: u64,
}

impl CpuTicks {
    /// Time spent running something: user, nice, system, irq, softirq.
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }

    /// Time spent idle, waiting for IO included.
    pub fn idle_total(&self) -> u64 {
        self.idle + self.iowait
    }

    /// Busy + idle + steal.
    pub fn total(&self) -> u64 {
        self.busy() + self.idle_total() + self.steal
    }
}

/// The `cpu  user nice system idle iowait irq softirq steal …` line of `/proc/stat` text
/// (`None` without one, or with fewer than the eight fields every kernel since 2.6.11 has).
pub fn parse_stat_cpu(stat: &str) -> Option<CpuTicks> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let [user, nice, system, idle, iowait, irq, softirq, steal, ..] = v[..] else {
        return None;
    };
    Some(CpuTicks {
        user,
        nice,
        system,
        idle,
        iowait,
        irq,
        softirq,
        steal,
    })
}

/// The `btime` line of `/proc/stat` text: when the machine booted, in seconds since the epoch.
pub fn parse_stat_boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The machine's CPU times so far.
pub fn cpu_ticks() -> io::Result<CpuTicks> {
    const PATH: &str = "/proc/stat";
    parse_stat_cpu(&read(PATH)?).ok_or_else(|| invalid(PATH))
}

/// When the machine booted.
pub fn boot_time() -> io::Result<SystemTime> {
    const PATH: &str = "/proc/stat";
    let secs = parse_stat_boot_time(&read(PATH)?).ok_or_else(|| invalid(PATH))?;
    Ok(UNIX_EPOCH + Duration::from_secs(secs))
}

// ---------------------------------------------------------------------------------------------
// /proc/<pid>/stat

/// The fields of `/proc/<pid>/stat` pagebench uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidStat {
    /// `R`, `S`, `D`, `Z` (zombie), …
    pub state: char,
    /// Parent process.
    pub ppid: i32,
    /// Process group.
    pub pgrp: i32,
    /// User and system CPU time, in clock ticks.
    pub utime: u64,
    pub stime: u64,
    /// User and system CPU time of the children it reaped (each with its own reaped
    /// children's), in clock ticks.
    pub children_ticks: u64,
    /// When the process started, in clock ticks after boot.
    pub start_ticks: u64,
}

impl PidStat {
    pub fn cpu_ticks(&self) -> u64 {
        self.utime + self.stime
    }

    pub fn is_zombie(&self) -> bool {
        self.state == 'Z'
    }

    /// The wall-clock start time, given the boot time and `USER_HZ`.
    pub fn started_at(&self, boot: SystemTime, ticks_per_second: f64) -> SystemTime {
        boot + Duration::from_secs_f64(self.start_ticks as f64 / ticks_per_second.max(1.0))
    }
}

/// Parses `/proc/<pid>/stat` text. The command name (field 2) may contain spaces and
/// parentheses, so fields are counted from the last `)`.
pub fn parse_pid_stat(stat: &str) -> Option<PidStat> {
    let after = &stat[stat.rfind(')')? + 1..];
    // f[0] = field 3 (state), f[1] = ppid, f[2] = pgrp, f[11] = utime, f[12] = stime,
    // f[13] = cutime, f[14] = cstime, f[19] = starttime.
    let f: Vec<&str> = after.split_whitespace().collect();
    if f.len() < 20 {
        return None;
    }
    let mut state = f[0].chars();
    let (Some(state), None) = (state.next(), state.next()) else {
        return None;
    };
    Some(PidStat {
        state,
        ppid: f[1].parse().ok()?,
        pgrp: f[2].parse().ok()?,
        utime: f[11].parse().ok()?,
        stime: f[12].parse().ok()?,
        children_ticks: f[13].parse::<u64>().ok()? + f[14].parse::<u64>().ok()?,
        start_ticks: f[19].parse().ok()?,
    })
}

/// `/proc/<pid>/stat` of a process: `NotFound` (or another read error) when there is no such
/// process, `InvalidData` when the text does not parse.
pub fn pid_stat(pid: i32) -> io::Result<PidStat> {
    let path = format!("/proc/{pid}/stat");
    parse_pid_stat(&read(&path)?).ok_or_else(|| invalid(&path))
}

/// The PIDs of the processes that exist now (the numeric entries of `/proc`).
pub fn pids() -> io::Result<Vec<i32>> {
    Ok(std::fs::read_dir("/proc")?
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect())
}

// ---------------------------------------------------------------------------------------------
// /proc/<pid>/task/<tid>/schedstat

/// A thread's scheduler statistics (`/proc/<pid>/task/<tid>/schedstat`, kept by the kernel's
/// SCHED_INFO): nanoseconds on a CPU, nanoseconds runnable but waiting for one, and how many
/// times it was given a CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedStat {
    pub cpu_ns: u64,
    pub wait_ns: u64,
    pub slices: u64,
}

/// Parses schedstat text: `cpu_ns wait_ns slices`.
pub fn parse_schedstat(text: &str) -> Option<SchedStat> {
    let mut f = text.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some(SchedStat {
        cpu_ns: f.next()??,
        wait_ns: f.next()??,
        slices: f.next()??,
    })
}

/// The scheduler statistics of thread `tid` of process `pid`.
pub fn task_schedstat(pid: i32, tid: i32) -> io::Result<SchedStat> {
    let path = format!("/proc/{pid}/task/{tid}/schedstat");
    parse_schedstat(&read(&path)?).ok_or_else(|| invalid(&path))
}

/// The thread ids of process `pid` now.
pub fn tids(pid: i32) -> io::Result<Vec<i32>> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/task"))?
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect())
}

/// The calling thread's id.
pub fn thread_id() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

// ---------------------------------------------------------------------------------------------
// /proc/self/status

/// The effective capability set (`CapEff:`, hexadecimal) of `/proc/<pid>/status` text.
pub fn parse_status_cap_eff(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// The effective capability set of this process.
pub fn effective_capabilities() -> io::Result<u64> {
    const PATH: &str = "/proc/self/status";
    parse_status_cap_eff(&read(PATH)?).ok_or_else(|| invalid(PATH))
}

// ---------------------------------------------------------------------------------------------
// Machine facts: loadavg, cpuinfo, meminfo, hostname, kernel release

/// The 1-minute load average of `/proc/loadavg` text.
pub fn parse_loadavg_1min(loadavg: &str) -> Option<f64> {
    loadavg.split_whitespace().next()?.parse().ok()
}

/// The first `model name` of `/proc/cpuinfo` text.
pub fn parse_cpuinfo_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// `MemTotal` of `/proc/meminfo` text, in KiB.
pub fn parse_meminfo_total_kib(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub fn load_average_1min() -> io::Result<f64> {
    const PATH: &str = "/proc/loadavg";
    parse_loadavg_1min(&read(PATH)?).ok_or_else(|| invalid(PATH))
}

pub fn cpu_model() -> io::Result<String> {
    const PATH: &str = "/proc/cpuinfo";
    parse_cpuinfo_model(&read(PATH)?).ok_or_else(|| invalid(PATH))
}

pub fn memory_total_kib() -> io::Result<u64> {
    const PATH: &str = "/proc/meminfo";
    parse_meminfo_total_kib(&read(PATH)?).ok_or_else(|| invalid(PATH))
}

/// The host name (of the calling thread's UTS namespace).
pub fn hostname() -> io::Result<String> {
    Ok(read("/proc/sys/kernel/hostname")?.trim().to_string())
}

/// The running kernel's release, e.g. `6.1.0-18-amd64`.
pub fn kernel_release() -> io::Result<String> {
    Ok(read("/proc/sys/kernel/osrelease")?.trim().to_string())
}

// ---------------------------------------------------------------------------------------------
// TCP congestion control sysctls (per network namespace: of the calling thread)

const TCP_CC_DEFAULT: &str = "/proc/sys/net/ipv4/tcp_congestion_control";
const TCP_CC_AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
const TCP_CC_ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// True if the space-separated algorithm list (`tcp_available_congestion_control`,
/// `tcp_allowed_congestion_control`) names `name` exactly.
pub fn congestion_listed(list: &str, name: &str) -> bool {
    list.split_whitespace().any(|a| a == name)
}

/// The namespace's default congestion control (`tcp_congestion_control`), trimmed.
pub fn tcp_congestion_default() -> io::Result<String> {
    Ok(read(TCP_CC_DEFAULT)?.trim().to_string())
}

/// Makes `name` the namespace's default congestion control. A child namespace may only pick
/// one of the host's `tcp_allowed_congestion_control`.
pub fn set_tcp_congestion_default(name: &str) -> io::Result<()> {
    std::fs::write(TCP_CC_DEFAULT, name)
}

/// The algorithms this kernel has loaded (`tcp_available_congestion_control`), trimmed.
pub fn tcp_congestion_available() -> io::Result<String> {
    Ok(read(TCP_CC_AVAILABLE)?.trim().to_string())
}

/// The algorithms unprivileged users and child namespaces may pick
/// (`tcp_allowed_congestion_control`), trimmed.
pub fn tcp_congestion_allowed() -> io::Result<String> {
    Ok(read(TCP_CC_ALLOWED)?.trim().to_string())
}

// ---------------------------------------------------------------------------------------------
// IPv6 sysctl (per network namespace: of the calling thread)

/// The `disable_ipv6` sysctl of `which` (`all`, `default` or an interface).
pub fn disable_ipv6_path(which: &str) -> String {
    format!("/proc/sys/net/ipv6/conf/{which}/disable_ipv6")
}

/// Turns IPv6 off for `which` (`NotFound` when the kernel has no IPv6).
pub fn disable_ipv6(which: &str) -> io::Result<()> {
    std::fs::write(disable_ipv6_path(which), "1")
}

// ---------------------------------------------------------------------------------------------
// /proc/net/snmp

/// Protocol counters by `Proto.Field`, e.g. `Udp.RcvbufErrors`.
pub type SnmpCounters = BTreeMap<String, i64>;

/// Parses the header/value line pairs of `/proc/net/snmp` text.
pub fn parse_snmp(text: &str) -> SnmpCounters {
    let mut out = SnmpCounters::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((proto, names)), Some((proto2, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if proto != proto2 {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse::<i64>() {
                out.insert(format!("{proto}.{n}"), v);
            }
        }
    }
    out
}

/// The protocol counters of the calling thread's network namespace.
pub fn thread_snmp() -> io::Result<SnmpCounters> {
    Ok(parse_snmp(&read("/proc/thread-self/net/snmp")?))
}

// ---------------------------------------------------------------------------------------------
// /proc/net/dev

/// The counters of one device in `/proc/net/dev`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetDevCounters {
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_dropped: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
}

/// The counters of `device` in `/proc/net/dev` text (`None` if it is not listed).
pub fn parse_net_dev(text: &str, device: &str) -> Option<NetDevCounters> {
    let rest = text.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        (name.trim() == device).then_some(rest)
    })?;
    let v: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    if v.len() < 16 {
        return None;
    }
    // rx: bytes packets errs drop fifo frame compressed multicast | tx: bytes packets errs drop …
    Some(NetDevCounters {
        rx_bytes: v[0],
        rx_packets: v[1],
        rx_dropped: v[3],
        tx_bytes: v[8],
        tx_packets: v[9],
        tx_dropped: v[11],
    })
}

/// Opens `/proc/net/dev` of the calling thread's network namespace. The open file keeps
/// showing that namespace wherever it is read from (rewind and read again for new values).
pub fn open_thread_net_dev() -> io::Result<File> {
    File::open("/proc/thread-self/net/dev")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_schedstat_and_reads_this_thread() {
        assert_eq!(
            parse_schedstat("307960520 299160112 110\n"),
            Some(SchedStat {
                cpu_ns: 307_960_520,
                wait_ns: 299_160_112,
                slices: 110
            })
        );
        assert_eq!(parse_schedstat("12 x 3"), None);
        assert_eq!(parse_schedstat("12 3"), None);
        let me = task_schedstat(std::process::id() as i32, thread_id()).unwrap();
        assert!(me.slices > 0);
        assert!(tids(std::process::id() as i32)
            .unwrap()
            .contains(&thread_id()));
    }

    const STAT: &str = "cpu  60148 153 8735 75966 844 7 118 111 0 0\n\
cpu0 1 2 3 4 5 6 7 8 9 10\n\
intr 12345 0 0\n\
ctxt 999\n\
btime 1700000000\n\
processes 4242\n";

    #[test]
    fn parses_the_aggregate_cpu_line_and_boot_time() {
        let c = parse_stat_cpu(STAT).unwrap();
        assert_eq!(
            c,
            CpuTicks {
                user: 60148,
                nice: 153,
                system: 8735,
                idle: 75966,
                iowait: 844,
                irq: 7,
                softirq: 118,
                steal: 111,
            }
        );
        assert_eq!(c.busy(), 60148 + 153 + 8735 + 7 + 118);
        assert_eq!(c.idle_total(), 75966 + 844);
        assert_eq!(c.total(), c.busy() + c.idle_total() + 111);
        assert_eq!(parse_stat_boot_time(STAT), Some(1_700_000_000));
    }

    #[test]
    fn rejects_stat_without_a_usable_cpu_line() {
        assert_eq!(parse_stat_cpu("intr 1 2\n"), None);
        // Per-CPU lines are not the aggregate.
        assert_eq!(parse_stat_cpu("cpu0 1 2 3 4 5 6 7 8\n"), None);
        // Too few fields, or a non-number: no silently shifted columns.
        assert_eq!(parse_stat_cpu("cpu  1 2 3 4 5 6 7\n"), None);
        assert_eq!(parse_stat_cpu("cpu  1 2 x 4 5 6 7 8\n"), None);
        assert_eq!(parse_stat_boot_time("cpu  1 2 3\n"), None);
    }

    #[test]
    fn parses_pid_stat_despite_odd_command_names() {
        let stat = "4242 (we ird) name)) S 1 4242 4242 0 -1 4194560 100 0 0 0 17 5 3 2 20 0 1 0 987654 1000 10";
        let s = parse_pid_stat(stat).unwrap();
        assert_eq!(
            s,
            PidStat {
                state: 'S',
                ppid: 1,
                pgrp: 4242,
                utime: 17,
                stime: 5,
                children_ticks: 5,
                start_ticks: 987654,
            }
        );
        assert_eq!(s.cpu_ticks(), 22);
        assert!(!s.is_zombie());
        let boot = UNIX_EPOCH + Duration::from_secs(1000);
        assert_eq!(
            s.started_at(boot, 100.0),
            boot + Duration::from_secs_f64(9876.54)
        );
        assert_eq!(parse_pid_stat("garbage"), None);
        assert_eq!(parse_pid_stat("1 (x) Z 1 2"), None);
    }

    #[test]
    fn parses_status_capabilities() {
        let status = "Name:\tpagebench\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(parse_status_cap_eff(status), Some(0x1ff_ffff_ffff));
        assert_eq!(parse_status_cap_eff("Name:\tx\n"), None);
    }

    #[test]
    fn parses_machine_facts() {
        assert_eq!(
            parse_loadavg_1min("0.52 0.58 0.59 2/468 12345\n"),
            Some(0.52)
        );
        assert_eq!(parse_loadavg_1min(""), None);
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            parse_cpuinfo_model(cpuinfo).as_deref(),
            Some("Intel(R) Xeon(R) CPU @ 2.20GHz")
        );
        assert_eq!(parse_cpuinfo_model("processor\t: 0\n"), None);
        let meminfo = "MemTotal:        8141324 kB\nMemFree:          123456 kB\n";
        assert_eq!(parse_meminfo_total_kib(meminfo), Some(8_141_324));
        assert_eq!(parse_meminfo_total_kib("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn congestion_list_parsing() {
        assert!(congestion_listed("reno bbr cubic\n", "bbr"));
        assert!(!congestion_listed("reno cubic\n", "bbr"));
        assert!(!congestion_listed("reno bbr2", "bbr"));
    }

    #[test]
    fn parses_snmp_pairs() {
        let text = "Ip: Forwarding DefaultTTL InReceives\nIp: 2 64 100\n\
Tcp: RtoAlgorithm RtoMin InSegs OutSegs RetransSegs InErrs\nTcp: 1 200 50 60 3 0\n\
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
Udp: 1000 0 7 900 7 0 0 0 0\n";
        let c = parse_snmp(text);
        assert_eq!(c["Udp.RcvbufErrors"], 7);
        assert_eq!(c["Tcp.RetransSegs"], 3);
        assert_eq!(c["Ip.InReceives"], 100);
        assert_eq!(c.len(), 3 + 6 + 9);
        // A value line of another protocol does not pair with the header.
        assert!(parse_snmp("Ip: A B\nTcp: 1 2\n").is_empty());
    }

    #[test]
    fn parses_net_dev() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n\
pbtun-c: 1000      10    0    2    0     0          0         0     3000      30    0    7    0     0       0          0\n\
short: 1 2 3\n";
        assert_eq!(
            parse_net_dev(text, "pbtun-c"),
            Some(NetDevCounters {
                rx_bytes: 1000,
                rx_packets: 10,
                rx_dropped: 2,
                tx_bytes: 3000,
                tx_packets: 30,
                tx_dropped: 7
            })
        );
        assert_eq!(parse_net_dev(text, "eth0"), None);
        assert_eq!(parse_net_dev(text, "short"), None);
    }

    #[test]
    fn reads_this_machine() {
        let c = cpu_ticks().unwrap();
        assert!(c.total() > 0);
        assert!(boot_time().unwrap() < SystemTime::now());
        let me = pid_stat(std::process::id() as i32).unwrap();
        assert!(!me.is_zombie());
        assert!(pids().unwrap().contains(&(std::process::id() as i32)));
        assert!(effective_capabilities().is_ok());
        assert!(load_average_1min().unwrap() >= 0.0);
        assert!(memory_total_kib().unwrap() > 0);
        assert!(!kernel_release().unwrap().is_empty());
        assert!(thread_snmp().unwrap().contains_key("Udp.InDatagrams"));
        assert!(!tcp_congestion_default().unwrap().is_empty());
        // PIDs above pid_max never exist.
        assert!(pid_stat(i32::MAX).is_err());
    }
}
