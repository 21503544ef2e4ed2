//! HTTP/2 on the `h2` crate itself: hyper's server, which sits on the same crate, has no way to
//! send an informational response, and `103 Early Hints` is one. The connection is set up as
//! hyper set it up (its window, frame, header-list and send-buffer defaults, a `date` header,
//! `content-length` from the body), and a response body goes to its stream as hyper's does: one
//! chunk at a time, handed over once the stream has any send capacity, so nothing measured
//! changes with the switch. It also gives the request log each stream's id.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use hyper::body::Body;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::answers::{upload_reply, Plan};
use super::ctx::Ctx;
use super::knobs::{EffectiveKnobs, Priorities, Protocol};
use super::response::{new_pending, respond, ResponseBody};
use super::turns::{Turns, PRIORITY_CHUNK};

/// hyper's h2 server defaults, kept so the switch changes nothing on the wire.
const MAX_FRAME_SIZE: u32 = 16 * 1024;
const MAX_HEADER_LIST_SIZE: u32 = 16 * 1024;
const MAX_LOCAL_ERROR_RESET_STREAMS: usize = 1024;
const DEFAULT_SEND_BUFFER: usize = 400 * 1024;

/// The connection an h2 request came on.
#[derive(Clone)]
pub(crate) struct H2Conn {
    pub id: u64,
    pub peer: SocketAddr,
    /// Under `--priorities`: the connection's schedule.
    pub turns: Option<Turns>,
}

/// The per-stream send buffer: the knob, else 16 KiB under a priority policy (a later, more
/// urgent response waits behind little), else hyper's 400 KiB.
fn send_buffer(k: &EffectiveKnobs) -> usize {
    match (k.h2_stream_buffer, k.priorities) {
        (Some(n), _) => n as usize,
        (None, Priorities::Ignore) => DEFAULT_SEND_BUFFER,
        (None, _) => PRIORITY_CHUNK,
    }
}

fn builder(k: &EffectiveKnobs) -> h2::server::Builder {
    let mut b = h2::server::Builder::new();
    b.initial_window_size(k.h2_initial_stream_window as u32)
        .initial_connection_window_size(k.h2_initial_connection_window as u32)
        .max_frame_size(MAX_FRAME_SIZE)
        .max_header_list_size(MAX_HEADER_LIST_SIZE)
        .max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESET_STREAMS))
        .max_concurrent_streams(k.h2_max_concurrent_streams)
        .max_send_buffer_size(send_buffer(k));
    b
}

/// Serves one h2 connection until the client closes it, or until shutdown (then a GOAWAY, and
/// the requests in flight finish).
pub(crate) async fn serve<T>(
    io: T,
    ctx: Arc<Ctx>,
    conn: H2Conn,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), String>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut connection = builder(&ctx.knobs)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|e| error_text(&e))?;
    let mut streams = JoinSet::new();
    let mut closing = false;
    let result = loop {
        tokio::select! {
            next = connection.accept() => match next {
                Some(Ok((req, reply))) => {
                    streams.spawn(serve_stream(req, reply, ctx.clone(), conn.clone()));
                }
                Some(Err(e)) if e.is_go_away() && e.reason() == Some(h2::Reason::NO_ERROR) => break Ok(()),
                Some(Err(e)) => break Err(error_text(&e)),
                None => break Ok(()),
            },
            Some(_) = streams.join_next(), if !streams.is_empty() => {}
            _ = super::ctx::stop_requested(&mut shutdown), if !closing => {
                connection.graceful_shutdown();
                closing = true;
            }
        }
    };
    streams.shutdown().await;
    result
}

/// "error: cause: cause…".
fn error_text(e: &h2::Error) -> String {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

async fn serve_stream(
    req: http::Request<RecvStream>,
    mut reply: SendResponse<Bytes>,
    ctx: Arc<Ctx>,
    conn: H2Conn,
) {
    let stream_id = u64::from(u32::from(reply.stream_id()));
    let (parts, body) = req.into_parts();
    let req = http::Request::from_parts(parts, ());
    let (target, mut pending) = new_pending(&req, &ctx, conn.id, conn.peer, Protocol::H2);
    pending.rec.stream_id = Some(stream_id);
    if ctx.knobs.early_hints && req.method() == http::Method::GET {
        let hints = ctx
            .site
            .early_hints(super::answers::authority(&req).as_deref(), &target);
        if !hints.is_empty() {
            match reply.send_informational(super::early_hints::response(&hints)) {
                Ok(()) => pending.rec.early_hints = hints,
                Err(e) => tracing::debug!("103 for {target} not sent: {e}"),
            }
        }
    }
    let answer = match ctx.site.plan_request(&req, &target, &mut pending).await {
        Plan::Respond(r) => r,
        Plan::Upload => {
            let (n, failed) = drain(body).await;
            if let Some(e) = failed {
                pending.rec.error = Some(format!("upload body: {e}"));
            }
            pending.rec.bytes_received = n;
            upload_reply(n, pending.start.elapsed())
        }
    };
    let (mut head, body) = respond(answer, pending, conn.turns.as_ref(), &ctx.site);
    head.headers_mut()
        .entry(http::header::DATE)
        .or_insert_with(http_date);
    let end = body.is_end_stream();
    match reply.send_response(head, end) {
        Ok(tx) if !end => {
            if let Err(e) = pipe(body, tx).await {
                tracing::debug!("h2 stream {stream_id} of connection {}: {e}", conn.id);
            }
        }
        Ok(_) => {}
        Err(e) => tracing::debug!("h2 stream {stream_id}: response not sent: {e}"),
    }
}

/// The `date` header hyper adds to every h2 response.
fn http_date() -> http::HeaderValue {
    let now = chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT");
    http::HeaderValue::from_str(&now.to_string()).expect("an ASCII date")
}

/// Reads a request body to its end (or first error), giving its flow-control window back.
async fn drain(mut body: RecvStream) -> (u64, Option<h2::Error>) {
    let mut n = 0u64;
    while let Some(chunk) = body.data().await {
        match chunk {
            Ok(c) => {
                n += c.len() as u64;
                let _ = body.flow_control().release_capacity(c.len());
            }
            Err(e) => return (n, Some(e)),
        }
    }
    (n, None)
}

/// Why a body stopped going out.
#[derive(Debug, thiserror::Error)]
enum PipeError {
    #[error("the client reset the stream ({0:?})")]
    Reset(h2::Reason),
    #[error("{0}")]
    H2(#[from] h2::Error),
    #[error("the stream closed while waiting for capacity")]
    Closed,
}

/// hyper's `PipeToSendStream`: take the body's next chunk (under `--priorities` it comes in its
/// turn), claim one byte of capacity, and hand the whole chunk over once the stream has any
/// (h2 buffers it and sends as the windows open, up to the send buffer); a reset ends it.
async fn pipe(mut body: ResponseBody, mut tx: SendStream<Bytes>) -> Result<(), PipeError> {
    loop {
        let frame = poll_fn(|cx| {
            if let Poll::Ready(r) = tx.poll_reset(cx) {
                return Poll::Ready(Err(r.map_or_else(PipeError::H2, PipeError::Reset)));
            }
            Pin::new(&mut body).poll_frame(cx).map(Ok)
        })
        .await?;
        let Some(Ok(frame)) = frame else {
            tx.send_data(Bytes::new(), true)?;
            return Ok(());
        };
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        let eos = body.is_end_stream();
        if !chunk.is_empty() {
            tx.reserve_capacity(1);
            while tx.capacity() == 0 {
                poll_fn(|cx| {
                    if let Poll::Ready(r) = tx.poll_reset(cx) {
                        return Poll::Ready(Err(r.map_or_else(PipeError::H2, PipeError::Reset)));
                    }
                    match tx.poll_capacity(cx) {
                        Poll::Ready(Some(Ok(_))) => Poll::Ready(Ok(())),
                        Poll::Ready(Some(Err(e))) => Poll::Ready(Err(PipeError::H2(e))),
                        Poll::Ready(None) => Poll::Ready(Err(PipeError::Closed)),
                        Poll::Pending => Poll::Pending,
                    }
                })
                .await?;
            }
        }
        tx.send_data(chunk, eos)?;
        if eos {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_buffer_is_the_knob_then_the_policy_then_hypers() {
        let mut k = crate::embedded_server::ServerKnobs::default().effective();
        assert_eq!(send_buffer(&k), 400 * 1024);
        k.priorities = Priorities::Rfc9218;
        assert_eq!(send_buffer(&k), PRIORITY_CHUNK);
        k.h2_stream_buffer = Some(65_536);
        assert_eq!(send_buffer(&k), 65_536);
    }

    #[test]
    fn the_date_header_is_an_http_date() {
        let d = http_date();
        let s = d.to_str().unwrap();
        assert!(s.ends_with(" GMT") && s.len() == 29, "{s}");
    }
}
