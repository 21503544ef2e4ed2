//! Running a child as an unprivileged user: who (`nobody`), handing it the directories it
//! writes, dropping to it at exec (after the steps that need root: entering a namespace,
//! joining a CPU accounting group), and reading back from /proc how its processes ran.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::support::procfs;

/// The user a child runs as when pagebench is root.
const USER: &str = "nobody";
/// Debian's `nobody`, when the name cannot be looked up.
const NOBODY_ID: u32 = 65534;

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The ids a child takes at exec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserIds {
    pub uid: u32,
    pub gid: u32,
}

/// `nobody`'s ids (65534 where /etc/passwd does not name it).
pub fn nobody() -> UserIds {
    static IDS: OnceLock<UserIds> = OnceLock::new();
    *IDS.get_or_init(|| {
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        user_in_passwd(&passwd, USER).unwrap_or(UserIds {
            uid: NOBODY_ID,
            gid: NOBODY_ID,
        })
    })
}

/// `name`'s uid and gid in an /etc/passwd text.
fn user_in_passwd(passwd: &str, name: &str) -> Option<UserIds> {
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.len() >= 4 && f[0] == name).then_some(())?;
        Some(UserIds {
            uid: f[2].parse().ok()?,
            gid: f[3].parse().ok()?,
        })
    })
}

/// Gives `user` the directories its child writes (everything below them), after checking it
/// can reach them (a private TMPDIR would hide them).
pub fn hand_over(user: UserIds, dirs: &[&Path]) -> Result<()> {
    for dir in dirs {
        reachable_by_others(dir)?;
        chown_tree(dir, user)
            .with_context(|| format!("giving {} to uid {}", dir.display(), user.uid))?;
    }
    Ok(())
}

fn chown_tree(path: &Path, user: UserIds) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(user.uid), Some(user.gid))?;
    if std::fs::symlink_metadata(path)?.is_dir() {
        for entry in std::fs::read_dir(path)? {
            chown_tree(&entry?.path(), user)?;
        }
    }
    Ok(())
}

/// Every directory above `dir` must let others through (mode o+x), or the child's user cannot
/// open its own files (a browser's profile).
fn reachable_by_others(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for above in dir.ancestors().skip(1) {
        let Ok(meta) = std::fs::metadata(above) else {
            continue;
        };
        if meta.permissions().mode() & 0o001 == 0 {
            bail!(
                "{} is not reachable by the unprivileged user browsers run as: {} lets no other user through; set TMPDIR to a directory others can enter (e.g. /tmp), or run with --no-browser-sandbox",
                dir.display(),
                above.display()
            );
        }
    }
    Ok(())
}

/// Makes `cmd`'s process drop to `user` (no supplementary groups) right before it execs.
/// Registered after every other pre-exec step (entering the namespace, joining the CPU
/// accounting group), which need root.
pub fn drop_on_exec(cmd: &mut Command, user: UserIds) {
    // SAFETY: setgroups, setgid and setuid are async-signal-safe and allocate nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(user.gid) != 0
                || libc::setuid(user.uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// How a launched browser's processes actually run, read from /proc after it settled: the
/// record's proof that no browser ran as root and that its sandbox was on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    /// The processes of the browser's process group.
    pub processes: usize,
    /// Their distinct effective uids.
    pub uids: Vec<u32>,
    /// How many run under a seccomp filter (the engines' sandboxed helpers).
    pub seccomp_filtered: usize,
    /// Whether a command line carries `--no-sandbox`.
    pub no_sandbox_flag: bool,
}

impl Confinement {
    /// Not root, no `--no-sandbox`, and some process under a seccomp filter.
    pub fn sandboxed(&self) -> bool {
        self.processes > 0
            && !self.uids.contains(&0)
            && !self.no_sandbox_flag
            && self.seccomp_filtered > 0
    }
}

/// Reads the confinement of every live process in process group `pgid`.
pub fn observe(pgid: i32) -> Confinement {
    let mut c = Confinement::default();
    for pid in procfs::pids().unwrap_or_default() {
        let in_group = procfs::pid_stat(pid).is_ok_and(|s| !s.is_zombie() && s.pgrp == pgid);
        if !in_group {
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let Some(status) = parse_status(&status) else {
            continue;
        };
        c.processes += 1;
        if !c.uids.contains(&status.euid) {
            c.uids.push(status.euid);
        }
        c.seccomp_filtered += usize::from(status.seccomp == 2);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        c.no_sandbox_flag |= cmdline.split(|b| *b == 0).any(|a| a == b"--no-sandbox");
    }
    c.uids.sort_unstable();
    c
}

struct Status {
    euid: u32,
    seccomp: u32,
}

/// The effective uid and seccomp mode of a /proc/PID/status text.
fn parse_status(text: &str) -> Option<Status> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|rest| rest.split_whitespace().collect::<Vec<_>>())
    };
    let uids = field("Uid:")?;
    Some(Status {
        euid: uids.get(1)?.parse().ok()?,
        seccomp: field("Seccomp:")
            .and_then(|v| v.first()?.parse().ok())
            .unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_user_s_ids_in_passwd() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
        assert_eq!(
            user_in_passwd(passwd, "nobody"),
            Some(UserIds {
                uid: 65534,
                gid: 65534
            })
        );
        assert_eq!(user_in_passwd(passwd, "nobod"), None);
        assert_eq!(user_in_passwd("nobody:x:bad:1:", "nobody"), None);
    }

    #[test]
    fn a_private_directory_above_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let top = tempfile::tempdir().unwrap();
        let private = top.path().join("private");
        let inner = private.join("profile");
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        let err = reachable_by_others(&inner).unwrap_err().to_string();
        assert!(err.contains(&private.display().to_string()), "{err}");
        assert!(err.contains("TMPDIR"), "{err}");
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        reachable_by_others(&inner).unwrap();
    }

    #[test]
    fn reads_the_effective_uid_and_seccomp_mode() {
        let s =
            parse_status("Name:\tchromium\nUid:\t0\t65534\t65534\t65534\nSeccomp:\t2\n").unwrap();
        assert_eq!((s.euid, s.seccomp), (65534, 2));
        let s = parse_status("Uid:\t0\t0\t0\t0\n").unwrap();
        assert_eq!((s.euid, s.seccomp), (0, 0));
        assert!(parse_status("Name:\tx\n").is_none());
    }

    #[test]
    fn sandboxed_needs_every_sign() {
        let good = Confinement {
            processes: 5,
            uids: vec![65534],
            seccomp_filtered: 3,
            no_sandbox_flag: false,
        };
        assert!(good.sandboxed());
        for bad in [
            Confinement {
                uids: vec![0, 65534],
                ..good.clone()
            },
            Confinement {
                seccomp_filtered: 0,
                ..good.clone()
            },
            Confinement {
                no_sandbox_flag: true,
                ..good.clone()
            },
            Confinement::default(),
        ] {
            assert!(!bad.sandboxed(), "{bad:?}");
        }
    }
}
