//! Tests of `characterise.rs` and `characterise_inputs.rs`.

use super::*;

fn tree(lang: Lang, text: &str) -> spark_grammars::tree_sitter::Tree {
    crate::parse::text(lang, text).unwrap()
}

#[test]
fn literal_calls_table() {
    let cases: &[(Lang, &str, &[&str])] = &[
        (Lang::Rust, "fn f(a: u32) {}\nlet x = f(3);\nlet y = f(n);\n/// f(\"a\", 'b')\n", &["(3)", "(\"a\", 'b')"]),
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
        (Lang::TypeScript, "\"a\", 1, [1, 2], { a: 1 }", true),
        (Lang::TypeScript, "{ queryKey: [\"todos\", 1], enabled: false }, undefined", true),
        (Lang::TypeScript, "(x) => x + 1, (x: number) => { const y = x * 2; return Math.max(y, 0); }", true),
        (Lang::TypeScript, "({ a, b }) => a + b, [1, 2].map((n) => n * 2)", true),
        (Lang::TypeScript, "`a${1}b`, -1, new Map([[\"a\", 1]])", true),
        (Lang::TypeScript, "x", false),
        (Lang::TypeScript, "{ a }", false),
        (Lang::TypeScript, "() => process.exit(1)", false),
        (Lang::TypeScript, "() => require(\"fs\")", false),
        (Lang::TypeScript, "() => globalThis.fetch(\"x\")", false),
        (Lang::TypeScript, "[].constructor.constructor(\"return 1\")", false),
        (Lang::TypeScript, "async () => await 1", false),
        (Lang::TypeScript, "function () { return this; }", false),
        (Lang::TypeScript, "(a) => b", false),
        (Lang::TypeScript, "1, (", false),
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
fn two_parameters_of_one_type_are_also_given_equal_values_and_values_equal_but_for_case() {
    let chars: Vec<String> = ["'a'", "'Z'", "'0'"].map(str::to_owned).to_vec();
    let flags: Vec<String> = ["true", "false"].map(str::to_owned).to_vec();
    let calls = combine(&[chars.clone(), chars, flags], 40);
    for call in ["('a', 'a', false)", "('a', 'A', true)", "('a', 'A', false)", "('Z', 'z', true)", "('0', '0', true)"] {
        assert!(calls.contains(&call.to_owned()), "{call} in {calls:?}");
    }
    assert_eq!(case_twin("\"Hello\".to_string()").as_deref(), Some("\"hELLO\".to_string()"));
    assert_eq!(case_twin("'x'").as_deref(), Some("'X'"));
    assert_eq!(case_twin("\"a\\tb\""), None, "an escape is left alone");
    assert_eq!(case_twin("\"123\""), None, "no letters, no twin");
    assert_eq!(case_twin("42"), None);
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
            "the arm `0 =>` never taken",
            "`1` → `2`",
            "`1` → `0`",
            "an early return of the default value"
        ]
    );
    assert!(out.starts_with("fn g() {}\n#[allow(warnings, clippy::all)]\nfn f(a: u32, b: bool) -> u32 { if "), "{out}");
    assert!(out.contains("{ 0 if !(::std::env::var("), "the arm gets a guard, its pattern unchanged: {out}");
    // Lines in the new text (the attribute is one more line above the function).
    let lines: Vec<usize> = mutants.iter().map(|mutant| mutant.line).collect();
    assert_eq!(lines, [3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2]);
    // The output still parses, and a skipped mutant is gone.
    assert!(!crate::parse::text(Lang::Rust, &out).unwrap().root_node().has_error(), "{out}");
    let skip: BTreeSet<usize> = [1, 10_000].into();
    let (out, mutants) = schemata(Lang::Rust, tree.root_node(), text, start..text.len() - 1, &skip, 20);
    assert_eq!(mutants.len(), 9);
    assert!(!out.contains("Ok(\"1\")") && !out.contains("Default::default"), "{out}");
    let ts = "export function f(a: number): boolean {\n  return a === 2 || a > 7;\n}\n";
    let tree = self::tree(Lang::TypeScript, ts);
    let (out, mutants) = schemata(Lang::TypeScript, tree.root_node(), ts, 7..ts.len() - 1, &BTreeSet::new(), 20);
    assert_eq!(mutants.len(), 7, "{mutants:?}");
    assert!(!crate::parse::text(Lang::TypeScript, &out).unwrap().root_node().has_error(), "{out}");
}

#[test]
fn schemata_skip_branches_only_where_the_rest_still_matches() {
    // The last arm is a binding (takes everything): the arms before it can be skipped, a guarded one cannot.
    let text =
        "fn f(s: &str) -> u8 {\n    match s {\n        \"a\" | \"b\" => 1,\n        x if x.is_empty() => 2,\n        \
                _other => 3,\n    }\n}\n";
    let tree = tree(Lang::Rust, text);
    let (out, mutants) = schemata(Lang::Rust, tree.root_node(), text, 0..text.len() - 1, &BTreeSet::new(), 20);
    let arms: Vec<&str> =
        mutants.iter().map(|mutant| mutant.what.as_str()).filter(|what| what.contains("arm")).collect();
    assert_eq!(arms, ["the arm `\"a\" | \"b\" =>` never taken"]);
    assert!(!crate::parse::text(Lang::Rust, &out).unwrap().root_node().has_error(), "{out}");
    // No catch-all: the match would not be exhaustive without the arm.
    let text = "fn f(b: bool) -> u8 {\n    match b {\n        true => 1,\n        false => 0,\n    }\n}\n";
    let tree = self::tree(Lang::Rust, text);
    let (_, mutants) = schemata(Lang::Rust, tree.root_node(), text, 0..text.len() - 1, &BTreeSet::new(), 20);
    assert!(mutants.iter().all(|mutant| !mutant.what.contains("arm")), "{mutants:?}");
    // TypeScript: every `case` value, evaluated at run time, can become a value nothing equals.
    let ts = "export function f(s: string): number {\n  switch (s) {\n    case \"a\":\n      return 1;\n    default:\n      return 0;\n  }\n}\n";
    let tree = self::tree(Lang::TypeScript, ts);
    let (out, mutants) = schemata(Lang::TypeScript, tree.root_node(), ts, 7..ts.len() - 1, &BTreeSet::new(), 20);
    let whats: Vec<&str> = mutants.iter().map(|mutant| mutant.what.as_str()).collect();
    assert!(whats.contains(&"`case \"a\":` never taken"), "{whats:?}");
    assert!(out.contains("case ((globalThis.process?.env?.SPARK_MUTANT === \""), "{out}");
    assert!(out.contains(") ? (Symbol()) : (\"a\")):"), "{out}");
    assert!(!crate::parse::text(Lang::TypeScript, &out).unwrap().root_node().has_error(), "{out}");
}

#[test]
fn side_effects_table() {
    let cases = [
        (Lang::Rust, "fn f() -> String { std::fs::read_to_string(\"a\").unwrap() }", Some("it reads or writes files")),
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
        partial: false,
    };
    let inputs = [
        input("(0)", "0", &[]),
        input("(1)", "1", &[1]),
        input("(2)", "2", &[1, 2]),
        input("(3)", "2", &[]),
        input("(4)", "5", &[3]),
    ];
    let none = BTreeSet::new();
    assert_eq!(choose(&inputs, 10, &none), [0, 1, 2, 4]);
    assert_eq!(choose(&inputs, 1, &none), [2]);
    // The input whose assertion did not type-check is replaced by one that kills what it killed.
    assert_eq!(choose(&inputs, 10, &BTreeSet::from([2])), [0, 1, 3, 4]);
    assert_eq!(choose(&inputs, 1, &BTreeSet::from([1, 2])), [4]);
}

#[test]
fn own_rust_types_are_made_as_the_crate_makes_them() {
    let file = "pub struct Quoter { allow_nul: bool }\n\
        impl Quoter {\n    pub fn new() -> Self { Quoter { allow_nul: false } }\n    \
        pub fn allow_nul(mut self, allow: bool) -> Quoter { self.allow_nul = allow; self }\n    \
        pub fn quote(&self, s: &str) -> String { s.to_owned() }\n    pub fn make(n: u8) -> usize { n as usize }\n}\n\
        #[derive(Debug, Clone, Default)]\npub struct Options { pub case: bool, pub depth: u8 }\n\
        pub enum Spec { One(char), Range(char, char), Any }\n\
        const TABLE: &[u8; 4] = b\"abcd\";\n\
        pub fn f(o: &Options, s: Spec, t: &'static [u8; 4]) -> bool { o.case }\n";
    let sources = Sources::new(Lang::Rust, vec![file.to_owned()]);
    let options = sources.rust_values("&Options", "");
    assert_eq!(options[0], "&Options::default()", "{options:?}");
    assert!(options.contains(&"&Options { case: true, depth: 0 }".to_owned()), "{options:?}");
    let specs = sources.rust_values("Spec", "");
    assert!(specs.contains(&"Spec::Any".to_owned()) && specs.contains(&"Spec::One('a')".to_owned()), "{specs:?}");
    // An out-parameter slice gets buffers of a few lengths, and a call yields what was written into it.
    assert_eq!(sources.rust_values("&'a mut [u8]", "")[..2], ["&mut [0; 0]", "&mut [0; 1]"]);
    assert_eq!(
        with_callees_and_args(&["f".to_owned()], &["(\"ab\", &mut [0; 1])".to_owned()], &CallShape::Plain, 9),
        ["{ let mut out = [0; 1]; (f(\"ab\", &mut out), out) }"]
    );
    // A function that returns nothing yields what it wrote into its `&mut` argument; a receiver's parentheses
    // are not the argument list.
    assert_eq!(
        with_callees_and_args(
            &["Buf::new(2).put".to_owned()],
            &["(&mut vec![1, 2], \"a\")".to_owned()],
            &CallShape::Written,
            9
        ),
        ["{ let mut out = vec![1, 2]; Buf::new(2).put(&mut out, \"a\"); out }"]
    );
    assert_eq!(observing_mut_argument("f(&mut a, &mut b)", false), None, "two written arguments: neither");
    assert_eq!(observing_mut_argument("f(1)", true), None);
    let tables = sources.rust_values("&'static [u8; 4]", "");
    assert_eq!(tables[0], "TABLE", "{tables:?}");
    assert!(tables.contains(&"&[0; 4]".to_owned()), "{tables:?}");
    let quoter = sources.rust_values("Quoter", "");
    assert_eq!(quoter, ["Quoter::new()", "Quoter { allow_nul: true }", "Quoter { allow_nul: false }"]);
    let tree = tree(Lang::Rust, file);
    let functions = functions_by_name(tree.root_node(), file);
    let quote = functions["quote"];
    let callees = sources.rust_callees(quote, file, "quote").unwrap();
    assert_eq!(callees[0], "Quoter::new().quote", "{callees:?}");
    assert_eq!(sources.rust_callees(functions["make"], file, "make").unwrap(), ["Quoter::make"]);
    assert_eq!(sources.rust_callees(functions["f"], file, "f"), None);
    // No way to make a type: no values, so no input.
    assert!(sources.rust_values("Unknown", "").is_empty());
}

#[test]
fn generic_iterables_get_vectors() {
    let sources = Sources::new(Lang::Rust, vec![String::new()]);
    let header = "pub fn join<'a, I: IntoIterator<Item = &'a str>>(&self, words: I) -> String";
    let words = sources.rust_values("I", header);
    assert_eq!(words[0], "vec![]", "{words:?}");
    assert!(words[1].starts_with("vec![\""), "{words:?}");
    let header = "pub fn h<'a, A, E>(a: &'a A) -> f64 where &'a A: IntoIterator<Item = E>, E: PartialEq";
    let chars = sources.rust_values("&'a A", header);
    assert_eq!(chars[1], "&vec!['b']", "{chars:?}");
    let calls = with_callees_and_args(
        &["a.f".to_owned(), "b.f".to_owned()],
        &["(1)".to_owned(), "(2)".to_owned()],
        &CallShape::Collect,
        9,
    );
    assert_eq!(calls, ["a.f(1).collect::<Vec<_>>()", "b.f(1).collect::<Vec<_>>()", "b.f(2).collect::<Vec<_>>()"]);
}

#[test]
fn typescript_types_of_the_package_get_values() {
    let file = "export type Mode = 'online' | 'always'\n\
        export interface Point { x: number; label?: string }\n\
        export class Box { constructor(size: number) {} }\n\
        export function f<T>(m: Mode | undefined, p: Point, b: Box, v: unknown, t: T): boolean { return true }\n";
    let sources = Sources::new(Lang::TypeScript, vec![file.to_owned()]);
    assert_eq!(sources.ts_values("Mode | undefined", &[]), ["'online'", "undefined", "'always'"]);
    let points = sources.ts_values("Point", &[]);
    assert_eq!(points[0], "{ x: 0 }", "{points:?}");
    assert!(points.iter().any(|point| point.contains("label: ")), "{points:?}");
    assert_eq!(sources.ts_values("Box", &[])[0], "new Box(0)");
    assert!(sources.ts_values("unknown", &[]).contains(&"null".to_owned()));
    assert!(sources.ts_values("T", &["T".to_owned()]).contains(&"{ a: 1 }".to_owned()));
    // The standard library's types the package does not define.
    let maps = sources.ts_values("Map<string, Box>", &[]);
    assert_eq!(maps[..2], ["new Map()", "new Map([[\"\", new Box(0)]])"], "{maps:?}");
    assert_eq!(sources.ts_values("Set<Mode>", &[])[1], "new Set(['online'])");
    assert_eq!(sources.ts_values("Record<Mode, number>", &[]), ["{ 'online': 0, 'always': 1 }"]);
    assert_eq!(sources.ts_values("Record<string, boolean>", &[])[1], "{ \"a\": true }");
    assert!(sources.ts_values("DataView", &[])[0].starts_with("new DataView(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8,"));
    assert_eq!(sources.ts_values("Uint8Array", &[])[1], "new Uint8Array([1, 2, 3])");
    assert_eq!(sources.ts_values("Partial<Point>", &[])[..2], ["{}", "{ x: 0 }"]);
    assert!(sources.ts_values("Map<string, Promise<number>>", &[]).is_empty());
    // A conditional type takes its last branch's values; a function type, functions returning its values.
    let key =
        "Register extends { key: infer K } ? K extends ReadonlyArray<unknown> ? K : never : ReadonlyArray<number>";
    assert_eq!(sources.ts_values(key, &[])[0], "[]");
    assert_eq!(
        sources.ts_values("(a: number, b?: Mode) => boolean", &[]),
        ["(_0, _1) => (true)", "(_0, _1) => (false)"]
    );
    assert_eq!(sources.ts_values("() => void", &[]), ["() => (undefined)"]);
    assert_eq!(sources.ts_values("(\n  a: number,\n  b: string,\n) => void", &[]), ["(_0, _1) => (undefined)"]);
    assert!(sources.ts_values("(a: Point) => WeakMap<Point, Box>", &[]).is_empty());
    assert!(sources.ts_values("(string | number)[]", &[]).len() > 1);
    // Comments between an interface's members, with commas and brackets of their own, are not members.
    let file = "export interface Retire {\n  // The position, as classified (in pixels, see `x`).\n  offset: number\n  \
        /** The command, or null. */\n  command: {\n    index: number | null // none yet, or one\n  } | null\n  url: 'a//b'\n}\n";
    let sources = Sources::new(Lang::TypeScript, vec![file.to_owned()]);
    let retire = sources.ts_values("Retire", &[]);
    assert_eq!(retire[0], "{ offset: 0, command: null, url: 'a//b' }", "{retire:?}");
    assert!(retire.iter().any(|value| value.contains("command: { index: 0 }")), "{retire:?}");
    // A generic interface takes its type arguments (or defaults) and the members of what it extends.
    let file = "interface Initial<TParam> { initial: TParam }\n\
        type Next<TParam, TData = unknown> = (last: TData) => TParam | undefined\n\
        export interface Options<TData = unknown, TParam = unknown> extends Initial<TParam> {\n  next: Next<TParam, TData>\n}\n";
    let sources = Sources::new(Lang::TypeScript, vec![file.to_owned()]);
    let options = sources.ts_values("Options<string, number>", &[]);
    assert_eq!(options[0], "{ initial: 0, next: (_0) => (undefined) }", "{options:?}");
    assert!(!sources.ts_values("Options", &[]).is_empty());
}

#[test]
fn a_void_typescript_function_is_asserted_on_through_the_objects_it_was_given() {
    let names = ["query".to_owned(), "at".to_owned()];
    assert_eq!(
        observing_ts_arguments("touchQuery", "{ state: \"idle\", count: 1 }, 2", &names).as_deref(),
        Some(
            "(() => { const query: Parameters<typeof touchQuery>[0] = { state: \"idle\", count: 1 }; \
             touchQuery(query, 2); return query; })()"
        )
    );
    let names = ["view".to_owned(), "offset".to_owned(), "values".to_owned()];
    assert_eq!(
        observing_ts_arguments("put", "new DataView(new ArrayBuffer(8)), 0, [1, 2]", &names).as_deref(),
        Some(
            "(() => { const view: Parameters<typeof put>[0] = new DataView(new ArrayBuffer(8)); \
             const values: Parameters<typeof put>[2] = [1, 2]; put(view, 0, values); return [view, values]; })()"
        )
    );
    // A parameter named as the function (or not an identifier) is bound under another name.
    assert_eq!(
        observing_ts_arguments("f", "[1]", &["f".to_owned()]).as_deref(),
        Some("(() => { const arg0: Parameters<typeof f>[0] = [1]; f(arg0); return arg0; })()")
    );
    assert_eq!(observing_ts_arguments("f", "1, \"a\"", &names), None, "numbers and strings cannot change");
}

#[test]
fn a_type_spark_cannot_make_is_stood_in_for_by_the_members_the_function_reads() {
    let file = "interface Base { parent?: State; dirty: boolean; scope: Scope }\n\
                interface Scope { run(): void }\n\
                interface Counted extends Base { kind: \"counted\"; count: number }\n\
                type State = Counted | Counted[]\n";
    let sources = Sources::new(Lang::TypeScript, vec![file.to_owned()]);
    assert!(sources.ts_values("State", &[]).is_empty(), "a scope with a method has no value");
    let used = ["dirty".to_owned(), "parent".to_owned()];
    assert_eq!(sources.ts_partial_values("State", &used, &[]), ["{ dirty: true } as any", "{ dirty: false } as any"]);
    let used = ["count".to_owned()];
    let values = sources.ts_partial_values("State", &used, &[]);
    assert!(values.len() >= 2 && values.iter().all(|value| value.starts_with("{ count: ")), "{values:?}");
    assert!(sources.ts_partial_values("State", &["missing".to_owned()], &[]).is_empty());
    assert_eq!(sources.ts_partial_values("State", &[], &[]), ["{} as any"], "nothing read: an empty object");
}

#[test]
fn a_class_instance_is_stood_in_for_by_the_member_paths_the_function_reads() {
    let file = "type Phase = 'idle' | 'busy' | 'done'\n\
                interface Progress { phase: Phase; steps: number }\n\
                export class Job<T = unknown> {\n  progress: Progress;\n  label?: string;\n  static count: number;\n  \
                constructor(private runner: Runner<T>) {}\n  get size(): number { return 1 }\n  \
                retry(times: number): boolean { return times > 0 }\n}\n";
    let sources = Sources::new(Lang::TypeScript, vec![file.to_owned()]);
    // `job.progress.phase`: the progress is stood in for by its phase alone.
    let values = sources.ts_partial_values("Job", &["progress.phase".to_owned()], &[]);
    for phase in ["'idle'", "'busy'", "'done'"] {
        assert!(values.contains(&format!("{{ progress: {{ phase: {phase} }} as any }} as any")), "{values:?}");
    }
    // A member read whole takes whole values of its type; a getter is a field, a method a function.
    let values = sources.ts_partial_values("Job", &["progress".to_owned(), "progress.steps".to_owned()], &[]);
    assert!(values.iter().all(|value| value.starts_with("{ progress: { phase: ")), "{values:?}");
    let values = sources.ts_partial_values("Job", &["size".to_owned(), "retry".to_owned()], &[]);
    assert!(
        values.iter().all(|value| value.starts_with("{ size: ") && value.contains("retry: (_0) => (")),
        "{values:?}"
    );
    let values = sources.ts_partial_values("Job", &["label".to_owned()], &[]);
    assert!(values.contains(&"{} as any".to_owned()), "an optional member is also absent: {values:?}");
    assert!(
        sources.ts_partial_values("Job", &["count".to_owned()], &[]).is_empty(),
        "a static member is not an instance's"
    );
    // A path past what the type declares falls back to whole values of the member it starts from.
    let values = sources.ts_partial_values("Job", &["progress.missing".to_owned()], &[]);
    assert!(!values.is_empty() && values.iter().all(|value| value.contains("steps: ")), "{values:?}");
    assert!(sources.ts_partial_values("Job", &["missing.phase".to_owned()], &[]).is_empty());
}

#[test]
fn a_function_that_writes_into_a_formatter_is_called_by_a_display_and_asserted_on_as_text() {
    for ty in ["&mut fmt::Formatter", "&mut Formatter<'_>", "&mut std::fmt::Formatter<'a>", "&'a mut fmt::Formatter"] {
        assert!(is_formatter(ty), "{ty}");
        assert_eq!(rust_values(ty, ""), [FORMATTER]);
    }
    assert!(!is_formatter("&fmt::Formatter") && !is_formatter("&mut Vec<u8>"));
    assert_eq!(
        with_callees_and_args(&["title".to_owned()], &[format!("(\"a b\", {FORMATTER})")], &CallShape::Displayed, 9),
        ["std::fmt::from_fn(|f| title(\"a b\", f)).to_string()"]
    );
}

#[test]
fn what_two_runs_of_an_object_agree_on() {
    let one = "{href: \"/a?b\", search: \"?b\", state: {key: \"x1\", __TSR_index: 0}}";
    let two = "{href: \"/a?b\", search: \"?b\", state: {key: \"q7\", __TSR_index: 0}}";
    assert_eq!(stable_members(one, two).as_deref(), Some("{href: \"/a?b\", search: \"?b\"}"));
    // Nothing in common, other keys, not objects: nothing stable.
    assert_eq!(stable_members("{id: 1}", "{id: 2}"), None);
    assert_eq!(stable_members("{id: 1, a: 2}", "{key: 1, a: 2}"), None);
    assert_eq!(stable_members("[1, 2]", "[1, 3]"), None);
    assert_eq!(stable_members("{\"a-b\": 1, c: 2}", "{\"a-b\": 2, c: 2}"), None);
    // A value with a comma or a colon inside stays whole.
    assert_eq!(ts_object_members("{a: \"x, y: z\", b: [1, 2]}"), Some(vec![("a", "\"x, y: z\""), ("b", "[1, 2]")]));
    let partial = "{href: \"/a?b\", search: \"?b\"}";
    assert!(has_members(two, partial));
    assert!(!has_members("{href: \"/a\", search: \"?b\", state: {}}", partial));
    assert!(!has_members("NaN", partial));
}

#[test]
fn parameters_known_by_their_bounds_get_values_of_the_target_or_typed_literals() {
    let other = "pub struct Options { pub kilo: u64 }\npub const BINARY: Options = Options { kilo: 1024 };\n";
    let under_test = "use crate::options::Options;\npub fn f(x: u8) {}\n";
    let sources = Sources::new(Lang::Rust, vec![under_test.to_owned(), other.to_owned()]);
    // A conversion into a number: that number's values, suffixed (an unsuffixed literal would be an `i32`).
    assert_eq!(sources.rust_values("impl Into<u64>", "")[..3], ["0u64", "1u64", "2u64"]);
    // Into the crate's own type: its values, borrowed too for `AsRef`; a constant the file under test does not
    // name is reached through the crate's root.
    let options = sources.rust_values("impl AsRef<Options>", "");
    assert!(
        options.contains(&"crate::BINARY".to_owned()) && options.contains(&"&crate::BINARY".to_owned()),
        "{options:?}"
    );
    assert!(sources.rust_values("Options", "").contains(&"crate::BINARY".to_owned()));
    let naming = Sources::new(Lang::Rust, vec!["use crate::BINARY;\n".to_owned(), other.to_owned()]);
    assert_eq!(naming.rust_values("Options", "")[0], "BINARY");
    // A trait Spark cannot read: typed literals of the standard types, for the compiler to choose from.
    let header = "pub fn format_size<T: ToF64 + Unsigned>(input: T) -> String";
    assert_eq!(sources.rust_values("T", header), TYPED_LITERALS);
    assert_eq!(sources.rust_values("impl ToF64", ""), TYPED_LITERALS);
    // Closures and unbounded types get none.
    assert!(sources.rust_values("impl Fn(u8) -> u8", "").is_empty());
    assert!(sources.rust_values("T", "fn g<T>(x: T)").is_empty());
}

#[test]
fn bytes_and_strings_get_the_functions_byte_literals_and_comment_examples() {
    let text = "/// Parses a date like `Sunday, 06-Nov-94 GMT`; see `Self::new` and `parse(\"x\")`.\n\
        fn f(s: &[u8], t: &str, prefix: u8, c: char) -> bool {\n    // Example: `06:49`\n    \
        s == b\"Monday\" || t == \"yes\" || prefix == b'k' || c == 'q' || prefix.wrapping_sub(b'0') < 10\n}\n";
    let tree = tree(Lang::Rust, text);
    let function = tree.root_node().named_child(1).unwrap();
    assert_eq!(function.kind(), "function_item");
    let found = literals(function, text);
    assert_eq!(found.spans, ["06:49", "Sunday, 06-Nov-94 GMT"], "names and calls are not data");
    let values = |ty: &str| {
        let mut values = Vec::new();
        add_literals(Lang::Rust, ty, &found, &mut values);
        values
    };
    assert_eq!(values("&[u8]"), ["b\"Monday\"", "b\"yes\"", "b\"06:49\"", "b\"Sunday, 06-Nov-94 GMT\""]);
    // Strings also come as long as its small integers, and one shorter and longer (a length it may compare with).
    assert_eq!(
        values("&str"),
        ["\"yes\"", "\"06:49\"", "\"Sunday, 06-Nov-94 GMT\"", "\"abcdefghi\"", "\"abcdefghij\"", "\"abcdefghijk\""]
    );
    assert_eq!(values("u8")[..], ["9", "10", "11", "b'k'", "b'0'"]);
    assert_eq!(values("char"), ["'q'"]);
}

#[test]
fn a_returned_function_is_given_arguments_and_functions_of_anything_compute_with_theirs() {
    let file = "export type Handler<Req, Res> = (request: Req) => Res\n\
        export type Unit = 'kb' | 'mb'\n";
    let sources = Sources::new(Lang::TypeScript, vec![file.to_owned()]);
    assert_eq!(sources.ts_returned_function_args(": (n: number) => string", &[]), ["0", "1", "2"]);
    assert_eq!(
        sources.ts_returned_function_args("(unit: Unit, n: number) => string", &[])[..2],
        ["'kb', 0", "'mb', 0"]
    );
    // A rest parameter stands for one argument; `any` and bare type parameters for numbers and a string.
    assert_eq!(
        sources.ts_returned_function_args("(...values: any[]) => Out", &["Out".to_owned()]),
        ["1", "2", "\"a\""]
    );
    assert_eq!(sources.ts_returned_function_args("<V>(value: V) => V[]", &[]), ["1", "2", "\"a\""]);
    // The project's alias of a function type, and a function of no arguments.
    let params = ["Req".to_owned(), "Res".to_owned()];
    assert_eq!(sources.ts_returned_function_args("Handler<Req, Res>", &params), ["1", "2", "\"a\""]);
    assert_eq!(sources.ts_returned_function_args("() => void", &[]), [""]);
    assert!(sources.ts_returned_function_args("string", &[]).is_empty());
    assert!(sources.ts_returned_function_args("Unit", &[]).is_empty());
    // A function argument that may return anything uses its own argument.
    let functions = sources.ts_values("(item: Item) => Out", &["Item".to_owned(), "Out".to_owned()]);
    assert_eq!(functions, ["(_0: any) => _0 + 1", "(_0: any) => _0 * 2", "(_0: any) => [_0]"]);
    assert_eq!(sources.ts_values("() => number", &[])[0], "() => (0)");
}

#[test]
fn indexed_access_types_and_arrays_of_unions_of_objects_have_values() {
    let file = "type Key = number | string | bigint\ninterface Item { key: Key; index: number }\n";
    let sources = Sources::new(Lang::TypeScript, vec![file.to_owned()]);
    // `Item['key']` is the member's type.
    let keys = sources.ts_values("Item['key']", &[]);
    for key in ["0", "\"\"", "0n"] {
        assert!(keys.contains(&key.to_owned()), "{keys:?}");
    }
    assert!(sources.ts_values("Item['missing']", &[]).is_empty());
    // A union's parts take their turns; an array of the union holds objects and keys both.
    let union = sources.ts_values("Item | Item['key']", &[]);
    assert!(union[0].starts_with("{ key: ") && union[1] == "0", "{union:?}");
    let arrays = sources.ts_values("Array<Item | Item['key']>", &[]);
    assert!(arrays.iter().any(|array| array.contains("{ key: ") && array.contains("\"\"")), "{arrays:?}");
    assert!(sources.ts_values("Item[]", &[]).iter().any(|array| array.contains("{ key: ")));
}
