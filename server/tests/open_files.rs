//! A task that edits another file (TypeScript tests go to the sibling `<name>.test.ts`) reads it from the editor
//! when it is open there, and its edit names that version: an unsaved buffer must not get an edit computed
//! against the file on disk.

use std::time::Duration;

use spark_ide::model::Engine;
use spark_ide::position::PositionEncoding;
use spark_ide::route::Generator;
use spark_ide::tasks::{self, OpenFile, TaskBudget, TaskDocument, TaskKind, TaskTarget};
use spark_ide::Lang;
use spark_lsp::actions;
use tokio_util::sync::CancellationToken;
use tower_lsp_server::ls_types::{DocumentChangeOperation, DocumentChanges, Uri};

const SOURCE: &str = "export function add(a: number, b: number): number {\n  return a + b;\n}\n";
const ON_DISK: &str = "import { test } from \"node:test\";\n";
const UNSAVED: &str =
    "import { test } from \"node:test\";\nimport assert from \"node:assert/strict\";\n\n// typed, not saved\n";

#[test]
fn ts_tests_edit_the_open_test_file_at_its_version_not_the_copy_on_disk() {
    let dir = std::env::temp_dir().join(format!("spark-open-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source_path = dir.join("math.ts");
    let test_path = dir.join("math.test.ts");
    std::fs::write(&source_path, SOURCE).unwrap();
    std::fs::write(&test_path, ON_DISK).unwrap();
    let document = TaskDocument {
        text: SOURCE.to_owned(),
        lang: Lang::TypeScript,
        tree: Lang::TypeScript.parser().parse(SOURCE, None).unwrap(),
        path: Some(source_path.clone()),
        version: 3,
        revision: 0,
        open_files: vec![OpenFile { path: test_path.clone(), text: UNSAVED.to_owned(), version: 9 }],
    };
    let engine = Engine::start_scripted(vec!["  assert.equal(add(1, 2), 3);".to_owned()]);
    let at = SOURCE.find("return").unwrap();
    let target = TaskTarget { range: at..at, message: None };
    let budget = TaskBudget { samples: 1, time: Duration::from_secs(20), ..TaskBudget::default() };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let generator = Generator::local(&engine);
    let outcome = runtime
        .block_on(tasks::run(
            &generator,
            tasks::TaskInput { kind: TaskKind::Tests, document: &document, target: &target },
            budget,
            &CancellationToken::new(),
        ))
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(outcome.verified(), "{outcome:?}");
    let change = &outcome.changes[0];
    assert_eq!(change.path.as_deref(), Some(test_path.as_path()));
    assert_eq!(change.old_text, UNSAVED, "the edit is computed against the open buffer");
    assert!(!change.create);
    assert_eq!(change.replace, UNSAVED.len()..UNSAVED.len());

    let uri: Uri = Uri::from_file_path(&source_path).unwrap();
    let edit = actions::workspace_edit(&uri, &document, PositionEncoding::Utf16, &outcome);
    let Some(DocumentChanges::Operations(operations)) = edit.document_changes else { panic!("operations") };
    let [DocumentChangeOperation::Edit(test_edit)] = operations.as_slice() else { panic!("{operations:?}") };
    assert_eq!(test_edit.text_document.uri, Uri::from_file_path(&test_path).unwrap());
    assert_eq!(test_edit.text_document.version, Some(9), "the edit names the open buffer's version");
}
