//! The routes: the three cascade routes (chat, messages, responses), each a request through
//! the [`pipeline`]'s stages; metrics and the status page (loopback or the admin token),
//! health (anyone); the pass-through for everything else.

pub(crate) mod admission;
pub(crate) mod answer;
pub(crate) mod app;
pub(crate) mod body;
pub(crate) mod call;
pub(crate) mod cut;
pub(crate) mod fastpath;
pub(crate) mod gauge;
pub(crate) mod heavy;
pub(crate) mod history;
pub(crate) mod inbound;
pub(crate) mod observers;
pub(crate) mod outcome;
pub(crate) mod pipeline;
pub(crate) mod preparation;
pub(crate) mod provider_compaction;
pub(crate) mod recalling;
pub(crate) mod responses;
pub(crate) mod splice;
pub(crate) mod stream;
pub(crate) mod upstream;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use context_cascade::Format;

use self::answer::upstream_failure;
use self::app::AppState;
use self::inbound::Inbound;
use self::provider_compaction::{COMPACT_ROUTE, asks_provider_to_compact};
use crate::config::ProxyConfig;
use crate::error::ProxyError;
use crate::ops::accept::serve_connections;
use crate::ops::limits::deadline_body;
use crate::state::writes::FLUSH_BOUND;

/// The proxy's routes over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(health))
        .route("/metrics", get(metrics))
        // The status page is ours; other methods on `/` are forwarded.
        .route("/", get(status_page).fallback(passthrough))
        // Other methods on the cascade paths are forwarded like any other request.
        .route("/v1/chat/completions", post(openai).fallback(passthrough))
        .route("/v1/messages", post(anthropic).fallback(passthrough))
        .route(
            responses::ROUTE,
            post(responses_route).fallback(passthrough),
        )
        .route(COMPACT_ROUTE, post(compact_route).fallback(passthrough))
        .fallback(passthrough)
        .with_state(state)
}

/// Serves on `listener` until Ctrl-C or SIGTERM.
pub async fn serve(
    config: ProxyConfig,
    listener: tokio::net::TcpListener,
) -> Result<(), ProxyError> {
    let state = AppState::new(config)?;
    serve_state(state, listener, stop_signal()?).await
}

/// Completes on Ctrl-C (SIGINT) or SIGTERM (what a service manager or an orchestrator
/// sends to stop the proxy).
pub fn stop_signal() -> Result<impl std::future::Future<Output = ()> + Send, ProxyError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    // Both handlers are installed here, not when the future is first polled (as
    // `tokio::signal::ctrl_c()` would): a Ctrl-C right after "listening" must stop the
    // proxy, also inside a Python process whose own SIGINT handler never runs while the
    // proxy holds the thread.
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("stopping: finishing the requests in flight, then the state writes");
    })
}

/// Serves an already built `state` on `listener` until `shutdown` completes (build the
/// state first to fail on a bad configuration before listening); then lets the requests in
/// flight finish and flushes the state writes they left pending, so that a restart loses
/// no conversation's sticky decisions.
pub async fn serve_state(
    state: Arc<AppState>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ProxyError> {
    if let Ok(address) = listener.local_addr() {
        let upstream = crate::config::redact_url(&state.upstream.base);
        tracing::info!(%address, %upstream, "context-cascade proxy listening");
    }
    let limits = state.limits;
    let metrics = state.metrics.clone();
    serve_connections(listener, router(state.clone()), limits, metrics, shutdown).await?;
    if !state.flush(FLUSH_BOUND).await {
        tracing::warn!("stopped with state writes still pending after {FLUSH_BOUND:?}");
    }
    Ok(())
}

/// `ok`, or `degraded` with the reason while the store fails (requests are still served,
/// without the state the store keeps).
async fn health(State(state): State<Arc<AppState>>) -> String {
    state.store.check().await;
    match state.store.failure() {
        None => "ok\n".to_owned(),
        Some(reason) => format!("degraded: the state store is unavailable ({reason})\n"),
    }
}

/// `GET /metrics`: the counters, behind the status page's guard (they tell who uses the
/// proxy how much, and which models).
async fn metrics(State(state): State<Arc<AppState>>, request: Request) -> Response {
    if let Err(refusal) = state.status.authorize(&request) {
        return refusal.response();
    }
    // Only the model names admitted as labels (a client-chosen name is not a series).
    let mut text = state.metrics.render(&state.admitted_calibration());
    text.push_str(&state.windows.render_learned());
    text.push_str(&state.responses.render());
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

/// `GET /`: the operator's status page.
async fn status_page(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let calibration = (state.admitted_calibration().models())
        .map(|(model, scale)| (model.to_owned(), scale))
        .collect();
    (state.status).page(&request, &state.metrics.snapshot(), calibration)
}

async fn openai(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let response = cascade(&state, Format::OpenAi, request).await;
    (state.metrics).request("/v1/chat/completions", response.status().as_u16());
    response
}

async fn anthropic(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let response = cascade(&state, Format::Anthropic, request).await;
    (state.metrics).request("/v1/messages", response.status().as_u16());
    response
}

/// `POST /v1/responses`: through the cascade, unless the provider holds the history.
async fn responses_route(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let format = Format::Responses;
    let response = match Inbound::read(state.body_limits, &state.tenancy, format, request).await {
        Err(refusal) => refusal,
        Ok(inbound) if responses::holds_history_upstream(&inbound.bytes) => {
            responses::forward_history(&state.upstream, &state.responses, inbound).await
        }
        Ok(inbound) if asks_provider_to_compact(format, &inbound.bytes) => {
            responses::forward_compaction(&state.upstream, &state.responses, inbound).await
        }
        Ok(inbound) => state.stages().run(inbound).await,
    };
    (state.metrics).request(responses::ROUTE, response.status().as_u16());
    response
}

/// One request on a cascade route, read, then through the stages (or forwarded untouched
/// when it asks the provider to compact).
async fn cascade(state: &AppState, format: Format, request: Request) -> Response {
    match Inbound::read(state.body_limits, &state.tenancy, format, request).await {
        Ok(inbound) if asks_provider_to_compact(format, &inbound.bytes) => {
            responses::forward_compaction(&state.upstream, &state.responses, inbound).await
        }
        Ok(inbound) => state.stages().run(inbound).await,
        Err(refusal) => refusal,
    }
}

/// `POST /v1/responses/compact`: the provider compacts; forwarded untouched.
async fn compact_route(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let format = Format::Responses;
    let response = match Inbound::read(state.body_limits, &state.tenancy, format, request).await {
        Err(refusal) => refusal,
        Ok(inbound) => {
            responses::forward_compaction(&state.upstream, &state.responses, inbound).await
        }
    };
    (state.metrics).request(COMPACT_ROUTE, response.status().as_u16());
    response
}

async fn passthrough(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let body = Body::from_stream(deadline_body(body, state.limits.body_read_timeout));
    let result = (state.upstream)
        .forward(path, parts.method.clone(), &parts.headers, body)
        .await;
    let response = match result {
        Ok(response) => response,
        Err(error) => upstream_failure(Format::OpenAi, &error),
    };
    state.metrics.request("other", response.status().as_u16());
    response
}
