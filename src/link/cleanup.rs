//! Removal of namespaces left behind by pagebench processes that died without cleaning up
//! (SIGKILL, power loss). The owner's PID is part of each name; a namespace is stale when that
//! process no longer exists, or when the PID now belongs to a process started after the
//! namespace was created (PID reuse). TUN devices need no cleanup: they vanish with the fd of
//! the process that created them. The same rule removes the temporary directories (browser
//! profiles, testbed files) such a process left.

use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};

use super::netns_dir::{delete_by_name, parse_name, NETNS_DIR};
use crate::support::procfs;

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

/// Deletes the temporary directories of dead pagebench processes (SIGKILL leaves them: browser
/// profiles, testbed files, any [`crate::support::tempdir`] scratch directory) and returns them.
pub fn remove_stale_temp_dirs() -> Vec<std::path::PathBuf> {
    let base = std::env::temp_dir();
    let Ok(entries) = std::fs::read_dir(&base) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some((_, pid)) = crate::support::tempdir::parse_name(&name) else {
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
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    let stat = match procfs::pid_stat(pid) {
        Ok(s) => s,
        // It exists but its stat is unreadable as expected: assume it is the owner.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => return true,
        Err(_) => return false,
    };
    let started = procfs::boot_time()
        .ok()
        .map(|boot| stat.started_at(boot, procfs::clock_ticks_per_second()));
    match (started, ns_created) {
        // A process that started after the namespace existed cannot have created it.
        (Some(started), Some(created)) => started <= created + Duration::from_secs(2),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

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
