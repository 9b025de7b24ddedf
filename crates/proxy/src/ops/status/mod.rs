//! `GET /`: the operator's status page. For each conversation this replica served, what
//! the cascade did to each request: tokens against the window (a chart), the strategies
//! that ran, what each removal took out (the trail's counts per kind and its tokens); and
//! the summary cache hit rate, the calibration per model, the prefix stability.
//!
//! Who may see it (and `/metrics`, under the same rule): without an admin token, only
//! clients on loopback (the operator on the machine); with `--admin-token` /
//! `admin_token`, any client that presents it (`Authorization: Bearer TOKEN`, or
//! `?token=TOKEN` from a browser), loopback included.
//! The page shows no content in either case (see [`record`]).
//!
//! The timelines are in memory, per replica: a restart or another replica starts empty.

pub(crate) mod digest;
pub(crate) mod page;
pub(crate) mod record;
pub(crate) mod svg;

use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::fmt::Write as _;
use std::net::SocketAddr;

pub(crate) use crate::config::AdminToken;
use crate::ops::metrics::Snapshot;
use context_cascade::Scale;
pub(crate) use record::{Bounds, Recorder};

/// The page's state: the recorder and who may read it.
pub(crate) struct Status {
    /// The conversations' timelines.
    pub recorder: Recorder,
    token: Option<AdminToken>,
}

impl Status {
    /// A status page with the default bounds, guarded by `token` (else loopback only).
    pub(crate) fn new(token: Option<AdminToken>) -> Self {
        Status {
            recorder: Recorder::new(Bounds::default()),
            token,
        }
    }
}

impl Status {
    /// Whether `request` may see what the operator sees (this page, and `/metrics`): from
    /// loopback without an admin token; with one, from anywhere presenting it. `Ok`
    /// carries what the page's links must repeat (the token, when it came in the address);
    /// `Err` is why not ([`Refusal::response`] is the answer to send).
    pub(crate) fn authorize(&self, request: &Request) -> Result<Option<String>, Refusal> {
        let peer = (request.extensions())
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0);
        let query = request.uri().query().unwrap_or("");
        authorize(self.token.as_ref(), peer, request.headers(), query)
    }

    /// `GET /`: the page for `request`, showing the summary cache's counters from `metrics`
    /// and `calibration` (the admitted model names' scales, gathered by the route).
    pub(crate) fn page(
        &self,
        request: &Request,
        metrics: &Snapshot,
        calibration: Vec<(String, Scale)>,
    ) -> Response {
        let link_query = match self.authorize(request) {
            Ok(link_query) => link_query,
            Err(refusal) => return refusal.response(),
        };
        let query = request.uri().query().unwrap_or("");
        let selected = query_value(query, "c").filter(|id| {
            !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
        });
        let (timelines, totals) = self.recorder.snapshot();
        let view = page::View {
            timelines: &timelines,
            totals,
            bounds: self.recorder.bounds(),
            summary_hits: metrics.summary_hits,
            summary_misses: metrics.summary_misses,
            calibration,
            selected: selected.as_deref(),
            link_query,
            now: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        with_page_headers(page::render(&view).into_response())
    }
}

/// The page's answer with the headers that keep it private and inert.
fn with_page_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        // A token in the address must not leave in a Referer.
        (header::REFERRER_POLICY, "no-referrer"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Why the page (or `/metrics`) is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No token is set and the client is not on loopback.
    NotLoopback,
    /// A token is set and the request does not carry it.
    NoToken,
}

impl Refusal {
    /// The answer: 403 (loopback only), or 401 asking for the token.
    pub(crate) fn response(self) -> Response {
        match self {
            Refusal::NotLoopback => {
                let message = "context-cascade: the status page and /metrics are served to \
                               loopback clients only; start the proxy with --admin-token to \
                               serve them to others\n";
                (StatusCode::FORBIDDEN, message).into_response()
            }
            Refusal::NoToken => {
                let message = "context-cascade: the status page and /metrics need the admin \
                               token (Authorization: Bearer TOKEN, or ?token=TOKEN)\n";
                let mut refusal = (StatusCode::UNAUTHORIZED, message).into_response();
                refusal.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"cascade-status\""),
                );
                refusal
            }
        }
    }
}

/// Whether the request may see the page. `Ok` carries what the page's links must repeat
/// (the token, when it came in the address).
fn authorize(
    token: Option<&AdminToken>,
    peer: Option<SocketAddr>,
    headers: &HeaderMap,
    query: &str,
) -> Result<Option<String>, Refusal> {
    let Some(token) = token else {
        if peer.is_some_and(|p| p.ip().to_canonical().is_loopback()) {
            return Ok(None);
        }
        return Err(Refusal::NotLoopback);
    };
    let bearer = (headers.get(header::AUTHORIZATION))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if bearer.is_some_and(|b| token.matches(b.trim())) {
        return Ok(None);
    }
    if let Some(given) = query_value(query, "token")
        && token.matches(&given)
    {
        return Ok(Some(format!("token={}", percent_encode(&given))));
    }
    Err(Refusal::NoToken)
}

/// The decoded value of `name` in a query string (`a=1&b=2`), the first one.
fn query_value(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(key) == name).then(|| percent_decode(value))
    })
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(text: &str) -> Option<SocketAddr> {
        Some(text.parse().unwrap())
    }

    #[test]
    fn without_a_token_only_loopback_may_look() {
        let headers = HeaderMap::new();
        assert!(authorize(None, peer("127.0.0.1:5000"), &headers, "").is_ok());
        assert!(authorize(None, peer("[::1]:5000"), &headers, "").is_ok());
        assert!(authorize(None, peer("[::ffff:127.0.0.1]:5000"), &headers, "").is_ok());
        let refused = authorize(None, peer("10.0.0.2:5000"), &headers, "").unwrap_err();
        assert_eq!(refused, Refusal::NotLoopback);
        assert_eq!(refused.response().status(), StatusCode::FORBIDDEN);
        assert!(authorize(None, None, &headers, "").is_err());
    }

    #[test]
    fn with_a_token_everyone_must_present_it() {
        let token = AdminToken::new("s3cret&x").unwrap();
        let mut headers = HeaderMap::new();
        let local = peer("127.0.0.1:5000");
        let refused = authorize(Some(&token), local, &headers, "").unwrap_err();
        assert_eq!(refused.response().status(), StatusCode::UNAUTHORIZED);
        assert!(authorize(Some(&token), local, &headers, "token=wrong").is_err());
        let remote = peer("10.0.0.2:5000");
        let link = authorize(Some(&token), remote, &headers, "c=ab&token=s3cret%26x").unwrap();
        assert_eq!(link.as_deref(), Some("token=s3cret%26x"));
        headers.insert(header::AUTHORIZATION, "Bearer s3cret&x".parse().unwrap());
        assert_eq!(authorize(Some(&token), remote, &headers, "").unwrap(), None);
        headers.insert(header::AUTHORIZATION, "Bearer s3cret".parse().unwrap());
        assert!(authorize(Some(&token), remote, &headers, "").is_err());
    }

    #[test]
    fn tokens_are_never_empty_nor_printed() {
        assert!(AdminToken::new(" ").is_err());
        let token = AdminToken::new("abc").unwrap();
        assert!(!format!("{token:?}").contains("abc"));
        assert!(token.matches("abc") && !token.matches("abd") && !token.matches(""));
    }

    #[test]
    fn query_values_are_decoded() {
        assert_eq!(
            query_value("a=1&c=ff%20x+y", "c").as_deref(),
            Some("ff x y")
        );
        assert_eq!(query_value("a=1", "c"), None);
        assert_eq!(query_value("c=%zz%4", "c").as_deref(), Some("%zz%4"));
        assert_eq!(percent_encode("a b/é"), "a%20b%2F%C3%A9");
    }
}
