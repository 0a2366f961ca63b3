//! The workspace's ghost-text policy and task path in process, against the scripted engine (the real engine
//! around canned outputs): no LSP, no model file. Each test drives one branch of `Workspace::suggest` or
//! `Workspace::run_task`.

use std::sync::{Arc, Mutex};

use spark_engine::Engine;
use spark_ide::config::Settings;
use spark_ide::document::Change;
use spark_ide::position::{LspPosition, PositionEncoding};
use spark_ide::tasks::TaskKind;
use spark_ide::{Notice, TaskRequest, Workspace};
use tokio_util::sync::CancellationToken;

const URI: &str = "file:///p/src/lib.rs";
const TEXT: &str = "fn answer() -> u32 {\n    let x = \n    x\n}\n";

fn at(line: u32, character: u32) -> LspPosition {
    LspPosition { line, character }
}

/// A workspace over a scripted engine whose every request "generates" `output`; notices are collected.
fn workspace(output: &str) -> (Workspace, Arc<Mutex<Vec<Notice>>>) {
    let engine = Arc::new(Engine::start_scripted(vec![output.to_owned()]));
    let notices = Arc::new(Mutex::new(Vec::new()));
    let sink = notices.clone();
    let workspace = Workspace::new(engine, Settings::default(), PositionEncoding::Utf16, move |notice| {
        sink.lock().unwrap().push(notice)
    });
    (workspace, notices)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn a_suggestion_is_checked_and_placed_at_the_cursor() {
    runtime().block_on(async {
        let (workspace, notices) = workspace("42;");
        workspace.open(URI, None, "rust", TEXT, 1);
        let found = workspace.suggest(URI, at(1, 12), CancellationToken::new()).await.expect("a suggestion");
        assert_eq!(found.text, "42;");
        assert_eq!((found.position.line, found.position.character), (1, 12));
        assert_eq!(found.byte, TEXT.find("\n    x").unwrap());
        assert!(notices.lock().unwrap().is_empty());
        assert!(workspace.status().last_latency_ms.is_some());
    });
}

#[test]
fn a_suggestion_that_adds_a_syntax_error_is_not_shown() {
    runtime().block_on(async {
        // `)` closes nothing: inserted at the cursor it breaks the line.
        let (workspace, _) = workspace(") ) )");
        workspace.open(URI, None, "rust", TEXT, 1);
        assert!(workspace.suggest(URI, at(1, 12), CancellationToken::new()).await.is_none());
    });
}

#[test]
fn excluded_and_unknown_documents_get_nothing() {
    runtime().block_on(async {
        let (workspace, _) = workspace("42;");
        workspace.open("file:///p/.env", None, "rust", TEXT, 1);
        assert!(workspace.suggest("file:///p/.env", at(1, 12), CancellationToken::new()).await.is_none());
        assert!(workspace.suggest("file:///p/never-opened.rs", at(0, 0), CancellationToken::new()).await.is_none());
        let request = TaskRequest {
            uri: "file:///p/.env".into(),
            kind: TaskKind::Fix,
            start: at(1, 12),
            end: at(1, 12),
            version: None,
            message: None,
        };
        let error = workspace.run_task(&request, CancellationToken::new()).await.err().expect("refused");
        assert!(error.contains("excluded"), "{error}");
    });
}

#[test]
fn a_cancelled_request_answers_nothing() {
    runtime().block_on(async {
        let (workspace, _) = workspace("42;");
        workspace.open(URI, None, "rust", TEXT, 1);
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert!(workspace.suggest(URI, at(1, 12), cancel).await.is_none());
        // The next request is served as usual.
        assert!(workspace.suggest(URI, at(1, 12), CancellationToken::new()).await.is_some());
    });
}

#[test]
fn edits_move_the_cursor_and_positions_out_of_range_are_clamped() {
    runtime().block_on(async {
        let (workspace, _) = workspace("42;");
        workspace.open(URI, None, "rust", TEXT, 1);
        let shown = workspace.suggest(URI, at(1, 12), CancellationToken::new()).await;
        assert_eq!(shown.map(|found| found.text).as_deref(), Some("42;"));
        let typed = Change { range: Some((at(1, 12), at(1, 12))), text: "4".into() };
        assert!(workspace.edit(URI, &[typed], 2));
        assert_eq!(workspace.document(URI).unwrap().version, 2);
        // Typed along the shown suggestion "42;": the rest of it.
        let found = workspace.suggest(URI, at(1, 13), CancellationToken::new()).await;
        assert_eq!(found.map(|found| found.text).as_deref(), Some("2;"));
        // Line 99 does not exist: clamped to the end, answered or not, never a panic.
        let _ = workspace.suggest(URI, at(99, 99), CancellationToken::new()).await;
        assert!(!workspace.edit("file:///p/not-open.rs", &[], 1));
    });
}

#[test]
fn a_task_is_made_for_the_version_it_answers() {
    runtime().block_on(async {
        // No strong tier: an installed Qwen model would otherwise be asked when the scripted one has nothing.
        let engine = Arc::new(Engine::start_scripted(vec![String::new()]));
        let mut settings = Settings::default();
        settings.tasks.strong_model = "none".to_owned();
        let workspace = Workspace::new(engine, settings, PositionEncoding::Utf16, |_| {});
        // The parser reports the `;` as missing (before a `}`; before another statement it reports an ERROR).
        let broken = "pub fn f(a: u32) -> u32 {\n    let x = a + 1\n}\n";
        workspace.open(URI, None, "rust", broken, 3);
        let mut request = TaskRequest {
            uri: URI.into(),
            kind: TaskKind::Fix,
            start: at(1, 16),
            end: at(1, 16),
            version: Some(2),
            message: None,
        };
        let error = workspace.run_task(&request, CancellationToken::new()).await.err().expect("refused");
        assert!(error.contains("changed since"), "{error}");
        // At the right version the grammar's missing `;` repair verifies (the scripted model writes nothing).
        request.version = Some(3);
        let done = workspace.run_task(&request, CancellationToken::new()).await.expect("a verified fix");
        assert_eq!(done.snapshot.version, 3);
        let fixed = done.outcome.changes[0].new_text();
        assert!(fixed.contains("let x = a + 1;"), "{fixed}");
    });
}

/// Settings with the deadline at zero: every ghost-text request is cut before its prompt is evaluated.
fn cut_at_once(notify_ready: bool) -> Settings {
    let options = serde_json::json!({"inline": {"deadlineMs": 0, "prefetch": false, "notifyReady": notify_ready}});
    Settings::from_json(&options).unwrap()
}

#[test]
fn a_suggestion_the_deadline_cut_is_finished_and_announced_then_served_from_the_cache() {
    runtime().block_on(async {
        let (workspace, _) = workspace("42;");
        workspace.set_settings(cut_at_once(true));
        let (sender, mut ready) = tokio::sync::mpsc::unbounded_channel();
        workspace.on_suggestion_ready(move |event| {
            let _ = sender.send(event);
        });
        workspace.open(URI, None, "rust", TEXT, 1);
        assert!(workspace.suggest(URI, at(1, 12), CancellationToken::new()).await.is_none(), "cut at once");
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), ready.recv())
            .await
            .expect("announced")
            .expect("the hook is kept");
        assert_eq!((event.uri.as_str(), event.version, event.position), (URI, 1, at(1, 12)));
        let hits = workspace.engine().counters().cache_hits.load(std::sync::atomic::Ordering::Relaxed);
        let found = workspace.suggest(URI, at(1, 12), CancellationToken::new()).await.expect("from the cache");
        assert_eq!(found.text, "42;");
        assert_eq!(workspace.engine().counters().cache_hits.load(std::sync::atomic::Ordering::Relaxed), hits + 1);
    });
}

#[test]
fn a_finished_suggestion_is_not_announced_to_a_client_that_did_not_ask() {
    // (Not announced after an edit: tests/e2e/latency.rs, with the real model; the scripted one finishes before
    // any edit could arrive.)
    runtime().block_on(async {
        let (workspace, _) = workspace("42;");
        workspace.set_settings(cut_at_once(false));
        let (sender, mut ready) = tokio::sync::mpsc::unbounded_channel();
        workspace.on_suggestion_ready(move |event| {
            let _ = sender.send(event);
        });
        workspace.open(URI, None, "rust", TEXT, 1);
        assert!(workspace.suggest(URI, at(1, 12), CancellationToken::new()).await.is_none());
        let late = tokio::time::timeout(std::time::Duration::from_millis(500), ready.recv()).await;
        if let Ok(Some(event)) = late {
            panic!("announced {event:?} without notifyReady");
        }
        // Finished and cached all the same: asking again is served without the model.
        let found = workspace.suggest(URI, at(1, 12), CancellationToken::new()).await.expect("from the cache");
        assert_eq!(found.text, "42;");
    });
}

/// Waits until the engine has answered more than `after` background warm-ups; returns how many it has.
async fn warm_ups_after(engine: &Engine, after: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let warm_ups = engine
            .counters()
            .recent
            .lock()
            .unwrap()
            .iter()
            .filter(|call| call.background && call.stop == spark_engine::StopReason::WarmedUp)
            .count();
        if warm_ups > after {
            return warm_ups;
        }
        assert!(std::time::Instant::now() < deadline, "no warm-up ran after the first {after}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[test]
fn focus_warms_the_prompt_at_the_cursor_in_the_background() {
    runtime().block_on(async {
        let (workspace, _) = workspace("42;");
        let engine = workspace.engine().clone();
        workspace.open(URI, None, "rust", TEXT, 1);
        let opened = warm_ups_after(&engine, 0).await;
        workspace.focus(URI, at(1, 12));
        let focused = warm_ups_after(&engine, opened).await;
        // Focus on a document that is not open, or past its end: nothing breaks, the place is clamped.
        workspace.focus("file:///p/src/missing.rs", at(0, 0));
        workspace.focus(URI, at(99, 99));
        warm_ups_after(&engine, focused).await;
    });
}
