//! The client's answer on a cascade route: the upstream's response passed through (a stream
//! scanned for the usage it reports), its failure in the client's format, and the header
//! that says what the cascade did.

use std::sync::Arc;

use axum::body::Body;
use axum::http::HeaderValue;
use axum::response::Response;
use cascade_llm::Provider;
use context_cascade::{Format, LlmError, Report};

use crate::error::{ErrorKind, error_response};
use crate::route::cut::complete_events;
use crate::route::stream::scan_usage;
use crate::route::upstream::{UpstreamOutput, passthrough_error, response_headers};
use crate::route::{AppState, REPORT_HEADER};

/// The client's answer for a successful upstream call. `(prior, counted)`: the prior and
/// the engine's estimate of the request sent, paired with the usage a stream reports.
pub(crate) fn success(
    state: &Arc<AppState>,
    output: UpstreamOutput,
    format: Format,
    (prior, counted): (f64, u64),
    model: String,
) -> Response {
    match output {
        UpstreamOutput::Full {
            status,
            headers,
            body,
        } => {
            let mut response = Response::new(Body::from(body));
            *response.status_mut() = status;
            *response.headers_mut() = response_headers(&headers);
            response
        }
        UpstreamOutput::Stream(upstream) => {
            let status = upstream.status();
            let headers = response_headers(upstream.headers());
            let observer = state.clone();
            let provider = Provider::for_format(format);
            let idle = state.upstream_timeout;
            let events = complete_events(format, upstream.bytes_stream(), idle);
            let body = scan_usage(provider, events, move |tokens| {
                observer
                    .manager()
                    .observe_sent(&model, prior, counted, tokens);
                // The stream's callback is synchronous: the write goes on its own task.
                let (observer, model) = (observer.clone(), model.clone());
                tokio::spawn(async move { observer.save_scale(&model).await });
            });
            let mut response = Response::new(Body::from_stream(body));
            *response.status_mut() = status;
            *response.headers_mut() = headers;
            response
        }
    }
}

/// The client's answer when the upstream call failed with something other than overflow.
pub(crate) fn upstream_failure(format: Format, error: &LlmError) -> Response {
    match error {
        LlmError::Status {
            status,
            headers,
            body,
        } => passthrough_error(*status, headers, body.clone()),
        LlmError::Transport(detail) => {
            tracing::warn!(%detail, "upstream unreachable");
            let message = format!("context-cascade: could not reach the upstream: {detail}");
            error_response(format, ErrorKind::Unreachable, &message)
        }
        LlmError::Local(detail) => {
            tracing::warn!(%detail, "could not send the request upstream");
            let message = format!("context-cascade: could not send the request: {detail}");
            error_response(format, ErrorKind::Internal, &message)
        }
        LlmError::Timeout => error_response(
            format,
            ErrorKind::Timeout,
            "context-cascade: the upstream did not answer in time",
        ),
    }
}

pub(crate) fn add_report_header(response: &mut Response, report: &Report) {
    if report.steps.is_empty() && report.fits {
        return;
    }
    // The best request that could be made went upstream, but it is over the budget.
    let fit = if report.fits { "" } else { "; cannot fit" };
    let line = format!("{}{fit}", report.summary_line());
    if let Ok(value) = HeaderValue::from_str(line.trim_start_matches("; ")) {
        response.headers_mut().insert(REPORT_HEADER, value);
    }
}
