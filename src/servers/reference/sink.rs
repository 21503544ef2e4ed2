//! The upload sink behind the reference servers: a plain HTTP/1.1 listener on loopback in the
//! server namespace that reads and counts a `POST /upload` body and answers
//! `{"bytes": N, "duration_ms": F}` — the same answer the embedded server gives — so an upload
//! through Caddy or nginx is checked byte for byte.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};

/// One upload the sink received.
#[derive(Debug, Clone, PartialEq)]
pub struct Upload {
    pub bytes: u64,
    pub duration_ms: f64,
}

/// A running sink; dropping it stops it.
pub struct UploadSink {
    addr: SocketAddr,
    uploads: Arc<Mutex<Vec<Upload>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl UploadSink {
    /// Binds 127.0.0.1:0 in the calling thread's namespace and serves on a thread of its own.
    pub fn start() -> Result<UploadSink> {
        let std_listener =
            std::net::TcpListener::bind("127.0.0.1:0").context("upload sink: bind")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let uploads = Arc::new(Mutex::new(Vec::new()));
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let ups = uploads.clone();
        let thread = std::thread::Builder::new()
            .name("upload-sink".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!("upload sink: no runtime: {e}");
                        return;
                    }
                };
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) else {
                        return;
                    };
                    loop {
                        tokio::select! {
                            _ = &mut stop_rx => break,
                            accepted = listener.accept() => {
                                let Ok((stream, _)) = accepted else { continue };
                                let ups = ups.clone();
                                tokio::spawn(async move {
                                    let io = hyper_util::rt::TokioIo::new(stream);
                                    let svc = hyper::service::service_fn(move |req| handle(req, ups.clone()));
                                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
                                });
                            }
                        }
                    }
                });
            })?;
        Ok(UploadSink {
            addr,
            uploads,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Uploads received so far (a run takes the ones after its mark).
    pub fn uploads(&self) -> Vec<Upload> {
        self.uploads.lock().map(|u| u.clone()).unwrap_or_default()
    }
}

impl Drop for UploadSink {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn handle(
    req: Request<hyper::body::Incoming>,
    uploads: Arc<Mutex<Vec<Upload>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != hyper::Method::POST || req.uri().path() != "/upload" {
        return Ok(Response::builder()
            .status(404)
            .body(Full::new(Bytes::from_static(b"not found\n")))
            .expect("static response"));
    }
    let start = Instant::now();
    let (n, _) = crate::embedded_server::drain_body(req.into_body()).await;
    let duration_ms = start.elapsed().as_secs_f64() * 1e3;
    if let Ok(mut u) = uploads.lock() {
        u.push(Upload {
            bytes: n,
            duration_ms,
        });
    }
    let json = format!("{{\"bytes\":{n},\"duration_ms\":{duration_ms:.3}}}");
    Ok(Response::builder()
        .header("content-type", "application/json")
        .header("cache-control", "no-store")
        .body(Full::new(Bytes::from(json)))
        .expect("valid response"))
}
