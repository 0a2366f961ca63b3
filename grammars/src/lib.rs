//! Tree-sitter grammars and queries for the languages Spark edits, plus small helpers over syntax trees.
//!
//! The queries are data (`grammars/<lang>/*.scm`) compiled once per language. Every query is compiled by the
//! tests against every grammar that uses it, so the `expect` in [`Lang::queries`] cannot fire in a release.
//!
//! Broken code is input, not failure: the helpers work on trees with ERROR and MISSING nodes.

use std::path::Path;
use std::sync::OnceLock;

pub mod brackets;

pub use tree_sitter;

use tree_sitter::{Language, Node, Parser, Query, QueryCursor, StreamingIterator};

/// A language Spark can parse. JavaScript is parsed with the TypeScript grammars, JSX with TSX.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lang {
    Rust,
    TypeScript,
    Tsx,
}

impl Lang {
    /// All languages, for tests and tables.
    pub const ALL: [Lang; 3] = [Lang::Rust, Lang::TypeScript, Lang::Tsx];

    /// Maps an LSP `languageId` to a language: "rust" to Rust; "typescript" and "javascript" to TypeScript;
    /// "typescriptreact", "javascriptreact", "tsx" and "jsx" to Tsx. Other ids give `None`.
    pub fn from_language_id(language_id: &str) -> Option<Lang> {
        match language_id {
            "rust" => Some(Lang::Rust),
            "typescript" | "javascript" => Some(Lang::TypeScript),
            "typescriptreact" | "javascriptreact" | "tsx" | "jsx" => Some(Lang::Tsx),
            _ => None,
        }
    }

    /// Maps a file extension to a language: `rs`; `ts`, `mts`, `cts`, `js`, `mjs`, `cjs` to TypeScript;
    /// `tsx`, `jsx` to Tsx. Other extensions, and paths without one, give `None`.
    pub fn from_path(path: &Path) -> Option<Lang> {
        match path.extension()?.to_str()? {
            "rs" => Some(Lang::Rust),
            "ts" | "mts" | "cts" | "js" | "mjs" | "cjs" => Some(Lang::TypeScript),
            "tsx" | "jsx" => Some(Lang::Tsx),
            _ => None,
        }
    }

    /// Short lowercase name: "rust", "typescript" or "tsx".
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::TypeScript => "typescript",
            Lang::Tsx => "tsx",
        }
    }

    /// The tree-sitter grammar.
    pub fn language(self) -> Language {
        match self {
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
        }
    }

    /// A fresh parser with this language set. Parsers are cheap but not `Sync`; keep one per thread.
    pub fn parser(self) -> Parser {
        let mut parser = Parser::new();
        parser.set_language(&self.language()).expect("grammar ABI version is supported by the tree-sitter crate");
        parser
    }

    /// The compiled queries, built on first use and shared afterwards.
    pub fn queries(self) -> &'static Queries {
        static RUST: OnceLock<Queries> = OnceLock::new();
        static TYPESCRIPT: OnceLock<Queries> = OnceLock::new();
        static TSX: OnceLock<Queries> = OnceLock::new();
        let cell = match self {
            Lang::Rust => &RUST,
            Lang::TypeScript => &TYPESCRIPT,
            Lang::Tsx => &TSX,
        };
        cell.get_or_init(|| {
            Queries::compile(self).unwrap_or_else(|err| {
                panic!("query {err} does not compile for {}; the grammars tests catch this", self.name())
            })
        })
    }

    /// The line comment token, used to write comments into generated code.
    pub fn line_comment(self) -> &'static str {
        match self {
            Lang::Rust | Lang::TypeScript | Lang::Tsx => "//",
        }
    }

    /// The query sources, by query name, in the order of the fields of [`Queries`].
    pub(crate) fn query_sources(self) -> [(&'static str, &'static str); 6] {
        macro_rules! sources {
            ($dir:literal) => {
                [
                    ("items", include_str!(concat!("../", $dir, "/items.scm"))),
                    ("functions", include_str!(concat!("../", $dir, "/functions.scm"))),
                    ("tests", include_str!(concat!("../", $dir, "/tests.scm"))),
                    ("comments", include_str!(concat!("../", $dir, "/comments.scm"))),
                    ("imports", include_str!(concat!("../", $dir, "/imports.scm"))),
                    ("blocks", include_str!(concat!("../", $dir, "/blocks.scm"))),
                ]
            };
        }
        match self {
            Lang::Rust => sources!("rust"),
            // TSX is a superset of TypeScript for everything these queries look at.
            Lang::TypeScript | Lang::Tsx => sources!("typescript"),
        }
    }
}

/// The compiled queries of one language. Capture names starting with `_` are internal to predicates.
pub struct Queries {
    /// `@item`: nodes a rewrite may replace (statements, fields, functions, methods, impls, structs, enums,
    /// traits, modules, classes, interfaces, type aliases, imports). The smallest enclosing one is the unit
    /// of a "fix".
    pub items: Query,
    /// `@function`: a whole function, method, or function assigned to a const/let/var (then the whole
    /// declaration); `@name`: its name.
    pub functions: Query,
    /// `@test_module`: a Rust `#[cfg(test)]` module or a TS `describe(...)` call; `@test`: a Rust `#[test]`
    /// (or `#[tokio::test]`, ...) function or a TS `it(...)` / `test(...)` call.
    pub tests: Query,
    /// `@comment`: line, block and doc comments.
    pub comments: Query,
    /// `@import`: Rust `use` and `extern crate`; TS `import` statements and `const x = require(...)`.
    pub imports: Query,
    /// `@block`: brace-delimited bodies, used to tell that the cursor sits right after a block opener.
    pub blocks: Query,
}

impl Queries {
    /// Compiles all queries of `lang`. The error names the query that failed and why.
    pub(crate) fn compile(lang: Lang) -> Result<Queries, String> {
        let language = lang.language();
        let [items, functions, tests, comments, imports, blocks] = lang
            .query_sources()
            .map(|(name, source)| Query::new(&language, source).map_err(|err| format!("{name}.scm: {err}")));
        Ok(Queries {
            items: items?,
            functions: functions?,
            tests: tests?,
            comments: comments?,
            imports: imports?,
            blocks: blocks?,
        })
    }
}

/// The smallest node captured as `capture` by `query` whose byte range contains `start_byte..end_byte`.
/// An unknown capture name gives `None`. Among nodes with the same range, the innermost wins.
pub fn smallest_capture<'t>(
    query: &Query,
    capture: &str,
    root: Node<'t>,
    source: &[u8],
    start_byte: usize,
    end_byte: usize,
) -> Option<Node<'t>> {
    // No byte range: a pattern may start at a node outside the range (the `#[test]` attribute before a test
    // function), and a restricted cursor would drop that match.
    smallest_capture_in(query, capture, root, source, start_byte, end_byte, false)
}

/// [`smallest_capture`] for queries whose every pattern is one captured node (blocks, items): only the part of the
/// tree around `start_byte..end_byte` is searched, and the text of a predicate's node is read through `text` (a
/// rope's chunks, say), so the work grows with the nodes around the range, not with the file. A pattern that
/// starts at a node before the range (the `#[test]` attribute of a test function) needs [`smallest_capture`].
pub fn smallest_capture_near<'t, I: AsRef<[u8]>>(
    query: &Query,
    capture: &str,
    root: Node<'t>,
    text: impl tree_sitter::TextProvider<I>,
    start_byte: usize,
    end_byte: usize,
) -> Option<Node<'t>> {
    smallest_capture_in(query, capture, root, text, start_byte, end_byte, true)
}

/// The search of both: over the whole tree, or (`near`) over the nodes that intersect the range only.
fn smallest_capture_in<'t, I: AsRef<[u8]>>(
    query: &Query,
    capture: &str,
    root: Node<'t>,
    text: impl tree_sitter::TextProvider<I>,
    start_byte: usize,
    end_byte: usize,
    near: bool,
) -> Option<Node<'t>> {
    let capture_idx = query.capture_index_for_name(capture)?;
    let (start_byte, end_byte) = (start_byte.min(end_byte), start_byte.max(end_byte));
    let mut cursor = QueryCursor::new();
    if near {
        // Nodes that contain the range intersect it; one byte either side, since an empty range intersects nothing.
        cursor.set_byte_range(start_byte.saturating_sub(1)..end_byte + 1);
    }
    let mut captures = cursor.captures(query, root, text);
    let mut best: Option<Node<'t>> = None;
    while let Some((query_match, idx)) = captures.next() {
        let node = query_match.captures[*idx].node;
        if query_match.captures[*idx].index != capture_idx {
            continue;
        }
        if node.start_byte() > start_byte || node.end_byte() < end_byte {
            continue;
        }
        // Captures come in document order, outer nodes before inner ones, so `<=` prefers the inner node.
        if best.is_none_or(|best| node.byte_range().len() <= best.byte_range().len()) {
            best = Some(node);
        }
    }
    best
}

/// The ERROR and MISSING nodes of the tree in document order, at most `limit` of them. Only outermost ones
/// are listed: errors nested inside an ERROR node are covered by its range.
pub fn syntax_errors<'t>(root: Node<'t>, limit: usize) -> Vec<Node<'t>> {
    let mut errors = Vec::new();
    visit_errors(root, 0..usize::MAX, &mut |node| {
        if errors.len() >= limit {
            return false;
        }
        errors.push(node);
        true
    });
    errors
}

/// The number of outermost ERROR and MISSING nodes that overlap `start_byte..end_byte`. Zero-width nodes
/// (MISSING) and empty ranges count when they touch; otherwise ranges must share at least one byte.
pub fn count_errors_in(root: Node<'_>, start_byte: usize, end_byte: usize) -> usize {
    let mut n_errors = 0;
    visit_errors(root, start_byte..end_byte, &mut |_| {
        n_errors += 1;
        true
    });
    n_errors
}

/// Calls `on_error` for each outermost ERROR or MISSING node overlapping `range`, in document order, until it
/// returns false. Subtrees without errors or outside the range are skipped.
fn visit_errors<'t>(root: Node<'t>, range: std::ops::Range<usize>, on_error: &mut dyn FnMut(Node<'t>) -> bool) {
    let mut cursor = root.walk();
    loop {
        let node = cursor.node();
        let descend = if !node.has_error() || !overlaps(node.byte_range(), &range) {
            false
        } else if node.is_error() || node.is_missing() {
            if !on_error(node) {
                return;
            }
            false
        } else {
            true
        };
        if descend && cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
        }
    }
}

fn overlaps(node: std::ops::Range<usize>, range: &std::ops::Range<usize>) -> bool {
    if node.is_empty() || range.is_empty() {
        node.start <= range.end && range.start <= node.end
    } else {
        node.start < range.end && range.start < node.end
    }
}

#[cfg(test)]
mod tests;
