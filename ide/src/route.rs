//! Where a request is served: the local model, the optional remote endpoint, or both. Ghost text stays local
//! unless the user routes it elsewhere; a remote that fails degrades to the local model.

use std::time::Instant;

use spark_engine::postprocess::{self, StopContext};
use spark_engine::{
    ChatFrame, Completion, CompletionRequest, CompletionStats, Engine, EngineError, RemoteClient, RemoteError,
    RemoteHealth, RemoteRequest, StopMode, StopReason, StreamRules,
};
use tokio_util::sync::CancellationToken;

use crate::config::Route;

/// A task prompt in the two forms a model may need: an instruction (system and user message) for
/// instruction-tuned models, framed by their own chat template locally or sent as chat messages to a remote with
/// `remote.chat`; and a few-shot completion prompt for base models (and remote completion endpoints).
#[derive(Debug, Clone, Default)]
pub struct TaskPrompt {
    pub system: String,
    pub instruction: String,
    pub few_shot: String,
    /// Where a few-shot answer ends (the next example starts).
    pub few_shot_stops: Vec<String>,
    /// The start of the answer given to a local instruction-tuned model (the opening of a code block, say), so
    /// that it answers with code at once; the answer is returned without it.
    pub chat_prefill: String,
    /// Where a chat answer that was given `chat_prefill` ends (e.g. the closing code fence).
    pub chat_stops: Vec<String>,
}

/// How the model that answered was prompted, so that the task reads the answer right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptStyle {
    /// A continuation of the few-shot prompt.
    FewShot,
    /// A chat answer that went on from `chat_prefill` (local instruction-tuned model).
    ChatPrefilled,
    /// A whole chat answer (remote chat endpoint): code may come in fences, with prose around it.
    Chat,
}

/// Which backend produced an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    Local,
    Remote,
}

/// A request's backends and route. `remote` is `None` when no endpoint is configured: everything is local.
pub struct Generator<'a> {
    pub engine: &'a Engine,
    pub remote: Option<&'a RemoteClient>,
    pub route: Route,
    /// The last remote failure met, for one notice to the user after the request.
    pub last_remote_error: std::sync::Mutex<Option<RemoteError>>,
}

/// An answer, where it came from, and the remote failure met on the way (for one notice to the user).
pub struct Generated {
    pub completion: Completion,
    pub served: Served,
    pub remote_error: Option<RemoteError>,
    /// How the answering model was prompted (tasks); `FewShot` for ghost text.
    pub style: PromptStyle,
}

impl Generator<'_> {
    pub fn new<'a>(engine: &'a Engine, remote: Option<&'a RemoteClient>, route: Route) -> Generator<'a> {
        Generator { engine, remote, route, last_remote_error: std::sync::Mutex::new(None) }
    }

    pub fn local(engine: &Engine) -> Generator<'_> {
        Generator::new(engine, None, Route::Local)
    }

    /// The remote failure met by the last requests, if any (taken: reported once).
    pub fn take_remote_error(&self) -> Option<RemoteError> {
        self.last_remote_error.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take()
    }

    /// Runs `request` along the route.
    pub async fn generate(&self, request: CompletionRequest) -> Result<Generated, EngineError> {
        self.generate_with(request, None).await
    }

    /// How the local model takes task prompts: through its chat template when it has one.
    pub fn local_chat(&self) -> Option<ChatFrame> {
        match self.engine.state() {
            spark_engine::EngineState::Ready(info) => info.chat.clone(),
            _ => None,
        }
    }

    /// Whether a task's answer will come in a chat form (the local model's chat template or a chat endpoint),
    /// where every backend the route may use answers that way: a task shapes its prompt by it (Spark fix asks a
    /// chat model for the whole function, a few-shot prompt for the broken statement), and a remote few-shot
    /// answer of one statement checked against a whole function reads as a deletion.
    pub fn answers_in_chat_form(&self) -> bool {
        let local = self.local_chat().is_some();
        match (self.route, self.remote) {
            (Route::Local, _) | (_, None) => local,
            (Route::Remote, Some(remote)) => remote.config().chat,
            (Route::RemoteThenLocal | Route::Race, Some(remote)) => local && remote.config().chat,
        }
    }

    /// Runs a task prompt along the route: each backend gets the form it understands (the local model's own
    /// chat template, chat messages for a chat endpoint, the few-shot prompt otherwise); `request` carries
    /// everything else (budget, deadline, sampling, cancel). The answer says which form it answers.
    pub async fn generate_task(
        &self,
        task: &TaskPrompt,
        mut request: CompletionRequest,
    ) -> Result<Generated, EngineError> {
        request.raw_prompt = true;
        match self.local_chat() {
            Some(frame) => {
                request.prefix =
                    format!("{}{}", frame.prompt_with_system(&task.system, &task.instruction), task.chat_prefill);
                request.stop_strings = task.chat_stops.clone();
            }
            None => {
                request.prefix = task.few_shot.clone();
                request.stop_strings = task.few_shot_stops.clone();
            }
        }
        self.generate_with(request, Some(task)).await
    }

    async fn generate_with(
        &self,
        request: CompletionRequest,
        task: Option<&TaskPrompt>,
    ) -> Result<Generated, EngineError> {
        let generated = self.generate_inner(request, task).await?;
        if let Some(error) = &generated.remote_error {
            tracing::warn!(%error, "remote endpoint failed");
            *self.last_remote_error.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(error.clone());
        }
        Ok(generated)
    }

    async fn generate_inner(
        &self,
        request: CompletionRequest,
        task: Option<&TaskPrompt>,
    ) -> Result<Generated, EngineError> {
        let remote = match (self.route, self.remote) {
            (Route::Local, _) | (_, None) => None,
            (_, Some(remote)) => Some(remote),
        };
        let Some(remote) = remote else { return self.run_local(request, None).await };
        // Ghost text answered before (or typed ahead along the shown suggestion) needs no round trip.
        if task.is_none() {
            if let Some(completion) = self.engine.cached(&request) {
                return Ok(self.local_answer(completion, None, false));
            }
        }
        let result = self.generate_routed(remote, request.clone(), task).await;
        if let Ok(generated) = &result {
            if generated.served == Served::Remote {
                self.engine.remember(&request, &generated.completion);
            }
        }
        result
    }

    async fn generate_routed(
        &self,
        remote: &RemoteClient,
        request: CompletionRequest,
        task: Option<&TaskPrompt>,
    ) -> Result<Generated, EngineError> {
        let remote_style = match task {
            None => PromptStyle::FewShot,
            Some(_) if remote.config().chat => PromptStyle::Chat,
            Some(_) => PromptStyle::FewShot,
        };
        let remote_answer =
            |completion| Generated { completion, served: Served::Remote, remote_error: None, style: remote_style };
        // A remote that is down is skipped until its retry time; it is probed again by itself after that.
        if let RemoteHealth::Down { last_error, .. } = remote.health() {
            if self.route == Route::Remote {
                return Ok(empty(Served::Remote, Some(RemoteError::Unreachable(last_error))));
            }
            return self.run_local(request, None).await;
        }
        match self.route {
            Route::Local => unreachable!("handled above"),
            Route::Remote => match remote_complete(remote, &request, task).await {
                Ok(completion) => Ok(remote_answer(completion)),
                Err(error) => Ok(empty(Served::Remote, Some(error))),
            },
            Route::RemoteThenLocal => match remote_complete(remote, &request, task).await {
                Ok(completion) if !completion.text.trim().is_empty() => Ok(remote_answer(completion)),
                Ok(_) => self.run_local(request, None).await,
                Err(RemoteError::Cancelled) => Ok(empty(Served::Remote, None)),
                Err(error) => self.run_local(request, Some(error)).await,
            },
            Route::Race => {
                let remote_cancel = request.cancel.child_token();
                let mut remote_request = request.clone();
                remote_request.cancel = remote_cancel.clone();
                let local_cancel = request.cancel.child_token();
                let mut local_request = request;
                local_request.cancel = local_cancel.clone();
                let remote_future = remote_complete(remote, &remote_request, task);
                let local_future = self.engine.complete(local_request);
                tokio::pin!(remote_future, local_future);
                tokio::select! {
                    remote_result = &mut remote_future => match remote_result {
                        Ok(completion) if !completion.text.trim().is_empty() => {
                            local_cancel.cancel();
                            Ok(remote_answer(completion))
                        }
                        other => {
                            let completion = local_future.await?;
                            Ok(self.local_answer(completion, other.err(), task.is_some()))
                        }
                    },
                    local_result = &mut local_future => match local_result {
                        Ok(completion) => {
                            remote_cancel.cancel();
                            Ok(self.local_answer(completion, None, task.is_some()))
                        }
                        // The local model is loading or failed: the remote is still in the race.
                        Err(local_error) => match remote_future.await {
                            Ok(completion) => Ok(remote_answer(completion)),
                            Err(RemoteError::Cancelled) => Err(local_error),
                            Err(error) => {
                                *self.last_remote_error.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) =
                                    Some(error);
                                Err(local_error)
                            }
                        },
                    }
                }
            }
        }
    }

    async fn run_local(
        &self,
        request: CompletionRequest,
        remote_error: Option<RemoteError>,
    ) -> Result<Generated, EngineError> {
        let task = request.raw_prompt;
        let completion = self.engine.complete(request).await?;
        Ok(self.local_answer(completion, remote_error, task))
    }

    /// A local answer; a task's was prompted through the chat template when the model has one (see
    /// `generate_task`).
    fn local_answer(&self, completion: Completion, remote_error: Option<RemoteError>, task: bool) -> Generated {
        let chat = task && self.local_chat().is_some();
        let style = if chat { PromptStyle::ChatPrefilled } else { PromptStyle::FewShot };
        Generated { completion, served: Served::Local, remote_error, style }
    }
}

fn empty(served: Served, remote_error: Option<RemoteError>) -> Generated {
    let completion = Completion { text: String::new(), stop: StopReason::Cancelled, stats: CompletionStats::default() };
    Generated { completion, served, remote_error, style: PromptStyle::FewShot }
}

/// The request on the remote endpoint: a task as chat messages (chat endpoints) or its few-shot prompt, never
/// framed by the local model's chat template; ghost text as the header and prefix (with the suffix where the
/// server does fill-in), cut and cleaned by the same stop rules as local answers.
async fn remote_complete(
    remote: &RemoteClient,
    request: &CompletionRequest,
    task: Option<&TaskPrompt>,
) -> Result<Completion, RemoteError> {
    let started = Instant::now();
    if request.grammar.is_some() {
        // No endpoint kind Spark speaks is known to take a GBNF grammar: the answer is checked as any other.
        tracing::debug!("the remote endpoint decodes without the request's grammar");
    }
    let mut system = None;
    let (prompt, suffix, stop) = if let Some(task) = task {
        if remote.config().chat {
            system = Some(task.system.clone());
            (task.instruction.clone(), None, Vec::new())
        } else {
            (task.few_shot.clone(), None, task.few_shot_stops.clone())
        }
    } else if request.raw_prompt {
        (request.prefix.clone(), None, request.stop_strings.clone())
    } else {
        let stop = match request.mode {
            StopMode::Line => vec!["\n".to_owned()],
            StopMode::Block | StopMode::Free => vec!["\n\n\n".to_owned()],
        };
        let suffix = remote.config().supports_suffix.then(|| request.suffix.clone());
        (format!("{}{}", request.header, request.prefix), suffix, stop)
    };
    let remote_request = RemoteRequest {
        prompt,
        suffix,
        system,
        stop,
        max_tokens: request.max_tokens,
        temperature: request.sampling.temperature,
        seed: Some(u64::from(request.sampling.seed)),
        deadline: request.deadline,
        rules: (!request.raw_prompt && request.mode != StopMode::Free).then(|| StreamRules {
            mode: request.mode,
            indent: request.indent.clone(),
            suffix: request.suffix.clone(),
            max_lines: request.max_lines,
        }),
    };
    let cancel: CancellationToken = request.cancel.clone();
    let answer = remote.complete(remote_request, cancel).await?;
    let text = if request.raw_prompt || request.mode == StopMode::Free {
        answer.text
    } else {
        let context = StopContext {
            mode: request.mode,
            indent: &request.indent,
            suffix: &request.suffix,
            max_lines: request.max_lines,
        };
        postprocess::finalize(&answer.text, &context).unwrap_or_default()
    };
    let stats = CompletionStats {
        total_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        ..CompletionStats::default()
    };
    Ok(Completion { text, stop: StopReason::StopRule, stats })
}
