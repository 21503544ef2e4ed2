//! Network namespaces owned by this process: created with `ip netns add` (so `ip netns list` and
//! `ip netns exec` see them), named `pb-<pid>-<instance>-<role>` so that a later `pagebench
//! cleanup` can tell whether their owner is still alive, and deleted on Drop — or by the signal
//! handler's emergency cleanup when the process is forced to exit.
//!
//! `setns(CLONE_NEWNET)` moves only the calling thread, and a socket belongs for life to the
//! namespace of the thread that created it. So [`Namespace::run`] runs a closure on a fresh
//! thread inside the namespace (sockets made there live in it, and threads it spawns inherit it),
//! and [`Namespace::command`] gives a `Command` whose child enters it before `exec`.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use anyhow::{bail, Context, Result};

use super::netns_dir::{delete_by_name, namespace_name, namespace_path};
use crate::support::signals;

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(0);

/// A fresh per-process instance number (namespaces of one link share it).
pub fn next_instance() -> u64 {
    NEXT_INSTANCE.fetch_add(1, Ordering::SeqCst)
}

/// A network namespace created by this process, deleted when dropped.
pub struct Namespace {
    name: String,
    /// Open handle on the namespace: `setns` target for threads and children.
    fd: OwnedFd,
    _cleanup: signals::CleanupGuard,
}

impl std::fmt::Debug for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Namespace")
            .field("name", &self.name)
            .finish()
    }
}

impl Namespace {
    /// Creates `pb-<pid>-<instance>-<role>` with its loopback up and IPv6 disabled.
    pub fn create(instance: u64, role: &str) -> Result<Namespace> {
        let name = namespace_name(std::process::id(), instance, role);
        if let Err(e) = run_ip(&["netns", "add", &name]) {
            // A namespace of a dead process that had our PID may hold the name: clear stale
            // ones and try once more.
            if !namespace_path(&name).exists() {
                return Err(e).with_context(|| format!("creating network namespace {name}"));
            }
            super::cleanup::remove_stale()?;
            run_ip(&["netns", "add", &name])
                .with_context(|| format!("creating network namespace {name}"))?;
        }
        // From here on the namespace exists: make sure every exit path deletes it.
        let cleanup_name = name.clone();
        let guard = signals::register_cleanup(move || {
            let _ = delete_by_name(&cleanup_name);
        });
        let path = namespace_path(&name);
        let fd = match std::fs::File::open(&path) {
            Ok(f) => OwnedFd::from(f),
            Err(e) => {
                let _ = delete_by_name(&name);
                return Err(e).with_context(|| format!("opening {}", path.display()));
            }
        };
        let ns = Namespace {
            name,
            fd,
            _cleanup: guard,
        };
        ns.run(disable_ipv6)??;
        run_ip(&["-n", &ns.name, "link", "set", "lo", "up"])
            .with_context(|| format!("bringing up lo in {}", ns.name))?;
        Ok(ns)
    }

    /// A namespace with a fresh instance number.
    pub fn new(role: &str) -> Result<Namespace> {
        Namespace::create(next_instance(), role)
    }

    /// The name `ip netns` knows it by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace file under `/run/netns`.
    pub fn path(&self) -> PathBuf {
        namespace_path(&self.name)
    }

    /// A command whose child process runs inside this namespace. The namespace handle stays
    /// open in the parent; the child enters it between fork and exec.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        // The command owns its own handle, so it can still enter after `self` is dropped.
        let handle = self.fd.try_clone().ok();
        let raw = self.fd.as_raw_fd();
        // SAFETY: the closure only calls setns(2) and reads errno: both async-signal-safe, no
        // allocation between fork and exec.
        unsafe {
            cmd.pre_exec(move || enter(handle.as_ref().map_or(raw, |h| h.as_raw_fd())));
        }
        cmd
    }

    /// Moves the calling thread into this namespace (for threads made elsewhere, e.g. a tokio
    /// runtime's `on_thread_start`). Sockets it creates afterwards belong to the namespace.
    pub fn enter_current_thread(&self) -> Result<()> {
        enter(self.fd.as_raw_fd()).with_context(|| format!("entering namespace {}", self.name))
    }

    /// Runs `f` on a fresh thread inside this namespace and returns its result. A panic in `f`
    /// is resumed on the caller.
    pub fn run<F, R>(&self, f: F) -> Result<R>
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        run_in(self.fd.as_raw_fd(), &self.name, f)
    }

    /// Spawns a named thread that runs `f` inside this namespace. Returns once the thread is
    /// inside (or with the error why it could not enter).
    pub fn spawn_thread<F, R>(&self, name: &str, f: F) -> Result<JoinHandle<R>>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let fd = self
            .fd
            .try_clone()
            .context("duplicating the namespace handle")?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<io::Result<()>>(1);
        let handle = std::thread::Builder::new()
            .name(thread_name(name, ""))
            .spawn(move || {
                let entered = enter(fd.as_raw_fd());
                drop(fd);
                let failed = entered.is_err();
                let _ = tx.send(entered);
                if failed {
                    // End the thread without running `f` (and without the panic hook's noise):
                    // the caller already received the error.
                    std::panic::resume_unwind(Box::new("namespace not entered"));
                }
                f()
            })
            .context("spawning a thread")?;
        match rx.recv() {
            Ok(Ok(())) => Ok(handle),
            Ok(Err(e)) => Err(e).with_context(|| format!("entering namespace {}", self.name)),
            Err(_) => bail!(
                "thread {name} ended before entering namespace {}",
                self.name
            ),
        }
    }
}

impl Namespace {
    /// An owned handle on this namespace, for work that outlives a borrow of it (the next
    /// run's browser, launched on a background thread).
    pub fn handle(&self) -> Result<NamespaceHandle> {
        Ok(NamespaceHandle {
            name: self.name.clone(),
            fd: self
                .fd
                .try_clone()
                .context("duplicating the namespace handle")?,
        })
    }
}

/// An owned handle on a [`Namespace`] (a duplicate of its fd): `command` and `run` as the
/// namespace's own, usable from any thread for as long as the handle lives. It keeps the
/// namespace alive, not its name (the owner deletes that on drop).
#[derive(Debug)]
pub struct NamespaceHandle {
    name: String,
    fd: OwnedFd,
}

impl NamespaceHandle {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Another handle on the same namespace.
    pub fn duplicate(&self) -> Result<NamespaceHandle> {
        Ok(NamespaceHandle {
            name: self.name.clone(),
            fd: self
                .fd
                .try_clone()
                .context("duplicating the namespace handle")?,
        })
    }

    /// As [`Namespace::command`].
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        let handle = self.fd.try_clone().ok();
        let raw = self.fd.as_raw_fd();
        // SAFETY: the closure only calls setns(2) and reads errno: both async-signal-safe, no
        // allocation between fork and exec.
        unsafe {
            cmd.pre_exec(move || enter(handle.as_ref().map_or(raw, |h| h.as_raw_fd())));
        }
        cmd
    }

    /// As [`Namespace::run`].
    pub fn run<F, R>(&self, f: F) -> Result<R>
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        run_in(self.fd.as_raw_fd(), &self.name, f)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Err(e) = delete_by_name(&self.name) {
            tracing::warn!("could not delete network namespace {}: {e}", self.name);
        }
    }
}

/// Thread names are limited to 15 bytes by the kernel.
fn thread_name(prefix: &str, name: &str) -> String {
    let mut s = if name.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}-{name}")
    };
    s.truncate(15);
    s
}

fn enter(fd: RawFd) -> io::Result<()> {
    // SAFETY: setns with a namespace fd; only affects the calling thread (or the forked child).
    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Writes `1` to `disable_ipv6` for all and for new interfaces (runs inside the namespace:
/// `/proc/sys/net` shows the namespace of the calling thread).
fn disable_ipv6() -> Result<()> {
    for which in ["all", "default"] {
        match crate::support::procfs::disable_ipv6(which) {
            Ok(()) => {}
            // No IPv6 in this kernel: nothing to disable.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                let path = crate::support::procfs::disable_ipv6_path(which);
                return Err(e).with_context(|| format!("writing {path}"));
            }
        }
    }
    Ok(())
}

/// Runs `ip ARGS…`, failing with its stderr.
pub(crate) fn run_ip(args: &[&str]) -> Result<()> {
    run_ip_with_input(args, None)
}

/// Runs `ip ARGS…` with `input` on stdin (for `-batch -`).
pub(crate) fn run_ip_with_input(args: &[&str], input: Option<&str>) -> Result<()> {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running `ip` (iproute2)")?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin
            .write_all(text.as_bytes())
            .context("writing to `ip -batch`")?;
    }
    let out = child.wait_with_output().context("waiting for `ip`")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Runs `f` on a fresh thread inside the namespace of `fd` (named `name` in errors and the
/// thread's name) and returns its result; a panic in `f` is resumed on the caller.
fn run_in<F, R>(fd: std::os::fd::RawFd, name: &str, f: F) -> Result<R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name(thread_name("ns", name))
            .spawn_scoped(s, move || -> io::Result<R> {
                enter(fd)?;
                Ok(f())
            })
            .context("spawning a thread")?;
        match handle.join() {
            Ok(r) => r.with_context(|| format!("entering namespace {name}")),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_names_fit_the_kernel_limit() {
        assert_eq!(thread_name("ns", "pb-123456-99-c"), "ns-pb-123456-99");
        assert!(thread_name("emulator", "").len() <= 15);
    }
}
