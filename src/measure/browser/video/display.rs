//! A virtual display for one browser launch (`--visual`, video): Xvfb inside the client
//! namespace, in a process group of its own, its screen memory-mapped to a file
//! (`-fbdir`) that the [`super::recorder`] reads. Xvfb picks a free display number itself
//! (`-displayfd`), so parallel runs and test binaries never share a screen; the display ends
//! (by its group, then the files) when it drops.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::measure::browser::{process_group, ClientSide};
use crate::support::signals;
use crate::support::tempdir::{self, TempDir};

/// Debian's Xvfb (package `xvfb`).
pub const XVFB: &str = "Xvfb";
/// The screen: the browsers' viewport, so the page fills it in kiosk mode.
pub const SCREEN: (u32, u32) = (1280, 720);
/// How long Xvfb may take to say its display number.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The descriptor Xvfb writes its display number to.
const DISPLAY_FD: i32 = 3;

/// A running Xvfb.
pub struct VirtualDisplay {
    child: Child,
    pgid: i32,
    number: u32,
    dir: TempDir,
    /// Ends Xvfb and removes its files if a signal forces pagebench out before `drop` runs.
    _cleanup: signals::CleanupGuard,
}

impl VirtualDisplay {
    /// Starts Xvfb inside `client` and waits until it accepts clients.
    pub fn start(client: &dyn ClientSide) -> Result<VirtualDisplay> {
        let dir = tempdir::create("display")?;
        let (mut read_end, write_end) = pipe()?;
        let mut cmd = client.command(XVFB);
        let (w, h) = SCREEN;
        cmd.args(["-displayfd", &DISPLAY_FD.to_string()])
            .args(["-screen", "0", &format!("{w}x{h}x24")])
            .arg("-fbdir")
            .arg(dir.path())
            // No TCP, no cursor over the page, one server for the whole launch.
            .args(["-nolisten", "tcp", "-nocursor", "-noreset"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("xvfb.stderr"))?)
            .process_group(0);
        let fd = write_end.as_raw_fd();
        // SAFETY: dup2 is async-signal-safe; nothing is allocated between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // dup2 onto itself keeps close-on-exec: clear it instead.
                let r = if fd == DISPLAY_FD {
                    libc::fcntl(fd, libc::F_SETFD, 0)
                } else {
                    libc::dup2(fd, DISPLAY_FD)
                };
                match r {
                    -1 => Err(std::io::Error::last_os_error()),
                    _ => Ok(()),
                }
            });
        }
        let child = cmd.spawn().with_context(|| {
            format!("cannot start {XVFB}: install Debian's xvfb package (./setup.sh does)")
        })?;
        drop(write_end);
        let pgid = child.id() as i32;
        let files = dir.path().to_path_buf();
        let cleanup = signals::register_cleanup(move || {
            // SAFETY: signalling the process group we created.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = std::fs::remove_dir_all(&files);
        });
        let mut display = VirtualDisplay {
            child,
            pgid,
            number: 0,
            dir,
            _cleanup: cleanup,
        };
        display.number = display.read_number(&mut read_end)?;
        Ok(display)
    }

    /// The display number Xvfb wrote once it was ready (a line), or why it gave none.
    fn read_number(&mut self, pipe: &mut std::fs::File) -> Result<u32> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut text = String::new();
        let mut byte = [0u8; 1];
        while !text.ends_with('\n') {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !readable(pipe, left)? {
                bail!(
                    "{XVFB} gave no display number in {START_TIMEOUT:?}{}",
                    self.stderr()
                );
            }
            match pipe.read(&mut byte) {
                Ok(0) => bail!("{XVFB} exited before it was ready{}", self.stderr()),
                Ok(_) => text.push(byte[0] as char),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("reading Xvfb's display number"),
            }
        }
        text.trim()
            .parse()
            .with_context(|| format!("{XVFB} wrote {text:?} as its display number"))
    }

    fn stderr(&self) -> String {
        let tail = process_group::stderr_tail(&self.dir.path().join("xvfb.stderr"));
        if tail.is_empty() {
            String::new()
        } else {
            format!(": {tail}")
        }
    }

    /// `DISPLAY` for the browser.
    pub fn name(&self) -> String {
        format!(":{}", self.number)
    }

    /// Waits until every pixel of the screen is white (the page a recording starts from is
    /// on it, not what was shown before: a navigation completes before its paint reaches the
    /// screen).
    pub fn wait_until_white(&self, timeout: Duration) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open(self.screen_file())?;
        let mut header = vec![0u8; 4096];
        let n = file.read_at(&mut header, 0)?;
        let layout = super::xwd::Layout::parse(&header[..n])?;
        let mut pixels = vec![0u8; layout.pixel_bytes()];
        let deadline = Instant::now() + timeout;
        loop {
            file.read_exact_at(&mut pixels, layout.pixels_at as u64)?;
            if layout.is_white(&pixels) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("the screen did not turn white within {timeout:?} before the load");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The file Xvfb keeps screen 0 in.
    pub fn screen_file(&self) -> PathBuf {
        self.dir.path().join("Xvfb_screen0")
    }
}

impl std::fmt::Debug for VirtualDisplay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VirtualDisplay({}, pid {})", self.name(), self.pgid)
    }
}

impl Drop for VirtualDisplay {
    fn drop(&mut self) {
        // SAFETY: signalling the process group we created; Xvfb removes its socket and lock
        // on SIGTERM.
        unsafe { libc::kill(-self.pgid, libc::SIGTERM) };
        process_group::end_group(&mut self.child, self.pgid, Duration::from_secs(2));
    }
}

/// Whether `file` has something to read (or its end) within `timeout`.
fn readable(file: &std::fs::File, timeout: Duration) -> Result<bool> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLIN)];
    let ms = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
    match poll(&mut fds, ms) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(e).context("waiting for Xvfb's display number"),
    }
}

/// A pipe whose read end is a `File` (blocking reads, closed on exec) and whose write end is
/// handed to the child.
fn pipe() -> Result<(std::fs::File, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("creating a pipe")?;
    Ok((std::fs::File::from(r), w))
}
