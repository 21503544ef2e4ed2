//! What the server answers, independent of the protocol: files from the workload root,
//! `POST /upload`, and the errors. The h1/h2 and h3 front ends only move the bytes.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    HeaderName, HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, SERVER,
};
use http::{Method, Response, StatusCode};

use super::paths::{self, Resolved};
use crate::config::site_archive::replay::{request_url, request_url_over, Replay, ReplayMatch};

const TIMING_ALLOW_ORIGIN: http::header::HeaderName =
    http::header::HeaderName::from_static("timing-allow-origin");

/// Recorded response headers, in order.
pub(crate) type Headers = Arc<[(http::header::HeaderName, HeaderValue)]>;

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
    /// The site archive being replayed, if any: then every request is answered from it.
    pub replay: RwLock<Option<Replay>>,
    /// `--early-hints`: the workload tree's files may be reused within a load (a browser
    /// fetches a hinted `no-store` response again when the page asks for it).
    pub early_hints: bool,
    /// `--early-hints-links`: the user's hints, instead of those read from the page.
    pub hint_list: Option<super::hint_list::HintList>,
    /// `--page-think-ms`: how long a page (an HTML response) takes the server to answer.
    pub page_think: Duration,
}

/// The workload tree's `Cache-Control`: `no-store`, as the study; under `--early-hints` a
/// short lifetime, so the page can take what its hints preloaded (each run's browser starts
/// with an empty cache, and a repeat view clears it unless `--repeat-cache keep`).
const REPLAYED_ALT_SVC: HeaderValue = HeaderValue::from_static("h3=\":443\"; ma=86400");
const NO_STORE: HeaderValue = HeaderValue::from_static("no-store");
const HINTED: HeaderValue = HeaderValue::from_static("max-age=600");

/// The authority a request was sent to: `:authority` (h2, h3) or `Host` (h1).
pub(crate) fn authority<B>(req: &http::Request<B>) -> Option<String> {
    req.uri()
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| {
            req.headers()
                .get(http::header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        })
}

/// Marks a request that came over plain HTTP (no TLS): a replayed site's `http://` origin.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlainHttp;

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
    /// A replayed response: its recorded headers (sent instead of pagebench's own).
    pub recorded: Option<Headers>,
    /// How a replayed request was matched.
    pub replay: Option<ReplayMatch>,
    /// Leave Alt-Svc out (an origin replayed on its recorded protocol, which was not h3, or
    /// one over plain HTTP).
    pub no_alt_svc: bool,
    /// A replayed origin's port, as its URLs name it: its Alt-Svc names that port.
    pub origin_port: Option<u16>,
}

impl Reply {
    fn text(status: StatusCode, msg: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Bytes::from(format!("{msg}\n")),
            head_only: false,
            allow: None,
            recorded: None,
            replay: None,
            no_alt_svc: false,
            origin_port: None,
        }
    }
}

impl Site {
    /// Starts (or, with `None`, stops) replaying a site archive.
    pub fn set_replay(&self, replay: Option<Replay>) {
        *self.replay.write().unwrap_or_else(|p| p.into_inner()) = replay;
    }

    pub fn replaying(&self) -> Option<Replay> {
        self.replay
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The `Link` values of a `103 Early Hints` for a GET of `target` from `authority`: the
    /// user's list's, else the page's own hints ([`super::early_hints::links`]); none for anything but an HTML page.
    pub fn early_hints(&self, authority: Option<&str>, target: &str) -> Vec<String> {
        if let Some(list) = &self.hint_list {
            return list.links(authority.unwrap_or(""), target);
        }
        let host = authority.unwrap_or("").split(':').next().unwrap_or("");
        let html = match self.replaying() {
            Some(replay) => {
                let answer = replay
                    .site
                    .answer("GET", &request_url(authority.unwrap_or(""), target));
                let header = |name: HeaderName| {
                    answer
                        .headers
                        .iter()
                        .find(|(n, _)| *n == name)
                        .and_then(|(_, v)| v.to_str().ok())
                };
                let is_html = header(CONTENT_TYPE).is_some_and(|t| t.contains("text/html"));
                if answer.status != StatusCode::OK || !is_html {
                    return Vec::new();
                }
                let coding = crate::config::site_archive::encoding::Coding::parse(header(
                    http::header::CONTENT_ENCODING,
                ));
                match coding.and_then(|c| c.decode(&answer.body)) {
                    Ok(bytes) => bytes,
                    Err(e) => {
                        tracing::debug!("no early hints for {target}: {e:#}");
                        return Vec::new();
                    }
                }
            }
            None => match paths::resolve(&self.root, target) {
                Resolved::File(file)
                    if crate::config::workload::content_type_for(&file)
                        .starts_with("text/html") =>
                {
                    std::fs::read(&file).unwrap_or_default()
                }
                _ => return Vec::new(),
            },
        };
        super::early_hints::links(&String::from_utf8_lossy(&html), host)
    }

    /// What to do with `req` (whose target is `target`), with the authority it asked noted in
    /// its log record.
    pub async fn plan_request<B>(
        &self,
        req: &http::Request<B>,
        target: &str,
        pending: &mut super::log::PendingRecord,
    ) -> Plan {
        pending.rec.authority = authority(req);
        pending.rec.plain = req.extensions().get::<PlainHttp>().is_some();
        let tls = !pending.rec.plain;
        self.plan(req.method(), pending.rec.authority.as_deref(), target, tls)
            .await
    }

    /// What to do with `method` `target`, asked of `authority` (`:authority` or `Host`) over
    /// TLS or not.
    pub async fn plan(
        &self,
        method: &Method,
        authority: Option<&str>,
        target: &str,
        tls: bool,
    ) -> Plan {
        if let Some(replay) = self.replaying() {
            let head_only = method == Method::HEAD;
            let get = if head_only { "GET" } else { method.as_str() };
            let authority = authority.unwrap_or("");
            let answer = replay
                .site
                .answer(get, &request_url_over(tls, authority, target));
            let no_alt_svc = replay
                .recorded_protocol(authority)
                .is_some_and(|p| p != crate::config::protocol::Protocol::H3);
            let html = answer.headers.iter().any(|(n, v)| {
                n == CONTENT_TYPE && v.to_str().is_ok_and(|t| t.contains("text/html"))
            });
            let think = answer.think + self.think_for(answer.status, html);
            if !think.is_zero() {
                tokio::time::sleep(think).await;
            }
            return Plan::Respond(Reply {
                status: answer.status,
                content_type: "",
                body: answer.body,
                head_only,
                allow: None,
                recorded: Some(answer.headers),
                replay: Some(answer.matched),
                no_alt_svc: no_alt_svc || !tls,
                origin_port: Some(port_of(authority)),
            });
        }
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
                    content_type: crate::config::workload::content_type_for(&file),
                    body: Bytes::from(bytes),
                    head_only: false,
                    allow: None,
                    recorded: None,
                    replay: None,
                    no_alt_svc: false,
                    origin_port: None,
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
        let html = reply.content_type == crate::config::workload::FileKind::Html.content_type();
        let think = self.think_for(reply.status, html);
        if !think.is_zero() {
            tokio::time::sleep(think).await;
        }
        Plan::Respond(reply)
    }

    /// The page think time, for a page's answer (a 200 of HTML); nothing for anything else.
    fn think_for(&self, status: StatusCode, html: bool) -> Duration {
        if status == StatusCode::OK && html {
            self.page_think
        } else {
            Duration::ZERO
        }
    }

    /// The response head: never compressed, never cached, Alt-Svc when h3 is offered (on
    /// HTTP/3 responses only with the `alt_svc_over_h3` knob). A replayed response has its
    /// recorded headers instead (and `Timing-Allow-Origin: *` unless it had one).
    pub fn head(&self, reply: &Reply, over_h3: bool) -> Response<()> {
        let mut r = Response::new(());
        *r.status_mut() = reply.status;
        let h = r.headers_mut();
        match &reply.recorded {
            Some(recorded) => {
                for (n, v) in recorded.iter() {
                    h.append(n.clone(), v.clone());
                }
                // Resource Timing hides the protocol and sizes of cross-origin responses
                // without it, and validation reads them.
                if !h.contains_key(TIMING_ALLOW_ORIGIN) {
                    h.insert(TIMING_ALLOW_ORIGIN, HeaderValue::from_static("*"));
                }
            }
            None => {
                h.insert(CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
                h.insert(
                    CACHE_CONTROL,
                    if self.early_hints { HINTED } else { NO_STORE },
                );
                h.insert(SERVER, HeaderValue::from_static("pagebench"));
            }
        }
        h.insert(CONTENT_LENGTH, HeaderValue::from(reply.body.len()));
        if let Some(a) = self
            .alt_svc
            .as_ref()
            .filter(|_| !reply.no_alt_svc)
            .filter(|_| !over_h3 || self.alt_svc_over_h3)
        {
            // A replayed origin is on the port its pages name, whatever port this server
            // listens on (the link maps 443 for an arm of --servers).
            let a = match (&reply.recorded, reply.origin_port) {
                (Some(_), Some(port)) => alt_svc(port),
                (Some(_), None) => REPLAYED_ALT_SVC,
                (None, _) => a.clone(),
            };
            h.insert(http::header::ALT_SVC, a);
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
        recorded: None,
        replay: None,
        no_alt_svc: false,
        origin_port: None,
    }
}

/// The port an authority names (443 when it names none: only TLS requests get an Alt-Svc).
fn port_of(authority: &str) -> u16 {
    authority
        .rsplit_once(':')
        .filter(|(h, _)| !h.ends_with(']') || authority.starts_with('['))
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(443)
}

pub(crate) fn alt_svc(port: u16) -> HeaderValue {
    HeaderValue::from_str(&format!("h3=\":{port}\"; ma=86400")).expect("ascii header")
}
