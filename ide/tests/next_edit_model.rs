//! The model's next edits in process, against the scripted engine: the model's rewrite of the lines after the
//! user's edit is read back, the changed line that carries the user's change on is offered, the unrelated one is
//! not, and without `nextEdit.model` the model is never asked.

use std::sync::Arc;

use spark_engine::Engine;
use spark_ide::config::Settings;
use spark_ide::document::Change;
use spark_ide::position::{LspPosition, PositionEncoding};
use spark_ide::Workspace;
use tokio_util::sync::CancellationToken;

const URI: &str = "file:///p/src/area.rs";
const TEXT: &str = "fn area(w: u32) -> u32 {\n    let a: u32 = w * 2;\n    let b = 7;\n    a + b\n}\n";
/// What the scripted model "writes" for the window: the parameter's new type carried to `a`, and `b` changed
/// for no reason.
const REWRITE: &str = "fn area(w: u64) -> u32 {\n    let a: u64 = w * 2;\n    let b = 8;\n    a + b\n}";

fn at(line: u32, character: u32) -> LspPosition {
    LspPosition { line, character }
}

fn workspace(model: bool) -> (Workspace, Arc<Engine>) {
    let engine = Arc::new(Engine::start_scripted(vec![REWRITE.to_owned()]));
    let mut settings = Settings::default();
    settings.next_edit.model = model;
    // No ghost text: opening the document would warm its prompt in the background, a request of its own that
    // races the counts below (and would take the scripted answer).
    settings.inline.enabled = false;
    (Workspace::new(engine.clone(), settings, PositionEncoding::Utf16, |_| {}), engine)
}

/// The user changes the parameter's type: `u32` → `u64` (line 1, columns 11..14).
fn edit(workspace: &Workspace) {
    workspace.open(URI, None, "rust", TEXT, 1);
    let change = Change { range: Some((at(0, 11), at(0, 14))), text: "u64".into() };
    assert!(workspace.edit(URI, &[change], 2));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn the_models_line_that_carries_the_edit_is_offered_and_the_unrelated_one_is_not() {
    runtime().block_on(async {
        let (workspace, _) = workspace(true);
        edit(&workspace);
        // No rule applies to a changed primitive type: the rules alone predict nothing.
        assert!(workspace.next_edits(URI, None).unwrap().edits.is_empty());
        let found = workspace.next_edits_with_model(URI, None, CancellationToken::new()).await.unwrap();
        assert_eq!(found.version, 2);
        assert_eq!(found.edits.len(), 1, "{found:?}");
        let edit = &found.edits[0];
        assert_eq!((edit.start, edit.end, edit.new_text.as_str(), edit.source), (at(1, 11), at(1, 14), "u64", "model"));
        // Computed once per revision: the code-action path reads the model's answer without asking again.
        assert_eq!(workspace.next_edits(URI, None).unwrap().edits, found.edits);
    });
}

#[test]
fn without_the_setting_the_model_is_not_asked() {
    runtime().block_on(async {
        let (workspace, engine) = workspace(false);
        edit(&workspace);
        let requests_before = engine.counters().requests.load(std::sync::atomic::Ordering::Relaxed);
        let found = workspace.next_edits_with_model(URI, None, CancellationToken::new()).await.unwrap();
        assert!(found.edits.is_empty());
        let requests_after = engine.counters().requests.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(requests_after, requests_before);
    });
}
