//! A run's browser, launched when the run needs it or ahead of it. Launch and settle cost a
//! fresh browser most of a second on this machine class (the settle wait lets the start-up CPU
//! burst end before the load); the run protocol (`testbed::measure`) starts the *next* run's
//! browser right after the current run's measured window closes, so its launch and settle
//! overlap this run's teardown, collection, assembly and disk writes instead of following
//! them. Never earlier: nothing of the next browser runs while a load is measured, and it
//! starts its own settle wait after its start-up like any other launch.
//!
//! The same code path for every engine: [`Prelaunch`] runs the engine's own
//! [`Browser::launch`] on a thread, and [`Ready`] is what a run gets either way. Start-ups
//! take turns ([`start_up`]): on concurrent lanes they never burst the CPU together.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Context, Result};

use super::{Browser, ClientSide, Engine, LaunchOptions};
use crate::config::identity::BrowserId;
use crate::support::tempdir::{self, TempDir};

/// A browser ready for a run: launched (or failed to) with the run's options.
pub struct Ready {
    pub browser: Box<dyn Browser>,
    /// How its launch went (an error: the run is a crashed one).
    pub launched: Result<()>,
    /// Where its TLS key log (and Chromium's NetLog) are written; removed on drop.
    pub files: TempDir,
    pub key_log: PathBuf,
    pub net_log: PathBuf,
    /// How long the run waited for it (ms).
    pub wait_ms: f64,
    /// Launched ahead, during the previous run's teardown.
    pub prelaunched: bool,
}

/// `opts` with this launch's own files: a fresh directory for the key log and the NetLog.
fn with_files(opts: &LaunchOptions) -> Result<(LaunchOptions, TempDir, PathBuf, PathBuf)> {
    let files = tempdir::create("capture")?;
    let key_log = files.path().join("keys.log");
    let net_log = files.path().join("netlog.json");
    let mut o = opts.clone();
    o.key_log = Some(key_log.clone());
    o.net_log = opts
        .net_log
        .as_ref()
        .map(|(_, mode)| (net_log.clone(), *mode));
    Ok((o, files, key_log, net_log))
}

/// What makes two launches interchangeable: the options but for where the files go.
fn fits(a: &LaunchOptions, b: &LaunchOptions) -> bool {
    let strip = |o: &LaunchOptions| LaunchOptions {
        key_log: None,
        net_log: o.net_log.as_ref().map(|(_, m)| (PathBuf::new(), *m)),
        ..o.clone()
    };
    strip(a) == strip(b)
}

/// One browser start-up (launch and settle) at a time in this process. A serial walk never
/// starts two at once; on concurrent lanes a wave of units would start one per lane at the
/// same moment — six Chromium start-ups of ~0.4 CPU-s each on two cores — and the first lane
/// to settle would load its page inside the others' bursts (its link emulator then fell
/// 19–23 ms behind its schedule, and the link gate rejected the run). In turn, each waits
/// ~0.4 s per lane ahead of it.
static START_UP: Mutex<()> = Mutex::new(());

/// `browser.launch(client, opts)`, once no other browser of this process is starting.
fn start_up(
    browser: &mut dyn Browser,
    client: &dyn ClientSide,
    opts: &LaunchOptions,
) -> Result<()> {
    let _turn = START_UP.lock().unwrap_or_else(PoisonError::into_inner);
    browser.launch(client, opts)
}

/// Launches `browser` with `opts` now; the run waits for it.
pub fn launch_now(
    mut browser: Box<dyn Browser>,
    client: &dyn ClientSide,
    opts: &LaunchOptions,
) -> Result<Ready> {
    let t = Instant::now();
    let (opts, files, key_log, net_log) = with_files(opts)?;
    let launched = start_up(browser.as_mut(), client, &opts);
    Ok(Ready {
        browser,
        launched,
        files,
        key_log,
        net_log,
        wait_ms: t.elapsed().as_secs_f64() * 1e3,
        prelaunched: false,
    })
}

/// A browser launching (and settling) on a thread of its own.
pub struct Prelaunch {
    /// Its engine (which makes a fresh one if the launch thread panicked).
    engine: &'static Engine,
    /// The options it was asked for (without its files' paths).
    opts: LaunchOptions,
    files: Option<(TempDir, PathBuf, PathBuf)>,
    thread: Option<JoinHandle<Launched>>,
}

type Launched = (Box<dyn Browser + Send>, Result<()>);

impl Prelaunch {
    /// Starts launching `browser` (of `engine`) with `opts` inside `client`.
    pub fn start(
        engine: &'static Engine,
        mut browser: Box<dyn Browser + Send>,
        client: Box<dyn ClientSide + Send>,
        opts: &LaunchOptions,
    ) -> Result<Prelaunch> {
        let (with, files, key_log, net_log) = with_files(opts)?;
        let thread = std::thread::Builder::new()
            .name("prelaunch".into())
            .spawn(move || {
                let launched = start_up(browser.as_mut(), client.as_ref(), &with);
                (browser, launched)
            })
            .context("spawning the browser's launch thread")?;
        Ok(Prelaunch {
            engine,
            opts: opts.clone(),
            files: Some((files, key_log, net_log)),
            thread: Some(thread),
        })
    }

    /// Whether it is the browser a run of engine `id` with `opts` needs.
    pub fn fits(&self, id: BrowserId, opts: &LaunchOptions) -> bool {
        self.engine.id == id && fits(&self.opts, opts)
    }

    /// Waits until it is launched and settled; `wait_ms` says how long that took.
    pub fn join(mut self) -> Ready {
        let t = Instant::now();
        let thread = self.thread.take().expect("joined once");
        let (browser, launched): (Box<dyn Browser>, Result<()>) = match thread.join() {
            Ok((b, l)) => (b, l),
            Err(_) => (
                (self.engine.make)(),
                Err(anyhow::anyhow!("the browser's launch thread panicked")),
            ),
        };
        let (files, key_log, net_log) = self.files.take().expect("taken once");
        Ready {
            browser,
            launched,
            files,
            key_log,
            net_log,
            wait_ms: t.elapsed().as_secs_f64() * 1e3,
            prelaunched: true,
        }
    }
}

impl Drop for Prelaunch {
    /// Not used: it still ends its browser (nothing of it left running).
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            if let Ok((mut browser, _)) = t.join() {
                browser.close();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::protocol::Protocol;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// A browser that takes `launch` time to launch and writes down what happens to it.
    struct Slow {
        launch: Duration,
        log: Arc<Mutex<Vec<String>>>,
        key_log: Option<PathBuf>,
    }

    impl Browser for Slow {
        fn id(&self) -> BrowserId {
            crate::measure::browser::engines::chromium::ID
        }
        fn launch(&mut self, _: &dyn ClientSide, o: &LaunchOptions) -> Result<()> {
            std::thread::sleep(self.launch);
            self.key_log = o.key_log.clone();
            self.log
                .lock()
                .unwrap()
                .push(format!("launched {}", o.protocol));
            Ok(())
        }
        fn process_group(&self) -> Option<i32> {
            None
        }
        fn version(&self) -> Option<String> {
            None
        }
        fn load(
            &mut self,
            _: &str,
            _: &crate::config::workload::WorkloadKind,
            _: usize,
            _: Duration,
        ) -> Result<(
            crate::evidence::metrics::Observation,
            crate::evidence::validate::LoadEnd,
        )> {
            unreachable!()
        }
        fn close(&mut self) -> crate::evidence::run_record::BrowserOverhead {
            self.log.lock().unwrap().push("closed".into());
            Default::default()
        }
    }

    /// A `Slow` browser of `launch_ms`, writing down into `log`.
    fn slow(launch_ms: u64, log: &Arc<Mutex<Vec<String>>>) -> Box<Slow> {
        Box::new(Slow {
            launch: Duration::from_millis(launch_ms),
            log: log.clone(),
            key_log: None,
        })
    }

    /// A `Slow` Chromium of `launch_ms` started ahead for `protocol`, and its log.
    fn start_slow(launch_ms: u64, protocol: Protocol) -> (Prelaunch, Arc<Mutex<Vec<String>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let p = Prelaunch::start(
            &crate::measure::browser::engines::chromium::ENGINE,
            slow(launch_ms, &log),
            Box::new(super::super::HostSide),
            &LaunchOptions::fixture(protocol),
        )
        .unwrap();
        (p, log)
    }

    #[test]
    fn a_browser_launched_ahead_is_ready_when_the_run_needs_it() {
        let (p, log) = start_slow(300, Protocol::H2);
        assert!(p.fits(
            crate::measure::browser::engines::chromium::ID,
            &LaunchOptions::fixture(Protocol::H2)
        ));
        assert!(!p.fits(
            crate::measure::browser::engines::chromium::ID,
            &LaunchOptions::fixture(Protocol::H3)
        ));
        assert!(!p.fits(
            crate::measure::browser::engines::firefox::ID,
            &LaunchOptions::fixture(Protocol::H2)
        ));
        // The run's other work: longer than the launch.
        std::thread::sleep(Duration::from_millis(600));
        let ready = p.join();
        assert!(ready.launched.is_ok() && ready.prelaunched);
        assert!(ready.wait_ms < 200.0, "waited {} ms", ready.wait_ms);
        // Its files are its own, in its directory.
        assert!(ready.key_log.starts_with(ready.files.path()));
        assert_eq!(*log.lock().unwrap(), ["launched h2"]);
    }

    #[test]
    fn start_ups_take_turns() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let t = Instant::now();
        let lanes: Vec<Prelaunch> = [Protocol::H1, Protocol::H2, Protocol::H3]
            .into_iter()
            .map(|p| {
                Prelaunch::start(
                    &crate::measure::browser::engines::chromium::ENGINE,
                    slow(150, &log),
                    Box::new(super::super::HostSide),
                    &LaunchOptions::fixture(p),
                )
                .unwrap()
            })
            .collect();
        for p in lanes {
            assert!(p.join().launched.is_ok());
        }
        // Three launches of 150 ms one after another (side by side: 150 ms in all).
        assert!(
            t.elapsed() >= Duration::from_millis(450),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(log.lock().unwrap().len(), 3);
    }

    #[test]
    fn a_launch_the_run_does_not_take_is_ended() {
        let (p, log) = start_slow(50, Protocol::H1);
        drop(p);
        assert_eq!(*log.lock().unwrap(), ["launched h1", "closed"]);
        // Launching now: the wait is the whole launch.
        let now = launch_now(
            slow(100, &log),
            &super::super::HostSide,
            &LaunchOptions::fixture(Protocol::H3),
        )
        .unwrap();
        assert!(now.wait_ms >= 100.0 && !now.prelaunched);
    }
}
