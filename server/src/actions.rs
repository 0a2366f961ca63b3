//! Code actions: the cheap listing (no model call), the data an action carries until it is resolved or run as a
//! command, Spark's own syntax diagnostics, and task outcomes as versioned `WorkspaceEdit`s.

use std::sync::Arc;

use ropey::Rope;
use serde::{Deserialize, Serialize};
use tower_lsp_server::ls_types::*;

use spark_ide::document::Document;
use spark_ide::offers;
use spark_ide::position::{self, LspPosition, PositionEncoding};
use spark_ide::tasks::{self, FileChange, TaskDocument, TaskKind, TaskOutcome};
use spark_ide::workspace::{TaskRequest, Workspace};
use tokio_util::sync::CancellationToken;

/// What a listed action needs to be computed later; travels as the action's `data` or the command's argument.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ActionData {
    /// The command (`spark.fix`, …); taken from the command's name when run as a command.
    #[serde(default)]
    pub task: String,
    pub uri: Uri,
    /// The document version the action was listed for; `None` from a command typed by hand.
    #[serde(default)]
    pub version: Option<i32>,
    /// Where: the diagnostic's range, or the cursor (`position` is accepted instead, from commands).
    #[serde(default)]
    pub range: Range,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    #[serde(default)]
    pub message: Option<String>,
}

impl ActionData {
    pub fn kind(&self) -> Option<TaskKind> {
        TaskKind::from_command(&self.task)
    }
}

pub const COMMANDS: [&str; 3] = ["spark.fix", "spark.generateTests", "spark.generateRegex"];

/// Lists Spark's actions for a range without calling the model.
pub fn list(
    document: &Document,
    uri: &Uri,
    range: Range,
    diagnostics: &[Diagnostic],
    encoding: PositionEncoding,
    resolve_supported: bool,
) -> Vec<CodeActionOrCommand> {
    let mut actions = Vec::new();
    let Some(lang) = document.lang else { return actions };
    let Some(tree) = document.tree.as_ref() else { return actions };
    let start = document.offset(to_lsp(range.start), encoding).byte;
    let end = document.offset(to_lsp(range.end), encoding).byte.max(start);
    // A fix is offered for the errors anywhere on the lines of the range: the cursor need not sit on them.
    let lines_start = document.rope.line_to_byte(document.rope.byte_to_line(start));
    let last_line = document.rope.byte_to_line(end);
    let lines_end = if last_line + 1 < document.rope.len_lines() {
        document.rope.line_to_byte(last_line + 1)
    } else {
        document.rope.len_bytes()
    };

    let mut fix_targets: Vec<(Range, String, Option<Diagnostic>)> = diagnostics
        .iter()
        .map(|diagnostic| (diagnostic.range, diagnostic.message.clone(), Some(diagnostic.clone())))
        .collect();
    for error in offers::syntax_errors(document, 64) {
        if error.node_start <= lines_end && error.node_end >= lines_start {
            let node_range = byte_range_to_lsp(&document.rope, error.start, error.end, encoding);
            if !fix_targets.iter().any(|(range, _, _)| *range == node_range) {
                fix_targets.push((node_range, error.message, None));
            }
        }
    }
    for (target_range, message, diagnostic) in fix_targets.into_iter().take(4) {
        let data = ActionData {
            task: TaskKind::Fix.command().into(),
            uri: uri.clone(),
            version: Some(document.version),
            range: target_range,
            position: None,
            message: Some(message.clone()),
        };
        let title = format!("Spark fix: {}", message.lines().next().unwrap_or("").chars().take(60).collect::<String>());
        actions.push(action(
            title,
            CodeActionKind::QUICKFIX,
            true,
            diagnostic.map(|d| vec![d]),
            data,
            resolve_supported,
        ));
    }

    let snapshot = TaskDocument {
        text: document.text(),
        lang,
        tree: tree.clone(),
        path: None,
        version: document.version,
        revision: document.revision,
        open_files: Vec::new(),
    };
    {
        if let Some(name) = offers::function_to_test(&snapshot, start) {
            let data = ActionData {
                task: TaskKind::Tests.command().into(),
                uri: uri.clone(),
                version: Some(document.version),
                range,
                position: None,
                message: None,
            };
            let title = format!("Spark: generate tests for `{name}`");
            actions.push(action(title, CodeActionKind::REFACTOR_REWRITE, false, None, data, resolve_supported));
        }
    }
    if tasks::regex_comment_at(&snapshot, start).is_some() {
        let data = ActionData {
            task: TaskKind::Regex.command().into(),
            uri: uri.clone(),
            version: Some(document.version),
            range,
            position: None,
            message: None,
        };
        actions.push(action(
            "Spark: generate regex".into(),
            CodeActionKind::REFACTOR_REWRITE,
            false,
            None,
            data,
            resolve_supported,
        ));
    }
    actions
}

fn action(
    title: String,
    kind: CodeActionKind,
    preferred: bool,
    diagnostics: Option<Vec<Diagnostic>>,
    data: ActionData,
    resolve_supported: bool,
) -> CodeActionOrCommand {
    let value = serde_json::to_value(&data).unwrap_or_default();
    // Without resolve support the action carries a command: the model still runs only when it is chosen.
    let (data, command) = if resolve_supported {
        (Some(value), None)
    } else {
        (None, Some(Command { title: title.clone(), command: data.task.clone(), arguments: Some(vec![value]) }))
    };
    CodeActionOrCommand::CodeAction(CodeAction {
        title,
        kind: Some(kind),
        diagnostics,
        edit: None,
        command,
        is_preferred: preferred.then_some(true),
        disabled: None,
        data,
    })
}

/// Spark's own diagnostics: one per ERROR or MISSING node (source `spark`).
pub fn syntax_diagnostics(document: &Document, encoding: PositionEncoding) -> Vec<Diagnostic> {
    offers::syntax_errors(document, 50)
        .into_iter()
        .map(|error| Diagnostic {
            range: byte_range_to_lsp(&document.rope, error.start, error.end, encoding),
            severity: Some(DiagnosticSeverity::ERROR),
            source: Some("spark".into()),
            message: error.message,
            ..Default::default()
        })
        .collect()
}

pub fn byte_range_to_lsp(rope: &Rope, start: usize, end: usize, encoding: PositionEncoding) -> Range {
    Range::new(
        from_lsp(position::to_position(rope, start, encoding)),
        from_lsp(position::to_position(rope, end, encoding)),
    )
}

/// A verified outcome as a `WorkspaceEdit`: the task's document at the version it was computed for; other files
/// (a TypeScript test file) created, or edited at the version the task read when the editor has them open (an
/// edit of an open file's unsaved text without its version would land at the wrong offsets if it changed).
pub fn workspace_edit(
    uri: &Uri,
    snapshot: &TaskDocument,
    encoding: PositionEncoding,
    outcome: &TaskOutcome,
) -> WorkspaceEdit {
    let mut operations = Vec::new();
    for change in &outcome.changes {
        let (target_uri, target_version) = match &change.path {
            None => (uri.clone(), Some(snapshot.version)),
            Some(path) => match Uri::from_file_path(path) {
                Some(uri) => (uri, snapshot.open_file(path).map(|file| file.version)),
                None => continue,
            },
        };
        if change.create {
            operations.push(DocumentChangeOperation::Op(ResourceOp::Create(CreateFile {
                uri: target_uri.clone(),
                options: Some(CreateFileOptions { overwrite: Some(false), ignore_if_exists: Some(true) }),
                annotation_id: None,
            })));
        }
        operations.push(DocumentChangeOperation::Edit(TextDocumentEdit {
            text_document: OptionalVersionedTextDocumentIdentifier { uri: target_uri, version: target_version },
            edits: vec![OneOf::Left(text_edit(change, encoding))],
        }));
    }
    WorkspaceEdit {
        changes: None,
        document_changes: Some(DocumentChanges::Operations(operations)),
        change_annotations: None,
    }
}

fn text_edit(change: &FileChange, encoding: PositionEncoding) -> TextEdit {
    let rope = Rope::from_str(&change.old_text);
    TextEdit {
        range: byte_range_to_lsp(&rope, change.replace.start, change.replace.end, encoding),
        new_text: change.insert.clone(),
    }
}

pub fn to_lsp(position: Position) -> LspPosition {
    LspPosition { line: position.line, character: position.character }
}

pub fn from_lsp(position: LspPosition) -> Position {
    Position::new(position.line, position.character)
}

/// Runs a task for an action or command, to a verified edit or a message saying why there is none.
/// The edit comes with its title and where it came from ("fast tier", "compiler", …).
pub async fn run(
    workspace: Option<&Arc<Workspace>>,
    data: &ActionData,
) -> std::result::Result<(WorkspaceEdit, String, String), String> {
    let kind = data.kind().ok_or_else(|| format!("unknown Spark command {:?}", data.task))?;
    let workspace = workspace.ok_or("Spark is not initialized")?;
    let range = data.position.map(|position| Range::new(position, position)).unwrap_or(data.range);
    let request = TaskRequest {
        uri: data.uri.as_str().to_owned(),
        kind,
        start: to_lsp(range.start),
        end: to_lsp(range.end),
        version: data.version,
        message: data.message.clone(),
    };
    let done = workspace.run_task(&request, CancellationToken::new()).await?;
    Ok((
        workspace_edit(&data.uri, &done.snapshot, workspace.encoding(), &done.outcome),
        done.outcome.source(),
        done.outcome.title,
    ))
}

/// Publishes Spark's syntax diagnostics for a document once it has been quiet for a moment (the caller owns
/// the handle: a change aborts it).
pub fn diagnostics_after_quiet(
    client: tower_lsp_server::Client,
    workspace: Arc<Workspace>,
    uri: Uri,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        let computed = workspace
            .document(uri.as_str())
            .map(|document| (syntax_diagnostics(&document, workspace.encoding()), document.version));
        if let Some((diagnostics, version)) = computed {
            client.publish_diagnostics(uri, diagnostics, Some(version)).await;
        }
    })
}

/// The titles of code actions (the tests of this module's and `next_edit`'s listings).
#[cfg(test)]
pub(crate) fn titles_of(actions: Vec<CodeActionOrCommand>) -> Vec<String> {
    actions
        .into_iter()
        .map(|action| match action {
            CodeActionOrCommand::CodeAction(action) => action.title,
            CodeActionOrCommand::Command(command) => command.title,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use spark_ide::Lang;

    fn uri() -> Uri {
        "file:///p/src/lib.rs".parse().unwrap()
    }

    fn titles(text: &str, at: Position) -> Vec<String> {
        let document = Document::new(text, "rust", Some(Lang::Rust), 3);
        titles_of(list(&document, &uri(), Range::new(at, at), &[], PositionEncoding::Utf16, true))
    }

    #[test]
    fn listing_is_cheap_and_fits_the_cursor() {
        let text = "pub fn add(a: i32, b: i32) -> i32 {\n    let x = 1 +;\n    a + b\n}\n// regex: a year, matches 2024, not 24\n";
        assert_eq!(
            titles(text, Position::new(1, 14)),
            vec![
                "Spark fix: syntax error: missing identifier".to_owned(),
                "Spark: generate tests for `add`".to_owned()
            ]
        );
        assert_eq!(titles(text, Position::new(4, 5)), vec!["Spark: generate regex".to_owned()]);
    }

    #[test]
    fn without_resolve_support_actions_carry_commands() {
        let text = "fn f() {\n    let x = 1 +;\n}\n";
        let document = Document::new(text, "rust", Some(Lang::Rust), 3);
        let at = Position::new(1, 14);
        let actions = list(&document, &uri(), Range::new(at, at), &[], PositionEncoding::Utf16, false);
        let CodeActionOrCommand::CodeAction(action) = &actions[0] else { panic!("an action") };
        let command = action.command.as_ref().unwrap();
        assert_eq!(command.command, "spark.fix");
        let data: ActionData = serde_json::from_value(command.arguments.as_ref().unwrap()[0].clone()).unwrap();
        assert_eq!(data.version, Some(3));
        assert!(action.data.is_none());
    }

    #[test]
    fn diagnostics_for_error_and_missing_nodes() {
        let document = Document::new("fn f() {\n    let x = 1\n}\n", "rust", Some(Lang::Rust), 1);
        let diagnostics = syntax_diagnostics(&document, PositionEncoding::Utf16);
        assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
        assert_eq!(diagnostics[0].source.as_deref(), Some("spark"));
        assert!(diagnostics[0].message.contains("missing `;`"), "{}", diagnostics[0].message);
    }
}
