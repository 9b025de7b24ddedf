//! The client's answer on a cascade route: the upstream's response passed through (a stream
//! scanned for the usage it reports), its failure in the client's format, and the header
//! that says what the cascade did.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::HeaderValue;
use axum::response::Response;
use cascade_llm::Provider;
use context_cascade::logged::clipped;
use context_cascade::{Format, LlmError, Report};
use futures::StreamExt;

use crate::error::{ErrorKind, error_response};
use crate::route::cut::complete_events;
use crate::route::gauge;
use crate::route::outcome::Outcome;
use crate::route::splice::Splice;
use crate::route::stream::scan_usage;
use crate::route::upstream::{UpstreamOutput, passthrough_error, response_headers};
use crate::window::calibration::Calibrator;

/// The response header that lists the strategies applied to a request.
pub const REPORT_HEADER: &str = "x-context-cascade";

/// What the upstream call left for the client.
pub(crate) enum Answer {
    /// The upstream answered; `sent` is the prior and the engine's estimate of the request
    /// sent, paired with the usage a stream reports.
    Upstream {
        output: UpstreamOutput,
        sent: (f64, u64),
        /// The factor the answer's prompt counts are rescaled by (`requests.gauge`).
        rescale: Option<f64>,
    },
    /// The conversation could not be made to fit.
    Exhausted,
    /// The upstream call failed with something other than an overflow.
    Failed(LlmError),
}

/// What answering needs: the calibration a stream's usage goes to, and how long a stream
/// may stay idle.
pub(crate) struct Answering<'s> {
    pub(crate) calibrator: &'s Arc<Calibrator>,
    pub(crate) idle: Duration,
}

impl Answering<'_> {
    /// The client's answer for `outcome`, with the header that says what the cascade did.
    pub(crate) fn respond(&self, outcome: &Outcome<'_>, answer: Answer) -> Response {
        let (format, report) = (outcome.format, &outcome.report);
        let mut response = match answer {
            Answer::Upstream {
                output,
                sent,
                rescale,
            } => self.success(output, format, (sent, rescale), outcome.model.clone()),
            Answer::Exhausted => exhausted(format, report),
            Answer::Failed(error) => upstream_failure(format, &error),
        };
        add_report_header(&mut response, report);
        response
    }

    /// The client's answer for a successful upstream call.
    fn success(
        &self,
        output: UpstreamOutput,
        format: Format,
        ((prior, counted), rescale): ((f64, u64), Option<f64>),
        model: String,
    ) -> Response {
        match output {
            UpstreamOutput::Full {
                status,
                headers,
                body,
            } => {
                let body = match rescale {
                    Some(factor) if status.is_success() => gauge::rescale_body(body, factor),
                    _ => body,
                };
                let mut response = Response::new(Body::from(body));
                *response.status_mut() = status;
                *response.headers_mut() = response_headers(&headers);
                response
            }
            UpstreamOutput::Stream(upstream) => {
                self.streamed(upstream, None, format, ((prior, counted), rescale), model)
            }
            UpstreamOutput::Recalling(upstream, splice) => self.streamed(
                upstream,
                Some(*splice),
                format,
                ((prior, counted), rescale),
                model,
            ),
        }
    }

    /// The client's stream: `upstream`'s events (spliced with recall's rounds when `splice`
    /// is there), the first round's usage going to the calibration.
    fn streamed(
        &self,
        upstream: reqwest::Response,
        splice: Option<Splice>,
        format: Format,
        ((prior, counted), rescale): ((f64, u64), Option<f64>),
        model: String,
    ) -> Response {
        let status = upstream.status();
        let headers = response_headers(upstream.headers());
        let calibrator = self.calibrator.clone();
        let provider = Provider::for_format(format);
        let events = complete_events(format, upstream.bytes_stream(), self.idle);
        // Only the first round's count is the request's: the scan reads it alone.
        let body = scan_usage(provider, events, move |tokens| {
            calibrator.observe_sent(&model, prior, counted, tokens);
            calibrator.persist(&model);
        });
        let body = match splice {
            Some(splice) => splice.run(body, self.idle).boxed(),
            None => body.boxed(),
        };
        // The count is read before the rescale: calibration needs the provider's own.
        let body = body.map(move |chunk| match (chunk, rescale) {
            (Ok(chunk), Some(factor)) => Ok(gauge::rescale_events(chunk, factor)),
            (chunk, _) => chunk,
        });
        let mut response = Response::new(Body::from_stream(body));
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        response
    }
}

/// The client's answer when every recovery step was spent and the conversation still
/// overflows.
fn exhausted(format: Format, report: &Report) -> Response {
    let steps = report.summary_line();
    let message = format!(
        "context-cascade: the conversation still exceeds the model's context window after {} call(s) \
         (window {} tokens; after {} the request takes about {} tokens){}; \
         start a new conversation or raise the window",
        report.calls,
        report.window,
        if steps.is_empty() {
            "every strategy"
        } else {
            &steps
        },
        report.tokens_after,
        report
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default(),
    );
    error_response(format, ErrorKind::ContextLength, &message)
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
            tracing::warn!(detail = %clipped(detail), "upstream unreachable");
            let message = format!("context-cascade: could not reach the upstream: {detail}");
            error_response(format, ErrorKind::Unreachable, &message)
        }
        LlmError::Local(detail) => {
            tracing::warn!(detail = %clipped(detail), "could not send the request upstream");
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

/// Says what the cascade did in [`REPORT_HEADER`] (nothing when it did nothing and the
/// request fits).
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
