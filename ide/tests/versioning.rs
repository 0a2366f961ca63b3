//! No data loss: a result computed for one document version is never applied to another. Property tests over
//! `spark_lsp`'s public API: random edit sequences on a `Document`, results "computed" at random points, and
//! the check every handler makes before it answers (`edit_check::check_version`).

use proptest::prelude::*;
use spark_ide::document::{Change, Document};
use spark_ide::position::{LspPosition, PositionEncoding};
use spark_ide::verify::check_version;

/// A result as a handler keeps it: the version (and revision) it was computed for, and the text it saw.
#[derive(Clone)]
struct Snapshot {
    version: i32,
    revision: u64,
    text: String,
}

fn snapshot(document: &Document) -> Snapshot {
    Snapshot { version: document.version, revision: document.revision, text: document.text() }
}

#[derive(Debug, Clone)]
enum Step {
    /// Insert or replace at (line, character), possibly out of range: clamped.
    Edit { line: u32, character: u32, len: u32, text: String },
    /// A result is computed now.
    Compute,
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u32..6, 0u32..12, 0u32..4, "[a-z😀\n]{0,3}").prop_map(|(line, character, len, text)| Step::Edit { line, character, len, text }),
        1 => Just(Step::Compute),
    ]
}

fn apply(document: &mut Document, step: &Step, version: i32) {
    if let Step::Edit { line, character, len, text } = step {
        let start = LspPosition { line: *line, character: *character };
        let end = LspPosition { line: *line, character: character + len };
        document.apply_changes(
            &[Change { range: Some((start, end)), text: text.clone() }],
            PositionEncoding::Utf16,
            version,
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// With versions that increase, as LSP requires: whenever the check lets a result through, the document
    /// is exactly the text it was computed for; a result for version N never reaches N+1.
    #[test]
    fn a_result_for_version_n_is_never_applied_to_another_text(
        steps in proptest::collection::vec(arb_step(), 1..40),
        increments in proptest::collection::vec(1i32..3, 40),
    ) {
        let mut document = Document::new("fn main() {\n    let x = 1;\n}\n", "rust", Some(spark_grammars::Lang::Rust), 1);
        let mut results: Vec<Snapshot> = Vec::new();
        for (step, increment) in steps.iter().zip(&increments) {
            match step {
                Step::Compute => results.push(snapshot(&document)),
                Step::Edit { .. } => {
                    let version = document.version + increment;
                    apply(&mut document, step, version);
                }
            }
            for result in &results {
                if check_version(result.version, document.version).is_ok() {
                    prop_assert_eq!(&result.text, &document.text(), "a stale result passed the version check");
                }
                prop_assert!(check_version(result.version, result.version + 1).is_err());
            }
        }
    }

    /// Whatever versions the client sends, the revision identifies the text: equal revisions, equal text.
    #[test]
    fn the_revision_identifies_the_text_even_when_versions_go_backwards(
        steps in proptest::collection::vec(arb_step(), 1..40),
        versions in proptest::collection::vec(-3i32..6, 40),
    ) {
        let mut document = Document::new("abc\ndef\n", "plaintext", None, 1);
        let mut results: Vec<Snapshot> = Vec::new();
        for (step, version) in steps.iter().zip(&versions) {
            match step {
                Step::Compute => results.push(snapshot(&document)),
                Step::Edit { .. } => apply(&mut document, step, *version),
            }
            for result in &results {
                if result.revision == document.revision {
                    prop_assert_eq!(&result.text, &document.text());
                }
            }
        }
    }
}

/// Versions going backwards (a client bug) can repeat a version with other text; the version check alone
/// then lets a stale result through.
#[test]
fn a_repeated_version_passes_the_version_check_today() {
    let mut document = Document::new("let a = 1;\n", "rust", Some(spark_grammars::Lang::Rust), 5);
    let computed = snapshot(&document);
    let at_start = LspPosition { line: 0, character: 0 };
    document.apply_changes(
        &[Change { range: Some((at_start, at_start)), text: "// x\n".into() }],
        PositionEncoding::Utf16,
        3,
    );
    document.apply_changes(
        &[Change { range: Some((at_start, at_start)), text: "// y\n".into() }],
        PositionEncoding::Utf16,
        5,
    );
    assert_ne!(computed.text, document.text());
    // The version alone cannot tell the texts apart when a client's versions go backwards: the suggestion path
    // (`Spark::suggest`) and `run_task` compare `Document::revision` too, which does.
    assert!(check_version(computed.version, document.version).is_ok());
    assert_ne!(computed.revision, document.revision, "the revision tells them apart");
}
