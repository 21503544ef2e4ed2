//! Ctrl-C and SIGTERM: the first signal asks long loops to stop (they poll [`interrupted`]) so
//! that results are flushed and namespaces torn down by the normal Drop path; a second signal, or
//! a stop that takes longer than [`GRACE`], runs the registered emergency cleanups (delete
//! namespaces, end our children) and exits with 130.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// How long a first signal waits for the graceful path before forcing the cleanups.
pub const GRACE: Duration = Duration::from_secs(20);

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
type Cleanup = Box<dyn Fn() + Send>;
static CLEANUPS: Mutex<Vec<(u64, Cleanup)>> = Mutex::new(Vec::new());

/// True once SIGINT/SIGTERM/SIGHUP arrived (after [`install`]).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Installs the handler thread once per process. Safe to call many times.
pub fn install() {
    INSTALL.call_once(|| {
        let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot install signal handlers: {e}");
                return;
            }
        };
        std::thread::Builder::new()
            .name("pagebench-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    if INTERRUPTED.swap(true, Ordering::SeqCst) {
                        eprintln!("pagebench: second signal: cleaning up and exiting now");
                        emergency_exit();
                    }
                    eprintln!(
                        "pagebench: signal {sig}: stopping after the current step (again to force)"
                    );
                    std::thread::spawn(|| {
                        std::thread::sleep(GRACE);
                        eprintln!("pagebench: graceful stop took too long: forcing cleanup");
                        emergency_exit();
                    });
                }
            })
            .expect("spawn signal thread");
    });
}

fn emergency_exit() -> ! {
    run_cleanups();
    std::process::exit(130);
}

/// Runs (and forgets) every registered cleanup, newest first.
pub fn run_cleanups() {
    let list: Vec<(u64, Cleanup)> = match CLEANUPS.lock() {
        Ok(mut g) => std::mem::take(&mut *g),
        Err(p) => std::mem::take(&mut *p.into_inner()),
    };
    for (_, f) in list.into_iter().rev() {
        f();
    }
}

/// A registered emergency cleanup; dropping the guard unregisters it (the normal path did the
/// work itself).
#[must_use = "dropping the guard unregisters the cleanup"]
pub struct CleanupGuard(u64);

/// Registers `f` to run if the process is forced to exit by a signal.
pub fn register_cleanup(f: impl Fn() + Send + 'static) -> CleanupGuard {
    let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
    let mut g = CLEANUPS.lock().unwrap_or_else(|p| p.into_inner());
    g.push((id, Box::new(f)));
    CleanupGuard(id)
}

impl Drop for CleanupGuard {
    fn drop(&mut self) {
        let mut g = CLEANUPS.lock().unwrap_or_else(|p| p.into_inner());
        g.retain(|(id, _)| *id != self.0);
    }
}

/// Error returned by loops that stopped because of a signal.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by a signal")]
pub struct Interrupted;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn guard_unregisters() {
        let hits = Arc::new(AtomicU64::new(0));
        let h = hits.clone();
        let g = register_cleanup(move || {
            h.fetch_add(1, Ordering::SeqCst);
        });
        drop(g);
        let h2 = hits.clone();
        let _g2 = register_cleanup(move || {
            h2.fetch_add(10, Ordering::SeqCst);
        });
        run_cleanups();
        assert_eq!(hits.load(Ordering::SeqCst), 10);
    }
}
