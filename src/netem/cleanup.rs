//! Removal of namespaces left behind by pagebench processes that died without cleaning up
//! (SIGKILL, power loss). The owner's PID is part of each name; a namespace is stale when that
//! process no longer exists, or when the PID now belongs to a process started after the
//! namespace was created (PID reuse). TUN devices need no cleanup: they vanish with the fd of
//! the process that created them. The same rule removes the temporary directories (browser
//! profiles, testbed files) such a process left.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use super::netns::{delete_by_name, parse_name, NETNS_DIR};

/// Deletes every stale pagebench namespace and returns their names. Namespaces of live
/// pagebench processes (including this one) are left alone.
pub fn remove_stale() -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(NETNS_DIR) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("listing {NETNS_DIR}")),
    };
    let mut removed = Vec::new();
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    for name in names {
        let Some((pid, _, _)) = parse_name(&name) else {
            continue;
        };
        let created = std::fs::metadata(Path::new(NETNS_DIR).join(&name))
            .and_then(|m| m.modified())
            .ok();
        if owner_alive(pid, created) {
            continue;
        }
        delete_by_name(&name).with_context(|| format!("deleting stale namespace {name}"))?;
        tracing::info!("removed stale network namespace {name} (owner PID {pid} is gone)");
        removed.push(name);
    }
    Ok(removed)
}

/// Prefixes of the temporary directories a pagebench process makes (a fresh Chromium profile per
/// run, the testbed's certificate and reference-server configs): `<prefix>-<pid>-<suffix>`.
const TEMP_PREFIXES: [&str; 2] = ["pagebench-browser-", "pagebench-testbed-"];

/// Deletes the temporary directories of dead pagebench processes (SIGKILL leaves them) and
/// returns them.
pub fn remove_stale_temp_dirs() -> Vec<std::path::PathBuf> {
    let base = std::env::temp_dir();
    let Ok(entries) = std::fs::read_dir(&base) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = TEMP_PREFIXES.iter().find_map(|p| name.strip_prefix(p)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let created = e.metadata().and_then(|m| m.modified()).ok();
        if owner_alive(pid, created) {
            continue;
        }
        if std::fs::remove_dir_all(e.path()).is_ok() {
            tracing::info!("removed stale temporary directory {}", e.path().display());
            removed.push(e.path());
        }
    }
    removed
}

/// True if process `pid` exists and was started before the namespace was created.
fn owner_alive(pid: u32, ns_created: Option<SystemTime>) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    match (process_start(&stat), ns_created) {
        // A process that started after the namespace existed cannot have created it.
        (Some(started), Some(created)) => started <= created + Duration::from_secs(2),
        _ => true,
    }
}

/// Start time of a process from its `/proc/<pid>/stat` text.
fn process_start(stat: &str) -> Option<SystemTime> {
    let ticks = start_ticks(stat)?;
    let boot = boot_time()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(boot + Duration::from_secs_f64(ticks as f64 / hz))
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`; the command name (field 2) may contain spaces
/// and parentheses, so count from the last `)`.
fn start_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

fn boot_time() -> Option<SystemTime> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let secs: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_start_time_despite_odd_command_names() {
        let stat = "4242 (we ird) name)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(start_ticks(stat), Some(987654));
        assert_eq!(start_ticks("garbage"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_dead_pid_is_not() {
        let now = SystemTime::now();
        assert!(owner_alive(std::process::id(), Some(now)));
        // Created long before this process started: its PID was reused.
        assert!(!owner_alive(
            std::process::id(),
            Some(UNIX_EPOCH + Duration::from_secs(1))
        ));
        // PIDs above pid_max never exist.
        assert!(!owner_alive(u32::MAX - 1, Some(now)));
    }
}
