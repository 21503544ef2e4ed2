//! HTTP/3 over QUIC (quinn + h3): the transport knobs, the accept loop and the request streams.
//!
//! The per-stream send buffer. quinn bounds unacknowledged data with `send_window`, which is
//! per *connection*: bytes the application wrote and quinn still retains (sent but not yet
//! acknowledged, or not yet sent) may not exceed it, so writes block. To give each request
//! stream its own budget of `h3_send_buffer` bytes, the connection's window is kept at
//! `h3_send_buffer × active request streams` (at least one stream's worth), updated as request
//! streams start and end. A single active stream — the download workload — is therefore capped
//! at exactly `h3_send_buffer` bytes in flight, i.e. at most `h3_send_buffer / RTT` throughput.
//! With several active streams the streams share the sum: the total is what per-stream buffers
//! would allow, but one stream may borrow an idle neighbour's share (quinn cannot account
//! acknowledgements per stream). Unset, quinn's own 10 MB connection-wide window applies.
//!
//! quinn counts a written chunk against the window until *all* of it is acknowledged (its
//! `send_window` bounds retained bytes). Written in one piece, a window's worth would free up
//! only once its last byte is acknowledged — about two round trips per window with pacing. So
//! with a send buffer set, bodies are written in chunks of 1/16 of it: the retained bytes then
//! track the unacknowledged ones to within 1/16 of the buffer.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::{Buf, Bytes};
use quinn::{TransportConfig, VarInt};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::answers::{upload_reply, Plan, Reply, Site, CHUNK};
use super::ctx::Ctx;
use super::knobs::{EffectiveKnobs, QuicCongestion, DEFAULT_QUIC_SEND_WINDOW};
use super::log::PendingRecord;
use super::quic_streams::{self, StreamPriorities};
use super::transport_stats::{ConnGuard, Probe, Transport};
use crate::config::priority::Priority;

type H3Conn = h3::server::Connection<quic_streams::Connection, Bytes>;
type H3Stream = h3::server::RequestStream<quic_streams::RequestStream<Bytes>, Bytes>;
type H3Resolver = h3::server::RequestResolver<quic_streams::Connection, Bytes>;

/// The quinn transport configuration for the knobs.
pub(crate) fn transport_config(k: &EffectiveKnobs) -> Result<TransportConfig> {
    let varint = |v: u64, what: &str| {
        VarInt::from_u64(v).with_context(|| format!("{what} = {v} is too large for QUIC"))
    };
    let mut t = TransportConfig::default();
    t.max_concurrent_bidi_streams(varint(
        k.h3_max_concurrent_streams,
        "h3_max_concurrent_streams",
    )?)
    .stream_receive_window(varint(
        k.h3_stream_receive_window,
        "h3_stream_receive_window",
    )?)
    .receive_window(varint(
        k.h3_connection_receive_window,
        "h3_connection_receive_window",
    )?)
    .send_window(initial_send_window(k))
    .enable_segmentation_offload(k.gso);
    match k.quic_congestion {
        QuicCongestion::Cubic => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default()))
        }
        QuicCongestion::Newreno => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default()))
        }
        QuicCongestion::Bbr => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default()))
        }
    };
    Ok(t)
}

/// The send window a new connection starts with (one stream's budget, or quinn's default).
pub(crate) fn initial_send_window(k: &EffectiveKnobs) -> u64 {
    k.h3_send_buffer.unwrap_or(DEFAULT_QUIC_SEND_WINDOW)
}

/// One sentence for the run metadata: how the send window is set.
pub(crate) fn send_window_rule(k: &EffectiveKnobs) -> String {
    match k.h3_send_buffer {
        Some(b) => format!(
            "quinn send_window = {b} B × active request streams (min 1): each stream's \
             unacknowledged bytes are bounded by {b} B when it is alone, the sum when several run"
        ),
        None => format!(
            "quinn default: send_window = {DEFAULT_QUIC_SEND_WINDOW} B per connection, shared by its streams"
        ),
    }
}

/// Bytes per write to quinn: 1/16 of the send buffer when one is set (see the module docs).
pub(crate) fn write_chunk(k: &EffectiveKnobs) -> usize {
    match k.h3_send_buffer {
        Some(b) => ((b / 16) as usize).clamp(1200, CHUNK),
        None => CHUNK,
    }
}

/// Keeps a connection's send window at `per_stream × active streams`.
struct SendWindow {
    per_stream: Option<u64>,
    active: Mutex<u64>,
    conn: quinn::Connection,
}

struct ActiveStream(Arc<SendWindow>);

impl SendWindow {
    fn enter(self: &Arc<Self>) -> Option<ActiveStream> {
        let b = self.per_stream?;
        let mut n = self.active.lock().unwrap_or_else(|p| p.into_inner());
        *n += 1;
        self.conn.set_send_window(b.saturating_mul(*n));
        Some(ActiveStream(self.clone()))
    }
}

impl Drop for ActiveStream {
    fn drop(&mut self) {
        let w = &self.0;
        let Some(b) = w.per_stream else { return };
        let mut n = w.active.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_sub(1);
        w.conn.set_send_window(b.saturating_mul((*n).max(1)));
    }
}

/// Accepts QUIC connections until shutdown, then lets them finish (at most `grace`).
pub(crate) async fn accept_loop(
    endpoint: quinn::Endpoint,
    ctx: Arc<Ctx>,
    mut shutdown: watch::Receiver<bool>,
    grace: Duration,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => {
                    conns.spawn(serve_connection(incoming, ctx.clone(), shutdown.clone()));
                }
                None => break,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = super::ctx::stop_requested(&mut shutdown) => break,
        }
    }
    // No new connections from here on.
    endpoint.set_server_config(None);
    let _ = tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
    conns.shutdown().await;
    endpoint.close(VarInt::from_u32(0x100), b"server shutdown");
    let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
}

async fn serve_connection(
    incoming: quinn::Incoming,
    ctx: Arc<Ctx>,
    shutdown: watch::Receiver<bool>,
) {
    let peer = incoming.remote_address();
    let t0 = Instant::now();
    let accepted = match qlog_config(&ctx, peer) {
        Some(cfg) => incoming.accept_with(cfg),
        None => incoming.accept(),
    };
    // With 0-RTT the connection is served at once (0.5-RTT): a resuming client's requests in its
    // first flight are answered before its handshake completes, not a round trip later.
    let zero_rtt = ctx.knobs.quic_0rtt;
    let handshaken = async {
        let mut connecting = accepted?;
        if zero_rtt {
            // Not before the whole ClientHello is in (Chromium's spans two packets): quinn learns
            // the client's stream limits from it, and an h3 stream opened before that waits for
            // credit nobody announces (the connection hangs).
            connecting.handshake_data().await?;
            match connecting.into_0rtt() {
                Ok((conn, done)) => return Ok((conn, Some(done))),
                Err(connecting) => return connecting.await.map(|c| (c, None)),
            }
        }
        connecting.await.map(|c| (c, None))
    };
    let (conn, done) = match handshaken.await {
        Ok(c) => c,
        Err(e) => {
            // Kept in the statistics: a browser refusing the certificate over QUIC shows here.
            tracing::debug!("QUIC handshake from {peer} failed: {e}");
            let mut guard =
                ConnGuard::new(ctx.registry.clone(), Transport::Quic, peer, Probe::None);
            guard.error = Some(format!("QUIC handshake failed: {e}"));
            return;
        }
    };
    let mut guard = ConnGuard::new(
        ctx.registry.clone(),
        Transport::Quic,
        peer,
        Probe::Quic(conn.clone()),
    );
    let completion = match done {
        // The handshake completes while the connection is already being served.
        Some(done) => {
            let (registry, id, conn) = (ctx.registry.clone(), guard.id, conn.clone());
            Some(tokio::spawn(async move {
                // Resolves at completion (true only if the client's 0-RTT was accepted) or, with
                // false, when the connection is lost first; quinn records the loss before it
                // resolves, and a server that completed has sent HANDSHAKE_DONE.
                let accepted_0rtt = done.await;
                let completed = accepted_0rtt
                    || conn.close_reason().is_none()
                    || conn.stats().frame_tx.handshake_done > 0;
                if completed {
                    registry.established(
                        id,
                        super::Protocol::H3.alpn(),
                        t0.elapsed().as_secs_f64() * 1000.0,
                    );
                }
                completed
            }))
        }
        None => {
            guard.registry().established(
                guard.id,
                super::Protocol::H3.alpn(),
                t0.elapsed().as_secs_f64() * 1000.0,
            );
            None
        }
    };
    let served = serve_h3(conn, peer, &ctx, guard.id, shutdown).await;
    guard.error = match (served, completion) {
        (Ok(()), _) => None,
        // A connection served at 0.5-RTT whose handshake never completed (a client refusing the
        // certificate) failed its handshake, like one that was never served.
        (Err(e), Some(completion)) => {
            let completed = tokio::time::timeout(std::time::Duration::from_secs(1), completion)
                .await
                .map_or(true, |joined| joined.unwrap_or(true));
            Some(if completed {
                e
            } else {
                format!("QUIC handshake failed: {e}")
            })
        }
        (Err(e), None) => Some(e),
    };
}

/// The server configuration of a connection whose qlog is kept (None: qlog off, or the
/// transport cannot be built again, which start-up already checked).
fn qlog_config(ctx: &Ctx, peer: SocketAddr) -> Option<Arc<quinn::ServerConfig>> {
    let writer = ctx
        .capture
        .qlog_writer(format!("server-{}-{}", peer.ip(), peer.port()))?;
    let mut sc = ctx.quic_base.clone()?;
    let mut transport = transport_config(&ctx.knobs).ok()?;
    let mut q = quinn::QlogConfig::default();
    q.writer(Box::new(writer)).title(Some(format!(
        "pagebench embedded server, connection from {peer}"
    )));
    transport.qlog_stream(q.into_stream());
    sc.transport_config(Arc::new(transport));
    Some(Arc::new(sc))
}

async fn serve_h3(
    conn: quinn::Connection,
    peer: SocketAddr,
    ctx: &Arc<Ctx>,
    conn_id: u64,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), String> {
    let policy = ctx.knobs.priorities;
    let priorities = (!policy.is_ignore()).then(|| StreamPriorities::new(policy));
    let mut h3conn: H3Conn = h3::server::builder()
        .build(quic_streams::Connection::new(
            conn.clone(),
            priorities.clone(),
        ))
        .await
        .map_err(|e| format!("HTTP/3 set-up failed: {e}"))?;
    let window = Arc::new(SendWindow {
        per_stream: ctx.knobs.h3_send_buffer,
        active: Mutex::new(0),
        conn: conn.clone(),
    });
    let mut requests = JoinSet::new();
    let result = loop {
        tokio::select! {
            accepted = h3conn.accept() => match accepted {
                Ok(Some(resolver)) => {
                    let stream = StreamCtx { conn_id, peer, window: window.clone(), priorities: priorities.clone() };
                    requests.spawn(handle_request(resolver, ctx.clone(), stream));
                }
                Ok(None) => break Ok(()),
                Err(e) if e.is_h3_no_error() => break Ok(()),
                Err(e) => break Err(e.to_string()),
            },
            Some(_) = requests.join_next(), if !requests.is_empty() => {}
            _ = super::ctx::stop_requested(&mut shutdown) => {
                // GOAWAY: no new requests; the ones in flight finish below.
                let _ = h3conn.shutdown(0).await;
                while requests.join_next().await.is_some() {}
                conn.close(VarInt::from_u32(0x100), b"server shutdown");
                break Ok(());
            }
        }
    };
    while requests.join_next().await.is_some() {}
    result
}

/// What a request stream's handler needs of its connection.
struct StreamCtx {
    conn_id: u64,
    peer: SocketAddr,
    window: Arc<SendWindow>,
    priorities: Option<StreamPriorities>,
}

async fn handle_request(resolver: H3Resolver, ctx: Arc<Ctx>, conn: StreamCtx) {
    let StreamCtx {
        conn_id,
        peer,
        window,
        priorities,
    } = conn;
    let (req, mut stream) = match resolver.resolve_request().await {
        Ok(x) => x,
        Err(e) => {
            tracing::debug!("h3 request from {peer} not readable: {e}");
            return;
        }
    };
    let seq = ctx.registry.next_request(conn_id);
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| req.uri().to_string());
    let mut pending = PendingRecord::new(
        ctx.log.clone(),
        peer,
        super::Protocol::H3.alpn(),
        req.method().as_str(),
        &target,
        conn_id,
        seq,
        Some(stream.id().into_inner()),
    );
    pending.rec.priority = super::response_order::header(req.headers());
    if let Some(asked) = &priorities {
        let p = Priority::parse(pending.rec.priority.as_deref().unwrap_or(""));
        pending.rec.scheduled = Some(p);
        asked.ask_by_header(stream.id().into_inner(), p);
    }
    let _active = window.enter();
    if ctx.knobs.early_hints && req.method() == http::Method::GET {
        send_early_hints(&mut stream, &ctx, &req, &target, &mut pending).await;
    }
    let mut request_read_to_end = false;
    let reply = match ctx.site.plan_request(&req, &target, &mut pending).await {
        Plan::Respond(r) => r,
        Plan::Upload => {
            request_read_to_end = true;
            let mut n = 0u64;
            loop {
                match stream.recv_data().await {
                    Ok(Some(chunk)) => n += chunk.remaining() as u64,
                    Ok(None) => break,
                    Err(e) => {
                        pending.rec.error = Some(format!("upload body: {e}"));
                        break;
                    }
                }
            }
            pending.rec.bytes_received = n;
            upload_reply(n, pending.start.elapsed())
        }
    };
    pending.answered();
    pending.rec.status = reply.status.as_u16();
    pending.rec.replay = reply.replay;
    let chunk = write_chunk(&ctx.knobs);
    match send(&mut stream, &ctx.site, &reply, chunk, &mut pending).await {
        Ok(()) => pending.set_complete(),
        Err(e) => pending.rec.error = Some(e.to_string()),
    }
    if !request_read_to_end {
        // The response does not depend on the rest of the request: stop reading it the way
        // RFC 9114 §4.1 asks (H3_NO_ERROR) rather than quinn's implicit code 0 on drop.
        stream.stop_sending(h3::error::Code::H3_NO_ERROR);
    }
}

/// A `103 Early Hints` with the page's hints, before the server thinks about its answer.
async fn send_early_hints(
    stream: &mut H3Stream,
    ctx: &Ctx,
    req: &http::Request<()>,
    target: &str,
    pending: &mut PendingRecord,
) {
    let hints = ctx
        .site
        .early_hints(super::answers::authority(req).as_deref(), target);
    if hints.is_empty() {
        return;
    }
    match stream
        .send_response(super::early_hints::response(&hints))
        .await
    {
        Ok(()) => pending.rec.early_hints = hints,
        Err(e) => tracing::debug!("103 for {target} not sent: {e}"),
    }
}

async fn send(
    stream: &mut H3Stream,
    site: &Site,
    reply: &Reply,
    chunk: usize,
    pending: &mut PendingRecord,
) -> Result<(), h3::error::StreamError> {
    stream.send_response(site.head(reply, true)).await?;
    if !reply.head_only {
        let body = &reply.body;
        let mut pos = 0;
        while pos < body.len() {
            let end = (pos + chunk).min(body.len());
            pending.body_started();
            stream.send_data(body.slice(pos..end)).await?;
            pending.rec.bytes_sent += (end - pos) as u64;
            pos = end;
        }
    }
    stream.finish().await
}
