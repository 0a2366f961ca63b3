//! The compiler's own suggested edits as fix candidates: rustc's `help:` replacements (a similarly named local,
//! `use std::collections::HashMap;`, a method spelled like the one called), tsc's "Did you mean 'x'?", and for
//! tsc's "Cannot find name 'X'" the import of an `X` another module of the package exports (what tsserver's
//! "Add import" offers). They are candidates like the model's, not answers: each is offered only when the
//! compiler accepts the file with it (`verify.compile`). Everything here is pure: it reads compiler output, the
//! document and, for imports, the package's source files.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::{FileChange, TaskDocument};
use crate::exec_check::is_target_message;

/// One suggested edit: byte ranges of the original text and what replaces each (a rustc suggestion may have
/// several parts: `&` before an argument and `.clone()` after it).
pub type Suggested = Vec<(Range<usize>, String)>;

/// At most this many suggestions are compiled per fix: each costs a type-check of the project.
pub const MAX_SUGGESTIONS: usize = 4;

/// rustc's suggested replacements for the diagnostic the fix is asked about, from the output of
/// `cargo check --message-format=json` on the original text. The diagnostic is the error in `file` (as cargo
/// names it, relative to the workspace) whose message is the target's and whose primary span is nearest
/// `target` (byte offsets of the same text). A suggestion with placeholders (`/* u32 */`) is left out.
///
/// rustc writes a suggestion's alternatives ("consider importing one of these items") and its parts (`&` here
/// and `)` there) alike, as the spans of one `help` child: spans that all replace the same range are taken as
/// alternatives, one candidate each; otherwise all of them together is the first candidate and each alone the
/// next ones. The compiler decides which is right.
///
/// A `use` removed from a file leaves several names unknown, each its own error with its own "consider
/// importing": importing the diagnosed one alone clears the diagnostic and leaves the others. So when the
/// target's suggestion is an import, the first candidate imports every name the file's errors suggest importing
/// (each error's first alternative).
pub fn rustc_suggestions(stdout: &str, file: &str, target_message: &str, target: Range<usize>) -> Vec<Suggested> {
    let Some(message) = rustc_diagnostic(stdout, file, target_message, target) else { return Vec::new() };
    let mut found = suggestions_of(&message, file);
    if let Some(own) = import_of(&message, file) {
        let mut parts = vec![own];
        for other in rustc_errors(stdout) {
            if let Some(part) = import_of(&other, file) {
                if !parts.iter().any(|(_, seen)| *seen == part.1) {
                    parts.push(part);
                }
            }
        }
        if parts.len() > 1 && !overlapping(&parts) {
            found.insert(0, parts);
            found.truncate(MAX_SUGGESTIONS);
        }
    }
    found
}

/// The error-level diagnostics (the `message` objects) of `cargo check --message-format=json` output.
fn rustc_errors(stdout: &str) -> impl Iterator<Item = serde_json::Value> + '_ {
    stdout
        .lines()
        .filter(|line| line.starts_with('{'))
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|value| value["reason"] == "compiler-message" && value["message"]["level"] == "error")
        .map(|mut value| value["message"].take())
}

/// A diagnostic's first suggested `use` in `file` ("consider importing this struct").
fn import_of(message: &serde_json::Value, file: &str) -> Option<(Range<usize>, String)> {
    message["children"].as_array()?.iter().find_map(|child| {
        let span = child["spans"].as_array()?.first()?;
        let replacement = span["suggested_replacement"].as_str()?;
        let is_import = child["message"].as_str()?.starts_with("consider importing")
            && replacement.trim_start().starts_with("use ")
            && span["file_name"].as_str() == Some(file);
        is_import.then(|| (byte(&span["byte_start"])..byte(&span["byte_end"]), replacement.to_owned()))
    })
}

/// rustc's notes and help for the diagnostic (see [`rustc_suggestions`]) as lines for a model's prompt, each
/// with its first suggested replacement, placeholders included: "help: provide the argument: `f(a, /* u32 */)`".
pub fn rustc_help(stdout: &str, file: &str, target_message: &str, target: Range<usize>) -> Vec<String> {
    let Some(message) = rustc_diagnostic(stdout, file, target_message, target) else { return Vec::new() };
    let mut lines = Vec::new();
    for child in message["children"].as_array().into_iter().flatten() {
        let (Some(level), Some(text)) = (child["level"].as_str(), child["message"].as_str()) else { continue };
        if text.is_empty() || text.len() > 200 {
            continue;
        }
        let replacement = child["spans"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|span| span["suggested_replacement"].as_str())
            .map(str::trim)
            .find(|replacement| !replacement.is_empty() && replacement.len() <= 120 && !replacement.contains('\n'));
        lines.push(match replacement {
            Some(replacement) => format!("{level}: {text}: `{replacement}`"),
            None => format!("{level}: {text}"),
        });
        if lines.len() == 3 {
            break;
        }
    }
    lines
}

/// The error in `stdout` that the fix is asked about (see [`rustc_suggestions`]).
fn rustc_diagnostic(stdout: &str, file: &str, target_message: &str, target: Range<usize>) -> Option<serde_json::Value> {
    let mut best: Option<(usize, serde_json::Value)> = None;
    for message in rustc_errors(stdout) {
        if !is_target_message(message["message"].as_str().unwrap_or_default(), target_message) {
            continue;
        }
        let spans = message["spans"].as_array().cloned().unwrap_or_default();
        let Some(primary) = spans.iter().find(|span| span["is_primary"] == true) else { continue };
        if primary["file_name"].as_str() != Some(file) {
            continue;
        }
        let (start, end) = (byte(&primary["byte_start"]), byte(&primary["byte_end"]));
        let distance = target.start.saturating_sub(end).max(start.saturating_sub(target.end));
        if best.as_ref().is_none_or(|(nearest, _)| distance < *nearest) {
            best = Some((distance, message.clone()));
        }
    }
    best.map(|(_, message)| message)
}

/// The suggested replacements of one rustc diagnostic in `file`.
fn suggestions_of(message: &serde_json::Value, file: &str) -> Vec<Suggested> {
    let mut found: Vec<Suggested> = Vec::new();
    for child in message["children"].as_array().into_iter().flatten() {
        let parts: Vec<(Range<usize>, String)> = child["spans"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|span| span["file_name"].as_str() == Some(file))
            .filter(|span| span["suggestion_applicability"].as_str() != Some("HasPlaceholders"))
            .filter_map(|span| {
                let replacement = span["suggested_replacement"].as_str()?;
                Some((byte(&span["byte_start"])..byte(&span["byte_end"]), replacement.to_owned()))
            })
            .collect();
        if parts.is_empty() {
            continue;
        }
        let one_range = parts.iter().all(|(range, _)| *range == parts[0].0);
        if !one_range && !overlapping(&parts) {
            found.push(parts.clone());
        }
        found.extend(parts.into_iter().map(|part| vec![part]));
    }
    let mut unique: Vec<Suggested> = Vec::new();
    for suggestion in found {
        if !unique.contains(&suggestion) {
            unique.push(suggestion);
        }
    }
    unique.truncate(MAX_SUGGESTIONS);
    unique
}

fn byte(value: &serde_json::Value) -> usize {
    value.as_u64().and_then(|at| usize::try_from(at).ok()).unwrap_or(0)
}

fn overlapping(parts: &[(Range<usize>, String)]) -> bool {
    let mut ranges: Vec<&Range<usize>> = parts.iter().map(|(range, _)| range).collect();
    ranges.sort_by_key(|range| (range.start, range.end));
    ranges.windows(2).any(|pair| pair[1].start < pair[0].end)
}

/// The name tsc proposes in its message: "Cannot find name 'cuont'. Did you mean 'count'?", "Property 'lenght'
/// does not exist on type 'string'. Did you mean 'length'?", "… Did you mean the instance member 'this.x'?".
pub fn tsc_did_you_mean(message: &str) -> Option<String> {
    let at = message.find("Did you mean ")?;
    let rest = &message[at + "Did you mean ".len()..];
    let rest =
        rest.strip_prefix("the instance member ").or_else(|| rest.strip_prefix("the static member ")).unwrap_or(rest);
    let name = rest.strip_prefix('\'')?.split_once("'?")?.0;
    let valid = !name.is_empty()
        && name.chars().all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$' || ch == '.')
        && !name.starts_with(|ch: char| ch.is_ascii_digit() || ch == '.');
    valid.then(|| name.to_owned())
}

/// The name tsc cannot find: "Cannot find name 'X'." (TS2304, and TS2552 with a "Did you mean"; the code may
/// come first, as some editors show it).
pub fn tsc_missing_name(message: &str) -> Option<&str> {
    const CANNOT_FIND: &str = "Cannot find name '";
    let rest = &message[message.find(CANNOT_FIND)? + CANNOT_FIND.len()..];
    let name = rest.split('\'').next()?;
    let valid = !name.is_empty() && name.chars().all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$');
    valid.then_some(name)
}

/// A suggestion as a change of the document: one replacement from the first part's start to the last part's end.
pub fn as_change(document: &TaskDocument, suggestion: &Suggested) -> Option<FileChange> {
    let mut parts = suggestion.clone();
    parts.sort_by_key(|(range, _)| (range.start, range.end));
    let start = parts.first()?.0.start;
    let end = parts.iter().map(|(range, _)| range.end).max()?;
    let text = &document.text;
    if end > text.len() || !text.is_char_boundary(start) || !text.is_char_boundary(end) {
        return None;
    }
    let mut insert = String::new();
    let mut copied = start;
    for (range, replacement) in &parts {
        if range.start < copied || !text.is_char_boundary(range.start) || !text.is_char_boundary(range.end) {
            return None;
        }
        insert.push_str(&text[copied..range.start]);
        insert.push_str(replacement);
        copied = range.end;
    }
    insert.push_str(&text[copied..end]);
    Some(FileChange { path: None, create: false, old_text: text.clone(), replace: start..end, insert })
}

/// Where a TypeScript package exports `name` from: the package's source files (under `root`, without
/// `node_modules`, dot folders and declaration-only output) that declare it exported or re-export it, nearest
/// to `file` first. Reads at most [`MAX_SCANNED`] files.
pub fn ts_exporters(root: &Path, file: &Path, name: &str) -> Vec<(PathBuf, bool)> {
    ts_exporters_of(root, file, &[name]).pop().unwrap_or_default()
}

/// [`ts_exporters`] of several names, reading each file once: one list per name.
pub fn ts_exporters_of(root: &Path, file: &Path, names: &[&str]) -> Vec<Vec<(PathBuf, bool)>> {
    let mut found: Vec<Vec<(PathBuf, bool)>> = vec![Vec::new(); names.len()];
    let mut pending = vec![root.to_owned()];
    let mut scanned = 0;
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|entry| entry.file_name());
        for entry in entries {
            let path = entry.path();
            let file_name = entry.file_name();
            let file_name = file_name.to_string_lossy();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                if !file_name.starts_with('.') && file_name != "node_modules" {
                    pending.push(path);
                }
                continue;
            }
            let source = [".ts", ".tsx", ".mts", ".cts"].iter().any(|ext| file_name.ends_with(ext))
                && !file_name.ends_with(".d.ts")
                && path != file;
            if !source || scanned >= MAX_SCANNED {
                continue;
            }
            scanned += 1;
            let Ok(text) = std::fs::read_to_string(&path) else { continue };
            for (name, found) in names.iter().zip(found.iter_mut()) {
                if let Some(type_only) = exports(&text, name) {
                    found.push((path.clone(), type_only));
                }
            }
        }
    }
    let from = file.parent().unwrap_or(Path::new(""));
    for found in &mut found {
        found.sort_by_key(|(path, _)| (relative_path(from, path).matches("../").count(), path.components().count()));
    }
    found
}

/// Files [`ts_exporters`] reads at most.
pub const MAX_SCANNED: usize = 4000;

/// Whether `text` exports `name`, and whether only as a type (an interface or a type alias): `Some(type_only)`.
pub fn exports(text: &str, name: &str) -> Option<bool> {
    for line in text.lines() {
        let line = line.trim_start();
        let Some(rest) = line.strip_prefix("export ") else { continue };
        let mut words = rest.split(|ch: char| ch.is_whitespace() || ch == '(' || ch == '<' || ch == ':' || ch == '=');
        let mut word = words.next().unwrap_or("");
        while matches!(word, "declare" | "abstract" | "async" | "default" | "") {
            word = match words.next() {
                Some(next) => next,
                None => break,
            };
        }
        let keyword = word.trim_end_matches('*');
        if matches!(
            keyword,
            "function" | "const" | "let" | "var" | "class" | "interface" | "type" | "enum" | "namespace"
        ) && words.find(|word| !word.is_empty() && *word != "*") == Some(name)
        {
            return Some(matches!(keyword, "interface" | "type"));
        }
        // `export { a, b as name }` and `export type { name } from "./x"`.
        let (type_only, list) = match rest.strip_prefix("type ") {
            Some(list) => (true, list.trim_start()),
            None => (false, rest),
        };
        if let Some(list) = list.strip_prefix('{') {
            let list = list.split('}').next().unwrap_or("");
            let listed = list.split(',').any(|item| {
                let item = item.trim();
                let item = item.strip_prefix("type ").unwrap_or(item);
                item == name || item.rsplit_once(" as ").is_some_and(|(_, alias)| alias.trim() == name)
            });
            if listed {
                return Some(type_only);
            }
        }
    }
    None
}

/// `to` relative to the folder `from`, with `/`: `../a/b.ts`.
fn relative_path(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to_parts: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to_parts).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_owned(); from.len() - common];
    parts.extend(to_parts[common..].iter().map(|part| part.as_os_str().to_string_lossy().into_owned()));
    parts.join("/")
}

/// The module specifiers that import `target` from `file`, in the style of the file's own relative imports:
/// without an extension, or with `.js` (NodeNext) or `.ts` when they have one; a file without relative imports
/// gets both the bare path and `.js` (an ECMAScript module under NodeNext needs the extension; the compiler
/// tells which).
pub fn ts_specifiers(file: &Path, target: &Path, text: &str) -> Vec<String> {
    let specifier = ts_specifier(file, target, text);
    let styled = text.lines().any(|line| {
        line.split(" from ")
            .nth(1)
            .is_some_and(|rest| rest.trim_start().trim_start_matches(['\'', '"']).starts_with('.'))
    });
    if styled {
        vec![specifier]
    } else {
        let with_extension = format!("{specifier}.js");
        vec![specifier, with_extension]
    }
}

/// The module specifier that imports `target` from `file`, in the style of the file's own relative imports:
/// without an extension, or with `.js` (NodeNext) or `.ts` when they have one.
pub fn ts_specifier(file: &Path, target: &Path, text: &str) -> String {
    let relative = relative_path(file.parent().unwrap_or(Path::new("")), target);
    let relative = if relative.starts_with("../") { relative } else { format!("./{relative}") };
    let stem = relative.rsplit_once('.').map_or(relative.as_str(), |(stem, _)| stem).to_owned();
    let relative_imports: Vec<&str> = text
        .lines()
        .filter_map(|line| line.split(" from ").nth(1))
        .map(|rest| rest.trim().trim_end_matches(';').trim_matches(|ch| ch == '\'' || ch == '"'))
        .filter(|specifier| specifier.starts_with('.'))
        .collect();
    let extension = if relative_imports.iter().any(|specifier| specifier.ends_with(".js")) {
        ".js"
    } else if relative_imports.iter().any(|specifier| specifier.ends_with(".ts")) {
        ".ts"
    } else {
        ""
    };
    format!("{stem}{extension}")
}

/// The change that imports `names` (each with whether it is a type only) from `specifier`: added to an import
/// of that module that names others (`import { a } from "./m"` becomes `import { a, b } from "./m"`), else a
/// new import after the file's last one (at the top when it has none), in its quotes and semicolons.
pub fn ts_import_change(document: &TaskDocument, names: &[(String, bool)], specifier: &str) -> FileChange {
    let text = &document.text;
    let root = document.tree.root_node();
    let mut cursor = root.walk();
    let imports: Vec<_> = root.children(&mut cursor).filter(|node| node.kind() == "import_statement").collect();
    let change = |at: usize, insert: String| FileChange {
        path: None,
        create: false,
        old_text: text.clone(),
        replace: at..at,
        insert,
    };
    let all_types = names.iter().all(|(_, type_only)| *type_only);
    let item = |name: &str, type_only: bool, in_type_import: bool| {
        if type_only && !in_type_import {
            format!("type {name}")
        } else {
            name.to_owned()
        }
    };
    for import in &imports {
        let source = &text[import.byte_range()];
        let names_module = source.contains(&format!("'{specifier}'")) || source.contains(&format!("\"{specifier}\""));
        let type_import = source.starts_with("import type");
        if !names_module || (type_import && !all_types) {
            continue;
        }
        if let (Some(open), Some(close)) = (source.find('{'), source.find('}')) {
            if open < close {
                let listed = source[open + 1..close].trim_end();
                let at = import.start_byte() + open + 1 + listed.len();
                let comma = if listed.ends_with(',') || listed.trim().is_empty() { "" } else { "," };
                let items: Vec<String> =
                    names.iter().map(|(name, type_only)| item(name, *type_only, type_import)).collect();
                return change(at, format!("{comma} {}", items.join(", ")));
            }
        }
    }
    let last = imports.last();
    let quote = last.map_or('"', |import| if text[import.byte_range()].contains('\'') { '\'' } else { '"' });
    let semicolon = last.is_none_or(|import| text[import.byte_range()].trim_end().ends_with(';'));
    let keyword = if all_types { "import type" } else { "import" };
    let items: Vec<String> = names.iter().map(|(name, type_only)| item(name, *type_only, all_types)).collect();
    let line = format!(
        "{keyword} {{ {} }} from {quote}{specifier}{quote}{}",
        items.join(", "),
        if semicolon { ";" } else { "" }
    );
    match last {
        Some(import) => change(import.end_byte(), format!("\n{line}")),
        None => match after_header(document) {
            Some(at) => change(at, format!("{line}\n\n")),
            None => change(0, format!("{line}\n")),
        },
    }
}

/// Where the code of a file starts after its header (a licence or a description: leading comments that a blank
/// line parts from what follows), where a first import goes; `None` when the file has no such header (a comment
/// right above code documents that code and stays with it).
fn after_header(document: &TaskDocument) -> Option<usize> {
    let text = &document.text;
    let root = document.tree.root_node();
    let mut cursor = root.walk();
    let (mut header_end, mut block_start) = (None, None);
    for node in root.children(&mut cursor) {
        if node.kind() != "comment" {
            // After the header: the comments right above this code (its documentation), or the code itself.
            return header_end.map(|_| block_start.unwrap_or(node.start_byte()));
        }
        block_start.get_or_insert(node.start_byte());
        let gap = text.get(node.end_byte()..).unwrap_or("");
        let blank_line_after = gap
            .trim_start_matches([' ', '\t', '\r'])
            .strip_prefix('\n')
            .is_some_and(|rest| rest.trim_start_matches([' ', '\t', '\r']).starts_with('\n'));
        if blank_line_after {
            header_end = Some(node.end_byte());
            block_start = None;
        }
    }
    None
}

/// One import change for every name of `names` that a module exports (`exporters`, as [`ts_exporters_of`] gives
/// them: each name from its nearest exporter, names of one module in one import), when that is more than one
/// name: the first candidate where a removed import left several names unknown.
pub fn ts_combined_import(
    document: &TaskDocument,
    file: &Path,
    names: &[String],
    exporters: &[Vec<(PathBuf, bool)>],
) -> Option<FileChange> {
    let mut groups: Vec<(String, Vec<(String, bool)>)> = Vec::new();
    let conventional = sibling_specifiers(file, names);
    // The barrels among them (modules that `export * from` others), with the modules they re-export.
    let folder = file.parent().unwrap_or(Path::new(""));
    let mut barrels: Vec<(String, Vec<PathBuf>)> = Vec::new();
    for specifier in conventional.iter().flatten() {
        if barrels.iter().all(|(seen, _)| seen != specifier) {
            let exported = resolve_module(folder, specifier).map(|barrel| re_exported(&barrel)).unwrap_or_default();
            barrels.push((specifier.clone(), exported));
        }
    }
    for ((name, exporters), conventional) in names.iter().zip(exporters).zip(conventional) {
        let Some((exporter, type_only)) = exporters.first() else { continue };
        // The module the files beside this one import the name from (a package's barrel, whose order of
        // evaluation the package may depend on), or a barrel they use that re-exports it, else the nearest module
        // that declares it.
        let barrel = || barrels.iter().find(|(_, exported)| exported.contains(exporter)).map(|(s, _)| s.clone());
        let specifier =
            conventional.or_else(barrel).or_else(|| ts_specifiers(file, exporter, &document.text).into_iter().next());
        let Some(specifier) = specifier else { continue };
        match groups.iter_mut().find(|(seen, _)| *seen == specifier) {
            Some((_, listed)) => listed.push((name.clone(), *type_only)),
            None => groups.push((specifier, vec![(name.clone(), *type_only)])),
        }
    }
    if groups.iter().map(|(_, listed)| listed.len()).sum::<usize>() < 2 {
        return None;
    }
    let parts: Suggested = groups
        .iter()
        .map(|(specifier, listed)| {
            let change = ts_import_change(document, listed, specifier);
            (change.replace, change.insert)
        })
        .collect();
    as_change(document, &parts)
}

/// For each of `names`, the relative module specifier that the other TypeScript files in `file`'s folder import
/// it from most often (`None` where none imports it): how the package itself imports these names.
fn sibling_specifiers(file: &Path, names: &[String]) -> Vec<Option<String>> {
    static NAMED_IMPORT: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"import\s+(?:type\s+)?\{([^}]*)\}\s*from\s*["'](\.[^"']*)["']"#).expect("a valid pattern")
    });
    let mut counts: Vec<HashMap<String, usize>> = vec![HashMap::new(); names.len()];
    let siblings = file.parent().and_then(|dir| std::fs::read_dir(dir).ok());
    for entry in siblings.into_iter().flatten().flatten().take(MAX_SIBLINGS) {
        let path = entry.path();
        let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        let source = [".ts", ".tsx", ".mts", ".cts"].iter().any(|ext| name.ends_with(ext));
        if !source || path == file {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        for import in NAMED_IMPORT.captures_iter(&text) {
            let listed: Vec<&str> =
                import[1].split(',').map(|item| item.trim().trim_start_matches("type ").trim()).collect();
            for (wanted, counts) in names.iter().zip(counts.iter_mut()) {
                if listed.iter().any(|item| item == wanted) {
                    *counts.entry(import[2].to_owned()).or_default() += 1;
                }
            }
        }
    }
    counts
        .into_iter()
        .map(|counts| {
            let best = counts.into_iter().max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)));
            best.map(|(specifier, _)| specifier)
        })
        .collect()
}

/// The TypeScript file a relative specifier names from `folder` (`./m`, `./m.js`, `./m.ts`, `./dir` with its
/// `index.ts`, and `..`).
fn resolve_module(folder: &Path, specifier: &str) -> Option<PathBuf> {
    let base = folder.join(specifier.strip_suffix(".js").unwrap_or(specifier));
    let candidates = [
        base.clone(),
        base.with_extension("ts"),
        base.with_extension("tsx"),
        base.join("index.ts"),
        base.join("index.tsx"),
    ];
    let found =
        candidates.into_iter().find(|path| path.is_file() && path.extension().is_some_and(|ext| ext != "js"))?;
    Some(normalise(&found))
}

/// `path` without its `.` and `..` parts (no file system access: the paths here are the package's own).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The files a barrel module re-exports whole (`export * from "./m"`).
fn re_exported(barrel: &Path) -> Vec<PathBuf> {
    static EXPORT_ALL: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"export\s*\*\s*from\s*["'](\.[^"']*)["']"#).expect("a valid pattern")
    });
    let folder = barrel.parent().unwrap_or(Path::new(""));
    let Ok(text) = std::fs::read_to_string(barrel) else { return Vec::new() };
    EXPORT_ALL.captures_iter(&text).filter_map(|export| resolve_module(folder, &export[1])).collect()
}

/// Files of a folder [`sibling_specifiers`] reads at most.
const MAX_SIBLINGS: usize = 200;

/// The names of tsc's "Cannot find name" errors in `file` (relative to the project, as tsc names it) in the
/// output of a `tsc` run, in order and without repeats.
pub fn tsc_missing_names(output: &str, file: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for error in crate::exec_check::parse_tsc(output) {
        if error.file == file {
            if let Some(name) = tsc_missing_name(&error.message) {
                if !names.iter().any(|seen| seen == name) {
                    names.push(name.to_owned());
                }
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use spark_grammars::Lang;

    fn document(lang: Lang, text: &str) -> TaskDocument {
        TaskDocument::parsed(lang, text)
    }

    fn span(start: usize, end: usize, replacement: Option<&str>, applicability: &str) -> serde_json::Value {
        serde_json::json!({"file_name": "src/lib.rs", "byte_start": start, "byte_end": end, "is_primary": true,
            "suggested_replacement": replacement, "suggestion_applicability": applicability})
    }

    fn cargo_line(message: &str, primary: (usize, usize), children: Vec<serde_json::Value>) -> String {
        serde_json::json!({"reason": "compiler-message", "message": {"level": "error", "message": message,
            "spans": [span(primary.0, primary.1, None, "")], "children": children}})
        .to_string()
    }

    #[test]
    fn rustc_help_replacements_become_candidates() {
        let similar = serde_json::json!({"level": "help", "message": "a local variable with a similar name exists",
            "spans": [span(40, 44, Some("total"), "MaybeIncorrect")]});
        let imports = serde_json::json!({"level": "help", "message": "consider importing one of these items",
            "spans": [span(0, 0, Some("use std::fmt::Write;\n"), "MaybeIncorrect"),
                      span(0, 0, Some("use std::io::Write;\n"), "MaybeIncorrect")]});
        let placeholder = serde_json::json!({"level": "help", "message": "provide the argument",
            "spans": [span(50, 60, Some("f(a, /* u32 */)"), "HasPlaceholders")]});
        let other = cargo_line("cannot find value `totl` in this scope", (90, 94), vec![similar.clone()]);
        let stdout = format!(
            "{}\n{}\n{}\n",
            cargo_line("cannot find value `totl` in this scope", (40, 44), vec![similar, placeholder]),
            other,
            cargo_line("cannot find trait `Write` in this scope", (70, 75), vec![imports]),
        );
        let found = rustc_suggestions(&stdout, "src/lib.rs", "cannot find value `totl` in this scope", 40..44);
        assert_eq!(found, vec![vec![(40..44, "total".to_owned())]]);
        // Alternatives at one place are one candidate each.
        let found = rustc_suggestions(&stdout, "src/lib.rs", "cannot find trait `Write` in this scope", 70..75);
        assert_eq!(found.len(), 2);
        assert_eq!(found[1], vec![(0..0, "use std::io::Write;\n".to_owned())]);
        assert_eq!(
            rustc_help(&stdout, "src/lib.rs", "cannot find value `totl` in this scope", 40..44),
            vec![
                "help: a local variable with a similar name exists: `total`",
                "help: provide the argument: `f(a, /* u32 */)`"
            ]
        );
        // Another file's diagnostic or another message gives nothing.
        assert!(rustc_suggestions(&stdout, "src/main.rs", "cannot find value `totl` in this scope", 40..44).is_empty());
        assert!(rustc_suggestions(&stdout, "src/lib.rs", "mismatched types", 40..44).is_empty());
    }

    #[test]
    fn a_removed_use_is_put_back_whole() {
        let import = |name: &str| {
            serde_json::json!({"level": "help", "message": "consider importing this function",
                "spans": [span(0, 0, Some(&format!("use crate::{name};\n")), "MaybeIncorrect")]})
        };
        let stdout = format!(
            "{}\n{}\n",
            cargo_line("cannot find function `transform` in this scope", (40, 49), vec![import("transform")]),
            cargo_line("cannot find value `uppercase` in this scope", (60, 69), vec![import("uppercase")]),
        );
        let found = rustc_suggestions(&stdout, "src/lib.rs", "cannot find function `transform` in this scope", 40..49);
        let both = vec![(0..0, "use crate::transform;\n".to_owned()), (0..0, "use crate::uppercase;\n".to_owned())];
        assert_eq!(found[0], both);
        assert_eq!(found[1], vec![(0..0, "use crate::transform;\n".to_owned())]);
        let doc = document(Lang::Rust, "fn f() {}\n");
        assert_eq!(
            as_change(&doc, &found[0]).unwrap().new_text(),
            "use crate::transform;\nuse crate::uppercase;\nfn f() {}\n"
        );
    }

    #[test]
    fn parts_of_one_suggestion_are_tried_together_first() {
        let borrow = serde_json::json!({"level": "help", "message": "consider borrowing here",
            "spans": [span(11, 11, Some("&"), "MachineApplicable"), span(16, 16, Some(".clone()"), "MachineApplicable")]});
        let stdout = cargo_line("mismatched types", (11, 16), vec![borrow]);
        let found = rustc_suggestions(&stdout, "src/lib.rs", "mismatched types", 11..16);
        assert_eq!(found[0], vec![(11..11, "&".to_owned()), (16..16, ".clone()".to_owned())]);
        assert_eq!(found.len(), 3);
        let doc = document(Lang::Rust, "fn f() { g(aaaaa); }\n");
        let change = as_change(&doc, &found[0]).unwrap();
        assert_eq!(change.new_text(), "fn f() { g(&aaaaa.clone()); }\n");
    }

    #[test]
    fn tsc_names_in_messages() {
        assert_eq!(tsc_did_you_mean("Cannot find name 'cuont'. Did you mean 'count'?").as_deref(), Some("count"));
        assert_eq!(
            tsc_did_you_mean("Property 'lenght' does not exist on type 'string'. Did you mean 'length'?").as_deref(),
            Some("length")
        );
        assert_eq!(
            tsc_did_you_mean("Cannot find name 'size'. Did you mean the instance member 'this.size'?").as_deref(),
            Some("this.size")
        );
        assert_eq!(tsc_did_you_mean("Did you mean to call this expression?"), None);
        assert_eq!(tsc_did_you_mean("Cannot find name 'x'."), None);
        assert_eq!(tsc_missing_name("Cannot find name 'Ticket'."), Some("Ticket"));
        assert_eq!(tsc_missing_name("TS2304: Cannot find name 'ITransform'."), Some("ITransform"));
        assert_eq!(tsc_missing_name("Cannot find name 'cuont'. Did you mean 'count'?"), Some("cuont"));
        assert_eq!(tsc_missing_name("Property 'x' does not exist on type 'Y'."), None);
    }

    #[test]
    fn typescript_exports_table() {
        let cases = [
            ("export function isQueued(value: any): boolean {", "isQueued", Some(false)),
            ("export async function* walk() {}", "walk", Some(false)),
            ("export const QUEUE_STATE: unique symbol = Symbol.for(\"x\")", "QUEUE_STATE", Some(false)),
            ("export interface Change { op: string }", "Change", Some(true)),
            ("export type Recordish = AnyRecord | AnyList", "Recordish", Some(true)),
            ("export declare abstract class Store<T> {}", "Store", Some(false)),
            ("export { a, b as Ticket } from \"./types\"", "Ticket", Some(false)),
            ("export type { Frozen } from './types'", "Frozen", Some(true)),
            ("export function isQueuedish() {}", "isQueued", None),
            ("const local = 1", "local", None),
        ];
        for (text, name, expected) in cases {
            assert_eq!(exports(text, name), expected, "{text}");
        }
    }

    #[test]
    fn typescript_imports_follow_the_files_style() {
        let file = Path::new("/p/src/core/session.ts");
        let text =
            "import { fail } from '../utils/failures.js';\nimport type { Change } from './changes.js';\n\nconst x = 1;\n";
        assert_eq!(ts_specifier(file, Path::new("/p/src/utils/shared.ts"), text), "../utils/shared.js");
        assert_eq!(ts_specifier(file, Path::new("/p/src/core/handle.ts"), "const x = 1;\n"), "./handle");
        assert_eq!(
            ts_specifiers(file, Path::new("/p/src/core/handle.ts"), "const x = 1;\n"),
            ["./handle", "./handle.js"]
        );
        assert_eq!(ts_specifiers(file, Path::new("/p/src/core/handle.ts"), text), ["./handle.js"]);
        let doc = document(Lang::TypeScript, text);
        let added = ts_import_change(&doc, &[("isQueued".into(), false)], "../utils/shared.js");
        assert_eq!(
            added.new_text(),
            "import { fail } from '../utils/failures.js';\nimport type { Change } from './changes.js';\nimport { isQueued } from '../utils/shared.js';\n\nconst x = 1;\n"
        );
        let joined =
            ts_import_change(&doc, &[("assert".into(), false), ("Fault".into(), true)], "../utils/failures.js");
        assert!(
            joined.new_text().starts_with("import { fail, assert, type Fault } from '../utils/failures.js';\n"),
            "{}",
            joined.new_text()
        );
        // A value is not added to a type-only import.
        let value = ts_import_change(&doc, &[("applyChanges".into(), false)], "./changes.js");
        assert!(
            value.new_text().contains("import { applyChanges } from './changes.js';\n\nconst"),
            "{}",
            value.new_text()
        );
        let bare = document(Lang::TypeScript, "const x: Ticket = 1\n");
        let top = ts_import_change(&bare, &[("Ticket".into(), true)], "./types");
        assert_eq!(top.new_text(), "import type { Ticket } from \"./types\";\nconst x: Ticket = 1\n");
    }

    #[test]
    fn a_first_import_goes_below_the_files_header_comment() {
        let text = "// Licence: a header,\n// two lines.\n\n/** The function. */\nexport function f(a: Item) {}\n";
        let doc = document(Lang::TypeScript, text);
        let added = ts_import_change(&doc, &[("Item".into(), true)], "./item");
        assert_eq!(
            added.new_text(),
            "// Licence: a header,\n// two lines.\n\nimport type { Item } from \"./item\";\n\n/** The function. */\nexport function f(a: Item) {}\n"
        );
        // A comment right above the code documents it: the import goes above it.
        let text = "/** The function. */\nexport function f(a: Item) {}\n";
        let added = ts_import_change(&document(Lang::TypeScript, text), &[("Item".into(), true)], "./item");
        assert!(added.new_text().starts_with("import type { Item } from \"./item\";\n/** The function. */"));
    }

    #[test]
    fn exporters_are_found_nearest_first() {
        let dir = std::env::temp_dir().join(format!("spark-exporters-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in [
            ("src/a/use.ts", "const d = isQueued(x);\n"),
            ("src/a/near.ts", "export function isQueued(x: unknown) { return !!x; }\n"),
            ("src/far/deep/other.ts", "export const isQueued = (x: unknown) => false;\n"),
            ("node_modules/dep/index.ts", "export function isQueued() {}\n"),
            ("src/types.d.ts", "export declare function isQueued(): boolean;\n"),
        ] {
            std::fs::create_dir_all(dir.join(path).parent().unwrap()).unwrap();
            std::fs::write(dir.join(path), text).unwrap();
        }
        let found = ts_exporters(&dir, &dir.join("src/a/use.ts"), "isQueued");
        let names: Vec<_> = found.iter().map(|(path, _)| path.strip_prefix(&dir).unwrap().to_path_buf()).collect();
        assert_eq!(names, vec![PathBuf::from("src/a/near.ts"), PathBuf::from("src/far/deep/other.ts")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_the_folder_imports_from_a_barrel_are_imported_from_it() {
        let dir = std::env::temp_dir().join(format!("spark-barrel-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in [
            (
                "src/internal.ts",
                "export * from \"./utils/errors\"\nexport * from \"./core/scope\"\nexport * from \"./utils/common\"\n",
            ),
            ("src/utils/common.ts", "export const isSet = (x: unknown) => x instanceof Set\n"),
            ("src/utils/errors.ts", "export function die(why: string): never { throw new Error(why) }\n"),
            ("src/core/scope.ts", "import { die } from \"../internal\"\nexport interface Scope { depth: number }\n"),
            ("src/core/proxy.ts", "import {\n\tdie,\n\ttype Scope,\n} from \"../internal\"\n"),
            ("src/core/use.ts", "export function f(s: Scope) { die(\"no\"); isSet(s) }\n"),
        ] {
            std::fs::create_dir_all(dir.join(path).parent().unwrap()).unwrap();
            std::fs::write(dir.join(path), text).unwrap();
        }
        let file = dir.join("src/core/use.ts");
        let names = vec!["die".to_owned(), "Scope".to_owned(), "isSet".to_owned()];
        let wanted: Vec<&str> = names.iter().map(String::as_str).collect();
        let exporters = ts_exporters_of(&dir, &file, &wanted);
        let doc = document(Lang::TypeScript, "export function f(s: Scope) { die(\"no\"); isSet(s) }\n");
        let change = ts_combined_import(&doc, &file, &names, &exporters).expect("one import of both");
        assert_eq!(
            change.new_text(),
            "import { die, type Scope, isSet } from \"../internal\";\nexport function f(s: Scope) { die(\"no\"); isSet(s) }\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
