//! What the server answers, independent of the protocol: files from the workload root,
//! `POST /upload`, and the errors. The h1/h2 and h3 front ends only move the bytes.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, SERVER};
use http::{Method, Response, StatusCode};

use super::paths::{self, Resolved};

/// Bodies go to the transport in slices of this size (`Bytes::slice`, no copies).
pub(crate) const CHUNK: usize = 128 * 1024;
pub const UPLOAD_PATH: &str = "/upload";

/// The static part of every response.
pub(crate) struct Site {
    /// Canonical workload root.
    pub root: PathBuf,
    /// `h3=":<port>"; ma=86400` when h3 is offered.
    pub alt_svc: Option<HeaderValue>,
    /// Send it on HTTP/3 responses too (see the `alt_svc_over_h3` knob).
    pub alt_svc_over_h3: bool,
}

/// What to do with a request.
pub(crate) enum Plan {
    /// Answer with this status and body (for HEAD: the head of it only).
    Respond(Reply),
    /// Read the request body, then answer with [`upload_reply`].
    Upload,
}

pub(crate) struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: Bytes,
    /// HEAD: send the head (with the full Content-Length) and no body.
    pub head_only: bool,
    pub allow: Option<&'static str>,
}

impl Reply {
    fn text(status: StatusCode, msg: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Bytes::from(format!("{msg}\n")),
            head_only: false,
            allow: None,
        }
    }
}

impl Site {
    pub async fn plan(&self, method: &Method, target: &str) -> Plan {
        let path = target.split('?').next().unwrap_or("");
        if path == UPLOAD_PATH {
            if method == Method::POST {
                return Plan::Upload;
            }
            let mut r = Reply::text(StatusCode::METHOD_NOT_ALLOWED, "use POST for /upload");
            r.allow = Some("POST");
            return Plan::Respond(r);
        }
        let head_only = method == Method::HEAD;
        if method != Method::GET && !head_only {
            let mut r = Reply::text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
            r.allow = Some("GET, HEAD");
            return Plan::Respond(r);
        }
        let mut reply = match paths::resolve(&self.root, target) {
            Resolved::File(file) => match tokio::fs::read(&file).await {
                Ok(bytes) => Reply {
                    status: StatusCode::OK,
                    content_type: crate::workload::content_type_for(&file),
                    body: Bytes::from(bytes),
                    head_only: false,
                    allow: None,
                },
                Err(e) => {
                    tracing::warn!("cannot read {}: {e}", file.display());
                    Reply::text(StatusCode::NOT_FOUND, "not found")
                }
            },
            Resolved::NotFound => Reply::text(StatusCode::NOT_FOUND, "not found"),
            Resolved::BadRequest(why) => Reply::text(StatusCode::BAD_REQUEST, why),
        };
        reply.head_only = head_only;
        Plan::Respond(reply)
    }

    /// The response head: never compressed, never cached, Alt-Svc when h3 is offered (on
    /// HTTP/3 responses only with the `alt_svc_over_h3` knob).
    pub fn head(&self, reply: &Reply, over_h3: bool) -> Response<()> {
        let mut r = Response::new(());
        *r.status_mut() = reply.status;
        let h = r.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
        h.insert(CONTENT_LENGTH, HeaderValue::from(reply.body.len()));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert(SERVER, HeaderValue::from_static("pagebench"));
        if let Some(a) = self
            .alt_svc
            .as_ref()
            .filter(|_| !over_h3 || self.alt_svc_over_h3)
        {
            h.insert(http::header::ALT_SVC, a.clone());
        }
        if let Some(allow) = reply.allow {
            h.insert(ALLOW, HeaderValue::from_static(allow));
        }
        r
    }
}

/// `{"bytes": N, "duration_ms": F}`: what the upload page reads back.
pub(crate) fn upload_reply(bytes: u64, took: Duration) -> Reply {
    let json = serde_json::json!({
        "bytes": bytes,
        "duration_ms": took.as_secs_f64() * 1000.0,
    });
    Reply {
        status: StatusCode::OK,
        content_type: "application/json",
        body: Bytes::from(json.to_string()),
        head_only: false,
        allow: None,
    }
}

pub(crate) fn alt_svc(port: u16) -> HeaderValue {
    HeaderValue::from_str(&format!("h3=\":{port}\"; ma=86400")).expect("ascii header")
}
