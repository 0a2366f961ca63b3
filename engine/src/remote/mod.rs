//! The optional remote backend: an OpenAI-compatible HTTP server (`/v1/completions` or `/v1/chat/completions`,
//! always streamed) reached over one persistent, pooled connection.
//!
//! Nothing in the engine builds a [`RemoteClient`] by itself: the server constructs one only when the user
//! configured a remote URL, so without that setting no byte leaves the machine. The API key is read once from
//! the environment variable the configuration names; it is sent as `Authorization: Bearer` and never appears in
//! `Debug` output, logs or error messages. After a failure the client reports [`RemoteHealth::Down`] until a
//! back-off (or the server's `Retry-After`) has passed; callers skip it meanwhile, and the next request after
//! that is the probe.

mod wire;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONNECTION, CONTENT_TYPE};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Where the remote server is and how to talk to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteConfig {
    /// The base URL, e.g. `http://127.0.0.1:8080` (a trailing `/v1` is accepted too).
    pub url: String,
    /// Sent as `model`; llama.cpp's server ignores it, hosted APIs require it.
    pub model: String,
    /// The name of the environment variable that holds the API key (never the key itself).
    pub api_key_env: Option<String>,
    /// The longest any request may take, whatever its own deadline says; also the connect timeout.
    pub timeout_ms: u64,
    /// Use `/v1/chat/completions` (the prompt becomes the user message) instead of `/v1/completions`.
    pub chat: bool,
    /// Send the request's `suffix` for fill-in (completions only), for servers whose `/v1/completions` does FIM
    /// with it (Ollama, hosted FIM APIs). llama.cpp's server ignores it there (older versions answered 400):
    /// for llama-server leave this off and put the fill-in layout in the prompt.
    pub supports_suffix: bool,
}

/// One completion request, in editor-neutral terms.
#[derive(Debug, Clone)]
pub struct RemoteRequest {
    pub prompt: String,
    /// The text after the cursor; sent only when [`RemoteConfig::supports_suffix`] is set and not in chat mode.
    pub suffix: Option<String>,
    /// The system message (chat only).
    pub system: Option<String>,
    /// All of them are applied client-side as text arrives; the first four are also sent to the server.
    pub stop: Vec<String>,
    pub max_tokens: usize,
    pub temperature: f32,
    pub seed: Option<u64>,
    pub deadline: Instant,
    /// Ghost text's stop rules (`postprocess::stop_at`: end of line, dedent, line count), applied as text
    /// arrives so that the stream closes as soon as the suggestion is complete.
    pub rules: Option<StreamRules>,
}

/// The owned form of `postprocess::StopContext`, for a request that outlives its caller's borrows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRules {
    pub mode: crate::StopMode,
    pub indent: String,
    pub suffix: String,
    pub max_lines: usize,
}

impl StreamRules {
    fn stop_at(&self, text: &str) -> Option<usize> {
        let context = crate::postprocess::StopContext {
            mode: self.mode,
            indent: &self.indent,
            suffix: &self.suffix,
            max_lines: self.max_lines,
        };
        crate::postprocess::stop_at(text, &context)
    }
}

/// The text the server produced, cut at the first stop string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteAnswer {
    pub text: String,
    /// From the start of `complete` to the first non-empty piece of text (`total_ms` when there was none).
    pub first_token_ms: u64,
    pub total_ms: u64,
    /// Stream events received (each `data:` line but `[DONE]`).
    pub n_chunks: usize,
    pub stop: RemoteStop,
}

/// Why the text ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteStop {
    /// The server finished (a stop string it knew, end of generation).
    Stop,
    /// The server ran out of `max_tokens`.
    Length,
    /// A stop string matched client-side; the stream was closed so the server stops generating.
    ClientStop,
    /// The deadline (or `timeout_ms`) came after some text arrived: the text so far is the answer.
    Deadline,
}

/// Whether callers should use the backend now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteHealth {
    Up,
    /// Failing since `since` (the first failure of the current run); the next request after `retry_at` probes it.
    Down {
        since: Instant,
        last_error: String,
        retry_at: Instant,
    },
}

/// Monotonic counters, for tests and benchmarks (connection reuse is asserted through `n_connects`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RemoteCounters {
    /// Calls to `complete`.
    pub n_requests: u64,
    /// TCP connections the client started to open (including failed attempts).
    pub n_connects: u64,
    /// Failures that marked the backend Down.
    pub n_failures: u64,
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum RemoteError {
    #[error("remote server unreachable: {0}")]
    Unreachable(String),
    #[error("remote server did not answer before the deadline")]
    Timeout,
    #[error("remote server rejected the credentials (HTTP 401/403); check the API key variable")]
    Unauthorized,
    #[error("remote server is rate limiting{}", retry_hint(.retry_after_ms))]
    RateLimited { retry_after_ms: Option<u64> },
    #[error("remote server answered HTTP {0}")]
    Status(u16),
    #[error("remote server sent a bad response: {0}")]
    BadResponse(String),
    #[error("remote stream ended before the server finished")]
    Truncated,
    #[error("remote request cancelled")]
    Cancelled,
    #[error("remote backend configuration: {0}")]
    Config(String),
}

fn retry_hint(retry_after_ms: &Option<u64>) -> String {
    retry_after_ms.map(|ms| format!(" (retry after {ms} ms)")).unwrap_or_default()
}

/// A handle on the remote backend; cheap to clone (the HTTP pool, health and counters are shared).
#[derive(Clone)]
pub struct RemoteClient {
    inner: Arc<Inner>,
}

struct Inner {
    config: RemoteConfig,
    http: reqwest::Client,
    api_key: Option<ApiKey>,
    completions_url: String,
    models_url: String,
    health: Mutex<HealthState>,
    n_requests: AtomicU64,
    n_connects: Arc<AtomicU64>,
    n_failures: AtomicU64,
    /// Learned: the server closes the connection after every streamed response (llama-server does). Completion
    /// requests then say `Connection: close`, so no request is first sent on a connection that is already dead.
    closes_after_stream: AtomicBool,
    /// When the last stream ended: a dead pooled connection soon after one means the server closed it on purpose
    /// (an idle timeout would take seconds).
    last_stream_end: Mutex<Option<Instant>>,
}

/// The key, kept out of every `Debug`.
struct ApiKey(String);

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

#[derive(Debug, Default)]
struct HealthState {
    down: Option<(Instant, String, Instant)>,
    n_consecutive_failures: u32,
}

impl fmt::Debug for RemoteClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteClient")
            .field("config", &self.inner.config)
            .field("api_key", &self.inner.api_key)
            .finish_non_exhaustive()
    }
}

/// Idle pooled connections are kept this long on our side (servers may close earlier: llama.cpp's after 5 s).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// A pooled connection found dead this soon after a stream ended was closed by the server on purpose.
const STREAM_CLOSE_WINDOW: Duration = Duration::from_secs(2);
/// A non-success body is read (bounded) only to log a short excerpt of the server's message.
const ERROR_BODY_MAX_BYTES: usize = 4096;

impl RemoteClient {
    /// Builds the client and its connection pool; reads the API key once. Opens no connection (see `warm`).
    pub fn new(config: RemoteConfig) -> Result<RemoteClient, RemoteError> {
        RemoteClient::build(config, true)
    }

    /// The same client without a connection pool: every request opens (and closes) its own connection. Only
    /// for comparisons such as `remote-bench`; the server should use [`RemoteClient::new`].
    pub fn new_without_pool(config: RemoteConfig) -> Result<RemoteClient, RemoteError> {
        RemoteClient::build(config, false)
    }

    fn build(config: RemoteConfig, pooled: bool) -> Result<RemoteClient, RemoteError> {
        let url = reqwest::Url::parse(&config.url)
            .map_err(|error| RemoteError::Config(format!("remote url {:?} is not a URL: {error}", config.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(RemoteError::Config(format!("remote url {:?} is not http or https", config.url)));
        }
        if config.timeout_ms == 0 {
            return Err(RemoteError::Config("remote timeout_ms is 0".to_string()));
        }
        let api_key = match &config.api_key_env {
            None => None,
            Some(name) => Some(read_api_key(name)?),
        };
        let n_connects = Arc::new(AtomicU64::new(0));
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("spark/", env!("CARGO_PKG_VERSION")))
            .tcp_nodelay(true)
            .tcp_keepalive(Duration::from_secs(30))
            .connect_timeout(Duration::from_millis(config.timeout_ms))
            .http2_adaptive_window(true)
            .http2_keep_alive_interval(Duration::from_secs(30))
            .http2_keep_alive_while_idle(true)
            // Never follow a redirect with the key to wherever it points.
            .redirect(reqwest::redirect::Policy::none())
            .connector_layer(CountConnectsLayer { n_connects: n_connects.clone() });
        builder = if pooled {
            builder.pool_idle_timeout(POOL_IDLE_TIMEOUT).pool_max_idle_per_host(8)
        } else {
            builder.pool_max_idle_per_host(0)
        };
        let loopback = match url.host_str() {
            Some("localhost") => true,
            Some(host) => host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback()),
            None => false,
        };
        if loopback {
            // A proxy from the environment has no business seeing loopback traffic.
            builder = builder.no_proxy();
        }
        let http = builder
            .build()
            .map_err(|error| RemoteError::Config(format!("cannot build the HTTP client: {}", error_chain(&error))))?;
        let completions_path = if config.chat { "v1/chat/completions" } else { "v1/completions" };
        Ok(RemoteClient {
            inner: Arc::new(Inner {
                completions_url: wire::endpoint(&config.url, completions_path),
                models_url: wire::endpoint(&config.url, "v1/models"),
                config,
                http,
                api_key,
                health: Mutex::new(HealthState::default()),
                n_requests: AtomicU64::new(0),
                n_connects,
                n_failures: AtomicU64::new(0),
                closes_after_stream: AtomicBool::new(false),
                last_stream_end: Mutex::new(None),
            }),
        })
    }

    pub fn config(&self) -> &RemoteConfig {
        &self.inner.config
    }

    /// Opens the pooled connection (`GET /v1/models`) so that the first completion pays no connection set-up.
    /// A 404 still counts as warm: the connection is open. Bounded by `timeout_ms`.
    pub async fn warm(&self) -> Result<(), RemoteError> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(self.inner.config.timeout_ms);
        let request = self.inner.http.get(&self.inner.models_url).headers(self.headers());
        let result = async {
            let response = match tokio::time::timeout_at(deadline, request.send()).await {
                Err(_elapsed) => return Err(RemoteError::Timeout),
                Ok(Err(error)) => return Err(self.transport_error(&error)),
                Ok(Ok(response)) => response,
            };
            let status = response.status().as_u16();
            let failed = matches!(status, 401 | 403 | 429) || status >= 500;
            if failed {
                let retry_after_ms = retry_after_from(response.headers());
                return Err(wire::status_error(status, retry_after_ms));
            }
            // Read the body to its end so the connection goes back to the pool.
            let mut response = response;
            while let Ok(Ok(Some(_))) = tokio::time::timeout_at(deadline, response.chunk()).await {}
            drop(response);
            let_pool_take_connection_back().await;
            tracing::debug!(status, "remote backend warmed");
            Ok(())
        }
        .await;
        self.record_outcome(result.as_ref().err());
        if let Err(error) = &result {
            tracing::warn!(%error, "remote backend warm-up failed");
        }
        result
    }

    /// Streams one completion. Every await is bounded by `min(request.deadline, now + timeout_ms)` and by
    /// `cancel`: a cancel drops the response (closing the connection, so the server stops generating).
    pub async fn complete(
        &self,
        request: RemoteRequest,
        cancel: CancellationToken,
    ) -> Result<RemoteAnswer, RemoteError> {
        let started = Instant::now();
        let timeout_at = started + Duration::from_millis(self.inner.config.timeout_ms);
        let deadline = request.deadline.min(timeout_at);
        self.inner.n_requests.fetch_add(1, Ordering::Relaxed);
        let span = tracing::debug_span!(
            "remote_complete",
            n_prompt_bytes = request.prompt.len(),
            n_suffix_bytes = request.suffix.as_ref().map_or(0, String::len),
            max_tokens = request.max_tokens,
            chat = self.inner.config.chat,
        );
        let result = self.stream_completion(&request, &cancel, deadline, started).instrument(span.clone()).await;
        span.in_scope(|| match &result {
            Ok(answer) => tracing::debug!(
                n_chunks = answer.n_chunks,
                n_text_bytes = answer.text.len(),
                first_token_ms = answer.first_token_ms,
                total_ms = answer.total_ms,
                stop = ?answer.stop,
                "remote completion"
            ),
            Err(RemoteError::Cancelled) => tracing::debug!("remote completion cancelled"),
            Err(error) => {
                tracing::warn!(%error, elapsed_ms = started.elapsed().as_millis() as u64, "remote completion failed")
            }
        });
        // A request's own deadline, shorter than the configured timeout, that passes before any text is this
        // request's budget (a keystroke's few hundred ms), not an outage: health stays as it was.
        let own_deadline_missed = matches!(result, Err(RemoteError::Timeout)) && request.deadline < timeout_at;
        if !own_deadline_missed {
            self.record_outcome(result.as_ref().err());
        }
        result
    }

    /// `Up`, or `Down` until its `retry_at`.
    pub fn health(&self) -> RemoteHealth {
        self.health_at(Instant::now())
    }

    /// [`RemoteClient::health`] as seen at `now` (so that tests need not wait for `retry_at`).
    pub fn health_at(&self, now: Instant) -> RemoteHealth {
        let state = self.inner.health.lock().unwrap_or_else(PoisonError::into_inner);
        match &state.down {
            Some((since, last_error, retry_at)) if now < *retry_at => {
                RemoteHealth::Down { since: *since, last_error: last_error.clone(), retry_at: *retry_at }
            }
            _ => RemoteHealth::Up,
        }
    }

    /// The last failure while no request has succeeded since: `(since, last_error, retry_at)`. Unlike
    /// [`RemoteClient::health`], this stays set after `retry_at` has passed, until a request succeeds: what a
    /// status report should show (the backend is not known to be up again before a probe succeeds).
    pub fn last_failure(&self) -> Option<(Instant, String, Instant)> {
        let state = self.inner.health.lock().unwrap_or_else(PoisonError::into_inner);
        state.down.clone()
    }

    pub fn counters(&self) -> RemoteCounters {
        RemoteCounters {
            n_requests: self.inner.n_requests.load(Ordering::Relaxed),
            n_connects: self.inner.n_connects.load(Ordering::Relaxed),
            n_failures: self.inner.n_failures.load(Ordering::Relaxed),
        }
    }

    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(ApiKey(key)) = &self.inner.api_key {
            // Checked in `read_api_key`, so this cannot fail; a sensitive value is masked in hyper's Debug.
            if let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {key}")) {
                value.set_sensitive(true);
                headers.insert(AUTHORIZATION, value);
            }
        }
        headers
    }

    async fn stream_completion(
        &self,
        request: &RemoteRequest,
        cancel: &CancellationToken,
        deadline: Instant,
        started: Instant,
    ) -> Result<RemoteAnswer, RemoteError> {
        if cancel.is_cancelled() {
            return Err(RemoteError::Cancelled);
        }
        if Instant::now() >= deadline {
            return Err(RemoteError::Timeout);
        }
        let config = &self.inner.config;
        let body = wire::request_body(config, request).to_string();
        let deadline_at = tokio::time::Instant::from_std(deadline);

        let mut n_attempts = 0;
        let mut response = loop {
            n_attempts += 1;
            let http_request = self
                .inner
                .http
                .post(&self.inner.completions_url)
                .headers(self.headers())
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, "text/event-stream")
                .body(body.clone());
            let http_request = if self.inner.closes_after_stream.load(Ordering::Relaxed) {
                http_request.header(CONNECTION, "close")
            } else {
                http_request
            };
            let sent = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(RemoteError::Cancelled),
                sent = tokio::time::timeout_at(deadline_at, http_request.send()) => sent,
            };
            match sent {
                Err(_elapsed) => return Err(RemoteError::Timeout),
                Ok(Ok(response)) => break response,
                Ok(Err(error)) => {
                    // A pooled connection that the server closed while it sat idle (llama-server closes every
                    // connection after a streamed response) fails before any byte of a response: the server never
                    // answered, so the request is sent once more. hyper may already have started a spare connection
                    // meanwhile, so "was the connection reused" cannot be told from the counter: any failure but a
                    // refused connect or a timeout gets the one retry, within the same deadline.
                    if n_attempts == 1 && !error.is_connect() && !error.is_timeout() {
                        let last_stream_end =
                            *self.inner.last_stream_end.lock().unwrap_or_else(PoisonError::into_inner);
                        let just_streamed = last_stream_end.is_some_and(|end| end.elapsed() < STREAM_CLOSE_WINDOW);
                        if just_streamed && !self.inner.closes_after_stream.swap(true, Ordering::Relaxed) {
                            tracing::info!(
                                "the remote server closes connections after streamed answers; not pooling them"
                            );
                        }
                        tracing::debug!(
                            error = %self.redact(&error_chain(&error)),
                            "the connection closed before a response; retrying once"
                        );
                        continue;
                    }
                    return Err(self.transport_error(&error));
                }
            }
        };

        let status = response.status().as_u16();
        if !response.status().is_success() {
            let error = wire::status_error(status, retry_after_from(response.headers()));
            let excerpt = tokio::select! {
                biased;
                _ = cancel.cancelled() => String::new(),
                excerpt = tokio::time::timeout_at(deadline_at, read_excerpt(&mut response)) => excerpt.unwrap_or_default(),
            };
            tracing::warn!(status, message = %self.redact(&excerpt), "remote server refused the request");
            return Err(error);
        }

        let mut decoder = wire::SseDecoder::default();
        let mut events = Vec::new();
        let mut text = String::new();
        let mut first_token_ms = None;
        let mut n_chunks = 0;
        let mut finish: Option<RemoteStop> = None;
        let mut done = false;
        let answer = |text: String, first_token_ms: Option<u64>, n_chunks: usize, stop: RemoteStop| {
            let total_ms = started.elapsed().as_millis() as u64;
            RemoteAnswer { text, first_token_ms: first_token_ms.unwrap_or(total_ms), total_ms, n_chunks, stop }
        };
        loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    // Dropping the unread response closes the connection: the server notices and stops.
                    drop(response);
                    return Err(RemoteError::Cancelled);
                }
                next = tokio::time::timeout_at(deadline_at, response.chunk()) => next,
            };
            let ended = done || finish.is_some();
            let bytes = match next {
                Ok(Ok(Some(bytes))) => bytes,
                // The end of the body: after `[DONE]` (or a finish reason) the connection goes back to the pool.
                Ok(Ok(None)) if ended => break,
                Ok(Ok(None)) => return Err(RemoteError::Truncated),
                // Only the tail after the finish was lost; the answer is complete.
                Ok(Err(_)) | Err(_) if ended => {
                    drop(response);
                    break;
                }
                Ok(Err(error)) => {
                    tracing::debug!(error = %self.redact(&error_chain(&error)), "remote stream broke");
                    return Err(RemoteError::Truncated);
                }
                Err(_elapsed) if text.is_empty() => return Err(RemoteError::Timeout),
                Err(_elapsed) => {
                    drop(response);
                    return Ok(answer(text, first_token_ms, n_chunks, RemoteStop::Deadline));
                }
            };
            decoder.push(&bytes, &mut events).map_err(RemoteError::BadResponse)?;
            for event in events.drain(..) {
                let payload = match event {
                    wire::SseEvent::Done => {
                        done = true;
                        continue;
                    }
                    wire::SseEvent::Data(_) if done => continue,
                    wire::SseEvent::Data(payload) => payload,
                };
                let chunk = wire::parse_chunk(config.chat, &payload).map_err(RemoteError::BadResponse)?;
                n_chunks += 1;
                if !chunk.text.is_empty() && finish.is_none() {
                    first_token_ms.get_or_insert_with(|| started.elapsed().as_millis() as u64);
                    let n_checked = text.len();
                    text.push_str(&chunk.text);
                    let cut = wire::find_stop(&text, n_checked, &request.stop)
                        .into_iter()
                        .chain(request.rules.as_ref().and_then(|rules| rules.stop_at(&text)))
                        .min();
                    if let Some(cut) = cut {
                        text.truncate(cut);
                        drop(response);
                        return Ok(answer(text, first_token_ms, n_chunks, RemoteStop::ClientStop));
                    }
                }
                if let Some(reason) = chunk.finish_reason {
                    finish.get_or_insert(wire::stop_from_finish_reason(&reason));
                }
            }
        }
        *self.inner.last_stream_end.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        let_pool_take_connection_back().await;
        Ok(answer(text, first_token_ms, n_chunks, finish.unwrap_or(RemoteStop::Stop)))
    }

    /// Maps an error from sending the request (no response yet).
    fn transport_error(&self, error: &reqwest::Error) -> RemoteError {
        if error.is_timeout() {
            return RemoteError::Timeout;
        }
        RemoteError::Unreachable(self.redact(&error_chain(error)))
    }

    fn redact(&self, text: &str) -> String {
        wire::redact(text, self.inner.api_key.as_ref().map(|ApiKey(key)| key.as_str()))
    }

    fn record_outcome(&self, error: Option<&RemoteError>) {
        let mut state = self.inner.health.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(error) = error else {
            if state.down.take().is_some() {
                tracing::info!("remote backend is up again");
            }
            state.n_consecutive_failures = 0;
            return;
        };
        let Some(wait) = wire::backoff(error, state.n_consecutive_failures + 1) else {
            return;
        };
        state.n_consecutive_failures += 1;
        self.inner.n_failures.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let since = state.down.as_ref().map_or(now, |(since, _, _)| *since);
        // The message is already redacted: every string inside a RemoteError went through `redact`.
        state.down = Some((since, error.to_string(), now + wait));
        tracing::warn!(%error, retry_in_ms = wait.as_millis() as u64, n_failures = state.n_consecutive_failures, "remote backend down");
    }
}

/// Reads the key once; errors name the variable, never its value.
fn read_api_key(name: &str) -> Result<ApiKey, RemoteError> {
    let key = std::env::var(name).map_err(|error| match error {
        std::env::VarError::NotPresent => RemoteError::Config(format!("the API key variable {name} is not set")),
        std::env::VarError::NotUnicode(_) => {
            RemoteError::Config(format!("the API key variable {name} is not valid Unicode"))
        }
    })?;
    let key = key.trim().to_string();
    if key.is_empty() {
        return Err(RemoteError::Config(format!("the API key variable {name} is empty")));
    }
    if HeaderValue::from_str(&format!("Bearer {key}")).is_err() {
        return Err(RemoteError::Config(format!("the API key in {name} has characters an HTTP header cannot carry")));
    }
    Ok(ApiKey(key))
}

fn retry_after_from(headers: &HeaderMap) -> Option<u64> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    wire::retry_after_ms(header("retry-after-ms"), header("retry-after"), SystemTime::now())
}

/// Up to `ERROR_BODY_MAX_BYTES` of an error body, for the log.
async fn read_excerpt(response: &mut reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < ERROR_BODY_MAX_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    wire::truncate_chars(String::from_utf8_lossy(&bytes).trim(), 300)
}

/// hyper returns a finished HTTP/1 connection to the pool from a task of its own; yielding once lets that task
/// run before the caller's next request looks for an idle connection (otherwise that request may race it and
/// open a second connection).
async fn let_pool_take_connection_back() {
    tokio::task::yield_now().await;
}

/// `error: its source: its source's source`, the way the layers of hyper and the OS explain a failure.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A connector layer that counts connection attempts, so tests can assert pooling through a counter.
#[derive(Clone)]
struct CountConnectsLayer {
    n_connects: Arc<AtomicU64>,
}

impl<S> tower_layer::Layer<S> for CountConnectsLayer {
    type Service = CountConnects<S>;

    fn layer(&self, inner: S) -> CountConnects<S> {
        CountConnects { inner, n_connects: self.n_connects.clone() }
    }
}

#[derive(Clone)]
struct CountConnects<S> {
    inner: S,
    n_connects: Arc<AtomicU64>,
}

impl<S, R> tower_service::Service<R> for CountConnects<S>
where
    S: tower_service::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        self.n_connects.fetch_add(1, Ordering::Relaxed);
        self.inner.call(request)
    }
}
