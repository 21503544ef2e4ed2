//! HTTP/1.1 and HTTP/2 over TLS over TCP: accept, TLS handshake, pick the protocol by ALPN,
//! serve (HTTP/1.1 with hyper, HTTP/2 in [`super::h2_server`]), and count what goes out.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::answers::{upload_reply, PlainHttp, Plan};
use super::ctx::Ctx;
use super::knobs::Protocol;
use super::response::{new_pending, respond, ResponseBody};
use super::transport_stats::{ConnGuard, Probe, Transport};
use super::turns::{Counted, Turns, PRIORITY_CHUNK};

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
            _ = super::ctx::stop_requested(&mut shutdown) => break,
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
    // A replayed site's `http://` origins come to the same listener without TLS.
    let plain = ctx.site.replaying().is_some() && speaks_plain_http(&stream).await;
    let stream = Counted::new(stream, turns.clone());
    guard.error = if plain {
        guard
            .registry()
            .established(guard.id, Protocol::H1.alpn(), 0.0);
        serve_h1(stream, &ctx, guard.id, peer, shutdown, true).await
    } else {
        serve_tls(stream, turns, peer, acceptor, &ctx, &guard, shutdown).await
    }
    .err();
}

/// Whether the client's first byte is not a TLS handshake record's (22): plain HTTP.
async fn speaks_plain_http(stream: &tokio::net::TcpStream) -> bool {
    const TLS_HANDSHAKE: u8 = 22;
    let mut first = [0u8; 1];
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await {
        Ok(Ok(1)) => first[0] != TLS_HANDSHAKE,
        // Closed, failed or silent: the TLS path says why.
        _ => false,
    }
}

async fn serve_tls(
    stream: Counted<tokio::net::TcpStream>,
    turns: Option<Turns>,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    ctx: &Arc<Ctx>,
    guard: &ConnGuard,
    shutdown: watch::Receiver<bool>,
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
        Some(super::tls_config::ALPN_H2) => Protocol::H2,
        Some(super::tls_config::ALPN_H1) => Protocol::H1,
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
    if protocol == Protocol::H2 {
        let conn = super::h2_server::H2Conn { id, peer, turns };
        return super::h2_server::serve(tls, ctx.clone(), conn, shutdown).await;
    }
    serve_h1(tls, ctx, id, peer, shutdown, false).await
}

/// HTTP/1.1 on `io` (over TLS or, for a replayed `http://` origin, not) until it closes or
/// the server shuts down.
async fn serve_h1<IO>(
    io: IO,
    ctx: &Arc<Ctx>,
    id: u64,
    peer: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
    plain: bool,
) -> Result<(), String>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // HTTP/1.1 answers one request at a time: nothing to schedule, and no 103 (hyper 1 has no
    // API for it; Chromium ignores 103 over HTTP/1.1 anyway).
    let svc_ctx = ctx.clone();
    let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        if plain {
            req.extensions_mut().insert(PlainHttp);
        }
        handle(req, svc_ctx.clone(), id, peer)
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    // On shutdown it finishes the request in flight, then closes.
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = super::ctx::stop_requested(&mut shutdown) => {
            conn.as_mut().graceful_shutdown();
            conn.await
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

/// An HTTP/1.1 request.
async fn handle(
    req: Request<Incoming>,
    ctx: Arc<Ctx>,
    conn_id: u64,
    peer: SocketAddr,
) -> Result<Response<ResponseBody>, Infallible> {
    let (target, mut pending) = new_pending(&req, &ctx, conn_id, peer, Protocol::H1);
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
    let (head, body) = respond(reply, pending, None, &ctx.site);
    let (parts, ()) = head.into_parts();
    Ok(Response::from_parts(parts, body))
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
