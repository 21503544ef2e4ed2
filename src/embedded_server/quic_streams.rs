//! The QUIC streams h3 serves on, over quinn: h3-quinn's for the control and QPACK streams, and
//! request streams of our own whose send side takes a quinn priority — h3-quinn keeps its quinn
//! streams private, so a request's priority could not reach quinn's scheduler through it. The
//! priority comes from the request's header and from the client's PRIORITY_UPDATE frames, read
//! as the control stream passes by (h3 itself drops them).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};
use quinn::VarInt;

use super::response_order::{quic_priority, Priorities, PriorityUpdates};
use crate::config::priority::Priority;

/// The quinn priorities of a connection's request streams, by QUIC stream id, under a policy
/// that is not `ignore`.
#[derive(Clone)]
pub(crate) struct StreamPriorities {
    policy: Priorities,
    asked: Arc<Mutex<HashMap<u64, Asked>>>,
}

#[derive(Debug, Clone, Copy)]
struct Asked {
    quinn: i32,
    /// A PRIORITY_UPDATE set it: it wins over the request's header (RFC 9218 §7).
    updated: bool,
    applied: bool,
}

impl StreamPriorities {
    pub(crate) fn new(policy: Priorities) -> StreamPriorities {
        StreamPriorities {
            policy,
            asked: Arc::default(),
        }
    }

    /// The request's position on its connection: client streams are opened in request order
    /// (ids 0, 4, 8…).
    fn quinn(&self, id: u64, p: Priority) -> i32 {
        quic_priority(self.policy, p, id / 4)
    }

    /// What the request's `priority` header asks for stream `id`.
    pub(crate) fn ask_by_header(&self, id: u64, p: Priority) {
        let quinn = self.quinn(id, p);
        let mut asked = self.lock();
        let a = asked.entry(id).or_insert(Asked {
            quinn,
            updated: false,
            applied: false,
        });
        if !a.updated {
            a.quinn = quinn;
            a.applied = false;
        }
    }

    /// What a PRIORITY_UPDATE asks for stream `id` (which may not be open yet).
    fn ask_by_update(&self, id: u64, p: Priority) {
        let quinn = self.quinn(id, p);
        self.lock().insert(
            id,
            Asked {
                quinn,
                updated: true,
                applied: false,
            },
        );
    }

    /// The priority stream `id` should take now, if it changed since it last took one.
    fn pending(&self, id: u64) -> Option<i32> {
        let mut asked = self.lock();
        let a = asked.get_mut(&id).filter(|a| !a.applied)?;
        a.applied = true;
        Some(a.quinn)
    }

    fn forget(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Asked>> {
        self.asked.lock().unwrap_or_else(|p| p.into_inner())
    }
}

type Accepted = Result<(quinn::SendStream, quinn::RecvStream), quinn::ConnectionError>;
type Accepting = Pin<Box<dyn Future<Output = Accepted> + Send + Sync>>;

/// A connection as h3 sees it.
pub(crate) struct Connection {
    /// Accepts the client's unidirectional streams.
    uni: h3_quinn::Connection,
    /// Opens ours.
    open: Opener,
    conn: quinn::Connection,
    /// The request stream being accepted.
    accepting: Option<Accepting>,
    /// None under `--priorities ignore`: streams keep quinn's default priority.
    priorities: Option<StreamPriorities>,
}

impl Connection {
    pub(crate) fn new(conn: quinn::Connection, priorities: Option<StreamPriorities>) -> Connection {
        let uni = h3_quinn::Connection::new(conn.clone());
        let open = Opener(<h3_quinn::Connection as quic::Connection<Bytes>>::opener(
            &uni,
        ));
        Connection {
            uni,
            open,
            conn,
            accepting: None,
            priorities,
        }
    }
}

fn connection_error(e: quinn::ConnectionError) -> ConnectionErrorIncoming {
    match e {
        quinn::ConnectionError::ApplicationClosed(c) => ConnectionErrorIncoming::ApplicationClose {
            error_code: c.error_code.into_inner(),
        },
        quinn::ConnectionError::TimedOut => ConnectionErrorIncoming::Timeout,
        other => ConnectionErrorIncoming::Undefined(Arc::new(other)),
    }
}

fn write_error(e: quinn::WriteError) -> StreamErrorIncoming {
    match e {
        quinn::WriteError::Stopped(code) => StreamErrorIncoming::StreamTerminated {
            error_code: code.into_inner(),
        },
        quinn::WriteError::ConnectionLost(c) => StreamErrorIncoming::ConnectionErrorIncoming {
            connection_error: connection_error(c),
        },
        other => StreamErrorIncoming::Unknown(Box::new(other)),
    }
}

fn read_error(e: quinn::ReadError) -> StreamErrorIncoming {
    match e {
        quinn::ReadError::Reset(code) => StreamErrorIncoming::StreamTerminated {
            error_code: code.into_inner(),
        },
        quinn::ReadError::ConnectionLost(c) => StreamErrorIncoming::ConnectionErrorIncoming {
            connection_error: connection_error(c),
        },
        other => StreamErrorIncoming::Unknown(Box::new(other)),
    }
}

fn h3_id(id: quinn::StreamId) -> StreamId {
    StreamId::try_from(u64::from(id)).expect("a QUIC stream id is an h3 stream id")
}

fn servers_open_no_bidi<T>() -> Poll<Result<T, StreamErrorIncoming>> {
    Poll::Ready(Err(StreamErrorIncoming::Unknown(
        "an HTTP/3 server opens no bidirectional streams".into(),
    )))
}

impl<B: Buf> quic::Connection<B> for Connection {
    type RecvStream = ClientUniStream;
    type OpenStreams = Opener;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::RecvStream, ConnectionErrorIncoming>> {
        let inner = std::task::ready!(
            <h3_quinn::Connection as quic::Connection<B>>::poll_accept_recv(&mut self.uni, cx)
        )?;
        Poll::Ready(Ok(ClientUniStream {
            inner,
            updates: self
                .priorities
                .clone()
                .map(|p| (PriorityUpdates::default(), p)),
        }))
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, ConnectionErrorIncoming>> {
        let conn = &self.conn;
        let accepting = self.accepting.get_or_insert_with(|| {
            let conn = conn.clone();
            Box::pin(async move { conn.accept_bi().await })
        });
        let accepted = std::task::ready!(accepting.as_mut().poll(cx));
        self.accepting = None;
        let (send, recv) = accepted.map_err(connection_error)?;
        Poll::Ready(Ok(RequestStream {
            send: RequestSend {
                stream: send,
                writing: None,
                priorities: self.priorities.clone(),
            },
            recv: RequestRecv { stream: recv },
        }))
    }

    fn opener(&self) -> Opener {
        self.open.clone()
    }
}

impl<B: Buf> quic::OpenStreams<B> for Connection {
    type BidiStream = RequestStream<B>;
    type SendStream = h3_quinn::SendStream<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
        quic::OpenStreams::<B>::poll_open_bidi(&mut self.open, cx)
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        quic::OpenStreams::<B>::poll_open_send(&mut self.open, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        quic::OpenStreams::<B>::close(&mut self.open, code, reason)
    }
}

/// Opens our unidirectional streams (h3-quinn's).
pub(crate) struct Opener(h3_quinn::OpenStreams);

impl<B: Buf> quic::OpenStreams<B> for Opener {
    type BidiStream = RequestStream<B>;
    type SendStream = h3_quinn::SendStream<B>;

    fn poll_open_bidi(
        &mut self,
        _cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
        servers_open_no_bidi()
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        <h3_quinn::OpenStreams as quic::OpenStreams<B>>::poll_open_send(&mut self.0, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        <h3_quinn::OpenStreams as quic::OpenStreams<B>>::close(&mut self.0, code, reason)
    }
}

impl Clone for Opener {
    fn clone(&self) -> Self {
        Opener(self.0.clone())
    }
}

/// A request stream: the client's request in, our response out.
pub(crate) struct RequestStream<B: Buf> {
    send: RequestSend<B>,
    recv: RequestRecv,
}

/// The response side: quinn's send stream, at the priority last asked for it.
pub(crate) struct RequestSend<B: Buf> {
    stream: quinn::SendStream,
    writing: Option<WriteBuf<B>>,
    priorities: Option<StreamPriorities>,
}

impl<B: Buf> RequestSend<B> {
    /// Takes the priority asked for this stream, if it changed, before it writes on.
    fn prioritise(&mut self) {
        if let Some(asked) = &self.priorities {
            if let Some(p) = asked.pending(self.stream.id().into()) {
                let _ = self.stream.set_priority(p);
            }
        }
    }
}

impl<B: Buf> Drop for RequestSend<B> {
    fn drop(&mut self) {
        if let Some(asked) = &self.priorities {
            asked.forget(self.stream.id().into());
        }
    }
}

impl<B: Buf> quic::SendStream<B> for RequestSend<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.prioritise();
        if let Some(data) = self.writing.as_mut() {
            while data.has_remaining() {
                let written =
                    std::task::ready!(Pin::new(&mut self.stream).poll_write(cx, data.chunk()))
                        .map_err(write_error)?;
                data.advance(written);
            }
        }
        self.writing = None;
        Poll::Ready(Ok(()))
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if self.writing.is_some() {
            return Err(StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: ConnectionErrorIncoming::InternalError(
                    "send_data before the previous write was done".into(),
                ),
            });
        }
        self.writing = Some(data.into());
        Ok(())
    }

    fn poll_finish(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        Poll::Ready(
            self.stream
                .finish()
                .map_err(|e| StreamErrorIncoming::Unknown(Box::new(e))),
        )
    }

    fn reset(&mut self, reset_code: u64) {
        let _ = self
            .stream
            .reset(VarInt::from_u64(reset_code).unwrap_or(VarInt::MAX));
    }

    fn send_id(&self) -> StreamId {
        h3_id(self.stream.id())
    }
}

impl<B: Buf> quic::SendStreamUnframed<B> for RequestSend<B> {
    fn poll_send<D: Buf>(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut D,
    ) -> Poll<Result<usize, StreamErrorIncoming>> {
        self.prioritise();
        let written = std::task::ready!(Pin::new(&mut self.stream).poll_write(cx, buf.chunk()))
            .map_err(write_error)?;
        buf.advance(written);
        Poll::Ready(Ok(written))
    }
}

/// A unidirectional stream of the client's (control, QPACK), h3-quinn's, whose PRIORITY_UPDATE
/// frames are read on the way to h3.
pub(crate) struct ClientUniStream {
    inner: h3_quinn::RecvStream,
    updates: Option<(PriorityUpdates, StreamPriorities)>,
}

impl quic::RecvStream for ClientUniStream {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let data = std::task::ready!(self.inner.poll_data(cx))?;
        if let (Some(bytes), Some((reader, asked))) = (&data, self.updates.as_mut()) {
            for (id, p) in reader.feed(bytes) {
                tracing::debug!("PRIORITY_UPDATE for stream {id}: {p:?}");
                asked.ask_by_update(id, p);
            }
        }
        Poll::Ready(Ok(data))
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

/// The request side.
pub(crate) struct RequestRecv {
    stream: quinn::RecvStream,
}

/// Bytes read per poll of a request body.
const READ_CHUNK: usize = 64 * 1024;

impl quic::RecvStream for RequestRecv {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let mut buf = vec![0u8; READ_CHUNK];
        let n = std::task::ready!(self.stream.poll_read(cx, &mut buf)).map_err(read_error)?;
        if n == 0 {
            return Poll::Ready(Ok(None));
        }
        buf.truncate(n);
        Poll::Ready(Ok(Some(Bytes::from(buf))))
    }

    fn stop_sending(&mut self, error_code: u64) {
        let _ = self
            .stream
            .stop(VarInt::from_u64(error_code).unwrap_or(VarInt::MAX));
    }

    fn recv_id(&self) -> StreamId {
        h3_id(self.stream.id())
    }
}

impl<B: Buf> quic::BidiStream<B> for RequestStream<B> {
    type SendStream = RequestSend<B>;
    type RecvStream = RequestRecv;

    fn split(self) -> (RequestSend<B>, RequestRecv) {
        (self.send, self.recv)
    }
}

impl<B: Buf> quic::RecvStream for RequestStream<B> {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.recv.recv_id()
    }
}

impl<B: Buf> quic::SendStream<B> for RequestStream<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.send.reset(reset_code)
    }

    fn send_id(&self) -> StreamId {
        self.send.send_id()
    }
}

impl<B: Buf> quic::SendStreamUnframed<B> for RequestStream<B> {
    fn poll_send<D: Buf>(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut D,
    ) -> Poll<Result<usize, StreamErrorIncoming>> {
        self.send.poll_send(cx, buf)
    }
}
