//! h2 responses taking turns on their connection (the IO side of [`super::response_order::Scheduler`]):
//! a response body asks for its turn before each chunk and waits, woken when its turn comes.
//!
//! A turn also waits while the connection has more than [`HANDED_AHEAD`] bytes handed to hyper
//! but not yet written to the socket: hyper polls every body that has stream capacity, so
//! without this bound each stream's next chunk would queue in hyper's buffers before the
//! socket takes any of them, and a response that comes later would wait behind all of them.
//! [`Counted`] tells the turns what was written.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::response_order::{Priorities, Scheduler};
use crate::config::priority::Priority;

/// Under `--priorities` (not `ignore`), h2 bodies go out in chunks of this size, hyper holds at
/// most this much per stream (unless `--h2-stream-buffer` says otherwise), and the socket keeps
/// at most this much unsent (TCP_NOTSENT_LOWAT): a response that comes later with a higher
/// priority waits behind at most a few chunks, not behind a send buffer's worth of others.
pub(crate) const PRIORITY_CHUNK: usize = 16 * 1024;

/// Body bytes a connection may have handed to hyper beyond what it wrote to the socket.
pub(crate) const HANDED_AHEAD: u64 = 2 * PRIORITY_CHUNK as u64;

/// One connection's schedule, shared by its response bodies.
#[derive(Clone)]
pub(crate) struct Turns(Arc<Mutex<Shared>>);

struct Shared {
    scheduler: Scheduler,
    waiting: HashMap<u64, Waker>,
    /// Body bytes handed to hyper, and bytes hyper wrote (frames and TLS records included,
    /// so the difference errs on the side of sending).
    handed: u64,
    written: u64,
}

/// One response's place in its connection's schedule; leaving it (drop) passes the turn on.
pub(crate) struct Turn {
    turns: Turns,
    id: u64,
}

impl Turns {
    pub(crate) fn new(policy: Priorities) -> Turns {
        Turns(Arc::new(Mutex::new(Shared {
            scheduler: Scheduler::new(policy),
            waiting: HashMap::new(),
            handed: 0,
            written: 0,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A response whose body is ready to send.
    pub(crate) fn join(&self, seq: u64, priority: Priority) -> Turn {
        let id = self.lock().scheduler.open(seq, priority);
        Turn {
            turns: self.clone(),
            id,
        }
    }
}

impl Shared {
    fn ahead(&self) -> u64 {
        self.handed.saturating_sub(self.written)
    }

    /// Wakes the response whose turn it is now, if it waits.
    fn wake_chosen(&mut self) {
        if let Some(w) = self
            .scheduler
            .chosen()
            .and_then(|c| self.waiting.remove(&c))
        {
            w.wake();
        }
    }
}

impl Turn {
    /// Ready when this response may hand its next chunk over.
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.turns.lock();
        if s.scheduler.may_send(self.id) && s.ahead() < HANDED_AHEAD {
            return Poll::Ready(());
        }
        s.waiting.insert(self.id, cx.waker().clone());
        Poll::Pending
    }

    /// It handed `bytes` over: round-robin may pass the turn on.
    pub(crate) fn sent(&self, bytes: usize) {
        let mut s = self.turns.lock();
        s.handed += bytes as u64;
        s.scheduler.sent(self.id);
        s.wake_chosen();
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut s = self.turns.lock();
        s.scheduler.close(self.id);
        s.waiting.remove(&self.id);
        s.wake_chosen();
    }
}

impl Turns {
    /// hyper wrote `bytes` to the connection: the response whose turn it is may go on.
    fn written(&self, bytes: usize) {
        let mut s = self.lock();
        s.written += bytes as u64;
        if s.ahead() < HANDED_AHEAD {
            s.wake_chosen();
        }
    }
}

/// A connection's byte stream that tells its turns what was written to it.
pub(crate) struct Counted<T> {
    inner: T,
    turns: Option<Turns>,
}

impl<T> Counted<T> {
    /// `turns`: None when the connection does not schedule (`--priorities ignore`).
    pub(crate) fn new(inner: T, turns: Option<Turns>) -> Counted<T> {
        Counted { inner, turns }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let n = std::task::ready!(Pin::new(&mut self.inner).poll_write(cx, buf))?;
        if let Some(t) = &self.turns {
            t.written(n);
        }
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let n = std::task::ready!(Pin::new(&mut self.inner).poll_write_vectored(cx, bufs))?;
        if let Some(t) = &self.turns {
            t.written(n);
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
