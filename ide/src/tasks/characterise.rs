//! Characterisation tests, the pure half: inputs for a function (harvested from calls with literal arguments in
//! the project and its doc comments, made from the parameter types, proposed by a model), the probe that runs
//! the function on them and prints what it returns, mutant schemata (every mutant compiled into one copy of the
//! function, each switched on at run time by `SPARK_MUTANT`), and the assertions written from observed values.
//! `probe.rs` runs these in the scratch copy. The inputs are found in `characterise_inputs.rs`.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use spark_grammars::tree_sitter::Node;
use spark_grammars::Lang;

pub use super::characterise_inputs::*;
pub use types::*;

#[path = "characterise_types.rs"]
mod types;

/// The environment variable that selects a mutant in the schemata; unset, the function is the original.
pub const MUTANT_VAR: &str = "SPARK_MUTANT";

/// The number of the early-return mutant (the function returns its type's default, `Ok` of it, or `None` at
/// once): almost any input catches it, so it alone does not make a test worth offering when the function has
/// other mutants.
pub const EARLY_RETURN: usize = 10_000;

/// The environment variable that makes the probe skip the inputs before this index (after a crash).
pub const FROM_VAR: &str = "SPARK_PROBE_FROM";
/// The prefix of the probe's output lines.
pub const PROBE_MARK: &str = "SPARK_PROBE";
/// A Debug output longer than this is not written into a test.
pub const MAX_DEBUG_LEN: usize = 240;

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
///
/// `calls` are whole expressions that name the function `name` (as the test does).
pub fn ts_probe_script(
    typescript_lib: &str,
    out_dir: &str,
    module: &str,
    export: &str,
    name: &str,
    calls: &[String],
) -> String {
    let mark = PROBE_MARK;
    let quote = |text: &str| serde_json::Value::String(text.to_owned()).to_string();
    // The calls are TypeScript (an argument may be `(x: number) => x + 1`): transpiled with the package.
    let calls_ts: String = calls.iter().enumerate().map(|(idx, call)| format!("  {idx}: () => {call},\n")).collect();
    let calls_ts = quote(&format!("module.exports = ({name}: any) => ({{\n{calls_ts}}});\n"));
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
      else if (/\.(ts|tsx|mts|cts)$/.test(entry.name) && !/\.d\.(ts|mts|cts)$/.test(entry.name) && !/\.d\.[^.]+\.ts$/.test(entry.name)) {{
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
  fs.mkdirSync(out, {{ recursive: true }});
  // CommonJS whatever the package's own "type" says (the output is inside the package).
  fs.writeFileSync(path.join(out, "package.json"), '{{"type": "commonjs"}}\n');
  const calls = ts.transpileModule({calls_ts}, {{ compilerOptions: {{ module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2020 }} }});
  fs.writeFileSync(path.join(out, "spark-probe-calls.js"), calls.outputText);
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
  const list = (items) => {{
    const shown = Array.from(items, (item) => literal(item, depth + 1));
    return shown.includes(undefined) ? undefined : "[" + shown.join(", ") + "]";
  }};
  const kind = typeof value === "object" ? Object.getPrototypeOf(value) : null;
  const typed = ["Uint8Array", "Uint8ClampedArray", "Int8Array", "Uint16Array", "Int16Array", "Uint32Array", "Int32Array", "Float32Array", "Float64Array"];
  for (const name of typed) if (kind === globalThis[name].prototype) {{ const items = list(value); return items && "new " + name + "(" + items + ")"; }}
  const bytes = (buffer, offset, length) => "new Uint8Array(" + list(new Uint8Array(buffer, offset, length)) + ").buffer";
  if (kind === ArrayBuffer.prototype) return bytes(value, 0, value.byteLength);
  if (kind === DataView.prototype) return "new DataView(" + bytes(value.buffer, value.byteOffset, value.byteLength) + ")";
  if (kind === Date.prototype) return "new Date(" + (Number.isNaN(value.getTime()) ? "NaN" : value.getTime()) + ")";
  if (kind === RegExp.prototype) return String(value);
  if (kind === Set.prototype) {{ const items = list(value); return items && "new Set(" + items + ")"; }}
  if (kind === Map.prototype) {{
    const entries = Array.from(value, ([key, item]) => {{ const pair = [literal(key, depth + 1), literal(item, depth + 1)]; return pair.includes(undefined) ? undefined : "[" + pair.join(", ") + "]"; }});
    return entries.includes(undefined) ? undefined : "new Map([" + entries.join(", ") + "])";
  }}
  if (typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {{
    const parts = [];
    for (const key of Object.keys(value)) {{
      const item = literal(value[key], depth + 1);
      if (item === undefined) return undefined;
      parts.push((/^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key)) + ": " + item);
    }}
    return "{{" + parts.join(", ") + "}}";
  }}
  return undefined;
}};
const loaded = require(path.join(out, {module}));
const f = loaded[{export}];
const calls = require(path.join(out, "spark-probe-calls.js"))(f);
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

/// How a Rust call is written so that its value can be printed and asserted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallShape {
    /// As it is.
    Plain,
    /// An iterator, collected: `f(x).collect::<Vec<_>>()`.
    Collect,
    /// A return type the call cannot infer (`-> T` with `T: FromIterator<char>`), given one:
    /// `{ let value: String = f(x); value }`.
    Typed(String),
    /// A function that returns nothing and writes into its `&mut` argument: the argument after the call,
    /// `{ let mut out = vec![1]; f(&mut out, 2); out }`.
    Written,
    /// A function that writes into a formatter (`f: &mut fmt::Formatter`): called by a `Display`
    /// implementation, asserted on as what it wrote, `std::fmt::from_fn(|f| title_case("a", f)).to_string()`.
    Displayed,
}

/// Rust inputs as whole expressions: each argument list after a callee (the function's name, `Type::name`, or a
/// receiver and `.name`), the first with every callee and the rest in turn, written in `shape`; at most `max`.
pub fn with_callees_and_args(callees: &[String], args: &[String], shape: &CallShape, max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (idx, arguments) in args.iter().enumerate() {
        let picked: Vec<&String> =
            if idx == 0 { callees.iter().collect() } else { vec![&callees[idx % callees.len().max(1)]] };
        for callee in picked {
            let call = format!("{callee}{arguments}");
            let call = match shape {
                CallShape::Plain => observing_mut_argument(&call, true).unwrap_or(call),
                CallShape::Written => observing_mut_argument(&call, false).unwrap_or(call),
                CallShape::Displayed => format!("std::fmt::from_fn(|{FORMATTER}| {call}).to_string()"),
                CallShape::Collect => format!("{call}.collect::<Vec<_>>()"),
                CallShape::Typed(ty) => format!("{{ let value: {ty} = {call}; value }}"),
            };
            if !out.contains(&call) {
                out.push(call);
            }
        }
    }
    out.truncate(max);
    out
}

/// A call of a TypeScript function that returns `void` (`name(args)`, `args` without parentheses), written so
/// that the objects it was given are what is asserted on: each object, array or `new …` argument is bound
/// first, typed as the parameter it is passed to, and the call's value is those arguments after it,
/// `(() => { const state: Parameters<typeof f>[0] = {..}; f(state, 1); return state; })()`; several as an
/// array. `None` when no argument could be changed by the call (numbers, strings, …).
pub fn observing_ts_arguments(name: &str, args: &str, parameter_names: &[String]) -> Option<String> {
    let parts = split_arguments(args);
    let mutable = |arg: &str| arg.starts_with('{') || arg.starts_with('[') || arg.starts_with("new ");
    let mut bindings = String::new();
    let mut passed = Vec::new();
    let mut observed = Vec::new();
    for (idx, arg) in parts.iter().enumerate() {
        if !mutable(arg) {
            passed.push(arg.to_string());
            continue;
        }
        let named = parameter_names.get(idx).filter(|candidate| {
            let mut chars = candidate.chars();
            chars.next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
                && chars.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
                && candidate.as_str() != name
                && !parameter_names[..idx].contains(candidate)
        });
        let local = named.cloned().unwrap_or_else(|| format!("arg{idx}"));
        bindings.push_str(&format!("const {local}: Parameters<typeof {name}>[{idx}] = {arg}; "));
        passed.push(local.clone());
        observed.push(local);
    }
    let returned = match observed.as_slice() {
        [] => return None,
        [one] => one.clone(),
        several => format!("[{}]", several.join(", ")),
    };
    Some(format!("(() => {{ {bindings}{name}({}); return {returned}; }})()", passed.join(", ")))
}

/// A call with one `&mut` argument (an out-parameter buffer `f(x, &mut [0; 4])`, a `&mut vec![..]`, see
/// `rust_values`) as a block that yields the argument after the call, so that what the function wrote into it
/// is asserted on: with the call's value, `{ let mut out = [0; 4]; (f(x, &mut out), out) }`, or alone for a
/// function that returns nothing, `{ let mut out = vec![1]; f(&mut out); out }`. `None` without exactly one.
pub fn observing_mut_argument(call: &str, with_value: bool) -> Option<String> {
    // The argument list is the call's last parenthesised group (a receiver's `Type::new(1).f(..)` comes first).
    let inner_end = call.strip_suffix(')')?.len();
    let mut depth = 0i32;
    let open = call[..inner_end].char_indices().rev().find_map(|(at, ch)| {
        match ch {
            ')' | ']' | '}' => depth += 1,
            '(' | '[' | '{' if depth == 0 => return (ch == '(').then_some(Some(at)),
            '(' | '[' | '{' => depth -= 1,
            _ => {}
        }
        None
    })??;
    let inner = &call[open + 1..inner_end];
    let parts = split_arguments(inner);
    let mut written = parts.iter().filter(|part| part.starts_with("&mut "));
    let (Some(argument), None) = (written.next(), written.next()) else { return None };
    let value = argument.strip_prefix("&mut ")?.trim();
    let passed: Vec<&str> = parts.iter().map(|part| if part == argument { "&mut out" } else { part }).collect();
    let called = format!("{}({})", &call[..open], passed.join(", "));
    Some(if with_value {
        format!("{{ let mut out = {value}; ({called}, out) }}")
    } else {
        format!("{{ let mut out = {value}; {called}; out }}")
    })
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
    /// A guard on a match arm's pattern that fails when the mutant is on.
    SkipArm,
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
        if let Some(what) = skippable_branch(node, source) {
            // A match arm or a `case` (whose own text is a pattern, so checked from its parent).
            if node.parent().is_some_and(|parent| !in_unmutable_place(parent, function_node)) {
                let at = match node.kind() {
                    "match_arm" => node.child_by_field_name("pattern"),
                    _ => node.child_by_field_name("value"),
                };
                if let Some(at) = at {
                    let change = if lang == Lang::Rust { Change::SkipArm } else { Change::Replace("Symbol()".into()) };
                    add(at.byte_range(), change, what, &mut sites);
                }
            }
            continue;
        }
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
    let body = function_node.child_by_field_name("body");
    let returned = function_node.child_by_field_name("return_type").map(|ty| source[ty.byte_range()].trim());
    let early = (lang == Lang::Rust
        && !skip.contains(&EARLY_RETURN)
        && returned.is_some_and(|returned| !returned.contains("impl ")))
    .then_some(body)
    .flatten()
    .filter(|body| body.kind() == "block");
    // As cargo-mutants replaces a body: `Ok` of the default for a `Result` (`fmt::Result`: nothing written),
    // `None` for an `Option`, else the type's default.
    let early_value = match returned.unwrap_or("") {
        ty if ty.starts_with("Option<") => "None",
        ty if ty.split('<').next().is_some_and(|name| name == "Result" || name.ends_with("::Result")) => {
            "Ok(::core::default::Default::default())"
        }
        _ => "::core::default::Default::default()",
    };
    let guard = |id: usize| match lang {
        Lang::Rust => format!("::std::env::var(\"{MUTANT_VAR}\").as_deref() == Ok(\"{id}\")"),
        Lang::TypeScript | Lang::Tsx => format!("globalThis.process?.env?.{MUTANT_VAR} === \"{id}\""),
    };
    let mut mutants: Vec<Mutant> = sites.iter().map(|site| site.mutant.clone()).collect();
    let mut rendered = render(function_node, source, &sites, lang, &guard);
    if let Some(body) = early {
        let line = source[..body.start_byte()].matches('\n').count();
        let what = match early_value {
            "None" => "an early return of `None`",
            value if value.starts_with("Ok(") => "an early return of `Ok` of the default value",
            _ => "an early return of the default value",
        };
        mutants.push(Mutant { id: EARLY_RETURN, what: what.to_owned(), line });
        let at = body.start_byte() - function_node.start_byte();
        // The body's `{` is at `at` in the function's own text, which `render` keeps byte for byte up to there.
        let offset = rendered_offset(&rendered, &source[function_node.start_byte()..body.start_byte()]).unwrap_or(at);
        rendered.insert_str(offset + 1, &format!(" if {} {{ return {early_value}; }}", guard(EARLY_RETURN)));
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

/// A branch a mutant can make never taken, and what the mutant says: a Rust match arm without a guard that is
/// not the last (`"a" => …` becomes `"a" if !switched => …`), where the last arm takes everything (`_` or a
/// binding), so the match stays exhaustive; a TypeScript `case v:` (its value becomes a fresh `Symbol()`,
/// which no value equals: case values are evaluated at run time and the probe is transpiled, not type-checked).
fn skippable_branch(node: Node, source: &str) -> Option<String> {
    let head = |text: &str| {
        let first = text.lines().next().unwrap_or("").trim();
        if first.chars().count() > 40 {
            format!("{}…", first.chars().take(40).collect::<String>())
        } else {
            first.to_owned()
        }
    };
    match node.kind() {
        "match_arm" => {
            let pattern = node.child_by_field_name("pattern")?;
            if pattern.child_by_field_name("condition").is_some() {
                return None;
            }
            let block = node.parent().filter(|parent| parent.kind() == "match_block")?;
            let mut cursor = block.walk();
            let last = block.named_children(&mut cursor).filter(|arm| arm.kind() == "match_arm").last()?;
            if last.id() == node.id() {
                return None;
            }
            let last_pattern = last.child_by_field_name("pattern")?;
            let catch_all = last_pattern.child_by_field_name("condition").is_none()
                && (source[last_pattern.byte_range()].trim() == "_"
                    || (last_pattern.named_child_count() == 1
                        && last_pattern.named_child(0).is_some_and(|binding| {
                            // A binding, not a unit variant or a constant (`None`, `MAX`).
                            binding.kind() == "identifier"
                                && source[binding.byte_range()].starts_with(|c: char| c.is_lowercase() || c == '_')
                        })));
            catch_all.then(|| format!("the arm `{} =>` never taken", head(&source[pattern.byte_range()])))
        }
        "switch_case" => {
            let value = node.child_by_field_name("value")?;
            Some(format!("`case {}:` never taken", head(&source[value.byte_range()])))
        }
        _ => None,
    }
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
        let condition = guard(site.mutant.id);
        let mutated = match &site.change {
            Change::Operator { at, to } => render_children(node, source, sites, lang, guard, Some((at.clone(), to))),
            Change::Replace(to) => to.clone(),
            Change::SkipArm => {
                result = format!("{result} if !({condition})");
                continue;
            }
        };
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
                || node.parent().is_some_and(|parent| parent.kind() == "switch_case")
        }
        Change::SkipArm => node.kind() == "match_pattern",
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
    /// `value` is the members of a TypeScript object that were the same in both runs (others, a random key or
    /// a time, were not): asserted with `toMatchObject`, and a mutant is caught when one of them differs.
    pub partial: bool,
}

/// The members of a JavaScript object literal as the probe prints it (`{a: 1, "b-c": [2]}`): each key as
/// written and its value; `None` when `literal` is not an object or a key is not a plain name.
pub fn ts_object_members(literal: &str) -> Option<Vec<(&str, &str)>> {
    let inner = literal.strip_prefix('{')?.strip_suffix('}')?;
    split_arguments(inner)
        .into_iter()
        .map(|member| {
            let (key, value) = member.split_once(": ")?;
            let plain = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '$')
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
            plain.then_some((key, value))
        })
        .collect()
}

/// What two runs of an input that returned different objects agree on: the members with the same value in
/// both, as a literal, when there are some and the objects have the same keys (else nothing is stable).
pub fn stable_members(one: &str, two: &str) -> Option<String> {
    let (first, second) = (ts_object_members(one)?, ts_object_members(two)?);
    let same_keys = first.len() == second.len() && first.iter().zip(&second).all(|(a, b)| a.0 == b.0);
    if !same_keys {
        return None;
    }
    let stable: Vec<String> =
        first.iter().zip(&second).filter(|(a, b)| a.1 == b.1).map(|(a, _)| format!("{}: {}", a.0, a.1)).collect();
    (!stable.is_empty() && stable.len() < first.len()).then(|| format!("{{{}}}", stable.join(", ")))
}

/// Whether `observed` (an object literal) has every member of `partial` with the same value.
pub fn has_members(observed: &str, partial: &str) -> bool {
    let (Some(observed), Some(partial)) = (ts_object_members(observed), ts_object_members(partial)) else {
        return false;
    };
    partial.iter().all(|member| observed.contains(member))
}

/// The inputs to assert on: first those that kill mutants no input chosen so far kills (the most new kills
/// first), then inputs with other values, up to `max`; none of the `rejected` ones (their assertion did not
/// type-check).
pub fn choose(inputs: &[Input], max: usize, rejected: &BTreeSet<usize>) -> Vec<usize> {
    let mut chosen: Vec<usize> = Vec::new();
    let mut killed = BTreeSet::new();
    loop {
        let best = (0..inputs.len())
            .filter(|idx| !chosen.contains(idx) && !rejected.contains(idx))
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
        let repeated = chosen.iter().any(|other| inputs[*other].value == input.value);
        if !chosen.contains(&idx) && !rejected.contains(&idx) && !repeated {
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
    split_reference(ty).1
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
#[path = "characterise_tests.rs"]
mod tests;
