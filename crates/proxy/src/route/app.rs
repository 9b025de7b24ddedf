//! The proxy's services, built once at startup: the upstream, the engine, the store and
//! what lives on it, the window, the operator's views, and the observers registered to run
//! after each answer. Each stage of a request gets a view of the few it uses
//! ([`AppState::stages`]).

use std::sync::Arc;
use std::time::Duration;

use cascade_llm::{Executor, SummarizerSpec};
use context_cascade::summarizer::Summarizer;
use context_cascade::{Calibration, ContextManager, OfflineSummarizer, Scale};

use crate::ahead::background::{self, Background};
use crate::config::ProxyConfig;
use crate::error::ProxyError;
use crate::ops::limits::Limits;
use crate::ops::metrics::{Metrics, Snapshot};
use crate::ops::status::Status;
use crate::recall::Recaller;
use crate::route::admission::Admission;
use crate::route::answer::Answering;
use crate::route::body::BodyLimits;
use crate::route::call::Calling;
use crate::route::fastpath::{self, FastPath};
use crate::route::gauge::Gauge;
use crate::route::heavy::HeavyStages;
use crate::route::observers::{self, Observed};
use crate::route::outcome::Observer;
use crate::route::pipeline::Stages;
use crate::route::preparation::Preparation;
use crate::route::responses::ResponsesCounters;
use crate::route::upstream::Upstream;
use crate::state::writes::Writes;
use crate::state::{CachingSummarizer, StateStore, Sticky, Tenancy, open_store};
use crate::window::budget::Budgeting;
use crate::window::calibration::Calibrator;
use crate::window::discovery::{Learned, Windows};
use crate::window::labels::ModelLabels;
use crate::window::shared;

/// How long connecting to the upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything the handlers share. The engine's configuration, catalog and summarizer live
/// in the [`ContextManager`] only; the state keeps what the proxy itself uses.
pub struct AppState {
    pub(crate) upstream: Upstream,
    pub(crate) body_limits: BodyLimits,
    pub(crate) limits: Limits,
    /// Whose state a request may see (keyed hashes of credentials).
    pub(crate) tenancy: Tenancy,
    manager: Arc<ContextManager>,
    /// SQLite, or Redis shared with other replicas (see `state::store`).
    pub(crate) store: Arc<dyn StateStore>,
    /// `None` when `sticky_prefix` is off.
    sticky: Option<Arc<Sticky>>,
    pub(crate) windows: Arc<Windows>,
    /// Model names that may be metric labels and calibration rows.
    labels: Arc<ModelLabels>,
    calibrator: Arc<Calibrator>,
    /// Requests the cascade would leave alone skip it (issue 15).
    fastpath: Arc<FastPath>,
    /// Turns at the heavy stages (parse, prepare, write): one per core.
    heavy: Arc<HeavyStages>,
    /// What answers tell the client its prompt took (`requests.gauge`).
    gauge: Gauge,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) responses: ResponsesCounters,
    /// `None` when background summaries are off (or the summarizer is offline).
    background: Option<Arc<Background>>,
    /// The status page's timelines and guard.
    pub(crate) status: Arc<Status>,
    /// What runs after each answer.
    observers: Vec<Box<dyn Observer>>,
    /// State writes running in the background, flushed at shutdown.
    writes: Writes,
    /// The summary cache, used through a view bound to each request's tenant.
    summaries: Arc<CachingSummarizer>,
    /// `None` when recall is off (`requests.recall`).
    recaller: Option<Recaller>,
}

/// What [`AppState::new`] builds before the engine.
struct Foundation {
    store: Arc<dyn StateStore>,
    tenancy: Tenancy,
    metrics: Arc<Metrics>,
    windows: Arc<Windows>,
    labels: Arc<ModelLabels>,
    calibration: Vec<(String, Scale)>,
}

impl AppState {
    /// Opens the store, restores the calibration and builds the engine for `config`.
    pub fn new(config: ProxyConfig) -> Result<Arc<AppState>, ProxyError> {
        config.validate()?;
        config.validate_upstream()?;
        let base = foundation(&config)?;
        let inner = summarizer(&config.summarizer.spec())?;
        let summaries = Arc::new(
            CachingSummarizer::new(inner, base.store.clone(), base.metrics.clone())
                .with_gap_share(config.cascade.experimental.prepared_summary_gap),
        );
        // The engine's own summarizer is the cache without a tenant, which refuses: every
        // call names its tenant's view (`call_with_summarizer`).
        let cached: Arc<dyn Summarizer> = summaries.clone();
        let manager = Arc::new(engine(&config, cached, base.calibration));
        let background = background::jobs_for(&config)
            .map(|jobs| Arc::new(Background::new(summaries.clone(), manager.clone(), jobs)));
        let writes = Writes::default();
        let heavy = Arc::new(HeavyStages::per_core());
        let (store, labels) = (base.store, base.labels);
        let calibrator = Arc::new(Calibrator::new(
            manager.clone(),
            labels.clone(),
            store.clone(),
            writes.clone(),
        ));
        let limits = Limits::from_config(&config);
        let state = AppState {
            upstream: Upstream {
                base: config.upstream_base().to_owned(),
                client: client(&config)?,
                timeout: config.limits.upstream_timeout,
            },
            body_limits: BodyLimits {
                max_bytes: config.limits.max_request_bytes,
                read_timeout: limits.body_read_timeout,
            },
            limits,
            tenancy: base.tenancy,
            manager,
            sticky: (config.requests.sticky_prefix).then(|| {
                let sticky = Sticky::new(store.clone(), writes.clone())
                    .with_memory_limit(config.limits.sticky_memory_mb.saturating_mul(1 << 20));
                Arc::new(sticky.with_turns(heavy.semaphore()))
            }),
            recaller: (config.requests.recall).then(|| Recaller::new(store.clone())),
            store,
            windows: base.windows,
            labels,
            calibrator,
            fastpath: Arc::new(FastPath::new(config.requests.fast_path)),
            heavy,
            gauge: config.requests.gauge,
            metrics: base.metrics,
            responses: ResponsesCounters::default(),
            background,
            status: Arc::new(Status::new(config.status.admin_token.clone())),
            observers: Vec::new(),
            writes,
            summaries,
        };
        Ok(state.observed().following())
    }

    /// Registers the observers over the services built.
    fn observed(mut self) -> Self {
        self.observers = observers::registered(Observed {
            windows: self.windows.clone(),
            store: self.store.clone(),
            status: self.status.clone(),
            labels: self.labels.clone(),
            fastpath: self.fastpath.clone(),
            metrics: self.metrics.clone(),
            sticky: self.sticky.clone(),
            calibrator: self.calibrator.clone(),
            background: self.background.clone(),
        });
        self
    }

    /// Shares the state, following other replicas through a shared store.
    fn following(self) -> Arc<Self> {
        if self.store.shared() {
            // Calibration and learned windows other replicas persist reach this one.
            let (windows, manager) = (Arc::downgrade(&self.windows), Arc::downgrade(&self.manager));
            tokio::spawn(shared::follow(self.store.clone(), windows, manager));
        }
        Arc::new(self)
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

    /// The calibration of the model names admitted as labels (a client-chosen name is
    /// neither a metric series nor a row on the status page).
    pub(crate) fn admitted_calibration(&self) -> Calibration {
        let mut calibration = Calibration::new();
        for (model, scale) in self.manager.calibration().models() {
            if self.labels.is_known(model) {
                calibration.set(model, scale);
            }
        }
        calibration
    }

    /// The stages of a cascade request, each with the services it uses.
    pub(crate) fn stages(&self) -> Stages<'_> {
        let (manager, store) = (self.manager.as_ref(), self.store.as_ref());
        let (metrics, upstream) = (self.metrics.as_ref(), &self.upstream);
        let budgeting = || Budgeting {
            windows: &self.windows,
            labels: &self.labels,
            metrics,
            client: &upstream.client,
            base: &upstream.base,
        };
        Stages {
            heavy: &self.heavy,
            admission: Admission {
                fastpath: &self.fastpath,
                manager,
                store,
                budgeting: budgeting(),
                metrics,
                upstream,
                background: self.background.is_some(),
            },
            preparation: Preparation {
                manager,
                store,
                sticky: self.sticky.as_deref(),
                budgeting: budgeting(),
                metrics,
                upstream,
                gauge: self.gauge,
            },
            calling: Calling {
                manager,
                store,
                upstream,
                summaries: &self.summaries,
                recaller: self.recaller.as_ref(),
            },
            answering: Answering {
                calibrator: &self.calibrator,
                idle: self.upstream.timeout,
            },
            observers: &self.observers,
        }
    }
}

/// The store, opened, and what is restored from it before the engine is built.
fn foundation(config: &ProxyConfig) -> Result<Foundation, ProxyError> {
    let opened = open_store(config)?;
    let tenancy = Tenancy::open(&config.state.path)?;
    let windows = Windows::new(config);
    // Limits learned from overflow errors before a restart still hold.
    for (model, limit, counts_reserve) in opened.windows {
        let learned = Learned {
            limit,
            counts_reserve,
        };
        windows.learn(&model, learned);
    }
    let restored = opened.calibration.iter().map(|(m, _)| m.clone());
    let labels = ModelLabels::new(config.catalog.clone(), restored);
    Ok(Foundation {
        store: opened.store,
        tenancy,
        metrics: Arc::new(Metrics::default()),
        windows: Arc::new(windows),
        labels: Arc::new(labels),
        calibration: opened.calibration,
    })
}

/// The engine for `config`, summarizing through `summarizer`, with the calibration
/// `restored` from the store.
fn engine(
    config: &ProxyConfig,
    summarizer: Arc<dyn Summarizer>,
    restored: Vec<(String, Scale)>,
) -> ContextManager {
    let mut manager = ContextManager::new(config.cascade.clone())
        .with_catalog(config.catalog.clone())
        .with_summarizer(summarizer);
    if config.requests.recall {
        // The markers carry handles; the route keeps what went, per tenant (crate::recall).
        manager = manager.with_recall_handles();
    }
    let manager = fastpath::exact_counts(manager);
    let mut calibration = Calibration::new();
    for (model, scale) in restored {
        calibration.set(&model, scale);
    }
    manager.restore_calibration(calibration);
    manager
}

/// The HTTP client for the upstream.
fn client(config: &ProxyConfig) -> Result<reqwest::Client, ProxyError> {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(config.limits.upstream_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ProxyError::Client(e.to_string()))
}

fn summarizer(spec: &SummarizerSpec) -> Result<Arc<dyn Summarizer>, ProxyError> {
    // The proxy's own runtime carries the summarizer's calls.
    match spec.llm_summarizer(Executor::Current) {
        Ok(Some(summarizer)) => Ok(Arc::new(summarizer)),
        Ok(None) => Ok(Arc::new(OfflineSummarizer::default())),
        Err(e) => Err(ProxyError::Config(format!("summarizer: {e}"))),
    }
}
