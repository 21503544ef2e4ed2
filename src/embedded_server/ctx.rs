//! What every connection task of the embedded server shares (`Ctx`: the answers, the request log,
//! the transport registry, the capture, the QUIC base configuration and the knobs), and the
//! shutdown signal they all watch.

use std::sync::Arc;

use tokio::sync::watch;

use super::answers::Site;
use super::capture::ServerCapture;
use super::knobs::EffectiveKnobs;
use super::log::RequestLog;
use super::transport_stats::Registry;

/// Shared by every connection task.
pub(crate) struct Ctx {
    pub site: Site,
    /// TLS over TCP offering HTTP/1.1 only (a replayed origin recorded over HTTP/1.1).
    pub tls_h1_only: Option<Arc<rustls::ServerConfig>>,
    pub log: Arc<RequestLog>,
    pub registry: Arc<Registry>,
    pub capture: Arc<ServerCapture>,
    /// The QUIC server configuration, for a connection accepted with its own (qlog on).
    pub quic_base: Option<quinn::ServerConfig>,
    pub knobs: EffectiveKnobs,
}

/// Resolves once a shutdown was requested (or the server handle is gone).
pub(crate) async fn stop_requested(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await.map(|_| ());
}
