//! Next-edit suggestions over LSP: the `spark/nextEdit` request's answer, the `spark/nextEditChanged`
//! notification's params, the "Spark next edit" code actions and the ranged inline completion item. The
//! predictions themselves come from [`spark_ide::Workspace::next_edits`].

use std::sync::Arc;

use dashmap::DashMap;
use serde_json::{json, Value};
use spark_ide::next_edit::{NextEdit, NextEdits};
use spark_ide::position::LspPosition;
use spark_ide::workspace::Workspace;
use tokio_util::sync::CancellationToken;
use tower_lsp_server::ls_types::notification::Notification;
use tower_lsp_server::ls_types::*;
use tower_lsp_server::Client;

use crate::actions::from_lsp;

/// `spark/nextEditChanged`: the predicted edits of a document after the user paused.
pub enum NextEditChanged {}

impl Notification for NextEditChanged {
    type Params = Value;
    const METHOD: &'static str = "spark/nextEditChanged";
}

/// The params of `spark/nextEdit`.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NextEditParams {
    pub text_document: TextDocumentIdentifier,
    #[serde(default)]
    pub position: Option<Position>,
}

fn range(edit: &NextEdit) -> Range {
    Range::new(from_lsp(edit.start), from_lsp(edit.end))
}

/// The answer of `spark/nextEdit` and the params of `spark/nextEditChanged`.
pub fn to_json(uri: &Uri, found: &NextEdits) -> Value {
    let edits: Vec<Value> = found
        .edits
        .iter()
        .map(|edit| json!({"range": range(edit), "newText": edit.new_text, "label": edit.label, "source": edit.source}))
        .collect();
    json!({"uri": uri, "version": found.version, "edits": edits})
}

/// Whether two ranges share a position (touching counts: a cursor at either end of a name is on it).
fn touches(a: (LspPosition, LspPosition), b: (LspPosition, LspPosition)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

fn versioned_edit(uri: &Uri, version: i32, edits: &[&NextEdit]) -> WorkspaceEdit {
    WorkspaceEdit {
        changes: None,
        document_changes: Some(DocumentChanges::Edits(vec![TextDocumentEdit {
            text_document: OptionalVersionedTextDocumentIdentifier { uri: uri.clone(), version: Some(version) },
            edits: edits.iter().map(|edit| OneOf::Left(TextEdit::new(range(edit), edit.new_text.clone()))).collect(),
        }])),
        change_annotations: None,
    }
}

fn code_action(title: String, uri: &Uri, version: i32, edits: &[&NextEdit]) -> CodeActionOrCommand {
    CodeActionOrCommand::CodeAction(CodeAction {
        title,
        kind: Some(CodeActionKind::REFACTOR_REWRITE),
        edit: Some(versioned_edit(uri, version, edits)),
        ..Default::default()
    })
}

/// "Spark next edit" actions for `range`: each predicted edit the range touches (at the user's last edit, the
/// one predicted when there is one), and all of them at once where the range touches the user's last edit or any
/// predicted one. The edits are included: no model call is left.
pub fn code_actions(uri: &Uri, found: &NextEdits, range: Range) -> Vec<CodeActionOrCommand> {
    let asked = (crate::actions::to_lsp(range.start), crate::actions::to_lsp(range.end));
    let mut actions = Vec::new();
    let at_last_edit = found.last_edit.is_some_and(|last| touches(last, asked));
    let at_predicted = found.edits.iter().any(|edit| touches((edit.start, edit.end), asked));
    if (at_last_edit || at_predicted) && found.edits.len() > 1 && found.all_together {
        let all: Vec<&NextEdit> = found.edits.iter().collect();
        let title = format!("Spark next edit: apply all {} ({})", all.len(), found.edits[0].label);
        actions.push(code_action(title, uri, found.version, &all));
    }
    for edit in &found.edits {
        if touches((edit.start, edit.end), asked) || (at_last_edit && found.edits.len() == 1) {
            let title = format!("Spark next edit: {} (line {})", edit.label, edit.start.line + 1);
            actions.push(code_action(title, uri, found.version, &[edit]));
        }
    }
    actions
}

/// A predicted edit on the cursor's line that holds the cursor, as an inline completion item replacing its range.
pub fn inline_item(found: &NextEdits, position: Position) -> Option<InlineCompletionItem> {
    let at = crate::actions::to_lsp(position);
    let edit = found.edits.iter().find(|edit| edit.start.line == at.line && edit.start <= at && at <= edit.end)?;
    Some(InlineCompletionItem {
        insert_text: edit.new_text.clone(),
        filter_text: None,
        range: Some(range(edit)),
        command: None,
        insert_text_format: None,
    })
}

/// Computes a document's next edits after `nextEdit.pauseMs` (code actions and the inline item read them from the
/// cache), and sends `spark/nextEditChanged` when the client asked for it and the answer is news (edits, or none
/// after some were shown). The caller owns the handle: a change aborts it.
pub fn after_pause(
    client: Client,
    workspace: Arc<Workspace>,
    uri: Uri,
    shown: Arc<DashMap<Uri, bool>>,
) -> tokio::task::JoinHandle<()> {
    let settings = workspace.settings().next_edit;
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(settings.pause_ms)).await;
        let cancel = CancellationToken::new();
        let _cancel_on_abort = cancel.clone().drop_guard();
        let Some(found) = workspace.next_edits_with_model(uri.as_str(), None, cancel).await else {
            return;
        };
        if !settings.notify {
            return;
        }
        let has_edits = !found.edits.is_empty();
        let had_edits = shown.insert(uri.clone(), has_edits).unwrap_or(false);
        if has_edits || had_edits {
            client.send_notification::<NextEditChanged>(to_json(&uri, &found)).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(line: u32, from: u32, to: u32) -> NextEdit {
        NextEdit {
            start: LspPosition { line, character: from },
            end: LspPosition { line, character: to },
            new_text: "total".into(),
            label: "`count` → `total`".into(),
            source: "rename",
        }
    }

    fn found() -> NextEdits {
        NextEdits {
            version: 4,
            revision: 9,
            edits: vec![edit(2, 4, 9), edit(3, 8, 13)],
            all_together: true,
            last_edit: Some((LspPosition { line: 1, character: 8 }, LspPosition { line: 1, character: 13 })),
        }
    }

    fn titles(at: Position) -> Vec<String> {
        let uri: Uri = "file:///p/a.rs".parse().unwrap();
        crate::actions::titles_of(code_actions(&uri, &found(), Range::new(at, at)))
    }

    #[test]
    fn actions_at_the_last_edit_and_at_each_predicted_place() {
        assert_eq!(titles(Position::new(1, 13)), ["Spark next edit: apply all 2 (`count` → `total`)"]);
        assert_eq!(
            titles(Position::new(3, 8)),
            ["Spark next edit: apply all 2 (`count` → `total`)", "Spark next edit: `count` → `total` (line 4)"]
        );
        assert!(titles(Position::new(5, 0)).is_empty());
    }

    #[test]
    fn the_edit_is_versioned_and_the_json_names_the_version() {
        let uri: Uri = "file:///p/a.rs".parse().unwrap();
        let actions = code_actions(&uri, &found(), Range::new(Position::new(2, 5), Position::new(2, 5)));
        let CodeActionOrCommand::CodeAction(action) = &actions[1] else { panic!("an action") };
        assert!(action.title.contains("(line 3)"), "{}", action.title);
        let value = serde_json::to_value(action.edit.as_ref().unwrap()).unwrap();
        assert_eq!(value["documentChanges"][0]["textDocument"]["version"], 4);
        assert_eq!(value["documentChanges"][0]["edits"][0]["newText"], "total");
        let json = to_json(&uri, &found());
        assert_eq!(json["version"], 4);
        assert_eq!(json["edits"][1]["range"]["start"], json!({"line": 3, "character": 8}));
        assert_eq!(json["edits"][0]["source"], "rename");
    }

    #[test]
    fn the_inline_item_replaces_the_edit_under_the_cursor() {
        let item = inline_item(&found(), Position::new(3, 10)).unwrap();
        assert_eq!(item.range, Some(Range::new(Position::new(3, 8), Position::new(3, 13))));
        assert!(inline_item(&found(), Position::new(3, 20)).is_none());
    }
}
