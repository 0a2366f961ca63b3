//! Characterisation tests' inputs, pure: calls with literal arguments harvested from the project and the doc
//! comments, values of the parameter types with the function's own literals added, and their combinations;
//! and whether the function may run at all (no files, network, environment or processes).

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use spark_grammars::tree_sitter::Node;
use spark_grammars::Lang;

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
pub(super) fn without_comments(text: &str) -> String {
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
pub(super) fn matching_paren(text: &str, open: usize) -> Option<usize> {
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
    let mut literal = crate::verify::edit::Literal::default();
    for (at, ch) in inner.char_indices() {
        if literal.skips(ch) {
            continue;
        }
        match ch {
            '"' | '`' => literal.open(ch),
            '\'' if inner[at + 1..].chars().nth(1) == Some('\'') || inner[at + 1..].starts_with('\\') => {
                literal.open(ch)
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
/// them (no name a test could not see, no call that could reach outside). TypeScript arguments may also be
/// object literals and functions written out in them ([`is_self_contained_ts`]).
pub fn is_literal_only(lang: Lang, arguments: &str) -> bool {
    let allowed: &[&str] = match lang {
        Lang::Rust => &["true", "false", "Some", "None", "vec", "b", "r", "to_string", "to_owned", "String", "from"],
        Lang::TypeScript | Lang::Tsx => return is_self_contained_ts(lang, arguments),
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

/// The globals a TypeScript argument may name: values and pure built-ins, nothing that reaches files, the network,
/// the environment, other modules or the global object.
const TS_GLOBALS: &[&str] = &[
    "undefined",
    "NaN",
    "Infinity",
    "Math",
    "JSON",
    "Number",
    "String",
    "Boolean",
    "Array",
    "Object",
    "Map",
    "Set",
    "Date",
    "Error",
    "TypeError",
    "RangeError",
    "RegExp",
    "Symbol",
    "BigInt",
    "Promise",
    "Uint8Array",
    "Uint8ClampedArray",
    "Int8Array",
    "Uint16Array",
    "Int16Array",
    "Uint32Array",
    "Int32Array",
    "Float32Array",
    "Float64Array",
    "ArrayBuffer",
    "DataView",
];

/// Whether TypeScript `arguments` (an argument list without its parentheses) are self-contained: literals, arrays,
/// object literals, and functions written out in them whose every name is one they declare (their parameters
/// and locals) or a pure global ([`TS_GLOBALS`]); no `this`, `await`, `import` or `require`, no reach for a
/// constructor or prototype (the way to `Function` and so to arbitrary code), one line.
pub fn is_self_contained_ts(lang: Lang, arguments: &str) -> bool {
    const KINDS: &[&str] = &["this", "await_expression", "import", "super", "meta_property", "with_statement"];
    if arguments.trim().is_empty()
        || arguments.contains('\n')
        || ["constructor", "prototype", "__proto__", "__defineGetter__"].iter().any(|word| arguments.contains(word))
    {
        return false;
    }
    let text = format!("f({arguments});");
    let mut parser = lang.parser();
    let Some(tree) = parser.parse(&text, None) else { return false };
    let root = tree.root_node();
    if root.has_error() || root.named_child_count() != 1 {
        return false;
    }
    let mut declared: BTreeSet<&str> = BTreeSet::new();
    let mut names: Vec<Node> = Vec::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        let kind = node.kind();
        if KINDS.contains(&kind) {
            return false;
        }
        if matches!(kind, "identifier" | "shorthand_property_identifier") {
            let declares = node.parent().is_some_and(|parent| {
                let field = |name: &str| parent.child_by_field_name(name).is_some_and(|child| child.id() == node.id());
                match parent.kind() {
                    "required_parameter" | "optional_parameter" => field("pattern"),
                    "arrow_function" => field("parameter"),
                    "variable_declarator" => field("name"),
                    "function_expression" | "function_declaration" => field("name"),
                    "array_pattern" | "rest_pattern" | "shorthand_property_identifier_pattern" => true,
                    _ => false,
                }
            });
            let name = &text[node.byte_range()];
            if declares {
                declared.insert(name);
            } else if node.start_byte() != 0 {
                names.push(node);
            }
        }
        if kind == "shorthand_property_identifier_pattern" {
            declared.insert(&text[node.byte_range()]);
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    names.iter().all(|node| {
        let name = &text[node.byte_range()];
        declared.contains(name) || TS_GLOBALS.contains(&name)
    })
}

/// A parameter as the signature spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parameter {
    pub name: String,
    pub ty: String,
    /// A TypeScript parameter that may be left out (`x?: T`, `x = 1`): `undefined` is one of its values.
    pub optional: bool,
}

/// The parameters of the function at `function` (without `self`), in order.
pub fn parameters(function: Node, source: &str) -> Option<Vec<Parameter>> {
    let list = function.child_by_field_name("parameters")?;
    let mut cursor = list.walk();
    let mut out = Vec::new();
    for parameter in list.named_children(&mut cursor) {
        match parameter.kind() {
            "self_parameter" | "comment" | "line_comment" | "block_comment" => {}
            _ => {
                let name = parameter.child_by_field_name("pattern").map(|node| &source[node.byte_range()]);
                let ty = parameter
                    .child_by_field_name("type")
                    .map(|node| source[node.byte_range()].trim_start_matches(':').trim().to_owned());
                let optional =
                    parameter.kind() == "optional_parameter" || parameter.child_by_field_name("value").is_some();
                out.push(Parameter {
                    name: name.unwrap_or("_").to_owned(),
                    ty: ty.unwrap_or_else(|| "any".to_owned()),
                    optional,
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
    /// Code spans of the function's comments and doc comment (`// Example: `Sunday, 06-Nov-94 08:49:37 GMT``)
    /// that read as data, not as a name or a call: the text between the backticks.
    pub spans: Vec<String>,
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
            "line_comment" | "block_comment" | "comment" => add_spans(text, &mut found.spans),
            _ => {}
        }
        // Children pushed last to first, so that they are visited in document order.
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    // The doc comment above the function (its examples of valid input).
    let mut above = function.prev_sibling();
    while let Some(node) = above.filter(|node| matches!(node.kind(), "line_comment" | "block_comment" | "comment")) {
        add_spans(&source[node.byte_range()], &mut found.spans);
        above = node.prev_sibling();
    }
    found
}

/// The code spans of a comment that read as data: not a name or a path (`Self::new`), not a call or an
/// expression with brackets (`from("XIV")`, `Some(2)`, whose calls are found as calls), at most 60 bytes.
fn add_spans(comment: &str, spans: &mut Vec<String>) {
    for (idx, span) in comment.split('`').enumerate() {
        let data = idx % 2 == 1
            && !span.is_empty()
            && span.len() <= 60
            && !span.contains(['\n', '(', '[', '{', '"', '\''])
            && !(span.starts_with(|ch: char| ch.is_alphabetic() || ch == '_')
                && span.chars().all(|ch| ch.is_alphanumeric() || ch == '_' || ch == ':' || ch == '.'))
            && span.chars().any(|ch| ch.is_alphanumeric());
        if data && !spans.iter().any(|seen| seen == span) && spans.len() < 4 {
            spans.push(span.to_owned());
        }
    }
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
    let byte = lang == Lang::Rust && ty == "u8";
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
        // A byte compared with byte literals (`b'k' | b'K'`, `x.wrapping_sub(b'0')`): those bytes.
        if byte {
            for value in found.chars.iter().filter(|value| value.starts_with("b'")).take(8) {
                push(value.clone());
            }
        }
        return;
    }
    if lang == Lang::Rust && split_reference(ty).1 == "[u8]" {
        // Bytes: the function's byte strings, its ASCII strings and comment spans as bytes.
        let strings = found.strings.iter().filter_map(|value| match value.strip_prefix('b') {
            Some(bytes) => Some(bytes.to_owned()),
            None => value.is_ascii().then(|| value.clone()).filter(|value| value.starts_with('"')),
        });
        let spans = found.spans.iter().filter(|span| span.is_ascii()).map(|span| rust_string(span));
        for value in strings.take(8).chain(spans) {
            push(format!("b{value}"));
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
        let strings = found.strings.iter().filter(|value| !value.starts_with('b')).take(8).cloned();
        let spans = found.spans.iter().map(|span| match lang {
            Lang::Rust => rust_string(span),
            Lang::TypeScript | Lang::Tsx => serde_json::Value::String(span.clone()).to_string(),
        });
        // A string function's small integers are most often lengths and indices (`s.len() > MAX`, `&s[..3]`):
        // strings one shorter, as long and one longer, where its comparisons and slices change their answer.
        let lengths = found
            .integers
            .iter()
            .filter(|value| (1..=LENGTHS_UP_TO).contains(*value))
            .take(4)
            .flat_map(|value| [value - 1, *value, value + 1])
            .filter(|length| *length > 0)
            .map(|length| format!("\"{}\"", &LETTERS[..length as usize]));
        for value in strings.chain(spans).chain(lengths) {
            push(if owned { format!("{value}.to_string()") } else { value });
        }
        return;
    }
    if lang == Lang::Rust && ty == "char" {
        for value in found.chars.iter().filter(|value| value.starts_with('\'')).take(8) {
            push(value.clone());
        }
    }
}

/// The longest string made for a length the function compares with, and what it is made of.
const LENGTHS_UP_TO: i64 = 24;
const LETTERS: &str = "abcdefghijklmnopqrstuvwxyz";

/// Strings of characters wider than a byte (a two-byte letter inside a word, a four-byte one after a letter),
/// so that byte offsets and character counts differ: what a function that slices by bytes or counts characters
/// must get right.
const WIDE_STRINGS: [&str; 2] = ["\"naïve café\"", "\"a😀\""];

/// `text` as a Rust string literal.
fn rust_string(text: &str) -> String {
    format!("\"{}\"", text.escape_default())
}

/// The element type of a TypeScript array type: `T[]`, `readonly T[]`, `Array<T>`, `ReadonlyArray<T>`.
pub(super) fn ts_array_element(ty: &str) -> Option<&str> {
    ty.strip_prefix("readonly ")
        .unwrap_or(ty)
        .strip_suffix("[]")
        .or_else(|| ty.strip_prefix("Array<").and_then(|rest| rest.strip_suffix('>')))
        .or_else(|| ty.strip_prefix("ReadonlyArray<").and_then(|rest| rest.strip_suffix('>')))
}

/// Values of a TypeScript type for a first probe (see [`rust_values`]).
pub fn ts_values(ty: &str) -> Vec<String> {
    let ty = ty.trim();
    let strings = ["\"\"", "\"a\"", "\"hello\"", "\"Hello World\"", "\"foo_bar-baz\"", "\"abc123\""];
    match ty {
        "string" => return strings.iter().chain(&WIDE_STRINGS).map(|value| value.to_string()).collect(),
        "number" => return ["0", "1", "2", "-1", "7", "10", "100", "2.5"].map(str::to_owned).to_vec(),
        "boolean" => return vec!["true".into(), "false".into()],
        "bigint" => return ["0n", "1n", "10n"].map(str::to_owned).to_vec(),
        _ => {}
    }
    if let Some(element) = ts_array_element(ty) {
        return slices(&ts_values(element), "[", "]");
    }
    // A union of literal types: each literal. Not a `|` inside brackets (`Omit<T, 'a' | 'b'>`): a union within a
    // generic type is the project's types' to read (`Sources::ts_values`).
    let parts: Vec<&str> = ty.split('|').map(str::trim).filter(|part| !part.is_empty()).collect();
    if parts.len() > 1 && !ty.contains(['<', '(', '{', '[']) {
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
    let ascii =
        ["\"\"", "\"a\"", "\"hello\"", "\"Hello World\"", "\"foo_bar-baz\"", "\"abc123\"", "\"x y\\tz\"", "\"a\\0b\""];
    let strings: Vec<&str> = ascii.iter().chain(&WIDE_STRINGS).copied().collect();
    let as_owned = |values: &[&str]| values.iter().map(|value| format!("{value}.to_string()")).collect();
    if is_formatter(ty) {
        // Called inside a `Display` implementation that hands it its formatter (`CallShape::Displayed`).
        return vec![FORMATTER.to_owned()];
    }
    if let Some(rest) = ty.strip_prefix("&mut ") {
        // An out-parameter slice (`out: &mut [u8]`): buffers of a few lengths, what the function checks.
        let slice = rest.trim().strip_prefix('[').and_then(|rest| rest.strip_suffix(']'));
        if let Some(element) = slice.filter(|element| !element.contains(';')) {
            let Some(first) = rust_values(element, generics).into_iter().next() else { return Vec::new() };
            return [0, 1, 2, 4, 8].map(|length| format!("&mut [{first}; {length}]")).to_vec();
        }
        return rust_values(rest, generics).into_iter().map(|value| format!("&mut {value}")).collect();
    }
    if let Some(rest) = ty.strip_prefix('&') {
        let rest = rest.trim_start();
        let rest = if rest.starts_with('\'') { rest.split_once(' ').map_or(rest, |(_, rest)| rest) } else { rest };
        if let Some(rest) = rest.strip_prefix("mut ") {
            return rust_values(&format!("&mut {rest}"), generics);
        }
        if rest == "str" {
            return strings.iter().map(|value| value.to_string()).collect();
        }
        if rest == "[u8]" {
            // (Digits last: a parser of numbers reads them, `s[0].wrapping_sub(b'0')`.)
            return ["b\"\"", "b\"a\"", "b\"hello\"", "b\"\\x00\\xff\\x10\"", "b\"1994\""].map(str::to_owned).to_vec();
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
        // Bytes of odd and even lengths, letters and digits.
        return ["\"\"", "\"a\"", "\"ab\"", "\"hello\"", "\"0a1B\"", "\"Hello World\""].map(str::to_owned).to_vec();
    }
    if string_like.iter().any(|bound| bounds.contains(bound)) || ty.starts_with("Cow<") {
        return strings.iter().map(|value| value.to_string()).collect();
    }
    Vec::new()
}

/// The name of the formatter a `Display` implementation passes to a function that writes into one.
pub const FORMATTER: &str = "f";

/// Whether a Rust parameter type is a formatter (`&mut fmt::Formatter`, `&mut Formatter<'_>`).
pub fn is_formatter(ty: &str) -> bool {
    let ("&mut ", rest) = split_reference(ty.trim()) else { return false };
    let path = rest.split('<').next().unwrap_or("").trim();
    ["Formatter", "fmt::Formatter", "std::fmt::Formatter", "core::fmt::Formatter", "::std::fmt::Formatter"]
        .contains(&path)
}

/// `&`, `&'a `, `&mut ` (kept, normalised) and the type behind it.
pub(super) fn split_reference(ty: &str) -> (&'static str, &str) {
    let Some(rest) = ty.strip_prefix('&') else { return ("", ty) };
    let rest = rest.trim_start();
    let rest = if rest.starts_with('\'') { rest.split_once(' ').map_or(rest, |(_, rest)| rest) } else { rest };
    match rest.strip_prefix("mut ") {
        Some(rest) => ("&mut ", rest.trim()),
        None => ("&", rest.trim()),
    }
}

/// The bounds of a type: `impl Trait` itself, or a type parameter's bounds in the header.
pub(super) fn type_bounds(ty: &str, header: &str) -> String {
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

pub(super) fn slices(elements: &[String], open: &str, close: &str) -> Vec<String> {
    if elements.is_empty() {
        return Vec::new();
    }
    let pick = |idx: usize| elements[idx % elements.len()].clone();
    let mut slices = vec![
        format!("{open}{close}"),
        format!("{open}{}{close}", pick(1)),
        format!("{open}{}, {}, {}{close}", pick(1), pick(2), pick(3)),
        format!("{open}{}, {}{close}", pick(4), pick(0)),
    ];
    // The edge values at the end of a long list (a tab, a NUL) in one more.
    if elements.len() > 5 {
        slices.push(format!("{open}{}{close}", elements[5..].iter().take(4).cloned().collect::<Vec<_>>().join(", ")));
    }
    slices
}

/// Argument lists from each parameter's values: every value of each parameter with the others at a usual value;
/// then, for two parameters of one type (a function that compares them), the pair equal and the pair differing
/// only in letter case (`('a', 'a')`, `('a', 'A')`), each with every value of the other parameters in turn (a
/// `case_sensitive` flag both ways); then mixed ones; at most `limit`.
pub fn combine(values: &[Vec<String>], limit: usize) -> Vec<String> {
    if values.iter().any(Vec::is_empty) {
        return Vec::new();
    }
    let base: Vec<usize> = values.iter().map(|options| 2.min(options.len() - 1)).collect();
    let mut calls: Vec<String> = Vec::new();
    let push = |calls: &mut Vec<String>, choice: &[usize]| {
        let args: Vec<&str> = choice.iter().zip(values).map(|(idx, options)| options[*idx].as_str()).collect();
        push_args(calls, &args);
    };
    for (param_idx, options) in values.iter().enumerate() {
        for value_idx in 0..options.len() {
            let mut choice = base.clone();
            choice[param_idx] = value_idx;
            push(&mut calls, &choice);
        }
    }
    for first in 0..values.len() {
        for second in first + 1..values.len() {
            if values[first] != values[second] {
                continue;
            }
            let others: Vec<usize> = (0..values.len()).filter(|idx| *idx != first && *idx != second).collect();
            for value in values[first].iter().take(4) {
                for paired in [Some(value.clone()), case_twin(value)].into_iter().flatten() {
                    let mut args: Vec<&str> =
                        base.iter().zip(values).map(|(idx, options)| options[*idx].as_str()).collect();
                    args[first] = value;
                    args[second] = &paired;
                    push_args(&mut calls, &args);
                    for other in &others {
                        for option in values[*other].iter().take(3) {
                            let mut varied = args.clone();
                            varied[*other] = option;
                            push_args(&mut calls, &varied);
                        }
                    }
                }
            }
        }
    }
    if values.len() > 1 {
        for round in 0..limit {
            let choice: Vec<usize> =
                values.iter().enumerate().map(|(idx, options)| (round * (idx + 1) + idx) % options.len()).collect();
            push(&mut calls, &choice);
        }
    }
    calls.truncate(limit);
    calls
}

fn push_args(calls: &mut Vec<String>, args: &[&str]) {
    let call = format!("({})", args.join(", "));
    if !calls.contains(&call) {
        calls.push(call);
    }
}

/// A text or character literal with the case of its ASCII letters swapped (`'a'` → `'A'`,
/// `"Hello".to_string()` → `"hELLO".to_string()`), where that changes it and it holds no escape: the value a
/// case-insensitive comparison takes as equal.
pub(super) fn case_twin(literal: &str) -> Option<String> {
    let quote = literal.chars().next().filter(|first| ['"', '\'', '`'].contains(first))?;
    let close = literal[1..].find(quote)? + 1;
    let inner = &literal[1..close];
    if inner.contains('\\') {
        return None;
    }
    let swapped: String = inner
        .chars()
        .map(|ch| if ch.is_ascii_lowercase() { ch.to_ascii_uppercase() } else { ch.to_ascii_lowercase() })
        .collect();
    (swapped != inner).then(|| format!("{quote}{swapped}{}", &literal[close..]))
}
