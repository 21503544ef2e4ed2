//! A small HTTPS client for h1, h2 (hyper over rustls) and h3 (quinn + h3) that trusts exactly
//! the server's certificate: what `bench server` measures with and what the tests check against.
//! One [`ProbeConnection`] is one connection of one protocol, reused for every request on it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, ServerName};

use super::cert::HOST;
use super::knobs::Protocol;
use super::tls_config;

/// The probe client's UDP receive buffer request.
pub const CLIENT_UDP_BUFFER: u64 = 8 << 20;

/// A response as the client received it.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// From sending the request to the last body byte.
    pub elapsed: Duration,
}

enum Inner {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
    H3 {
        send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
        conn: quinn::Connection,
        endpoint: quinn::Endpoint,
    },
}

/// One client connection.
pub struct ProbeConnection {
    inner: Inner,
    authority: String,
    protocol: Protocol,
    /// Time from starting to connect until the connection was ready for requests.
    pub connect_time: Duration,
}

impl ProbeConnection {
    /// Connects to `addr` with `protocol`, trusting only `cert`, as `pagebench.test`.
    pub async fn connect(
        addr: SocketAddr,
        protocol: Protocol,
        cert: &CertificateDer<'static>,
    ) -> Result<ProbeConnection> {
        match protocol {
            Protocol::H3 => {
                let crypto = tls_config::pinned_client_config(cert, &[tls_config::ALPN_H3], true)?;
                let quic = quinn::crypto::rustls::QuicClientConfig::try_from(crypto)
                    .context("QUIC client TLS")?;
                Self::connect_h3(addr, quinn::ClientConfig::new(Arc::new(quic))).await
            }
            p => {
                let alpn: &[u8] = if p == Protocol::H2 {
                    tls_config::ALPN_H2
                } else {
                    tls_config::ALPN_H1
                };
                let crypto = tls_config::pinned_client_config(cert, &[alpn], false)?;
                Self::connect_tcp(addr, p, crypto).await
            }
        }
    }

    /// h1 or h2 with a caller-made TLS configuration (its ALPN decides; h1 if none agreed).
    pub async fn connect_tcp(
        addr: SocketAddr,
        wanted: Protocol,
        crypto: rustls::ClientConfig,
    ) -> Result<ProbeConnection> {
        let t0 = Instant::now();
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .with_context(|| format!("cannot connect to {addr}"))?;
        tcp.set_nodelay(true)?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(crypto));
        let name = ServerName::try_from(HOST.to_string())?;
        let tls = connector
            .connect(name, tcp)
            .await
            .with_context(|| format!("TLS handshake with {addr} failed"))?;
        let negotiated = match tls.get_ref().1.alpn_protocol() {
            Some(tls_config::ALPN_H2) => Protocol::H2,
            _ => Protocol::H1,
        };
        let io = TokioIo::new(tls);
        let inner = if negotiated == Protocol::H2 {
            let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .context("h2 handshake")?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Inner::H2(send)
        } else {
            let (send, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .context("h1 handshake")?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Inner::H1(send)
        };
        if wanted == Protocol::H2 && negotiated != Protocol::H2 {
            tracing::debug!("asked for h2, the server chose http/1.1");
        }
        Ok(ProbeConnection {
            inner,
            authority: format!("{HOST}:{}", addr.port()),
            protocol: negotiated,
            connect_time: t0.elapsed(),
        })
    }

    /// h3 with a caller-made quinn client configuration (e.g. custom transport or crypto).
    pub async fn connect_h3(
        addr: SocketAddr,
        config: quinn::ClientConfig,
    ) -> Result<ProbeConnection> {
        let t0 = Instant::now();
        let local: SocketAddr = if addr.is_ipv4() {
            "0.0.0.0:0".parse()?
        } else {
            "[::]:0".parse()?
        };
        // A roomy receive buffer: a bulk transfer over loopback otherwise overflows the
        // kernel's default (~208 KiB) and the client, not the server, drops packets.
        let (socket, _) = super::sockets::udp_socket(local, Some(CLIENT_UDP_BUFFER), None)
            .context("QUIC client socket")?;
        let mut endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            None,
            socket,
            Arc::new(quinn::TokioRuntime),
        )
        .context("QUIC client endpoint")?;
        endpoint.set_default_client_config(config);
        let conn = endpoint
            .connect(addr, HOST)?
            .await
            .with_context(|| format!("QUIC handshake with {addr} failed"))?;
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .context("HTTP/3 set-up")?;
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(ProbeConnection {
            inner: Inner::H3 {
                send,
                conn,
                endpoint,
            },
            authority: format!("{HOST}:{}", addr.port()),
            protocol: Protocol::H3,
            connect_time: t0.elapsed(),
        })
    }

    /// The h3 request sender, for callers that need stream-level control (e.g. when to end
    /// the request); None for h1/h2.
    pub fn h3_sender(
        &mut self,
    ) -> Option<&mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>> {
        match &mut self.inner {
            Inner::H3 { send, .. } => Some(send),
            _ => None,
        }
    }

    /// The protocol the connection speaks (for h1/h2: what ALPN settled on).
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The QUIC connection (h3 only), e.g. for its statistics.
    pub fn quic_connection(&self) -> Option<&quinn::Connection> {
        match &self.inner {
            Inner::H3 { conn, .. } => Some(conn),
            _ => None,
        }
    }

    pub async fn get(&mut self, path: &str) -> Result<Fetched> {
        self.request(Method::GET, path, Bytes::new()).await
    }

    pub async fn request(&mut self, method: Method, path: &str, body: Bytes) -> Result<Fetched> {
        let uri = format!("https://{}{}", self.authority, path);
        let t0 = Instant::now();
        match &mut self.inner {
            Inner::H1(send) => {
                let req = Request::builder()
                    .method(method)
                    .uri(path)
                    .header(http::header::HOST, &self.authority)
                    .body(Full::new(body))?;
                send.ready().await.context("h1 connection")?;
                let resp = send.send_request(req).await.context("h1 request")?;
                collect_hyper(resp, t0).await
            }
            Inner::H2(send) => {
                let req = Request::builder()
                    .method(method)
                    .uri(uri)
                    .body(Full::new(body))?;
                send.ready().await.context("h2 connection")?;
                let resp = send.send_request(req).await.context("h2 request")?;
                collect_hyper(resp, t0).await
            }
            Inner::H3 { send, .. } => {
                let req = Request::builder().method(method).uri(uri).body(())?;
                let mut stream = send.send_request(req).await.context("h3 request")?;
                if !body.is_empty() {
                    stream.send_data(body).await.context("h3 request body")?;
                }
                // A server may stop reading the request once it can answer (RFC 9114 §4.1,
                // STOP_SENDING): then `finish` fails but the response still counts.
                let finished = stream.finish().await;
                let resp = match stream.recv_response().await {
                    Ok(resp) => resp,
                    Err(e) => {
                        let e = anyhow::Error::new(e).context("h3 response");
                        return Err(match finished {
                            Err(f) => e.context(format!("h3 request end: {f}")),
                            Ok(()) => e,
                        });
                    }
                };
                let mut buf = BytesMut::new();
                while let Some(mut chunk) = stream.recv_data().await.context("h3 body")? {
                    while chunk.has_remaining() {
                        let c = chunk.chunk();
                        buf.extend_from_slice(c);
                        let n = c.len();
                        chunk.advance(n);
                    }
                }
                Ok(Fetched {
                    status: resp.status().as_u16(),
                    headers: resp.headers().clone(),
                    body: buf.freeze(),
                    elapsed: t0.elapsed(),
                })
            }
        }
    }

    /// Closes the connection (h3: CONNECTION_CLOSE with H3_NO_ERROR, then waits briefly).
    pub async fn close(self) {
        match self.inner {
            Inner::H3 { conn, endpoint, .. } => {
                conn.close(quinn::VarInt::from_u32(0x100), b"done");
                let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
            }
            Inner::H1(s) => drop(s),
            Inner::H2(s) => drop(s),
        }
    }
}

async fn collect_hyper(
    resp: hyper::Response<hyper::body::Incoming>,
    t0: Instant,
) -> Result<Fetched> {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| anyhow!("response body: {e}"))?
        .to_bytes();
    Ok(Fetched {
        status,
        headers,
        body,
        elapsed: t0.elapsed(),
    })
}

/// Fetches `path` once over a fresh connection (convenience for checks).
pub async fn fetch_once(
    addr: SocketAddr,
    protocol: Protocol,
    cert: &CertificateDer<'static>,
    path: &str,
) -> Result<Fetched> {
    let mut c = ProbeConnection::connect(addr, protocol, cert).await?;
    let f = c.get(path).await?;
    if c.protocol() != protocol {
        bail!(
            "asked for {protocol}, the connection speaks {}",
            c.protocol()
        );
    }
    c.close().await;
    Ok(f)
}
