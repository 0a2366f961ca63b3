//! Characterisation tests, the pure half: inputs for a function (harvested from calls with literal arguments in
//! the project and its doc comments, made from the parameter types, proposed by a model), the probe that runs
//! the function on them and prints what it returns, mutant schemata (every mutant compiled into one copy of the
//! function, each switched on at run time by `SPARK_MUTANT`), and the assertions written from observed values.
//! `probe.rs` runs these in the scratch copy.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use spark_grammars::tree_sitter::Node;
use spark_grammars::Lang;

/// The environment variable that selects a mutant in the schemata; unset, the function is the original.
pub const MUTANT_VAR: &str = "SPARK_MUTANT";
/// The environment variable that makes the probe skip the inputs before this index (after a crash).
pub const FROM_VAR: &str = "SPARK_PROBE_FROM";
/// The prefix of the probe's output lines.
pub const PROBE_MARK: &str = "SPARK_PROBE";
/// A Debug output longer than this is not written into a test.
pub const MAX_DEBUG_LEN: usize = 240;

/// Why a function is not run: it reaches outside the process (files, network, environment, processes). `text`
/// is the function with the functions of its file it calls.
pub fn side_effect(lang: Lang, text: &str) -> Option<&'static str> {
    let rust: &[(&str, &str)] = &[
        ("std::fs", "it reads or writes files"),
        ("fs::", "it reads or writes files"),
        ("File::", "it reads or writes files"),
        ("OpenOptions", "it reads or writes files"),
        ("read_dir", "it reads or writes files"),
        (".metadata()", "it reads or writes files"),
        (".exists()", "it reads or writes files"),
        (".is_dir()", "it reads or writes files"),
        (".is_file()", "it reads or writes files"),
        ("canonicalize", "it reads or writes files"),
        ("std::net", "it uses the network"),
        ("TcpStream", "it uses the network"),
        ("UdpSocket", "it uses the network"),
        ("env::", "it reads the environment"),
        ("Command::new", "it spawns processes"),
        ("process::", "it spawns processes"),
        ("stdin()", "it reads the terminal"),
    ];
    let typescript: &[(&str, &str)] = &[
        ("fs.", "it reads or writes files"),
        ("readFile", "it reads or writes files"),
        ("writeFile", "it reads or writes files"),
        ("require(", "it loads modules at run time"),
        ("import(", "it loads modules at run time"),
        ("fetch(", "it uses the network"),
        ("XMLHttpRequest", "it uses the network"),
        ("WebSocket", "it uses the network"),
        ("process.env", "it reads the environment"),
        ("child_process", "it spawns processes"),
        ("process.", "it touches the process"),
        ("Deno.", "it touches the runtime"),
        ("localStorage", "it touches storage"),
    ];
    let patterns = match lang {
        Lang::Rust => rust,
        Lang::TypeScript | Lang::Tsx => typescript,
    };
    let code = without_comments(text);
    patterns.iter().find(|(pattern, _)| code.contains(pattern)).map(|(_, why)| *why)
}

/// `text` without `//` line comments (doc comments name files and processes without touching them).
fn without_comments(text: &str) -> String {
    text.lines().map(|line| line.split_once("//").map_or(line, |(code, _)| code)).collect::<Vec<_>>().join("\n")
}

/// The functions of a file by name (the first of each name), from the grammar's function kinds.
pub fn functions_by_name<'t>(root: Node<'t>, source: &str) -> HashMap<String, Node<'t>> {
    let mut found = HashMap::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if matches!(node.kind(), "function_item" | "function_declaration" | "method_definition") {
            if let Some(name) = node.child_by_field_name("name") {
                found.entry(source[name.byte_range()].to_owned()).or_insert(node);
            }
        }
        let mut cursor = node.walk();
        stack.extend(node.named_children(&mut cursor));
    }
    found
}

/// The function's text with the text of the functions of its file it calls, transitively (what runs when it
/// runs, as far as the file shows).
pub fn with_callees(root: Node, source: &str, function: Range<usize>) -> String {
    let functions = functions_by_name(root, source);
    let mut seen = BTreeSet::new();
    let mut queue = vec![function];
    let mut out = String::new();
    while let Some(range) = queue.pop() {
        if !seen.insert((range.start, range.end)) {
            continue;
        }
        let body = &source[range];
        out.push_str(body);
        out.push('\n');
        for (name, node) in &functions {
            if body.contains(&format!("{name}(")) {
                queue.push(node.byte_range());
            }
        }
    }
    out
}

/// Argument lists of calls `name(…)` in `text` whose arguments are all literals, each `(…)` with its
/// parentheses, in order of appearance and without repeats. Method calls (`x.name(`) and the definition
/// (`fn name(`, `function name(`) are not calls of the function.
pub fn literal_calls(lang: Lang, text: &str, name: &str, arity: Option<(usize, usize)>) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let needle = format!("{name}(");
    let mut from = 0;
    while let Some(at) = text[from..].find(&needle).map(|at| at + from) {
        from = at + needle.len();
        let before = text[..at].chars().next_back();
        if before.is_some_and(|ch| ch.is_alphanumeric() || ch == '_' || ch == '.' || ch == '$') {
            continue;
        }
        let head = text[..at].trim_end();
        if head.ends_with("fn") || head.ends_with("function") {
            continue;
        }
        let open = at + name.len();
        let Some(close) = matching_paren(text, open) else { continue };
        let arguments = &text[open..=close];
        let inner = &arguments[1..arguments.len() - 1];
        if inner.contains('\n') || !is_literal_only(lang, inner) {
            continue;
        }
        let count = split_arguments(inner).len();
        if arity.is_some_and(|(required, all)| count < required || count > all) {
            continue;
        }
        if !found.iter().any(|seen| seen == arguments) {
            found.push(arguments.to_owned());
        }
    }
    found
}

/// The byte offset of the `)` closing the `(` at `open`, skipping strings and characters.
fn matching_paren(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut at = open;
    while at < bytes.len() {
        match bytes[at] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return (bytes[at] == b')').then_some(at);
                }
            }
            quote @ (b'"' | b'\'' | b'`') => {
                at += 1;
                while at < bytes.len() && bytes[at] != quote {
                    if bytes[at] == b'\\' {
                        at += 1;
                    }
                    if bytes[at.min(bytes.len() - 1)] == b'\n' && quote != b'`' {
                        return None;
                    }
                    at += 1;
                }
            }
            b'\n' => return None,
            _ => {}
        }
        at += 1;
    }
    None
}

/// The top-level comma-separated parts of an argument list's inside.
pub fn split_arguments(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (at, ch) in inner.char_indices() {
        if let Some(open) = quote {
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == open {
                quote = None;
            }
            continue;
        }
        match ch {
            '"' | '`' => quote = Some(ch),
            '\'' if inner[at + 1..].chars().nth(1) == Some('\'') || inner[at + 1..].starts_with('\\') => {
                quote = Some(ch)
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(inner[start..at].trim());
                start = at + 1;
            }
            _ => {}
        }
    }
    let last = inner[start..].trim();
    if !last.is_empty() {
        parts.push(last);
    }
    parts
}

/// Whether `arguments` holds only literals: strings, characters, numbers, booleans, and lists or options of
/// them (no name a test could not see, no call that could reach outside).
pub fn is_literal_only(lang: Lang, arguments: &str) -> bool {
    let allowed: &[&str] = match lang {
        Lang::Rust => &["true", "false", "Some", "None", "vec", "b", "r", "to_string", "to_owned", "String", "from"],
        Lang::TypeScript | Lang::Tsx => &["true", "false", "null", "undefined"],
    };
    let mut chars = arguments.char_indices().peekable();
    while let Some((at, ch)) = chars.next() {
        match ch {
            '"' | '`' | '\'' => {
                if ch == '`' && arguments[at..].contains("${") {
                    return false;
                }
                let mut escaped = false;
                let mut closed = false;
                for (_, next) in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if next == '\\' {
                        escaped = true;
                    } else if next == ch {
                        closed = true;
                        break;
                    }
                }
                if !closed {
                    return false;
                }
            }
            ch if ch.is_alphabetic() || ch == '_' => {
                let mut end = at + ch.len_utf8();
                while let Some((next_at, next)) = chars.peek().copied() {
                    if next.is_alphanumeric() || next == '_' {
                        end = next_at + next.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                let word = &arguments[at..end];
                let is_suffix = arguments[..at].ends_with(|ch: char| ch.is_ascii_digit());
                if !allowed.contains(&word) && !is_suffix {
                    return false;
                }
            }
            ch if ch.is_ascii_digit() || " \t,-+.&[]()!:{}".contains(ch) => {}
            _ => return false,
        }
    }
    !arguments.trim().is_empty()
}

/// A parameter as the signature spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parameter {
    pub name: String,
    pub ty: String,
}

/// The parameters of the function at `function` (without `self`), in order; `None` with a receiver.
pub fn parameters(function: Node, source: &str) -> Option<Vec<Parameter>> {
    let list = function.child_by_field_name("parameters")?;
    let mut cursor = list.walk();
    let mut out = Vec::new();
    for parameter in list.named_children(&mut cursor) {
        match parameter.kind() {
            "self_parameter" => return None,
            "comment" => {}
            _ => {
                let name = parameter.child_by_field_name("pattern").map(|node| &source[node.byte_range()]);
                let ty = parameter
                    .child_by_field_name("type")
                    .map(|node| source[node.byte_range()].trim_start_matches(':').trim().to_owned());
                out.push(Parameter {
                    name: name.unwrap_or("_").to_owned(),
                    ty: ty.unwrap_or_else(|| "any".to_owned()),
                });
            }
        }
    }
    Some(out)
}

/// The literals a function compares with or computes from: its boundaries are the inputs that tell a mutant
/// (`<` for `<=`, a constant ±1) from the original.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Literals {
    pub integers: Vec<i64>,
    /// As written, quotes included.
    pub strings: Vec<String>,
    pub chars: Vec<String>,
}

pub fn literals(function: Node, source: &str) -> Literals {
    let mut found = Literals::default();
    let mut stack = vec![function];
    while let Some(node) = stack.pop() {
        let text = &source[node.byte_range()];
        match node.kind() {
            "integer_literal" | "number" => {
                let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
                let value = digits.parse::<i64>().ok().filter(|value| *value < 1 << 40);
                if let Some(value) = value.filter(|value| !found.integers.contains(value)) {
                    found.integers.push(value);
                }
            }
            "string_literal" | "string"
                if text.len() <= 40 && !text.contains('\n') && !found.strings.iter().any(|seen| seen == text) =>
            {
                found.strings.push(text.to_owned());
            }
            "char_literal" if !found.chars.iter().any(|seen| seen == text) => found.chars.push(text.to_owned()),
            _ => {}
        }
        // Children pushed last to first, so that they are visited in document order.
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    found
}

/// `values` (of a parameter of type `ty`) with the function's literals of that kind added: each integer and its
/// neighbours for an integer parameter, each string for a string one, each character for a `char`.
pub fn add_literals(lang: Lang, ty: &str, found: &Literals, values: &mut Vec<String>) {
    let ty = ty.trim();
    let mut push = |value: String| {
        if !values.contains(&value) {
            values.push(value);
        }
    };
    let integer = match lang {
        Lang::Rust => matches!(
            ty,
            "u8" | "u16" | "u32" | "u64" | "u128" | "usize" | "i8" | "i16" | "i32" | "i64" | "i128" | "isize"
        ),
        Lang::TypeScript | Lang::Tsx => ty == "number",
    };
    if integer {
        let unsigned = ty.starts_with('u');
        let max = match ty {
            "u8" => 255,
            "i8" => 127,
            _ => i64::MAX,
        };
        for value in found.integers.iter().take(8) {
            for near in [value - 1, *value, value + 1] {
                if (near >= 0 || !unsigned) && near <= max {
                    push(near.to_string());
                }
            }
        }
        return;
    }
    let text = match lang {
        Lang::Rust => {
            let owned = ty == "String";
            let borrowed = ty.strip_prefix('&').is_some_and(|rest| rest.trim_start().ends_with("str"));
            (owned || borrowed).then_some(owned)
        }
        Lang::TypeScript | Lang::Tsx => (ty == "string").then_some(false),
    };
    if let Some(owned) = text {
        for value in found.strings.iter().take(8) {
            push(if owned { format!("{value}.to_string()") } else { value.clone() });
        }
        return;
    }
    if lang == Lang::Rust && ty == "char" {
        for value in found.chars.iter().take(8) {
            push(value.clone());
        }
    }
}

/// Values of a TypeScript type for a first probe (see [`rust_values`]).
pub fn ts_values(ty: &str) -> Vec<String> {
    let ty = ty.trim();
    let strings = ["\"\"", "\"a\"", "\"hello\"", "\"Hello World\"", "\"foo_bar-baz\"", "\"abc123\""];
    match ty {
        "string" => return strings.map(str::to_owned).to_vec(),
        "number" => return ["0", "1", "2", "-1", "7", "10", "100", "2.5"].map(str::to_owned).to_vec(),
        "boolean" => return vec!["true".into(), "false".into()],
        "bigint" => return ["0n", "1n", "10n"].map(str::to_owned).to_vec(),
        _ => {}
    }
    let element = ty
        .strip_prefix("readonly ")
        .unwrap_or(ty)
        .strip_suffix("[]")
        .or_else(|| ty.strip_prefix("Array<").and_then(|rest| rest.strip_suffix('>')))
        .or_else(|| ty.strip_prefix("ReadonlyArray<").and_then(|rest| rest.strip_suffix('>')));
    if let Some(element) = element {
        return slices(&ts_values(element), "[", "]");
    }
    // A union of literal types: each literal.
    let parts: Vec<&str> = ty.split('|').map(str::trim).filter(|part| !part.is_empty()).collect();
    if parts.len() > 1 {
        let mut values = Vec::new();
        for part in parts {
            let literal = part.starts_with(['"', '\''])
                || part.parse::<f64>().is_ok()
                || ["true", "false", "undefined", "null"].contains(&part);
            if literal {
                values.push(part.to_owned());
            } else {
                values.extend(ts_values(part));
            }
        }
        return values;
    }
    Vec::new()
}

/// Values of a Rust type for a first probe: a few ordinary ones and the edges (empty, zero, one, negative).
/// `generics` is the function's header, where a type parameter's bounds are read.
pub fn rust_values(ty: &str, generics: &str) -> Vec<String> {
    let ty = ty.trim();
    let strings = ["\"\"", "\"a\"", "\"hello\"", "\"Hello World\"", "\"foo_bar-baz\"", "\"abc123\"", "\"x y\\tz\""];
    let as_owned = |values: &[&str]| values.iter().map(|value| format!("{value}.to_string()")).collect();
    if let Some(rest) = ty.strip_prefix("&mut ") {
        return rust_values(rest, generics).into_iter().map(|value| format!("&mut {value}")).collect();
    }
    if let Some(rest) = ty.strip_prefix('&') {
        let rest = rest.trim_start();
        let rest = if rest.starts_with('\'') { rest.split_once(' ').map_or(rest, |(_, rest)| rest) } else { rest };
        if rest == "str" {
            return strings.iter().map(|value| value.to_string()).collect();
        }
        if rest == "[u8]" {
            return ["b\"\"", "b\"a\"", "b\"hello\"", "b\"\\x00\\xff\\x10\""].map(str::to_owned).to_vec();
        }
        if let Some(element) = rest.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
            return slices(&rust_values(element, generics), "&[", "]");
        }
        return rust_values(rest, generics).into_iter().map(|value| format!("&{value}")).collect();
    }
    match ty {
        "String" => return as_owned(&strings),
        "bool" => return vec!["true".into(), "false".into()],
        "char" => return ["'a'", "'Z'", "'0'", "' '", "'_'", "'é'"].map(str::to_owned).to_vec(),
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => {
            return ["0", "1", "2", "3", "7", "10", "100"].map(str::to_owned).to_vec()
        }
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => {
            return ["0", "1", "2", "-1", "7", "-10", "100"].map(str::to_owned).to_vec()
        }
        "f32" | "f64" => return ["0.0", "1.0", "2.5", "-1.5", "100.0"].map(str::to_owned).to_vec(),
        _ => {}
    }
    if let Some(element) = ty.strip_prefix("Vec<").and_then(|rest| rest.strip_suffix('>')) {
        return slices(&rust_values(element, generics), "vec![", "]");
    }
    if let Some(inner) = ty.strip_prefix("Option<").and_then(|rest| rest.strip_suffix('>')) {
        let mut values = vec!["None".to_owned()];
        values.extend(rust_values(inner, generics).into_iter().take(4).map(|value| format!("Some({value})")));
        return values;
    }
    let string_like = ["AsRef<str>", "Into<String>", "ToString", "Display", "Into<Cow", "AsRef<OsStr>"];
    let bytes_like = ["AsRef<[u8]>"];
    let bounds = type_bounds(ty, generics);
    if bytes_like.iter().any(|bound| bounds.contains(bound)) {
        return ["\"\"", "\"a\"", "\"hello\"", "\"Hello World\""].map(str::to_owned).to_vec();
    }
    if string_like.iter().any(|bound| bounds.contains(bound)) || ty.starts_with("Cow<") {
        return strings.iter().map(|value| value.to_string()).collect();
    }
    Vec::new()
}

/// The bounds of a type: `impl Trait` itself, or a type parameter's bounds in the header.
fn type_bounds(ty: &str, header: &str) -> String {
    if let Some(bounds) = ty.strip_prefix("impl ") {
        return bounds.to_owned();
    }
    if ty.is_empty() || !ty.chars().all(|ch| ch.is_alphanumeric() || ch == '_') {
        return String::new();
    }
    let mut bounds = String::new();
    let mut from = 0;
    while let Some(at) = header[from..].find(ty).map(|at| at + from) {
        from = at + ty.len();
        let boundary = !header[..at].ends_with(|ch: char| ch.is_alphanumeric() || ch == '_');
        if boundary && header[from..].trim_start().starts_with(':') {
            let rest = &header[from..];
            let end = rest.find([',', '{', '>']).map_or(rest.len(), |end| end + 1);
            bounds.push_str(&rest[..end.min(rest.len())]);
        }
    }
    bounds
}

fn slices(elements: &[String], open: &str, close: &str) -> Vec<String> {
    if elements.is_empty() {
        return Vec::new();
    }
    let pick = |idx: usize| elements[idx % elements.len()].clone();
    vec![
        format!("{open}{close}"),
        format!("{open}{}{close}", pick(1)),
        format!("{open}{}, {}, {}{close}", pick(1), pick(2), pick(3)),
        format!("{open}{}, {}{close}", pick(4), pick(0)),
    ]
}

/// Argument lists from each parameter's values: every value of each parameter with the others at a usual value,
/// then mixed ones; at most `limit`.
pub fn combine(values: &[Vec<String>], limit: usize) -> Vec<String> {
    if values.iter().any(Vec::is_empty) {
        return Vec::new();
    }
    let base: Vec<usize> = values.iter().map(|options| 2.min(options.len() - 1)).collect();
    let mut calls: Vec<String> = Vec::new();
    let mut push = |choice: &[usize]| {
        let call = format!(
            "({})",
            choice.iter().zip(values).map(|(idx, options)| options[*idx].as_str()).collect::<Vec<_>>().join(", ")
        );
        if !calls.contains(&call) {
            calls.push(call);
        }
    };
    for (param_idx, options) in values.iter().enumerate() {
        for value_idx in 0..options.len() {
            let mut choice = base.clone();
            choice[param_idx] = value_idx;
            push(&choice);
        }
    }
    if values.len() > 1 {
        for round in 0..limit {
            let choice: Vec<usize> =
                values.iter().enumerate().map(|(idx, options)| (round * (idx + 1) + idx) % options.len()).collect();
            push(&choice);
        }
    }
    calls.truncate(limit);
    calls
}

/// What the function gave for one input in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// Its Debug output (Rust) or its JSON (TypeScript).
    Value(String),
    Panic,
    /// The process died or hung on this input (a stack overflow, an abort, an endless loop).
    Crashed,
    /// An output too long to write into a test.
    Big,
}

/// The probe's report lines: `SPARK_PROBE <idx> ok "<debug, escaped>"`, `… panic`, `… big`; also which input
/// was the last to start (a crash or a hang is that input's).
pub fn parse_probe(stdout: &str) -> (HashMap<usize, Observation>, Option<usize>) {
    let mut observed = HashMap::new();
    let mut started = None;
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix(PROBE_MARK).and_then(|rest| rest.strip_prefix(' ')) else { continue };
        let Some((idx, rest)) = rest.split_once(' ') else { continue };
        let Ok(idx) = idx.parse::<usize>() else { continue };
        let (word, payload) = rest.split_once(' ').unwrap_or((rest, ""));
        let observation = match word {
            "start" => {
                started = Some(idx);
                continue;
            }
            "ok" => match unescape_quoted(payload) {
                Some(value) if value.len() <= MAX_DEBUG_LEN => Observation::Value(value),
                Some(_) => Observation::Big,
                None => continue,
            },
            "panic" => Observation::Panic,
            "big" => Observation::Big,
            _ => continue,
        };
        observed.insert(idx, observation);
    }
    (observed, started)
}

/// A quoted string as Rust's Debug or JSON writes it, unquoted.
pub fn unescape_quoted(quoted: &str) -> Option<String> {
    let inner = quoted.trim().strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            '0' => out.push('\0'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'u' => {
                let rest: String = chars.clone().collect();
                let (hex, used) = if let Some(braced) = rest.strip_prefix('{') {
                    let end = braced.find('}')?;
                    (braced[..end].to_owned(), end + 2)
                } else {
                    (rest.chars().take(4).collect::<String>(), 4)
                };
                let code = u32::from_str_radix(&hex, 16).ok()?;
                // JSON writes characters outside the BMP as surrogate pairs.
                if (0xD800..0xDC00).contains(&code) {
                    for _ in 0..used {
                        chars.next();
                    }
                    let low: String = chars.clone().take(6).collect();
                    let low = u32::from_str_radix(low.strip_prefix("\\u")?, 16).ok()?;
                    for _ in 0..6 {
                        chars.next();
                    }
                    out.push(char::from_u32(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))?);
                    continue;
                }
                out.push(char::from_u32(code)?);
                for _ in 0..used {
                    chars.next();
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// The node script that probes a TypeScript function: `build` transpiles every TypeScript file of the package
/// (the TypeScript compiler's `transpileModule`, no type check) to CommonJS under `out`; without it, it loads the
/// module from there, calls the function on each input and prints what it returned as a JavaScript expression
/// (`ok "<expression>"`, JSON-quoted), `panic` for a throw, `big` for a value with no literal form.
pub fn ts_probe_script(typescript_lib: &str, out_dir: &str, module: &str, export: &str, calls: &[String]) -> String {
    let mark = PROBE_MARK;
    let quote = |text: &str| serde_json::Value::String(text.to_owned()).to_string();
    let calls_js: String = calls.iter().enumerate().map(|(idx, call)| format!("  {idx}: () => f{call},\n")).collect();
    format!(
        r#""use strict";
const fs = require("fs");
const path = require("path");
const out = {out};
if (process.argv[2] === "build") {{
  const ts = require({lib});
  const walk = (dir) => {{
    for (const entry of fs.readdirSync(dir, {{ withFileTypes: true }})) {{
      if (["node_modules", ".git", ".spark-probe"].includes(entry.name)) continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (/\.(ts|tsx|mts|cts)$/.test(entry.name) && !entry.name.endsWith(".d.ts")) {{
        const source = fs.readFileSync(full, "utf8");
        const js = ts.transpileModule(source, {{
          fileName: full,
          compilerOptions: {{ module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2020, esModuleInterop: true, jsx: ts.JsxEmit.React }},
        }}).outputText;
        const target = path.join(out, path.relative(process.cwd(), full)).replace(/\.(ts|tsx|mts|cts)$/, ".js");
        fs.mkdirSync(path.dirname(target), {{ recursive: true }});
        fs.writeFileSync(target, js);
      }}
    }}
  }};
  walk(process.cwd());
  process.exit(0);
}}
const literal = (value, depth) => {{
  if (depth > 6) return undefined;
  if (value === undefined) return "undefined";
  if (value === null) return "null";
  if (typeof value === "number") return Object.is(value, -0) ? "-0" : Number.isFinite(value) ? String(value) : Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
  if (typeof value === "bigint") return value + "n";
  if (typeof value === "string" || typeof value === "boolean") return JSON.stringify(value);
  if (Array.isArray(value)) {{
    const items = value.map((item) => literal(item, depth + 1));
    return items.includes(undefined) ? undefined : "[" + items.join(", ") + "]";
  }}
  if (typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {{
    const parts = [];
    for (const key of Object.keys(value)) {{
      const item = literal(value[key], depth + 1);
      if (item === undefined) return undefined;
      parts.push(JSON.stringify(key) + ": " + item);
    }}
    return "{{" + parts.join(", ") + "}}";
  }}
  return undefined;
}};
const loaded = require(path.join(out, {module}));
const f = loaded[{export}];
const calls = {{
{calls_js}}};
const from = Number(process.env.{from} || 0);
for (const idx of Object.keys(calls).map(Number)) {{
  if (idx < from) continue;
  console.log("{mark} " + idx + " start");
  let shown;
  try {{
    const value = calls[idx]();
    if (value && typeof value.then === "function") {{ console.log("{mark} " + idx + " big"); continue; }}
    shown = literal(value, 0);
  }} catch (error) {{
    console.log("{mark} " + idx + " panic");
    continue;
  }}
  if (shown === undefined || shown.length > {max}) console.log("{mark} " + idx + " big");
  else console.log("{mark} " + idx + " ok " + JSON.stringify(shown));
}}
"#,
        out = quote(out_dir),
        lib = quote(typescript_lib),
        module = quote(module),
        export = quote(export),
        from = FROM_VAR,
        max = MAX_DEBUG_LEN,
    )
}

/// A mutant of the schemata: its number (the value of [`MUTANT_VAR`] that selects it) and what it changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutant {
    pub id: usize,
    pub what: String,
    /// 0-based line in the file of the change (where a compiler reports an error in it).
    pub line: usize,
}

#[derive(Debug, Clone)]
enum Change {
    /// Replace the operator (a child of the node at `at`) by `to`.
    Operator { at: Range<usize>, to: &'static str },
    /// Replace the whole node by `to`.
    Replace(String),
}

#[derive(Debug, Clone)]
struct Site {
    node: Range<usize>,
    change: Change,
    mutant: Mutant,
}

/// The function at `function` with its mutants compiled in, each behind a run-time switch: an operator
/// swapped (comparison flipped at its boundary, `==`/`!=`, `&&`/`||`, `+`/`-`, `*`→`+`), an integer ±1, an
/// early return of the default value (Rust). Mutants in `skip` (they did not compile) are left out. Returns the
/// whole file's text with the schemata in place of the function, and the mutants.
pub fn schemata(
    lang: Lang,
    root: Node,
    source: &str,
    function: Range<usize>,
    skip: &BTreeSet<usize>,
    max_mutants: usize,
) -> (String, Vec<Mutant>) {
    let Some(function_node) = root.descendant_for_byte_range(function.start, function.end) else {
        return (source.to_owned(), Vec::new());
    };
    let mut sites = Vec::new();
    let mut next_id = 1;
    let mut add = |node: Range<usize>, change: Change, what: String, sites: &mut Vec<Site>| {
        let line = source[..node.start].matches('\n').count();
        let id = next_id;
        next_id += 1;
        sites.push(Site { node, change, mutant: Mutant { id, what, line } });
    };
    let mut stack = vec![function_node];
    let mut ordered = Vec::new();
    while let Some(node) = stack.pop() {
        ordered.push(node);
        let mut cursor = node.walk();
        let children: Vec<_> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    for node in ordered {
        if in_unmutable_place(node, function_node) {
            continue;
        }
        match node.kind() {
            "binary_expression" => {
                let Some(operator) = node.child_by_field_name("operator") else { continue };
                let Some(to) = swapped_operator(&source[operator.byte_range()]) else { continue };
                let what = format!("`{}` → `{to}`", &source[operator.byte_range()]);
                add(node.byte_range(), Change::Operator { at: operator.byte_range(), to }, what, &mut sites);
            }
            "integer_literal" | "number" => {
                let token = &source[node.byte_range()];
                let digits: String = token.chars().take_while(char::is_ascii_digit).collect();
                let suffix = &token[digits.len()..];
                let Ok(value) = digits.parse::<u64>() else { continue };
                let valid_suffix = suffix.is_empty() || (lang == Lang::Rust && suffix.starts_with(['u', 'i']));
                if !valid_suffix
                    || (token.starts_with('0') && token.len() > 1 && !suffix.is_empty() && digits.len() > 1)
                {
                    continue;
                }
                let plus = format!("{}{suffix}", value + 1);
                add(node.byte_range(), Change::Replace(plus.clone()), format!("`{token}` → `{plus}`"), &mut sites);
                if value > 0 {
                    let minus = format!("{}{suffix}", value - 1);
                    add(
                        node.byte_range(),
                        Change::Replace(minus.clone()),
                        format!("`{token}` → `{minus}`"),
                        &mut sites,
                    );
                }
            }
            "true" | "false" | "boolean_literal" => {
                let token = &source[node.byte_range()];
                let to = if token == "true" { "false" } else { "true" };
                add(node.byte_range(), Change::Replace(to.to_owned()), format!("`{token}` → `{to}`"), &mut sites);
            }
            _ => {}
        }
    }
    sites.retain(|site| !skip.contains(&site.mutant.id));
    // Spread over the function when there are more sites than mutants to run.
    if sites.len() > max_mutants {
        let step = sites.len() as f64 / max_mutants as f64;
        let keep: BTreeSet<usize> = (0..max_mutants).map(|idx| (idx as f64 * step) as usize).collect();
        let mut idx = 0;
        sites.retain(|_| {
            idx += 1;
            keep.contains(&(idx - 1))
        });
    }
    let early_return_id = 10_000;
    let body = function_node.child_by_field_name("body");
    let early = (lang == Lang::Rust
        && !skip.contains(&early_return_id)
        && function_node
            .child_by_field_name("return_type")
            .is_some_and(|ty| !source[ty.byte_range()].contains("impl ")))
    .then_some(body)
    .flatten()
    .filter(|body| body.kind() == "block");
    let guard = |id: usize| match lang {
        Lang::Rust => format!("::std::env::var(\"{MUTANT_VAR}\").as_deref() == Ok(\"{id}\")"),
        Lang::TypeScript | Lang::Tsx => format!("globalThis.process?.env?.{MUTANT_VAR} === \"{id}\""),
    };
    let mut mutants: Vec<Mutant> = sites.iter().map(|site| site.mutant.clone()).collect();
    let mut rendered = render(function_node, source, &sites, lang, &guard);
    if let Some(body) = early {
        let line = source[..body.start_byte()].matches('\n').count();
        mutants.push(Mutant { id: early_return_id, what: "an early return of the default value".to_owned(), line });
        let at = body.start_byte() - function_node.start_byte();
        // The body's `{` is at `at` in the function's own text, which `render` keeps byte for byte up to there.
        let offset = rendered_offset(&rendered, &source[function_node.start_byte()..body.start_byte()]).unwrap_or(at);
        rendered.insert_str(
            offset + 1,
            &format!(" if {} {{ return ::core::default::Default::default(); }}", guard(early_return_id)),
        );
    }
    let attribute = if lang == Lang::Rust { "#[allow(warnings, clippy::all)]\n" } else { "" };
    let text = format!(
        "{}{attribute}{rendered}{}",
        &source[..function_node.start_byte()],
        &source[function_node.end_byte()..]
    );
    // The attribute adds a line before the function: mutants' lines move with it.
    if lang == Lang::Rust {
        for mutant in &mut mutants {
            mutant.line += 1;
        }
    }
    (text, mutants)
}

/// Where the function's header (its text up to the body) ends in the rendered function: the header holds no
/// mutation site unless a default parameter value does (TypeScript), so it is usually unchanged.
fn rendered_offset(rendered: &str, header: &str) -> Option<usize> {
    rendered.starts_with(header).then_some(header.len())
}

fn swapped_operator(operator: &str) -> Option<&'static str> {
    Some(match operator {
        "<" => "<=",
        "<=" => "<",
        ">" => ">=",
        ">=" => ">",
        "==" => "!=",
        "!=" => "==",
        "===" => "!==",
        "!==" => "===",
        "&&" => "||",
        "||" => "&&",
        "+" => "-",
        "-" => "+",
        "*" => "+",
        _ => return None,
    })
}

/// Places where a switched expression would not compile: patterns, constants, types, macro token trees,
/// attributes, tuple indices, array lengths.
fn in_unmutable_place(node: Node, function: Node) -> bool {
    if node.parent().is_some_and(|parent| parent.kind() == "field_expression" || parent.kind() == "array_expression") {
        // `x.0`, and `[0; N]` (the length must be a constant; an element rarely matters alone).
        let parent = node.parent().expect("checked above");
        if parent.kind() == "field_expression" || parent.child_by_field_name("length").is_some() {
            return true;
        }
    }
    let mut current = Some(node);
    while let Some(at) = current {
        if at.id() == function.id() {
            return false;
        }
        let kind = at.kind();
        if kind.ends_with("_pattern")
            || matches!(
                kind,
                "token_tree"
                    | "attribute_item"
                    | "const_item"
                    | "static_item"
                    | "array_type"
                    | "type_arguments"
                    | "macro_invocation"
                    | "switch_case"
                    | "enum_declaration"
                    | "type_annotation"
                    | "literal_type"
                    | "template_string"
                    | "optional_parameter"
                    | "required_parameter"
                    | "parameters"
                    | "formal_parameters"
            )
        {
            return true;
        }
        current = at.parent();
    }
    false
}

fn render(node: Node, source: &str, sites: &[Site], lang: Lang, guard: &dyn Fn(usize) -> String) -> String {
    let plain = render_children(node, source, sites, lang, guard, None);
    let mut result = plain;
    for site in sites.iter().filter(|site| site.node == node.byte_range() && matches_kind(site, node)) {
        let mutated = match &site.change {
            Change::Operator { at, to } => render_children(node, source, sites, lang, guard, Some((at.clone(), to))),
            Change::Replace(to) => to.clone(),
        };
        let condition = guard(site.mutant.id);
        result = match lang {
            Lang::Rust => format!("(if {condition} {{ {mutated} }} else {{ {result} }})"),
            Lang::TypeScript | Lang::Tsx => format!("(({condition}) ? ({mutated}) : ({result}))"),
        };
    }
    result
}

/// A site belongs to the node of its kind (a literal and its parenthesised expression can share a range).
fn matches_kind(site: &Site, node: Node) -> bool {
    match site.change {
        Change::Operator { .. } => node.kind() == "binary_expression",
        Change::Replace(_) => {
            matches!(node.kind(), "integer_literal" | "number" | "true" | "false" | "boolean_literal")
        }
    }
}

fn render_children(
    node: Node,
    source: &str,
    sites: &[Site],
    lang: Lang,
    guard: &dyn Fn(usize) -> String,
    operator: Option<(Range<usize>, &str)>,
) -> String {
    if node.child_count() == 0 {
        return source[node.byte_range()].to_owned();
    }
    let mut out = String::new();
    let mut at = node.start_byte();
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        out.push_str(&source[at..child.start_byte()]);
        match &operator {
            Some((range, to)) if *range == child.byte_range() => out.push_str(to),
            _ => out.push_str(&render(child, source, sites, lang, guard)),
        }
        at = child.end_byte();
    }
    out.push_str(&source[at..node.end_byte()]);
    out
}

/// What each input did: its observation in the original, and the mutants it kills (a different observation,
/// a panic where the original returned, a crash or a hang).
#[derive(Debug, Clone)]
pub struct Input {
    pub call: String,
    pub value: String,
    pub kills: BTreeSet<usize>,
}

/// The inputs to assert on: first those that kill mutants no input chosen so far kills (the most new kills
/// first), then inputs with other values, up to `max`.
pub fn choose(inputs: &[Input], max: usize) -> Vec<usize> {
    let mut chosen: Vec<usize> = Vec::new();
    let mut killed = BTreeSet::new();
    loop {
        let best = (0..inputs.len())
            .filter(|idx| !chosen.contains(idx))
            .map(|idx| (inputs[idx].kills.difference(&killed).count(), idx))
            .filter(|(new, _)| *new > 0)
            .max_by_key(|(new, idx)| (*new, std::cmp::Reverse(*idx)));
        match best {
            Some((_, idx)) if chosen.len() < max => {
                killed.extend(inputs[idx].kills.iter().copied());
                chosen.push(idx);
            }
            _ => break,
        }
    }
    for (idx, input) in inputs.iter().enumerate() {
        if chosen.len() >= max {
            break;
        }
        if !chosen.contains(&idx) && !chosen.iter().any(|other| inputs[*other].value == input.value) {
            chosen.push(idx);
        }
    }
    chosen.sort_unstable();
    chosen
}

/// The Rust assertion for `call` (the function's name with its arguments) returning `debug` (its Debug output):
/// `assert_eq!(call, <value>)` when the Debug output is the value's Rust syntax for the declared return type,
/// else a comparison of the Debug output with the string.
pub fn rust_assertion(call: &str, debug: &str, return_type: &str) -> String {
    match rust_literal(debug, return_type) {
        Some(literal) => format!("assert_eq!({call}, {literal});"),
        None => format!("assert_eq!(format!(\"{{:?}}\", {call}), {debug:?});"),
    }
}

/// The Rust expression a Debug output is, for the types where the two coincide.
pub fn rust_literal(debug: &str, return_type: &str) -> Option<String> {
    let ty: String = return_type.split_whitespace().collect::<Vec<_>>().join(" ");
    let ty = ty.trim_start_matches("->").trim();
    let ty = strip_reference(ty);
    if debug.contains("NaN") || debug.contains("inf") && !debug.starts_with(['"', '\'', '[']) {
        return None;
    }
    if is_scalar(ty) || is_text(ty) {
        return scalar_matches(debug, ty).then(|| debug.to_owned());
    }
    if let Some(element) = ty.strip_prefix("Vec<").and_then(|rest| rest.strip_suffix('>')) {
        let element = strip_reference(element.trim());
        let inner = debug.strip_prefix('[')?.strip_suffix(']')?;
        if inner.is_empty() || !(is_scalar(element) || is_text(element)) {
            return None;
        }
        if !split_arguments(inner).iter().all(|part| scalar_matches(part, element)) {
            return None;
        }
        return Some(format!("vec![{inner}]"));
    }
    if let Some(inner_ty) = ty.strip_prefix("Option<").and_then(|rest| rest.strip_suffix('>')) {
        let inner_ty = inner_ty.trim();
        if !is_scalar(inner_ty) {
            return None;
        }
        if debug == "None" {
            return Some("None".to_owned());
        }
        let inner = debug.strip_prefix("Some(")?.strip_suffix(')')?;
        return scalar_matches(inner, inner_ty).then(|| debug.to_owned());
    }
    None
}

fn strip_reference(ty: &str) -> &str {
    let Some(rest) = ty.strip_prefix('&') else { return ty };
    let rest = rest.trim_start();
    let rest = if rest.starts_with('\'') { rest.split_once(' ').map_or(rest, |(_, rest)| rest) } else { rest };
    rest.trim_start_matches("mut ").trim()
}

fn is_scalar(ty: &str) -> bool {
    matches!(
        ty,
        "u8" | "u16"
            | "u32"
            | "u64"
            | "u128"
            | "usize"
            | "i8"
            | "i16"
            | "i32"
            | "i64"
            | "i128"
            | "isize"
            | "f32"
            | "f64"
            | "bool"
            | "char"
    )
}

fn is_text(ty: &str) -> bool {
    matches!(ty, "str" | "String" | "Cow<str>" | "Cow<'static, str>" | "Cow<'_, str>") || ty.starts_with("Cow<'")
}

fn scalar_matches(value: &str, ty: &str) -> bool {
    match ty {
        "bool" => value == "true" || value == "false",
        "char" => value.starts_with('\'') && value.ends_with('\'') && value.len() >= 3,
        "f32" | "f64" => value.parse::<f64>().is_ok_and(f64::is_finite),
        ty if is_text(ty) => value.starts_with('"') && value.ends_with('"') && value.len() >= 2,
        _ => value.parse::<i128>().is_ok() || value.parse::<u128>().is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(lang: Lang, text: &str) -> spark_grammars::tree_sitter::Tree {
        crate::parse::text(lang, text).unwrap()
    }

    #[test]
    fn literal_calls_table() {
        let cases: &[(Lang, &str, &[&str])] = &[
            (
                Lang::Rust,
                "fn f(a: u32) {}\nlet x = f(3);\nlet y = f(n);\n/// f(\"a\", 'b')\n",
                &["(3)", "(\"a\", 'b')"],
            ),
            (Lang::Rust, "x.f(1); g::f(2); if_f(3); f(vec![1, 2]);", &["(2)", "(vec![1, 2])"]),
            (Lang::Rust, "f(\"a,b\"); f(\"a,b\"); f(Some(1));", &["(\"a,b\")", "(Some(1))"]),
            (Lang::TypeScript, "export function f(a: string) {}\nf('x'); f(y); f(`a${b}`);", &["('x')"]),
            (Lang::Rust, "f(1, 2); f(1);", &["(1)"]),
        ];
        for (lang, text, expected) in cases {
            let arity = if text.contains("f(1, 2)") { Some((1, 1)) } else { None };
            assert_eq!(literal_calls(*lang, text, "f", arity), *expected, "{text}");
        }
    }

    #[test]
    fn literal_only_table() {
        let cases = [
            (Lang::Rust, "1, -2, 3.5, 10u8", true),
            (Lang::Rust, "\"a\\\"b\", 'c', true, None", true),
            (Lang::Rust, "&[1, 2], vec![\"x\".to_string()]", true),
            (Lang::Rust, "x", false),
            (Lang::Rust, "foo()", false),
            (Lang::Rust, "std::fs::read(\"a\")", false),
            (Lang::TypeScript, "\"a\", 1, [1, 2], { a: 1 }", false),
            (Lang::TypeScript, "\"a\", 1, [1, 2], null", true),
            (Lang::Rust, "", false),
        ];
        for (lang, arguments, expected) in cases {
            assert_eq!(is_literal_only(lang, arguments), expected, "{arguments}");
        }
    }

    #[test]
    fn values_of_types_table() {
        let cases: &[(&str, &str, &[&str])] = &[
            ("bool", "", &["true", "false"]),
            ("&str", "", &["\"\"", "\"a\""]),
            ("&'a str", "", &["\"\"", "\"a\""]),
            ("String", "", &["\"\".to_string()"]),
            ("&[u32]", "", &["&[]", "&[1]"]),
            ("Option<i32>", "", &["None", "Some(0)"]),
            ("T", "fn f<T: AsRef<str>>(s: T) -> usize", &["\"\"", "\"a\""]),
            ("impl AsRef<str>", "", &["\"\""]),
            ("HashMap<u8, u8>", "", &[]),
        ];
        for (ty, header, starts) in cases {
            let values = rust_values(ty, header);
            assert!(values.len() >= starts.len(), "{ty}: {values:?}");
            assert_eq!(&values[..starts.len()], *starts, "{ty}");
        }
        let ts_cases: &[(&str, &[&str])] = &[
            ("string", &["\"\"", "\"a\""]),
            ("number[]", &["[]", "[1]"]),
            ("\"left\" | \"right\"", &["\"left\"", "\"right\""]),
            ("boolean | undefined", &["true", "false", "undefined"]),
            ("Map<string, number>", &[]),
        ];
        for (ty, starts) in ts_cases {
            let values = ts_values(ty);
            assert!(values.len() >= starts.len(), "{ty}: {values:?}");
            assert_eq!(&values[..starts.len()], *starts, "{ty}");
        }
        let text = "fn f(n: u8, s: &str, c: char) -> bool { n > 250 && s == \"yes\" || c == 'q' || n == 0 }";
        let tree = tree(Lang::Rust, text);
        let found = literals(tree.root_node(), text);
        let mut values = Vec::new();
        add_literals(Lang::Rust, "u8", &found, &mut values);
        assert_eq!(values, ["249", "250", "251", "0", "1"]);
        let mut values = Vec::new();
        add_literals(Lang::Rust, "String", &found, &mut values);
        assert_eq!(values, ["\"yes\".to_string()"]);
        let mut values = Vec::new();
        add_literals(Lang::Rust, "char", &found, &mut values);
        assert_eq!(values, ["'q'"]);
        let calls = combine(&[vec!["1".into(), "2".into()], vec!["\"a\"".into()]], 10);
        assert_eq!(calls, ["(1, \"a\")", "(2, \"a\")"]);
        assert!(combine(&[vec!["1".into()], vec![]], 10).is_empty());
    }

    #[test]
    fn probe_output_and_unescaping() {
        let stdout = "running 1 test\nSPARK_PROBE 0 start\nSPARK_PROBE 0 ok \"\\\"a\\\\n\\\"\"\nSPARK_PROBE 1 start\n\
                      SPARK_PROBE 1 panic\nSPARK_PROBE 2 start\nnoise\n";
        let (observed, started) = parse_probe(stdout);
        assert_eq!(observed[&0], Observation::Value("\"a\\n\"".to_owned()));
        assert_eq!(observed[&1], Observation::Panic);
        assert_eq!(started, Some(2));
        let cases = [("\"a\\u{e9}\\t\"", Some("aé\t")), ("\"\\ud83d\\ude00\"", Some("😀")), ("nope", None)];
        for (quoted, expected) in cases {
            assert_eq!(unescape_quoted(quoted).as_deref(), expected, "{quoted}");
        }
    }

    #[test]
    fn assertions_table() {
        let cases = [
            ("f(1)", "3", "u32", "assert_eq!(f(1), 3);"),
            ("f(1)", "\"ab\"", "String", "assert_eq!(f(1), \"ab\");"),
            ("f(1)", "\"ab\"", "&'static str", "assert_eq!(f(1), \"ab\");"),
            ("f(1)", "[1, 2]", "Vec<u8>", "assert_eq!(f(1), vec![1, 2]);"),
            ("f(1)", "[]", "Vec<u8>", "assert_eq!(format!(\"{:?}\", f(1)), \"[]\");"),
            ("f(1)", "Some('a')", "Option<char>", "assert_eq!(f(1), Some('a'));"),
            ("f(1)", "Some(\"a\")", "Option<String>", "assert_eq!(format!(\"{:?}\", f(1)), \"Some(\\\"a\\\")\");"),
            ("f(1)", "NaN", "f64", "assert_eq!(format!(\"{:?}\", f(1)), \"NaN\");"),
            ("f(1)", "Ok(2)", "Result<u8, E>", "assert_eq!(format!(\"{:?}\", f(1)), \"Ok(2)\");"),
        ];
        for (call, debug, ty, expected) in cases {
            assert_eq!(rust_assertion(call, debug, ty), expected, "{ty}");
        }
    }

    #[test]
    fn schemata_switch_each_mutant_at_run_time() {
        let text = "fn g() {}\nfn f(a: u32, b: bool) -> u32 {\n    if a < 3 && b { a + 1 } else { match a { 0 => 1, _ => a } }\n}\n";
        let tree = tree(Lang::Rust, text);
        let start = text.find("fn f").unwrap();
        let (out, mutants) = schemata(Lang::Rust, tree.root_node(), text, start..text.len() - 1, &BTreeSet::new(), 20);
        let whats: Vec<&str> = mutants.iter().map(|mutant| mutant.what.as_str()).collect();
        assert_eq!(
            whats,
            [
                "`&&` → `||`",
                "`<` → `<=`",
                "`3` → `4`",
                "`3` → `2`",
                "`+` → `-`",
                "`1` → `2`",
                "`1` → `0`",
                "`1` → `2`",
                "`1` → `0`",
                "an early return of the default value"
            ]
        );
        assert!(
            out.starts_with("fn g() {}\n#[allow(warnings, clippy::all)]\nfn f(a: u32, b: bool) -> u32 { if "),
            "{out}"
        );
        assert!(out.contains("0 => "), "the pattern is not mutated: {out}");
        // Lines in the new text (the attribute is one more line above the function).
        let lines: Vec<usize> = mutants.iter().map(|mutant| mutant.line).collect();
        assert_eq!(lines, [3, 3, 3, 3, 3, 3, 3, 3, 3, 2]);
        // The output still parses, and a skipped mutant is gone.
        assert!(!crate::parse::text(Lang::Rust, &out).unwrap().root_node().has_error(), "{out}");
        let skip: BTreeSet<usize> = [1, 10_000].into();
        let (out, mutants) = schemata(Lang::Rust, tree.root_node(), text, start..text.len() - 1, &skip, 20);
        assert_eq!(mutants.len(), 8);
        assert!(!out.contains("Ok(\"1\")") && !out.contains("Default::default"), "{out}");
        let ts = "export function f(a: number): boolean {\n  return a === 2 || a > 7;\n}\n";
        let tree = self::tree(Lang::TypeScript, ts);
        let (out, mutants) = schemata(Lang::TypeScript, tree.root_node(), ts, 7..ts.len() - 1, &BTreeSet::new(), 20);
        assert_eq!(mutants.len(), 7, "{mutants:?}");
        assert!(!crate::parse::text(Lang::TypeScript, &out).unwrap().root_node().has_error(), "{out}");
    }

    #[test]
    fn side_effects_table() {
        let cases = [
            (
                Lang::Rust,
                "fn f() -> String { std::fs::read_to_string(\"a\").unwrap() }",
                Some("it reads or writes files"),
            ),
            (Lang::Rust, "fn f() -> String { std::env::var(\"A\").unwrap() }", Some("it reads the environment")),
            (Lang::Rust, "/// Does not touch std::fs.\nfn f(a: u32) -> u32 { a }", None),
            (Lang::TypeScript, "function f() { return fetch(\"x\"); }", Some("it uses the network")),
            (Lang::TypeScript, "function f(a: number) { return a + 1; }", None),
        ];
        for (lang, text, expected) in cases {
            assert_eq!(side_effect(lang, text), expected, "{text}");
        }
        let text = "fn f(a: u32) -> u32 { g(a) }\nfn g(a: u32) -> u32 { std::process::exit(1) }\n";
        let tree = tree(Lang::Rust, text);
        let callees = with_callees(tree.root_node(), text, 0..text.find('\n').unwrap());
        assert_eq!(side_effect(Lang::Rust, &callees), Some("it spawns processes"));
    }

    #[test]
    fn inputs_that_kill_mutants_first() {
        let input = |call: &str, value: &str, kills: &[usize]| Input {
            call: call.to_owned(),
            value: value.to_owned(),
            kills: kills.iter().copied().collect(),
        };
        let inputs = [
            input("(0)", "0", &[]),
            input("(1)", "1", &[1]),
            input("(2)", "2", &[1, 2]),
            input("(3)", "2", &[]),
            input("(4)", "5", &[3]),
        ];
        assert_eq!(choose(&inputs, 10), [0, 1, 2, 4]);
        assert_eq!(choose(&inputs, 1), [2]);
    }
}
