//! HTTP/1.1 and HTTP/2 over TLS over TCP: accept, TLS handshake, pick the protocol by ALPN,
//! serve with hyper, and count what goes out.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::knobs::Protocol;
use super::log::PendingRecord;
use super::priority::{Priorities, Priority};
use super::site::{upload_reply, Plan, Reply, CHUNK};
use super::stats::{ConnGuard, Probe, Transport};
use super::turns::{Counted, Turn, Turns, PRIORITY_CHUNK};
use super::Ctx;

const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts until shutdown, then lets open connections finish (at most `grace`).
pub(crate) async fn accept_loop(
    listener: tokio::net::TcpListener,
    acceptor: TlsAcceptor,
    ctx: Arc<Ctx>,
    mut shutdown: watch::Receiver<bool>,
    grace: Duration,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    conns.spawn(serve_connection(stream, peer, acceptor.clone(), ctx.clone(), shutdown.clone()));
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = super::stop_requested(&mut shutdown) => break,
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
    conns.shutdown().await;
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    ctx: Arc<Ctx>,
    shutdown: watch::Receiver<bool>,
) {
    super::sockets::tune_accepted(&stream);
    let policy = ctx.knobs.priorities;
    let turns = (!policy.is_ignore()).then(|| {
        super::sockets::limit_unsent(&stream, PRIORITY_CHUNK);
        Turns::new(policy)
    });
    let probe = match stream.as_fd().try_clone_to_owned() {
        Ok(fd) => Probe::Tcp(Arc::new(fd)),
        Err(e) => {
            tracing::warn!("cannot duplicate a socket for TCP_INFO: {e}");
            return;
        }
    };
    let mut guard = ConnGuard::new(ctx.registry.clone(), Transport::Tcp, peer, probe);
    let stream = Counted::new(stream, turns.clone());
    guard.error = serve_tls(stream, turns, peer, acceptor, &ctx, &guard, shutdown)
        .await
        .err();
}

async fn serve_tls(
    stream: Counted<tokio::net::TcpStream>,
    turns: Option<Turns>,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    ctx: &Arc<Ctx>,
    guard: &ConnGuard,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), String> {
    let t0 = Instant::now();
    let handshake = async {
        match (ctx.site.replaying(), &ctx.tls_h1_only) {
            // A replayed site on its recorded protocols: the client's SNI picks the ALPN.
            (Some(replay), Some(h1_only)) if replay.as_recorded.is_some() => {
                let start = tokio_rustls::LazyConfigAcceptor::new(
                    rustls::server::Acceptor::default(),
                    stream,
                )
                .await?;
                let sni = start.client_hello().server_name().map(str::to_string);
                let recorded = sni.as_deref().and_then(|h| replay.recorded_protocol(h));
                let config = if recorded == Some(Protocol::H1) {
                    h1_only.clone()
                } else {
                    acceptor.config().clone()
                };
                start.into_stream(config).await
            }
            _ => acceptor.accept(stream).await,
        }
    };
    let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => return Err(format!("TLS handshake failed: {e}")),
        Err(_) => return Err("TLS handshake timed out".into()),
    };
    let protocol = match tls.get_ref().1.alpn_protocol() {
        Some(super::tls::ALPN_H2) => Protocol::H2,
        Some(super::tls::ALPN_H1) => Protocol::H1,
        None if ctx.knobs.offers(Protocol::H1) => Protocol::H1,
        None => return Err("the client offered no ALPN and HTTP/1.1 is not offered".into()),
        Some(other) => {
            return Err(format!(
                "unexpected ALPN {:?}",
                String::from_utf8_lossy(other)
            ))
        }
    };
    let id = guard.id;
    guard
        .registry()
        .established(id, protocol.alpn(), t0.elapsed().as_secs_f64() * 1000.0);
    let resumed = tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    guard.registry().resumed(id, resumed);
    let svc_ctx = ctx.clone();
    // HTTP/1.1 answers one request at a time: nothing to schedule.
    let turns = turns.filter(|_| protocol == Protocol::H2);
    let svc = hyper::service::service_fn(move |req| {
        let conn = Conn {
            id,
            peer,
            protocol,
            turns: turns.clone(),
        };
        handle(req, svc_ctx.clone(), conn)
    });
    let io = TokioIo::new(tls);
    // Drives a hyper connection; on shutdown it finishes in-flight requests, then closes.
    macro_rules! drive {
        ($conn:expr) => {{
            let conn = $conn;
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => r,
                _ = super::stop_requested(&mut shutdown) => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            }
        }};
    }
    let result = match protocol {
        Protocol::H2 => {
            let k = &ctx.knobs;
            let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            b.timer(TokioTimer::new())
                .max_concurrent_streams(k.h2_max_concurrent_streams)
                .initial_stream_window_size(k.h2_initial_stream_window as u32)
                .initial_connection_window_size(k.h2_initial_connection_window as u32);
            match (k.h2_stream_buffer, k.priorities) {
                (Some(n), _) => {
                    b.max_send_buf_size(n as usize);
                }
                (None, Priorities::Ignore) => {}
                (None, _) => {
                    b.max_send_buf_size(PRIORITY_CHUNK);
                }
            }
            drive!(b.serve_connection(io, svc))
        }
        _ => {
            let mut b = hyper::server::conn::http1::Builder::new();
            b.timer(TokioTimer::new()).keep_alive(true);
            drive!(b.serve_connection(io, svc))
        }
    };
    result.map_err(|e| {
        let msg = error_chain(&e);
        tracing::debug!("connection {id} from {peer}: {msg}");
        msg
    })
}

/// "error: cause: cause…" — hyper's own message alone is often just "connection error".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// The connection a request came on.
struct Conn {
    id: u64,
    peer: SocketAddr,
    protocol: Protocol,
    /// h2 under `--priorities`: the connection's schedule.
    turns: Option<Turns>,
}

async fn handle(
    req: Request<Incoming>,
    ctx: Arc<Ctx>,
    conn: Conn,
) -> Result<Response<ResponseBody>, Infallible> {
    let Conn {
        id: conn_id,
        peer,
        protocol,
        turns,
    } = conn;
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
    pending.rec.priority = super::priority::header(req.headers());
    let reply = match ctx.site.plan_request(&req, &target, &mut pending).await {
        Plan::Respond(r) => r,
        Plan::Upload => {
            let (n, failed) = drain_body(req.into_body()).await;
            if let Some(e) = failed {
                pending.rec.error = Some(format!("upload body: {e}"));
            }
            pending.rec.bytes_received = n;
            upload_reply(n, pending.start.elapsed())
        }
    };
    pending.answered();
    pending.rec.status = reply.status.as_u16();
    pending.rec.replay = reply.replay;
    let turn = turns.map(|t| {
        let p = Priority::parse(pending.rec.priority.as_deref().unwrap_or(""));
        pending.rec.scheduled = Some(p);
        t.join(seq, p)
    });
    let (parts, ()) = ctx.site.head(&reply, false).into_parts();
    Ok(Response::from_parts(
        parts,
        ResponseBody::new(reply, pending, turn),
    ))
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

/// Reads a request body to its end (or its first error), counting its bytes: an upload.
pub async fn drain_body(mut body: hyper::body::Incoming) -> (u64, Option<hyper::Error>) {
    let mut n = 0u64;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => {
                if let Some(d) = f.data_ref() {
                    n += d.len() as u64;
                }
            }
            Err(e) => return (n, Some(e)),
        }
    }
    (n, None)
}
