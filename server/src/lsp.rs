//! The LSP front: capabilities, document sync, conversion between LSP and the `spark-ide` core, progress while
//! the model loads, diagnostics, and Spark's own methods (`spark/status`, `spark/statusChanged`,
//! `spark/recentCalls`; see docs/lsp-extensions.md). The ghost-text policy, the tasks and their verification live
//! in [`spark_ide::Workspace`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use dashmap::DashMap;
use serde_json::{json, Value};
use spark_ide::config::Settings;
use spark_ide::document::Change;
use spark_ide::model::{self, Engine};
use spark_ide::position::PositionEncoding;
use spark_ide::workspace::{Notice, NoticeLevel, Workspace};
use tokio_util::sync::CancellationToken;
use tower_lsp_server::jsonrpc::Result;
use tower_lsp_server::ls_types::*;
use tower_lsp_server::{Client, LanguageServer, LspService};

use crate::actions::{self, from_lsp, to_lsp, ActionData};
use crate::next_edit::{self, NextEditParams};

pub struct Spark {
    client: Client,
    /// Set at `initialize`, with the settings and the position encoding agreed there.
    workspace: OnceLock<Arc<Workspace>>,
    client_has_progress: AtomicBool,
    resolve_supported: AtomicBool,
    /// The debounced syntax-diagnostics task of each document.
    diagnostics_tasks: DashMap<Uri, tokio::task::JoinHandle<()>>,
    /// The pending `spark/nextEditChanged` of each document, and whether the last one sent had edits (a client
    /// is told once that there are none).
    next_edit_tasks: DashMap<Uri, tokio::task::JoinHandle<()>>,
    next_edit_shown: Arc<DashMap<Uri, bool>>,
    /// The status watcher (aborted at shutdown).
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// `SPARK_TEST_PANIC`, read once at start: the LSP method whose handler panics on purpose (tests of the
    /// panic guard; nothing else reads it).
    test_panic: Option<String>,
}

/// The service with Spark's custom methods registered, every handler behind the panic guard.
pub fn service() -> (crate::guard::CatchPanic<LspService<Spark>>, tower_lsp_server::ClientSocket) {
    let (service, socket) = LspService::build(Spark::new)
        .custom_method("textDocument/inlineCompletion", Spark::inline_completion)
        .custom_method("spark/status", Spark::status)
        .custom_method("spark/recentCalls", Spark::recent_calls)
        .custom_method("spark/nextEdit", Spark::next_edit)
        .custom_method("spark/didFocus", Spark::did_focus)
        .finish();
    (crate::guard::CatchPanic(service), socket)
}

impl Spark {
    pub fn new(client: Client) -> Spark {
        Spark {
            client,
            workspace: OnceLock::new(),
            client_has_progress: AtomicBool::new(false),
            resolve_supported: AtomicBool::new(false),
            diagnostics_tasks: DashMap::new(),
            next_edit_tasks: DashMap::new(),
            next_edit_shown: Arc::new(DashMap::new()),
            tasks: Mutex::new(Vec::new()),
            test_panic: std::env::var("SPARK_TEST_PANIC").ok().filter(|method| !method.is_empty()),
        }
    }

    /// The test-only hook: panics in the handler of `method` when `SPARK_TEST_PANIC` named it at start.
    fn panic_if_asked(&self, method: &str) {
        if self.test_panic.as_deref() == Some(method) {
            panic!("SPARK_TEST_PANIC: a panic on purpose in {method}");
        }
    }

    fn workspace(&self) -> Option<&Arc<Workspace>> {
        self.workspace.get()
    }

    fn encoding(&self) -> PositionEncoding {
        self.workspace().map(|workspace| workspace.encoding()).unwrap_or_default()
    }

    /// `textDocument/inlineCompletion` (LSP 3.18): a predicted next edit under the cursor, else ghost text.
    pub async fn inline_completion(&self, params: InlineCompletionParams) -> Result<Option<InlineCompletionResponse>> {
        let TextDocumentPositionParams { text_document, position } = params.text_document_position;
        let predicted = self
            .workspace()
            .and_then(|workspace| workspace.next_edits_cached(text_document.uri.as_str(), Some(to_lsp(position))))
            .and_then(|found| next_edit::inline_item(&found, position));
        if let Some(item) = predicted {
            return Ok(Some(InlineCompletionResponse::List(InlineCompletionList { items: vec![item] })));
        }
        let items = match self.suggest(&text_document.uri, position).await {
            Some(found) => {
                let at = from_lsp(found.position);
                vec![InlineCompletionItem {
                    insert_text: found.text,
                    filter_text: None,
                    range: Some(Range::new(at, at)),
                    command: None,
                    insert_text_format: None,
                }]
            }
            None => Vec::new(),
        };
        Ok(Some(InlineCompletionResponse::List(InlineCompletionList { items })))
    }

    /// `spark/didFocus`: the user looks at this document with the cursor here; its prompt is warmed.
    pub async fn did_focus(&self, params: crate::ghost::FocusParams) {
        if let Some(workspace) = self.workspace() {
            workspace.focus(params.text_document.uri.as_str(), crate::ghost::focus_position(&params));
        }
    }

    /// `spark/status`: the model's state, the last latency and the engine's counters.
    pub async fn status(&self) -> Result<Value> {
        Ok(match self.workspace() {
            Some(workspace) => crate::status::status_json(&workspace.status()),
            None => {
                json!({"state": "starting", "message": "waiting for initialize", "model": null, "lastLatencyMs": null})
            }
        })
    }

    /// `spark/recentCalls`: the engine's most recent model calls with their counters and timings, oldest first
    /// (for benchmarks and for seeing where time goes).
    pub async fn recent_calls(&self) -> Result<Value> {
        Ok(self
            .workspace()
            .map_or_else(|| json!([]), |workspace| crate::status::recent_calls_json(&workspace.recent_calls())))
    }

    /// `spark/nextEdit`: the edits predicted from the user's recent edits of a document.
    pub async fn next_edit(&self, params: NextEditParams) -> Result<Value> {
        let uri = params.text_document.uri;
        let Some(workspace) = self.workspace().cloned() else {
            return Err(tower_lsp_server::jsonrpc::Error::invalid_request());
        };
        let position = params.position.map(to_lsp);
        let found = workspace.next_edits_with_model(uri.as_str(), position, CancellationToken::new()).await;
        match found {
            Some(found) => Ok(next_edit::to_json(&uri, &found)),
            None => Err(tower_lsp_server::jsonrpc::Error::invalid_params(format!("{} is not open", uri.as_str()))),
        }
    }

    /// Computes a document's next edits once the user paused (code actions and the inline item read them from
    /// the cache), and sends `spark/nextEditChanged` when the client asked for it and the answer is news (edits,
    /// or none after some were shown).
    fn schedule_next_edit(&self, uri: &Uri) {
        let Some(workspace) = self.workspace().cloned() else { return };
        let settings = workspace.settings().next_edit;
        if !settings.enabled {
            return;
        }
        let handle = next_edit::after_pause(self.client.clone(), workspace, uri.clone(), self.next_edit_shown.clone());
        if let Some(previous) = self.next_edit_tasks.insert(uri.clone(), handle) {
            previous.abort();
        }
    }

    async fn suggest(&self, uri: &Uri, position: Position) -> Option<spark_ide::Suggestion> {
        let workspace = self.workspace()?;
        workspace.suggest(uri.as_str(), to_lsp(position), CancellationToken::new()).await
    }

    fn spawn_status_watcher(&self, engine: Arc<Engine>) {
        let has_progress = self.client_has_progress.load(Ordering::Relaxed);
        let handle = crate::progress::watch_status(self.client.clone(), engine, has_progress);
        self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(handle);
    }

    /// Publishes Spark's syntax diagnostics for a document once it has been quiet for a moment.
    fn schedule_diagnostics(&self, uri: &Uri) {
        let Some(workspace) = self.workspace().cloned() else { return };
        let handle = actions::diagnostics_after_quiet(self.client.clone(), workspace, uri.clone());
        if let Some(previous) = self.diagnostics_tasks.insert(uri.clone(), handle) {
            previous.abort();
        }
    }
}

impl LanguageServer for Spark {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let settings = match params.initialization_options.as_ref().map(Settings::from_json) {
            None => Settings::default(),
            Some(Ok(settings)) => settings,
            Some(Err(message)) => {
                tracing::warn!(%message, "initializationOptions ignored");
                self.client.show_message(MessageType::WARNING, format!("Spark: {message}; using defaults")).await;
                Settings::default()
            }
        };
        let support = crate::capabilities::client_support(&params);
        let encoding = support.encoding;
        self.client_has_progress.store(support.has_progress, Ordering::Relaxed);
        self.resolve_supported.store(support.resolve_supported, Ordering::Relaxed);
        let client = self.client.clone();
        let notify = move |notice: Notice| {
            let client = client.clone();
            let kind = match notice.level {
                NoticeLevel::Error => MessageType::ERROR,
                NoticeLevel::Warning => MessageType::WARNING,
            };
            tokio::spawn(async move { client.show_message(kind, notice.message).await });
        };
        let workspace = model::workspace(settings, encoding, notify);
        let client = self.client.clone();
        workspace.on_suggestion_ready(move |ready| {
            let (client, params) = (client.clone(), crate::ghost::ready_params(&ready));
            if let Some(params) = params {
                tokio::spawn(async move {
                    client.send_notification::<crate::ghost::InlineCompletionReady>(params).await;
                });
            }
        });
        let _ = self.workspace.set(Arc::new(workspace));
        tracing::info!(encoding = encoding.as_lsp_str(), "initialized");

        Ok(crate::capabilities::initialize_result(encoding))
    }

    async fn initialized(&self, _: InitializedParams) {
        if let Some(workspace) = self.workspace() {
            self.spawn_status_watcher(workspace.engine().clone());
        }
    }

    async fn shutdown(&self) -> Result<()> {
        let tasks: Vec<_> = self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).drain(..).collect();
        for task in tasks {
            task.abort();
        }
        if let Some(workspace) = self.workspace().cloned() {
            let _ = tokio::task::spawn_blocking(move || workspace.shutdown()).await;
        }
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let item = params.text_document;
        let Some(workspace) = self.workspace() else { return };
        let path = item.uri.to_file_path().map(|path| path.into_owned());
        workspace.open(item.uri.as_str(), path, &item.language_id, &item.text, item.version);
        self.schedule_diagnostics(&item.uri);
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        let uri = params.text_document.uri;
        let Some(workspace) = self.workspace() else { return };
        let changes: Vec<Change> = params
            .content_changes
            .into_iter()
            .map(|change| Change {
                range: change.range.map(|range| (to_lsp(range.start), to_lsp(range.end))),
                text: change.text,
            })
            .collect();
        if workspace.edit(uri.as_str(), &changes, params.text_document.version) {
            self.schedule_diagnostics(&uri);
            self.schedule_next_edit(&uri);
        }
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        let uri = params.text_document.uri;
        if let Some((_, task)) = self.diagnostics_tasks.remove(&uri) {
            task.abort();
        }
        if let Some((_, task)) = self.next_edit_tasks.remove(&uri) {
            task.abort();
        }
        self.next_edit_shown.remove(&uri);
        if let Some(workspace) = self.workspace() {
            workspace.close(uri.as_str());
        }
        self.client.publish_diagnostics(uri, Vec::new(), None).await;
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        let settings = match Settings::from_json(&params.settings) {
            Ok(settings) => settings,
            Err(message) => {
                self.client.show_message(MessageType::WARNING, format!("Spark: {message}; settings unchanged")).await;
                return;
            }
        };
        if let Some(workspace) = self.workspace() {
            workspace.set_settings(settings);
        }
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        let TextDocumentPositionParams { text_document, position } = params.text_document_position;
        let Some(found) = self.suggest(&text_document.uri, position).await else {
            return Ok(Some(CompletionResponse::List(CompletionList { is_incomplete: true, items: Vec::new() })));
        };
        let first_line = found.text.lines().next().unwrap_or("").trim();
        let label: String = format!("{}{}", found.word, first_line).chars().take(80).collect();
        let (word_position, position) = (from_lsp(found.word_position), from_lsp(found.position));
        let new_text = format!("{}{}", found.word, found.text);
        let item = CompletionItem {
            label,
            kind: Some(CompletionItemKind::TEXT),
            detail: Some("Spark".into()),
            documentation: Some(Documentation::MarkupContent(MarkupContent {
                kind: MarkupKind::Markdown,
                value: format!("```\n{new_text}\n```"),
            })),
            preselect: Some(true),
            sort_text: Some("0".into()),
            filter_text: Some(new_text.clone()),
            insert_text_format: Some(InsertTextFormat::PLAIN_TEXT),
            text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(Range::new(word_position, position), new_text))),
            ..Default::default()
        };
        Ok(Some(CompletionResponse::List(CompletionList { is_incomplete: true, items: vec![item] })))
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        self.panic_if_asked("textDocument/codeAction");
        let encoding = self.encoding();
        let resolve = self.resolve_supported.load(Ordering::Relaxed);
        let Some(workspace) = self.workspace() else { return Ok(None) };
        // A file whose text must not reach a model gets no model actions.
        if workspace.is_excluded(params.text_document.uri.as_str()) {
            return Ok(None);
        }
        let Some(document) = workspace.document(params.text_document.uri.as_str()) else { return Ok(None) };
        // Diagnostics of other servers are fix targets too; Spark's own are found again from the tree.
        let diagnostics: Vec<Diagnostic> = params
            .context
            .diagnostics
            .into_iter()
            .filter(|diagnostic| diagnostic.source.as_deref() != Some("spark"))
            .collect();
        let mut listed =
            actions::list(&document, &params.text_document.uri, params.range, &diagnostics, encoding, resolve);
        // The cache only: listing actions never runs the rules or parses (the pause after an edit computed them).
        let uri = params.text_document.uri.as_str();
        if let Some(found) = workspace.next_edits_cached(uri, Some(to_lsp(params.range.start))) {
            listed.extend(next_edit::code_actions(&params.text_document.uri, &found, params.range));
        }
        Ok((!listed.is_empty()).then_some(listed))
    }

    async fn code_action_resolve(&self, mut action: CodeAction) -> Result<CodeAction> {
        self.panic_if_asked("codeAction/resolve");
        let Some(data) = action.data.clone().and_then(|data| serde_json::from_value::<ActionData>(data).ok()) else {
            return Ok(action);
        };
        match actions::run(self.workspace(), &data).await {
            Ok((edit, _, _)) => action.edit = Some(edit),
            Err(message) => self.client.show_message(MessageType::INFO, message).await,
        }
        Ok(action)
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<LSPAny>> {
        self.panic_if_asked("workspace/executeCommand");
        let argument = params.arguments.into_iter().next().unwrap_or(Value::Null);
        let data = match serde_json::from_value::<ActionData>(argument) {
            Ok(mut data) => {
                data.task = params.command.clone();
                data
            }
            Err(error) => {
                let message =
                    format!("{}: expected an argument {{uri, range, version?, message?}}: {error}", params.command);
                return Err(tower_lsp_server::jsonrpc::Error::invalid_params(message));
            }
        };
        match actions::run(self.workspace(), &data).await {
            Ok((edit, source, title)) => {
                let applied = self.client.apply_edit(edit).await;
                match applied {
                    Ok(response) if response.applied => {
                        Ok(Some(json!({"applied": true, "title": title, "source": source})))
                    }
                    Ok(response) => {
                        let reason = response.failure_reason.unwrap_or_else(|| "the editor refused the edit".into());
                        self.client.show_message(MessageType::WARNING, format!("Spark: {reason}")).await;
                        Ok(Some(json!({"applied": false, "reason": reason})))
                    }
                    Err(error) => Ok(Some(json!({"applied": false, "reason": error.to_string()}))),
                }
            }
            Err(message) => {
                self.client.show_message(MessageType::INFO, message.clone()).await;
                Ok(Some(json!({"applied": false, "reason": message})))
            }
        }
    }
}
