//! No browser runs as root. A browser loads pages pagebench did not write (a recorded site's
//! third-party scripts, any URL `record` is given), so every engine runs as an unprivileged
//! user (`nobody` when pagebench is root) with its own sandbox on, inside the namespace the
//! run made. Its files (profile, HOME, key log, NetLog) are handed to that user before the
//! launch; pagebench, as root, reads them afterwards.
//!
//! The engines' sandboxes need unprivileged user namespaces (Chromium's zygote and Firefox's
//! content processes make their own). Where the kernel refuses them, pagebench refuses to
//! launch unless `--no-browser-sandbox` is given; then the browser runs as pagebench's own user
//! without its sandbox, and every record says so ([`Confinement`], observed, not assumed).

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{bail, Result};

use crate::support::unprivileged::{self, UserIds};
pub use crate::support::unprivileged::{observe, Confinement};

/// How browsers run, for the whole process (`--no-browser-sandbox` turns it off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sandbox {
    /// As an unprivileged user, with the engine's sandbox.
    On,
    /// As pagebench's own user, without the engine's sandbox.
    Off,
}

static MODE: OnceLock<Sandbox> = OnceLock::new();

/// Chooses how this process's browsers run; with the sandbox on, first checks that the kernel
/// lets an unprivileged user make a user namespace (what both engines' sandboxes need).
pub fn configure(no_sandbox: bool) -> Result<()> {
    let mode = if no_sandbox {
        Sandbox::Off
    } else {
        Sandbox::On
    };
    if mode == Sandbox::On {
        check_user_namespaces()?;
    }
    if let Err(set) = MODE.set(mode) {
        if set != mode {
            bail!("the browser sandbox was already chosen {set:?} in this process");
        }
    }
    Ok(())
}

/// How this process's browsers run (on unless [`configure`]d off).
pub fn mode() -> Sandbox {
    MODE.get().copied().unwrap_or(Sandbox::On)
}

/// Whether the engine's own sandbox is on (Chromium is then launched without `--no-sandbox`).
pub fn engine_sandbox_on() -> bool {
    mode() == Sandbox::On
}

/// Who the browser runs as: None when no change of user is needed (the sandbox is off, or
/// pagebench itself is not root).
pub fn browser_user() -> Option<UserIds> {
    (unprivileged::is_root() && mode() == Sandbox::On).then(unprivileged::nobody)
}

/// Whether an unprivileged user may make a user namespace here: a child drops to the browser's
/// user and unshares one (what the engines' sandboxes do first).
fn check_user_namespaces() -> Result<()> {
    static CHECKED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let outcome = CHECKED.get_or_init(|| {
        let mut cmd = Command::new("/bin/true");
        if unprivileged::is_root() {
            unprivileged::drop_on_exec(&mut cmd, unprivileged::nobody());
        }
        // SAFETY: unshare is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| match libc::unshare(libc::CLONE_NEWUSER) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
        match cmd.status() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("/bin/true exited {s}")),
            Err(e) => Err(e.to_string()),
        }
    });
    if let Err(why) = outcome {
        bail!(
            "the browsers' sandbox needs user namespaces for an unprivileged user, and this machine refuses one ({why}; /proc/sys/user/max_user_namespaces is {}): allow them (sysctl user.max_user_namespaces=10000, and kernel.unprivileged_userns_clone=1 where that exists), or run with --no-browser-sandbox to run browsers as root without their sandbox (the records then say so)",
            std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unreadable".into())
        );
    }
    Ok(())
}
