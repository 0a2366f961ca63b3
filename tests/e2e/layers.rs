//! Layers inside each crate: no circle between a crate's top-level modules. The edges are read from the source
//! (`use crate::x`, `crate::x::f()`, `super::x`, `self::x`, groups `crate::{a, b::c}` included, test code too),
//! at the granularity of the top-level module (`crate::tasks::fix` is `tasks`); a name the crate root re-exports
//! (`crate::Workspace`) counts as its module. A lower module that reaches up is a design question: the failure
//! names each circle, edge by edge, with the line that makes the edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CRATES: [&str; 5] = ["grammars", "engine", "ide", "server", "tests"];

#[test]
fn no_crate_has_a_circle_between_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_owned();
    let mut circles = Vec::new();
    for krate in CRATES {
        let graph = ModuleGraph::read(&root.join(krate).join("src"));
        assert!(!graph.modules.is_empty(), "{krate}: no module found");
        for circle in graph.circles() {
            circles.push(format!("{krate}: {} — the edges inside this circle:", graph.describe(&circle)));
            for ((from, to), at) in &graph.edges {
                if graph.same_circle(&circle, from, to) {
                    circles.push(format!("    {from} → {to} ({at})"));
                }
            }
        }
    }
    assert!(circles.is_empty(), "module circles:\n{}", circles.join("\n"));
}

#[test]
fn the_reader_finds_edges_of_every_form_and_names_a_circle() {
    let mut graph = ModuleGraph::default();
    graph.modules.extend(["a", "b", "c", "d"].map(String::from));
    graph.reexports.insert("Thing".into(), "d".into());
    let a = "use crate::{b::X, c};\n// crate::d::y in a comment\nlet s = \"crate::d\";\nmod tests { use super::*; }\n";
    graph.read_file(&["a".to_owned()], a, "a.rs");
    graph.read_file(&["b".to_owned(), "inner".to_owned()], "fn f() { super::super::c::g(); }\n", "b/inner.rs");
    graph.read_file(&["c".to_owned()], "use crate::Thing;\nfn f() -> char { '{' }\n", "c.rs");
    graph.read_file(&["d".to_owned()], "pub(crate) fn f() { super::a::g() }\n", "d.rs");
    let edges: Vec<_> = graph.edges.keys().map(|(from, to)| format!("{from}→{to}")).collect();
    assert_eq!(edges, ["a→b", "a→c", "b→c", "c→d", "d→a"]);
    let circles = graph.circles();
    assert_eq!(circles.len(), 1);
    assert_eq!(
        graph.describe(&circles[0]),
        "a → c (a.rs:1) → d (c.rs:1) → a (d.rs:1)",
        "the circle is named edge by edge"
    );
}

/// The modules of one crate and the edges between them, each with the first line that makes it.
#[derive(Default)]
struct ModuleGraph {
    modules: BTreeSet<String>,
    /// Names the crate root re-exports, and the module each comes from.
    reexports: BTreeMap<String, String>,
    edges: BTreeMap<(String, String), String>,
}

impl ModuleGraph {
    fn read(src: &Path) -> ModuleGraph {
        let mut graph = ModuleGraph::default();
        let mut files = Vec::new();
        collect_rs_files(src, &mut files);
        let module_path = |file: &Path| -> Vec<String> {
            let relative = file.strip_prefix(src).unwrap();
            let mut path: Vec<String> = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
            let last = path.pop().unwrap();
            let stem = last.trim_end_matches(".rs");
            if stem != "mod" {
                path.push(stem.to_owned());
            }
            path
        };
        let is_root = |file: &Path| {
            let relative = file.strip_prefix(src).unwrap();
            relative == Path::new("lib.rs") || relative == Path::new("main.rs") || relative.starts_with("bin")
        };
        for file in &files {
            if !is_root(file) {
                graph.modules.insert(module_path(file)[0].clone());
            }
        }
        if let Ok(lib) = std::fs::read_to_string(src.join("lib.rs")) {
            graph.read_reexports(&lib);
        }
        for file in &files {
            if is_root(file) {
                continue;
            }
            let text = std::fs::read_to_string(file).unwrap();
            let shown = file.strip_prefix(src.parent().unwrap()).unwrap().display().to_string();
            graph.read_file(&module_path(file), &text, &shown);
        }
        graph
    }

    /// `pub use module::{A, B}` and `pub use module::A` in the crate root.
    fn read_reexports(&mut self, lib: &str) {
        let tokens = tokens(lib);
        for (idx, window) in tokens.windows(3).enumerate() {
            if window[0].text != "pub" || window[1].text != "use" || !self.modules.contains(&window[2].text) {
                continue;
            }
            let module = window[2].text.clone();
            let mut depth = 0;
            for token in &tokens[idx + 3..] {
                match token.text.as_str() {
                    ";" if depth == 0 => break,
                    "{" => depth += 1,
                    "}" => depth -= 1,
                    _ if is_ident(&token.text) && depth <= 1 => {
                        self.reexports.entry(token.text.clone()).or_insert_with(|| module.clone());
                    }
                    _ => {}
                }
            }
        }
    }

    /// The edges of one file, whose module path is `file_module` (`["tasks", "fix"]`).
    fn read_file(&mut self, file_module: &[String], text: &str, shown: &str) {
        let tokens = tokens(text);
        let from = file_module[0].clone();
        // Inline modules (`mod tests { .. }`): their names, and the brace depth inside them.
        let mut inline: Vec<(String, usize)> = Vec::new();
        let mut depth = 0;
        let mut idx = 0;
        while idx < tokens.len() {
            let text = tokens[idx].text.as_str();
            match text {
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if inline.last().is_some_and(|(_, inner)| *inner > depth) {
                        inline.pop();
                    }
                }
                "mod" if tokens.get(idx + 2).is_some_and(|token| token.text == "{") => {
                    inline.push((tokens[idx + 1].text.clone(), depth + 1));
                }
                _ => {}
            }
            let starts_path = matches!(text, "crate" | "super" | "self")
                && tokens.get(idx + 1).is_some_and(|token| token.text == "::")
                && (idx == 0 || tokens[idx - 1].text != "::");
            if !starts_path {
                idx += 1;
                continue;
            }
            let mut scope: Vec<String> = file_module.to_vec();
            scope.extend(inline.iter().map(|(name, _)| name.clone()));
            let mut at = idx;
            let base: Option<Vec<String>> = match text {
                "crate" => {
                    at += 2;
                    Some(Vec::new())
                }
                "self" => {
                    at += 2;
                    Some(scope)
                }
                _ => {
                    let mut base = scope;
                    let mut ok = true;
                    while tokens.get(at).is_some_and(|token| token.text == "super")
                        && tokens.get(at + 1).is_some_and(|token| token.text == "::")
                    {
                        ok &= base.pop().is_some();
                        at += 2;
                    }
                    ok.then_some(base)
                }
            };
            let line = tokens[idx].line;
            if let Some(base) = base {
                for name in first_segments(&tokens, at) {
                    if let Some(to) = self.top_module(&base, &name) {
                        if to != from {
                            self.edges.entry((from.clone(), to)).or_insert_with(|| format!("{shown}:{line}"));
                        }
                    }
                }
            }
            idx = at.max(idx + 1);
        }
    }

    /// The top-level module that `base::name` lies in, when it is one of this crate's.
    fn top_module(&self, base: &[String], name: &str) -> Option<String> {
        if let Some(first) = base.first() {
            return Some(first.clone());
        }
        if self.modules.contains(name) {
            return Some(name.to_owned());
        }
        self.reexports.get(name).cloned()
    }

    /// Each circle: the strongly connected components of more than one module, as one cycle through each.
    fn circles(&self) -> Vec<Vec<String>> {
        let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (from, to) in self.edges.keys() {
            next.entry(from).or_default().push(to);
        }
        let reaches = |start: &str| -> BTreeSet<String> {
            let mut seen = BTreeSet::new();
            let mut stack = vec![start.to_owned()];
            while let Some(module) = stack.pop() {
                for to in next.get(module.as_str()).into_iter().flatten() {
                    if seen.insert((*to).to_owned()) {
                        stack.push((*to).to_owned());
                    }
                }
            }
            seen
        };
        let reach: BTreeMap<&str, BTreeSet<String>> =
            self.modules.iter().map(|module| (module.as_str(), reaches(module))).collect();
        let mut done = BTreeSet::new();
        let mut circles = Vec::new();
        for module in &self.modules {
            if done.contains(module) || !reach[module.as_str()].contains(module) {
                continue;
            }
            let component: BTreeSet<String> =
                reach[module.as_str()].iter().filter(|other| reach[other.as_str()].contains(module)).cloned().collect();
            done.extend(component.iter().cloned());
            circles.push(self.shortest_cycle(module, &next, &component));
        }
        circles
    }

    /// A shortest cycle from `start` back to itself within `component` (breadth first).
    fn shortest_cycle(
        &self,
        start: &str,
        next: &BTreeMap<&str, Vec<&str>>,
        component: &BTreeSet<String>,
    ) -> Vec<String> {
        let mut parent: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start.to_owned()]);
        while let Some(module) = queue.pop_front() {
            for to in next.get(module.as_str()).into_iter().flatten() {
                if *to == start {
                    let mut cycle = vec![module.clone()];
                    while let Some(up) = parent.get(cycle.last().unwrap()) {
                        cycle.push(up.clone());
                    }
                    cycle.reverse();
                    return cycle;
                }
                if component.contains(*to) && !parent.contains_key(*to) && *to != start {
                    parent.insert((*to).to_owned(), module.clone());
                    queue.push_back((*to).to_owned());
                }
            }
        }
        vec![start.to_owned()]
    }

    /// Whether `from → to` is an edge inside the strongly connected component of `circle`.
    fn same_circle(&self, circle: &[String], from: &str, to: &str) -> bool {
        let start = &circle[0];
        let reaches = |from: &str, goal: &str| -> bool {
            let mut seen = BTreeSet::from([from.to_owned()]);
            let mut stack = vec![from.to_owned()];
            while let Some(module) = stack.pop() {
                if module == goal {
                    return true;
                }
                for (edge_from, edge_to) in self.edges.keys() {
                    if *edge_from == module && seen.insert(edge_to.clone()) {
                        stack.push(edge_to.clone());
                    }
                }
            }
            false
        };
        let inside = |module: &str| reaches(start, module) && reaches(module, start);
        inside(from) && inside(to)
    }

    /// `a → b (file:line) → a (file:line)`.
    fn describe(&self, cycle: &[String]) -> String {
        let mut out = cycle[0].clone();
        for (idx, from) in cycle.iter().enumerate() {
            let to = &cycle[(idx + 1) % cycle.len()];
            let at = &self.edges[&(from.clone(), to.clone())];
            out.push_str(&format!(" → {to} ({at})"));
        }
        out
    }
}

fn collect_rs_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_rs_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// The first segment of each path that starts at `tokens[at]`: `x` of `x::y`, `a` and `b` of `{a, b::c}`.
fn first_segments(tokens: &[Token], at: usize) -> Vec<String> {
    match tokens.get(at).map(|token| token.text.as_str()) {
        Some("{") => {
            let mut names = Vec::new();
            let mut depth = 0;
            let mut item_start = true;
            for token in &tokens[at + 1..] {
                match token.text.as_str() {
                    "{" => depth += 1,
                    "}" if depth == 0 => break,
                    "}" => depth -= 1,
                    "," if depth == 0 => item_start = true,
                    name if item_start && depth == 0 => {
                        if is_ident(name) && name != "self" {
                            names.push(name.to_owned());
                        }
                        item_start = false;
                    }
                    _ => {}
                }
            }
            names
        }
        Some(name) if is_ident(name) => vec![name.to_owned()],
        _ => Vec::new(),
    }
}

fn is_ident(text: &str) -> bool {
    text.chars().next().is_some_and(|first| first.is_alphabetic() || first == '_')
}

struct Token {
    text: String,
    line: usize,
}

/// Identifiers, `::` and single punctuation; comments, strings and character literals left out.
fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut idx = 0;
    let count_lines = |from: usize, to: usize, line: &mut usize| {
        *line += chars[from..to.min(chars.len())].iter().filter(|c| **c == '\n').count();
    };
    while idx < chars.len() {
        let c = chars[idx];
        let next = chars.get(idx + 1).copied();
        if c == '\n' {
            line += 1;
            idx += 1;
        } else if c.is_whitespace() {
            idx += 1;
        } else if c == '/' && next == Some('/') {
            while idx < chars.len() && chars[idx] != '\n' {
                idx += 1;
            }
        } else if c == '/' && next == Some('*') {
            let start = idx;
            let mut depth = 0;
            while idx < chars.len() {
                if chars[idx] == '/' && chars.get(idx + 1) == Some(&'*') {
                    depth += 1;
                    idx += 2;
                } else if chars[idx] == '*' && chars.get(idx + 1) == Some(&'/') {
                    depth -= 1;
                    idx += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    idx += 1;
                }
            }
            count_lines(start, idx, &mut line);
        } else if let Some(end) = raw_string_end(&chars, idx) {
            count_lines(idx, end, &mut line);
            idx = end;
        } else if c == '"' || (c == 'b' && next == Some('"')) {
            let start = idx;
            idx += if c == 'b' { 2 } else { 1 };
            while idx < chars.len() && chars[idx] != '"' {
                idx += if chars[idx] == '\\' { 2 } else { 1 };
            }
            idx += 1;
            count_lines(start, idx, &mut line);
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'), else a lifetime or label.
            if next == Some('\\') {
                idx += 2;
                while idx < chars.len() && chars[idx] != '\'' {
                    idx += 1;
                }
                idx += 1;
            } else if chars.get(idx + 2) == Some(&'\'') {
                idx += 3;
            } else {
                idx += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = idx;
            while idx < chars.len() && (chars[idx].is_alphanumeric() || chars[idx] == '_') {
                idx += 1;
            }
            tokens.push(Token { text: chars[start..idx].iter().collect(), line });
        } else if c == ':' && next == Some(':') {
            tokens.push(Token { text: "::".into(), line });
            idx += 2;
        } else {
            tokens.push(Token { text: c.to_string(), line });
            idx += 1;
        }
    }
    tokens
}

/// The end of a raw string (`r"..."`, `r#"..."#`, `br#"..."#`) starting at `idx`, if one does.
fn raw_string_end(chars: &[char], idx: usize) -> Option<usize> {
    if idx > 0 && (chars[idx - 1].is_alphanumeric() || chars[idx - 1] == '_') {
        return None;
    }
    let mut at = idx;
    if chars.get(at) == Some(&'b') {
        at += 1;
    }
    if chars.get(at) != Some(&'r') {
        return None;
    }
    at += 1;
    let mut hashes = 0;
    while chars.get(at) == Some(&'#') {
        hashes += 1;
        at += 1;
    }
    if chars.get(at) != Some(&'"') {
        return None;
    }
    at += 1;
    while at < chars.len() {
        if chars[at] == '"' && (1..=hashes).all(|offset| chars.get(at + offset) == Some(&'#')) {
            return Some(at + 1 + hashes);
        }
        at += 1;
    }
    Some(chars.len())
}
