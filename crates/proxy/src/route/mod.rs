//! The router and its handlers: the two cascade routes, metrics, health, and the
//! pass-through for everything else.

pub(crate) mod answer;
pub(crate) mod body;
pub mod cut;
pub(crate) mod fastpath;
pub mod responses;
pub mod stream;
pub mod upstream;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cascade_llm::{Executor, Provider, SummarizerSpec};
use context_cascade::format::parse_value;
use context_cascade::summarizer::Summarizer;
use context_cascade::{Calibration, OfflineSummarizer};
use context_cascade::{CallError, ContextManager};
use context_cascade::{Conversation, Format};
use serde_json::Value;

use self::answer::{add_report_header, success, upstream_failure};
use self::body::read_request_body;
use self::fastpath::Served;
use self::responses::{ResponsesCounters, Watched};
use self::upstream::{UpstreamCall, forward, forwarded_headers};
use crate::ahead::background::{self, Background};
use crate::config::ProxyConfig;
use crate::error::{ErrorKind, ProxyError, error_response};
use crate::ops::limits::{Limits, deadline_body, serve_connections};
use crate::ops::metrics::{CallOutcome, Metrics, Snapshot};
use crate::ops::status::{Status, status_page};
use crate::state::memory;
use crate::state::stability::{Edit, LazyHashes, Sticky, hash_at};
use crate::state::store::{self, StateStore};
use crate::state::summary_cache::CachingSummarizer;
use crate::state::tenancy::Tenancy;
use crate::state::writes::{FLUSH_BOUND, Writes};
use crate::window::discovery::{Learned, Windows};
use crate::window::labels::ModelLabels;

/// The response header that lists the strategies applied to a request.
pub const REPORT_HEADER: &str = "x-context-cascade";
/// How long connecting to the upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything the handlers share. The engine's configuration, catalog and summarizer live
/// in the [`ContextManager`] only; the state keeps what the proxy itself uses.
pub struct AppState {
    pub(crate) upstream: String,
    pub(crate) max_request_bytes: usize,
    pub(crate) upstream_timeout: std::time::Duration,
    /// `None` when `sticky_prefix` is off.
    sticky: Option<Sticky>,
    pub(crate) windows: Windows,
    manager: ContextManager,
    pub(crate) client: reqwest::Client,
    /// SQLite, or Redis shared with other replicas (see [`crate::state::store`]).
    pub(crate) store: Arc<dyn StateStore>,
    /// Requests the cascade would leave alone skip it (issue 15).
    pub(crate) fastpath: crate::route::fastpath::FastPath,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) responses: ResponsesCounters,
    /// Whose state a request may see (keyed hashes of credentials).
    pub(crate) tenancy: Tenancy,
    /// Model names that may be metric labels and calibration rows.
    pub(crate) labels: ModelLabels,
    pub(crate) limits: Limits,
    /// `None` when background summaries are off (or the summarizer is offline).
    background: Option<Arc<Background>>,
    /// The status page's timelines and guard.
    pub(crate) status: Status,
    /// State writes running in the background, flushed at shutdown.
    writes: Writes,
    /// The summary cache, used through a view bound to each request's tenant.
    summaries: Arc<CachingSummarizer>,
}

impl AppState {
    /// Opens the store, restores the calibration and builds the engine for `config`.
    pub fn new(config: ProxyConfig) -> Result<Arc<AppState>, ProxyError> {
        config.validate()?;
        config.validate_upstream()?;
        let opened = store::open(&config)?;
        let store = opened.store;
        let tenancy = Tenancy::open(&config.db_path)?;
        let limits = Limits::from_config(&config);
        let status = Status::new(config.admin_token.clone());
        let metrics = Arc::new(Metrics::default());
        let windows = Windows::new(&config);
        // Limits learned from overflow errors before a restart still hold.
        for (model, limit, counts_reserve) in opened.windows {
            windows.learn(
                &model,
                Learned {
                    limit,
                    counts_reserve,
                },
            );
        }
        let inner = summarizer(&config.summarizer)?;
        let summaries = Arc::new(
            CachingSummarizer::new(inner, store.clone(), metrics.clone())
                .with_gap_share(config.cascade.prepared_summary_gap),
        );
        // The engine's own summarizer is the cache without a tenant, which refuses: every
        // call names its tenant's view (`call_with_summarizer`).
        let cached: Arc<dyn Summarizer> = summaries.clone();
        let background = background::for_config(&config, &summaries);
        let upstream = config.upstream_base().to_owned();
        let restored = opened.calibration;
        let labels = ModelLabels::new(
            config.catalog.clone(),
            restored.iter().map(|(m, _)| m.clone()),
        );
        let manager = ContextManager::new(config.cascade)
            .with_catalog(config.catalog)
            .with_summarizer(cached);
        let manager = crate::route::fastpath::exact_counts(manager);
        let mut calibration = Calibration::new();
        for (model, scale) in restored {
            calibration.set(&model, scale);
        }
        manager.restore_calibration(calibration);
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(config.upstream_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ProxyError::Client(e.to_string()))?;
        let writes = Writes::default();
        let state = Arc::new(AppState {
            upstream,
            max_request_bytes: config.max_request_bytes,
            upstream_timeout: config.upstream_timeout,
            sticky: (config.sticky_prefix).then(|| Sticky::new(store.clone(), writes.clone())),
            windows,
            manager,
            client,
            store,
            fastpath: crate::route::fastpath::FastPath::new(config.fast_path),
            metrics,
            responses: ResponsesCounters::default(),
            tenancy,
            labels,
            limits,
            background,
            status,
            writes,
            summaries,
        });
        if state.store.shared() {
            // Calibration and learned windows other replicas persist reach this one.
            tokio::spawn(crate::state::shared::follow(Arc::downgrade(&state)));
        }
        Ok(state)
    }

    /// The counters as they are now.
    pub fn metrics(&self) -> Snapshot {
        self.metrics.snapshot()
    }

    /// The engine (calibration, configuration).
    pub fn manager(&self) -> &ContextManager {
        &self.manager
    }

    /// Waits for the state writes still running in the background, at most `bound`;
    /// returns whether they all finished.
    pub async fn flush(&self, bound: Duration) -> bool {
        self.writes.flush(bound).await
    }

    /// The background summary jobs, when they are on.
    pub fn background(&self) -> Option<&Arc<Background>> {
        self.background.as_ref()
    }

    /// Persists the calibration of `model` after an observation (only for a model name
    /// something other than the client vouched for: see [`ModelLabels`]).
    pub(crate) async fn save_scale(&self, model: &str) {
        if !self.labels.is_known(model) {
            return;
        }
        if let Some(scale) = self.manager.calibration().get(model)
            && let Err(e) = self.store.save_scale(model, scale).await
        {
            tracing::warn!(error = %e, "could not persist the calibration");
        }
    }
}

fn summarizer(spec: &SummarizerSpec) -> Result<Arc<dyn Summarizer>, ProxyError> {
    // The proxy's own runtime carries the summarizer's calls.
    match spec.llm_summarizer(Executor::Current) {
        Ok(Some(summarizer)) => Ok(Arc::new(summarizer)),
        Ok(None) => Ok(Arc::new(OfflineSummarizer::default())),
        Err(e) => Err(ProxyError::Config(format!("summarizer: {e}"))),
    }
}

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
            post(responses::responses).fallback(passthrough),
        )
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
fn stop_signal() -> Result<impl std::future::Future<Output = ()> + Send, ProxyError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
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
        tracing::info!(%address, upstream = %state.upstream, "context-cascade proxy listening");
    }
    let limits = state.limits;
    serve_connections(listener, router(state.clone()), limits, shutdown).await?;
    state.flush(FLUSH_BOUND).await;
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

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    // Only the model names admitted as labels (a client-chosen name is not a series).
    let mut calibration = Calibration::new();
    for (model, scale) in state.manager.calibration().models() {
        if state.labels.is_known(model) {
            calibration.set(model, scale);
        }
    }
    let mut text = state.metrics.render(&calibration);
    text.push_str(&state.windows.render_learned());
    text.push_str(&state.responses.render());
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

async fn openai(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let response = cascade(&state, Format::OpenAi, request).await;
    state
        .metrics
        .request("/v1/chat/completions", response.status().as_u16());
    response
}

async fn anthropic(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let response = cascade(&state, Format::Anthropic, request).await;
    state
        .metrics
        .request("/v1/messages", response.status().as_u16());
    response
}

async fn passthrough(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{path}", state.upstream);
    let body = Body::from_stream(deadline_body(body, state.limits.body_read_timeout));
    let result = forward(
        &state.client,
        url,
        parts.method,
        &parts.headers,
        body,
        state.upstream_timeout,
    )
    .await;
    let response = match result {
        Ok(response) => response,
        Err(error) => upstream_failure(Format::OpenAi, &error),
    };
    state.metrics.request("other", response.status().as_u16());
    response
}

/// One request on a cascade route: read, remember, stitch, compact, call, answer.
pub(crate) async fn cascade(state: &Arc<AppState>, format: Format, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = match read_request_body(state, format, &parts.headers, body).await {
        Ok(bytes) => bytes,
        Err(answer) => return answer,
    };
    let overflowed = match crate::route::fastpath::serve(state, format, &parts, &bytes).await {
        Served::Answered(response) => return response,
        Served::Declined => None,
        Served::Overflowed(error) => Some(error),
    };
    let mut body: Value = match serde_json::from_slice(&bytes) {
        Ok(body) => body,
        Err(e) => {
            let message = format!(
                "context-cascade: invalid JSON in the request body at line {}, column {}: {e}",
                e.line(),
                e.column()
            );
            return error_response(format, ErrorKind::InvalidRequest, &message);
        }
    };
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    // Everything kept about the conversation is the credential's own (SPEC "Proxy state").
    let tenant = state.tenancy.tenant(&parts.headers);
    let key = Tenancy::scoped(
        &tenant,
        &memory::conversation_key(&parts.headers, &body, format),
    );
    let injection = remember(state, &key, &mut body, format).await;
    let mut hashes = lazy_hashes(&bytes, &body, format, injection);
    let mut conversation = match parse_value(body, Some(format)) {
        Ok(conversation) => conversation,
        Err(e) => {
            let message = format!(
                "context-cascade: invalid request at {}: {}",
                e.path, e.problem
            );
            return error_response(format, ErrorKind::InvalidRequest, &message);
        }
    };
    let stitched = match &state.sticky {
        Some(sticky) => sticky.stitch(&key, &mut hashes, &mut conversation).await,
        None => None,
    };
    if stitched.is_some() {
        state.metrics.prefix_reused();
    }

    let headers = forwarded_headers(&parts.headers, true);
    let (window, source) = (state.windows)
        .resolve(&state.client, &state.upstream, &headers, &model)
        .await;
    state.metrics.window_source(source.as_str());
    state.labels.admit(&model, source);
    let budget = (state.windows).budget(&model, window, source, conversation.output_reserve());
    // The server counts the client's bytes: only when they are what the cascade starts
    // from (no fact put back, no known prefix stitched in).
    let as_sent = stitched.is_none() && injection.is_none();
    if format == Format::OpenAi && as_sent && state.windows.count_first_with_llama_cpp(&model) {
        count_with_llama_cpp(state, &headers, &bytes, &model, &conversation).await;
    }
    let path = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |p| p.as_str());
    // Untouched requests go upstream byte for byte as the client wrote them (unless they
    // carry `_pin` markers, which providers reject).
    let untouched = stitched.is_none() && injection.is_none() && !carries_pins(&conversation);
    let call = UpstreamCall {
        provider: Provider::for_format(format),
        original: untouched.then(|| (bytes.clone(), conversation.clone())),
        client: &state.client,
        url: format!("{}{path}", state.upstream),
        headers,
        stream,
        timeout: state.upstream_timeout,
    };
    let call = Watched::new(call, format).answered_already(overflowed);
    crate::state::shared::before_call(state).await;
    // The summary cache below the engine, bound to the request's tenant.
    let summaries = state.summaries.for_tenant(&tenant);
    let result = (state.manager)
        .call_with_summarizer(&call, &mut conversation, budget, &summaries)
        .await;
    if let Some(learned) = call.learned() {
        if state.windows.learn(&model, learned)
            && let Err(e) = (state.store)
                .save_learned_window(&model, learned.limit, learned.counts_reserve)
                .await
        {
            tracing::warn!(model, error = %e, "could not persist a learned window");
        }
    }
    let admitted = state.labels.is_known(&model).then_some(model.as_str());
    (state.status.recorder).record(&key, admitted, &result, &conversation);
    let changed = !matches!(&result, Ok(called) if called.report.steps.is_empty());
    state.fastpath.settle(&key, untouched && !changed);
    match result {
        Ok(called) => {
            let report = called.report;
            state.metrics.report(&report, CallOutcome::Answered);
            if let Some(sticky) = &state.sticky {
                let changed = stitched.is_some() || !report.steps.is_empty();
                (sticky.record(&key, &mut hashes, &conversation, changed, bytes.clone())).await;
            }
            state.save_scale(&model).await;
            background::after_answer(state, &key, &tenant, &conversation, budget, &report);
            let sent = (
                state.manager.prior(&conversation),
                state.manager.estimate(&conversation),
            );
            let mut response = success(state, called.output, format, sent, model);
            add_report_header(&mut response, &report);
            response
        }
        Err(CallError::Exhausted { report }) => {
            state.metrics.report(&report, CallOutcome::Exhausted);
            state.save_scale(&model).await;
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
            let mut response = error_response(format, ErrorKind::ContextLength, &message);
            add_report_header(&mut response, &report);
            response
        }
        Err(CallError::Llm { error, report }) => {
            state.metrics.report(&report, CallOutcome::Failed);
            let mut response = upstream_failure(format, &error);
            add_report_header(&mut response, &report);
            response
        }
    }
}

/// Whether a message carries a `_pin` marker on the wire.
fn carries_pins(conversation: &Conversation) -> bool {
    (conversation.messages.iter()).any(|m| m.fields().contains_key("_pin"))
}

/// The message hashes of a request as it goes into the cascade: the client's bytes, with
/// the message the memory injection changed hashed again.
fn lazy_hashes<'a>(
    bytes: &'a [u8],
    body: &Value,
    format: Format,
    injection: Option<memory::Injection>,
) -> LazyHashes<'a> {
    let (index, inserted) = match injection {
        None => return LazyHashes::new(bytes, format, None),
        Some(memory::Injection::Inserted(i)) => (i, true),
        Some(memory::Injection::Changed(i)) => (i, false),
    };
    match hash_at(body, format, index) {
        Some(hash) => LazyHashes::new(
            bytes,
            format,
            Some(Edit {
                index,
                inserted,
                hash,
            }),
        ),
        None => LazyHashes::unavailable(bytes, format),
    }
}

/// Stores new remember requests and puts back the facts the request no longer carries.
async fn remember(
    state: &AppState,
    key: &str,
    body: &mut Value,
    format: Format,
) -> Option<memory::Injection> {
    let mut stored = 0;
    for text in memory::remember_requests(body, &state.manager.config().remember) {
        match state
            .store
            .add_fact(key, &memory::fact_hash(&text), &text)
            .await
        {
            Ok(true) => stored += 1,
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "could not store a remembered fact"),
        }
    }
    let facts = match state.store.facts(key).await {
        Ok(facts) => facts,
        Err(e) => {
            tracing::warn!(error = %e, "memory store unavailable");
            Vec::new()
        }
    };
    let missing = memory::missing_facts(body, &facts);
    if !missing.is_empty()
        && let Err(e) = state.store.touch_facts(key).await
    {
        tracing::warn!(error = %e, "could not mark remembered facts as used");
    }
    let injection = memory::inject(body, format, &missing);
    state.metrics.facts(stored, missing.len());
    injection
}

/// Folds the llama.cpp server's own count of this request (its model's first) into the
/// calibration, so that the cascade decides on it (see `crate::window::tokenize`).
async fn count_with_llama_cpp(
    state: &AppState,
    headers: &reqwest::header::HeaderMap,
    bytes: &bytes::Bytes,
    model: &str,
    conversation: &Conversation,
) {
    // A calibration restored from the store (a restart) needs no count.
    if state.manager.calibration().get(model).is_some() {
        return;
    }
    let counted =
        crate::window::tokenize::prompt_tokens(&state.client, &state.upstream, headers, bytes);
    match counted.await {
        Some(tokens) => {
            let prior = state.manager.prior(conversation);
            let estimate = state.manager.estimate(conversation);
            state.manager.observe_sent(model, prior, estimate, tokens);
            state.metrics.llama_cpp_count();
            tracing::info!(
                model,
                tokens,
                estimate,
                "first request counted by llama.cpp"
            );
        }
        None => tracing::debug!(model, "llama.cpp did not count the first request"),
    }
}
