//! A response on its way out over TCP (HTTP/1.1 or HTTP/2): its request's log line, its head,
//! and its body, which counts what the transport takes from it and, for h2 under
//! `--priorities`, hands a chunk over only in its turn.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use hyper::{Request, Response};

use super::answers::{Reply, CHUNK};
use super::ctx::Ctx;
use super::knobs::Protocol;
use super::log::PendingRecord;
use super::turns::{Turn, Turns, PRIORITY_CHUNK};
use crate::config::priority::Priority;

/// A request's log line in the making, and its target.
pub(crate) fn new_pending<B>(
    req: &Request<B>,
    ctx: &Ctx,
    conn_id: u64,
    peer: SocketAddr,
    protocol: Protocol,
) -> (String, PendingRecord) {
    let seq = ctx.registry.next_request(conn_id);
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| req.uri().to_string());
    let mut pending = PendingRecord::new(
        ctx.log.clone(),
        peer,
        protocol.alpn(),
        req.method().as_str(),
        &target,
        conn_id,
        seq,
        None,
    );
    pending.rec.priority = super::response_order::header(req.headers());
    (target, pending)
}

/// The response to `reply`: its head, and its body, which takes its turn in `turns` (h2 under
/// `--priorities`) and logs the request when done.
pub(crate) fn respond(
    reply: Reply,
    mut pending: PendingRecord,
    turns: Option<&Turns>,
    site: &super::answers::Site,
) -> (Response<()>, ResponseBody) {
    pending.answered();
    pending.rec.status = reply.status.as_u16();
    pending.rec.replay = reply.replay;
    let turn = turns.map(|t| {
        let p = Priority::parse(pending.rec.priority.as_deref().unwrap_or(""));
        pending.rec.scheduled = Some(p);
        t.join(pending.rec.seq_on_connection, p)
    });
    let head = site.head(&reply, false);
    (head, ResponseBody::new(reply, pending, turn))
}

/// A response body that counts what hyper takes from it and logs the request when done; under
/// `--priorities` it hands a chunk over only in its turn.
pub(crate) struct ResponseBody {
    data: Bytes,
    pos: usize,
    pending: Option<PendingRecord>,
    turn: Option<Turn>,
}

impl ResponseBody {
    fn new(reply: Reply, pending: PendingRecord, turn: Option<Turn>) -> ResponseBody {
        let data = if reply.head_only {
            Bytes::new()
        } else {
            reply.body
        };
        let mut body = ResponseBody {
            data,
            pos: 0,
            pending: Some(pending),
            turn,
        };
        if body.data.is_empty() {
            // Nothing for hyper to poll: the head is the whole response.
            body.finish();
        }
        body
    }

    fn finish(&mut self) {
        if let Some(mut p) = self.pending.take() {
            p.set_complete();
        }
        // The turn passes on with the last chunk.
        self.turn = None;
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let len = self.data.len();
        if self.pos >= len {
            self.finish();
            return Poll::Ready(None);
        }
        let chunk_size = match &self.turn {
            Some(turn) => {
                std::task::ready!(turn.poll_ready(cx));
                PRIORITY_CHUNK
            }
            None => CHUNK,
        };
        let end = (self.pos + chunk_size).min(len);
        let chunk = self.data.slice(self.pos..end);
        self.pos = end;
        if let Some(p) = self.pending.as_mut() {
            p.body_started();
            p.rec.bytes_sent += chunk.len() as u64;
        }
        if let Some(turn) = &self.turn {
            turn.sent(chunk.len());
        }
        if self.pos >= len {
            // hyper may not poll again after the last frame of a sized body.
            self.finish();
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact((self.data.len() - self.pos) as u64)
    }
}
