//! Tests: every query compiles, annotated samples for every query and language, and the tree helpers on broken code.
//!
//! Samples use caret assertions in the helix style. An assertion line is a `//` comment holding `^` (the column
//! of the caret) or `<-` (the column of the `//`), then one or more capture names. It points at the nearest line
//! above that is not an assertion. `@name` says that a node captured as `@name` by one of the language's queries
//! starts exactly there; `!@name` says that none does. Assertion lines are removed before parsing, so they never
//! change the tree (they would be JSX text inside JSX).

use expect_test::{expect, Expect};

use super::*;

#[test]
fn every_query_compiles_for_every_language() {
    for lang in Lang::ALL {
        let language = lang.language();
        for (name, source) in lang.query_sources() {
            if let Err(err) = Query::new(&language, source) {
                panic!("{}/{name}.scm: {err}", lang.name());
            }
        }
        // The public entry point must agree.
        let queries = lang.queries();
        assert!(queries.items.capture_index_for_name("item").is_some());
        assert!(queries.functions.capture_index_for_name("function").is_some());
        assert!(queries.functions.capture_index_for_name("name").is_some());
        assert!(queries.tests.capture_index_for_name("test_module").is_some());
        assert!(queries.tests.capture_index_for_name("test").is_some());
        assert!(queries.comments.capture_index_for_name("comment").is_some());
        assert!(queries.imports.capture_index_for_name("import").is_some());
        assert!(queries.blocks.capture_index_for_name("block").is_some());
    }
}

#[test]
fn check_rejects_wrong_assertions() {
    for fixture in [
        "fn main() {}\n// ^ @function",
        "fn main() {}\n// <- !@function",
        "fn main() {}\n// <- @comment",
        "fn main() {}\n// <- !@functoin",
        "fn main() {}",
    ] {
        let result = std::panic::catch_unwind(|| check(Lang::Rust, fixture));
        assert!(result.is_err(), "check accepted {fixture:?}");
    }
}

#[test]
fn lang_lookup() {
    assert_eq!(Lang::from_language_id("rust"), Some(Lang::Rust));
    assert_eq!(Lang::from_language_id("javascript"), Some(Lang::TypeScript));
    assert_eq!(Lang::from_language_id("typescript"), Some(Lang::TypeScript));
    assert_eq!(Lang::from_language_id("typescriptreact"), Some(Lang::Tsx));
    assert_eq!(Lang::from_language_id("javascriptreact"), Some(Lang::Tsx));
    assert_eq!(Lang::from_language_id("jsx"), Some(Lang::Tsx));
    assert_eq!(Lang::from_language_id("python"), None);
    for (path, lang) in [
        ("src/main.rs", Some(Lang::Rust)),
        ("a.ts", Some(Lang::TypeScript)),
        ("a.mts", Some(Lang::TypeScript)),
        ("a.cjs", Some(Lang::TypeScript)),
        ("a.js", Some(Lang::TypeScript)),
        ("a.tsx", Some(Lang::Tsx)),
        ("a.jsx", Some(Lang::Tsx)),
        ("a.py", None),
        ("Makefile", None),
    ] {
        assert_eq!(Lang::from_path(Path::new(path)), lang, "{path}");
    }
    for lang in Lang::ALL {
        assert_eq!(Lang::from_language_id(lang.name()), Some(lang));
        assert_eq!(lang.line_comment(), "//");
        assert!(lang.parser().parse("", None).is_some());
    }
}

#[test]
fn rust_items() {
    check(Lang::Rust, "use std::io;\n// <- @item");
    check(Lang::Rust, "extern crate alloc;\n// <- @item");
    check(
        Lang::Rust,
        r#"
        struct Point {
        // <- @item
            x: i32,
        //  ^ @item
        }
        "#,
    );
    check(
        Lang::Rust,
        r#"
        fn area(w: i32, h: i32) -> i32 {
        // <- @item
            let a = w * h;
        //  ^ @item
        //          ^ !@item
            a + 1
        //  ^ @item
        }
        "#,
    );
    check(
        Lang::Rust,
        r#"
        fn f(x: i32) -> i32 {
            if x > 0 {
        //  ^ @item
                return x;
        //      ^ @item
            }
            println!("{x}");
        //  ^ @item
            return 0
        //  ^ @item
        }
        "#,
    );
    check(
        Lang::Rust,
        r#"
        fn g(c: Color) -> u8 {
            match c {
        //  ^ @item
                Color::Red => 1,
        //      ^ @item
                Color::Green => 2,
        //      ^ @item
            }
        }
        "#,
    );
    check(
        Lang::Rust,
        r#"
        impl Point {
        // <- @item
            fn len(&self) -> f64 { 0.0 }
        //  ^ @item
        }
        trait Shape { fn area(&self) -> f64; }
        // <- @item
        //            ^ @item
        enum Color { Red, Green }
        // <- @item
        //           ^ @item
        mod geometry {}
        // <- @item
        type Meters = f64;
        // <- @item
        const MAX: u32 = 10;
        // <- @item
        "#,
    );
}

#[test]
fn typescript_items() {
    for lang in [Lang::TypeScript, Lang::Tsx] {
        check(lang, "import { a } from \"./a\";\n// <- @item");
        check(
            lang,
            r#"
            interface Shape {
            // <- @item
              area(): number;
            //^ @item
              name: string;
            //^ @item
            }
            "#,
        );
        check(
            lang,
            r#"
            class Point {
            // <- @item
              x = 0;
            //^ @item
              norm() {
            //^ @item
                const n = this.x * 2;
            //  ^ @item
            //        ^ !@item
                if (n > 1) {
            //  ^ @item
                  throw new Error("big");
            //    ^ @item
                }
                return n;
            //  ^ @item
              }
            }
            "#,
        );
        check(
            lang,
            r#"
            type Id = string;
            // <- @item
            enum Color { Red }
            // <- @item
            export function f() {}
            // <- @item
            //     ^ @item
            namespace N {}
            // <- @item
            const o = { a: 1 };
            //          ^ @item
            "#,
        );
    }
}

#[test]
fn tsx_items() {
    check(
        Lang::Tsx,
        r#"
        export function App() {
        // <- @item
        //     ^ @item
          const [n, setN] = useState(0);
        //^ @item
          return (
        //^ @item
            <div onClick={() => setN(n + 1)}>
              {n}
            </div>
          );
        }
        "#,
    );
    check(
        Lang::Tsx,
        r#"
        const el = <ul>{items.map((item) => { const key = item.id; return <li key={key} />; })}</ul>;
        // <- @item
        //                                    ^ @item
        "#,
    );
}

#[test]
fn rust_functions() {
    check(Lang::Rust, "fn main() {}\n// <- @function\n// ^ @name");
    check(Lang::Rust, "async fn fetch<T>(x: T) {}\n// <- @function\n//       ^ @name");
    check(
        Lang::Rust,
        r#"
        impl S {
            pub fn new() -> Self { S }
        //  ^ @function
        //         ^ @name
        }
        "#,
    );
    check(
        Lang::Rust,
        r#"
        trait T { fn f(&self); fn g(&self) {} }
        //        ^ !@function
        //                     ^ @function
        "#,
    );
    check(
        Lang::Rust,
        r#"
        fn outer() {
        // <- @function
            fn inner() {}
        //  ^ @function
        //     ^ @name
            let add = |a: i32| a + 1;
        //  ^ !@function
        //            ^ !@function
        }
        "#,
    );
}

#[test]
fn typescript_functions() {
    for lang in [Lang::TypeScript, Lang::Tsx] {
        check(lang, "function add(a: number, b: number) { return a + b; }\n// <- @function\n//       ^ @name");
        check(lang, "const mul = (a: number) => a * 2;\n// <- @function\n//    ^ @name");
        check(lang, "let g = function () {};\n// <- @function\n//  ^ @name");
        check(lang, "function* gen() {}\n// <- @function\n//        ^ @name");
        check(lang, "const x = 1;\n// <- !@function");
        check(
            lang,
            r#"
            class C {
              run() {}
            //^ @function @name
              #hidden() {}
            //^ @function @name
              onClick = () => {};
            //^ @function @name
              count = 0;
            //^ !@function
            }
            interface I { m(): void; }
            //            ^ !@function
            "#,
        );
    }
}

#[test]
fn tsx_functions() {
    check(
        Lang::Tsx,
        r#"
        const Button = ({ label }: Props) => <button>{label}</button>;
        // <- @function
        //    ^ @name
        const id = <T,>(x: T) => x;
        // <- @function
        export default function App() { return <Button label="a" />; }
        //             ^ @function
        //                      ^ @name
        "#,
    );
}

#[test]
fn rust_tests() {
    check(
        Lang::Rust,
        r#"
        #[cfg(test)]
        mod tests {
        // <- @test_module
            use super::*;

            #[test]
            fn adds() {}
        //  ^ @test

            #[tokio::test]
            async fn fetches() {}
        //  ^ @test

            /// Doc comments and other attributes may come in between.
            #[test]
            #[should_panic]
            fn panics() {}
        //  ^ @test

            fn helper() {}
        //  ^ !@test
        }
        "#,
    );
    check(Lang::Rust, "#[cfg(test)]\n#[allow(dead_code)]\nmod tests {}\n// <- @test_module");
    check(Lang::Rust, "mod tests {\n// <- @test_module\n    #![cfg(test)]\n}");
    check(Lang::Rust, "mod tests {}\n// <- !@test_module");
    check(Lang::Rust, "#[cfg(not(test))]\nmod real {}\n// <- !@test_module");
    check(Lang::Rust, "#[test]\nfn a() {}\n// <- @test\nfn b() {}\n// <- !@test");
    check(Lang::Rust, "#[inline]\nfn fast() {}\n// <- !@test");
}

#[test]
fn typescript_tests() {
    for lang in [Lang::TypeScript, Lang::Tsx] {
        check(
            lang,
            r#"
            describe("math", () => {
            // <- @test_module
              it("adds", () => {});
            //^ @test
              test.skip("subs", function () {});
            //^ @test
              beforeEach(() => {});
            //^ !@test !@test_module
            });
            "#,
        );
        check(lang, "describe.each([1, 2])(\"table %i\", (n) => {});\n// <- @test_module");
        check(lang, "test.each([1])(\"each %i\", (n) => {});\n// <- @test");
        check(lang, "const ok = /a/.test(\"a\");\n//         ^ !@test");
        check(lang, "test(\"no callback\");\n// <- !@test");
    }
}

#[test]
fn tsx_tests() {
    check(
        Lang::Tsx,
        r#"
        describe("App", () => {
        // <- @test_module
          it("renders", () => { render(<App title="x" />); });
        //^ @test
        });
        "#,
    );
}

#[test]
fn rust_comments() {
    check(Lang::Rust, "// plain\n// <- @comment");
    check(Lang::Rust, "/// doc\nfn f() {}\n// <- !@comment");
    check(Lang::Rust, "/// doc\n// <- @comment\nfn f() {}");
    check(Lang::Rust, "//! inner doc\n// <- @comment");
    check(Lang::Rust, "/* block */ fn f() {}\n// <- @comment\n//          ^ !@comment");
    check(Lang::Rust, "fn g() { /* inside */ }\n//       ^ @comment");
}

#[test]
fn typescript_comments() {
    for lang in [Lang::TypeScript, Lang::Tsx] {
        check(lang, "// line\n// <- @comment");
        check(lang, "/** doc */\n// <- @comment\nfunction f() {}");
        check(lang, "const a = 1; /* trailing */\n//           ^ @comment\n// <- !@comment");
        check(lang, "const s = \"// not a comment\";\n//        ^ !@comment");
    }
}

#[test]
fn tsx_comments() {
    check(
        Lang::Tsx,
        r#"
        const el = (
          <div>
            {/* hidden */}
        //   ^ @comment
            // this is JSX text
        //  ^ !@comment
          </div>
        );
        "#,
    );
}

#[test]
fn rust_imports() {
    check(Lang::Rust, "use std::io;\n// <- @import");
    check(Lang::Rust, "use std::{fs, path::Path};\n// <- @import");
    check(Lang::Rust, "pub use crate::a::b;\n// <- @import");
    check(Lang::Rust, "extern crate alloc;\n// <- @import");
    check(Lang::Rust, "fn f() { use std::fmt::Write; }\n// <- !@import\n//       ^ @import");
}

#[test]
fn typescript_imports() {
    for lang in [Lang::TypeScript, Lang::Tsx] {
        check(lang, "import fs from \"fs\";\n// <- @import");
        check(lang, "import type { T } from \"./t\";\n// <- @import");
        check(lang, "import * as path from \"path\";\n// <- @import");
        check(lang, "import \"./side-effect\";\n// <- @import");
        check(lang, "import x = require(\"x\");\n// <- @import");
        check(lang, "const y = require(\"y\");\n// <- @import");
        check(lang, "var z = require(\"z\");\n// <- @import");
        check(lang, "const w = requireLater(\"w\");\n// <- !@import");
    }
}

#[test]
fn tsx_imports() {
    check(Lang::Tsx, "import React from \"react\";\n// <- @import\nconst el = <div />;\n// <- !@import");
}

#[test]
fn rust_blocks() {
    check(
        Lang::Rust,
        r#"
        fn f() {
        //     ^ @block
            match x {
        //          ^ @block
                _ => {}
        //           ^ @block
            }
            println!("hi");
        //          ^ !@block
            my_macro! { a };
        //            ^ @block
            let p = P { x: 1 };
        //            ^ @block
        }
        "#,
    );
    check(
        Lang::Rust,
        r#"
        struct S {
        //       ^ @block
        }
        enum E { A }
        //     ^ @block
        mod m {
        //    ^ @block
        }
        impl S {}
        //     ^ @block
        "#,
    );
}

#[test]
fn typescript_blocks() {
    for lang in [Lang::TypeScript, Lang::Tsx] {
        check(
            lang,
            r#"
            function f() {
            //           ^ @block
              if (x) {
            //       ^ @block
              }
            }
            class C {
            //      ^ @block
            }
            interface I {
            //          ^ @block
            }
            type T = {
            //       ^ @block
            };
            enum E {
            //     ^ @block
            }
            const o = {
            //        ^ @block
            };
            switch (k) {
            //         ^ @block
            }
            "#,
        );
    }
}

#[test]
fn tsx_blocks() {
    check(
        Lang::Tsx,
        r#"
        const el = <div style={{ color: "red" }} />;
        //                    ^ !@block
        //                     ^ @block
        function App() {
        //             ^ @block
          return <p>{n}</p>;
        //          ^ !@block
        }
        "#,
    );
}

#[test]
fn smallest_capture_finds_enclosing_nodes() {
    check_smallest(Lang::Rust, "item", "fn f() {\n    let x = $01;\n}", expect![[r#"let x = 1;"#]]);
    check_smallest(Lang::Rust, "item", "fn f() {\n    $0\n}", expect![[r#"fn f() {\n    \n}"#]]);
    check_smallest(Lang::Rust, "item", "fn f() {}$0\nfn g() {}", expect![[r#"fn f() {}"#]]);
    check_smallest(
        Lang::Rust,
        "item",
        "fn f() {\n    $0let a = 1;\n    let b = 2;$0\n}",
        expect![[r#"fn f() {\n    let a = 1;\n    let b = 2;\n}"#]],
    );
    check_smallest(
        Lang::Rust,
        "function",
        "impl S {\n    fn m(&self) { let c = |x| x + $01; }\n}",
        expect![[r#"fn m(&self) { let c = |x| x + 1; }"#]],
    );
    check_smallest(
        Lang::Rust,
        "test_module",
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { $0 }\n}",
        expect![[r#"mod tests {\n    #[test]\n    fn t() {  }\n}"#]],
    );
    check_smallest(
        Lang::Rust,
        "test",
        "#[test]\nfn t() { assert!($0true); }",
        expect![[r#"fn t() { assert!(true); }"#]],
    );
    check_smallest(Lang::Rust, "nonexistent", "fn f() { $0 }", expect![[r#"None"#]]);
    check_smallest(Lang::Rust, "function", "const A: u8 = $01;", expect![[r#"None"#]]);
    check_smallest(Lang::TypeScript, "item", "class C {\n  m() {\n    return $01;\n  }\n}", expect![[r#"return 1;"#]]);
    check_smallest(
        Lang::TypeScript,
        "function",
        "const f = (a) => {\n  return a$0;\n};",
        expect![[r#"const f = (a) => {\n  return a;\n};"#]],
    );
    check_smallest(
        Lang::Tsx,
        "item",
        "function App() {\n  return <div>{$0n}</div>;\n}",
        expect![[r#"return <div>{n}</div>;"#]],
    );
    check_smallest(Lang::Tsx, "block", "function App() {\n  $0\n}", expect![[r#"{\n  \n}"#]]);
}

#[test]
fn smallest_capture_on_broken_code() {
    check_smallest(Lang::Rust, "item", "fn f() {\n    let x = ;$0\n}", expect![[r#"let x = ;"#]]);
    check_smallest(Lang::Rust, "function", "fn f( {\n    $0\n}", expect![[r#"fn f( {\n    \n}"#]]);
    check_smallest(Lang::TypeScript, "item", "const a = (1 + ;$0", expect!["const a = (1 + ;"]);
    check_smallest(
        Lang::TypeScript,
        "function",
        "function f() {\n  const a = (1 + ;$0\n}",
        expect![[r#"function f() {\n  const a = (1 + ;\n}"#]],
    );
}

#[test]
fn syntax_errors_lists_error_and_missing_nodes() {
    check_errors(Lang::Rust, "fn f() {}\n", expect![[r#""#]]);
    check_errors(Lang::Rust, "fn f( {", expect![[r#"ERROR 0:0..0:7 "fn f( {""#]]);
    check_errors(Lang::Rust, "fn f() {\n    let x = ;\n}\n", expect![[r#"ERROR 1:10..1:11 "=""#]]);
    check_errors(Lang::Rust, "fn f() {\n    let x = 1\n}\n", expect!["MISSING ; 1:13..1:13"]);
    check_errors(Lang::TypeScript, "const a = (1 + ;", expect![[r#"ERROR 0:8..0:14 "= (1 +""#]]);
    check_errors(Lang::TypeScript, "function f() {\n  return 1;\n", expect!["MISSING } 1:11..1:11"]);
    check_errors(
        Lang::Tsx,
        "const el = <div><span></div>;",
        expect![[r#"ERROR 0:0..0:29 "const el = <div><span></div>;""#]],
    );
}

#[test]
fn syntax_errors_stops_at_limit() {
    let source = "fn a() { let x = ; }\nfn b() { let y = ; }\nfn c() { let z = ; }\n";
    let tree = Lang::Rust.parser().parse(source, None).unwrap();
    let all = syntax_errors(tree.root_node(), usize::MAX);
    assert!(all.len() >= 3, "{all:?}");
    assert_eq!(syntax_errors(tree.root_node(), 2), all[..2]);
    assert!(syntax_errors(tree.root_node(), 0).is_empty());
}

#[test]
fn count_errors_in_counts_overlapping_errors() {
    let source = "fn f() {\n    let x = ;\n}\nfn g() {}\n";
    let tree = Lang::Rust.parser().parse(source, None).unwrap();
    let root = tree.root_node();
    let line_2 = source.find("let").unwrap()..source.find(";\n}").unwrap() + 1;
    assert_eq!(count_errors_in(root, line_2.start, line_2.end), 1);
    let fn_g = source.find("fn g").unwrap();
    assert_eq!(count_errors_in(root, fn_g, source.len()), 0);
    assert_eq!(count_errors_in(root, 0, source.len()), syntax_errors(root, usize::MAX).len());
    // An empty range counts the errors it touches.
    let error = syntax_errors(root, 1)[0];
    assert_eq!(count_errors_in(root, error.start_byte(), error.start_byte()), 1);
    assert_eq!(count_errors_in(root, 0, 0), 0);

    let source = "const a = 1;\nconst b = (1 + ;\nconst c = 3;\n";
    let tree = Lang::TypeScript.parser().parse(source, None).unwrap();
    let root = tree.root_node();
    assert_eq!(count_errors_in(root, 0, source.find("const b").unwrap()), 0);
    assert!(count_errors_in(root, source.find("const b").unwrap(), source.find("const c").unwrap()) >= 1);
}

/// Checks the caret assertions of `fixture` against the captures of every query of `lang`.
#[track_caller]
fn check(lang: Lang, fixture: &str) {
    let fixture = dedent(fixture);
    let (source, assertions) = parse_fixture(&fixture);
    assert!(!assertions.is_empty(), "fixture has no assertions:\n{fixture}");
    let tree = lang.parser().parse(&source, None).unwrap();
    let captures = all_captures(lang, tree.root_node(), source.as_bytes());
    let queries = lang.queries();
    let known_names: Vec<&str> =
        [&queries.items, &queries.functions, &queries.tests, &queries.comments, &queries.imports, &queries.blocks]
            .into_iter()
            .flat_map(|query| query.capture_names().iter().copied())
            .collect();
    let mut failures = Vec::new();
    for assertion in &assertions {
        // A misspelt `!@name` would pass silently.
        assert!(
            known_names.contains(&assertion.capture.as_str()),
            "unknown capture @{} in:\n{fixture}",
            assertion.capture
        );
        let found = captures.iter().any(|(name, point)| *name == assertion.capture && *point == assertion.point);
        if found != assertion.expected {
            let row = assertion.point.row;
            let near: Vec<String> = captures
                .iter()
                .filter(|(_, point)| point.row == row)
                .map(|(name, point)| format!("@{name} at {row}:{}", point.column))
                .collect();
            failures.push(format!(
                "{}@{} at {row}:{} in `{}`; captures on that line: {near:?}",
                if assertion.expected { "missing " } else { "unexpected " },
                assertion.capture,
                assertion.point.column,
                source.lines().nth(row).unwrap_or(""),
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} ({}):\n{}\nsource:\n{source}\ntree: {}",
        lang.name(),
        failures.len(),
        failures.join("\n"),
        tree.root_node().to_sexp()
    );
}

/// Checks the text of `smallest_capture` for the range between `$0` markers (one marker: an empty range).
#[track_caller]
fn check_smallest(lang: Lang, capture: &str, fixture: &str, expect: Expect) {
    let mut parts = fixture.split("$0");
    let before = parts.next().unwrap();
    let middle = parts.next().expect("fixture needs a $0 marker");
    let (source, start_byte, end_byte) = match parts.next() {
        Some(after) => (format!("{before}{middle}{after}"), before.len(), before.len() + middle.len()),
        None => (format!("{before}{middle}"), before.len(), before.len()),
    };
    let queries = lang.queries();
    let query = match capture {
        "item" => &queries.items,
        "function" | "nonexistent" => &queries.functions,
        "test" | "test_module" => &queries.tests,
        "block" => &queries.blocks,
        _ => panic!("no query for @{capture}"),
    };
    let tree = lang.parser().parse(&source, None).unwrap();
    let node = smallest_capture(query, capture, tree.root_node(), source.as_bytes(), start_byte, end_byte);
    let actual = node.map_or("None".to_owned(), |node| source[node.byte_range()].to_owned());
    expect.assert_eq(&actual.escape_debug().to_string());
}

/// Checks `syntax_errors`, one line per node: kind, range as row:column, and the text of ERROR nodes.
#[track_caller]
fn check_errors(lang: Lang, source: &str, expect: Expect) {
    let tree = lang.parser().parse(source, None).unwrap();
    let lines: Vec<String> = syntax_errors(tree.root_node(), usize::MAX)
        .iter()
        .map(|node| {
            let (start, end) = (node.start_position(), node.end_position());
            let range = format!("{}:{}..{}:{}", start.row, start.column, end.row, end.column);
            if node.is_missing() {
                format!("MISSING {} {range}", node.kind())
            } else {
                format!("ERROR {range} {:?}", &source[node.byte_range()])
            }
        })
        .collect();
    expect.assert_eq(&lines.join("\n"));
}

struct Assertion {
    point: tree_sitter::Point,
    capture: String,
    expected: bool,
}

/// Splits a fixture into the source without assertion lines and the assertions.
fn parse_fixture(fixture: &str) -> (String, Vec<Assertion>) {
    let mut source_lines: Vec<&str> = Vec::new();
    let mut assertions = Vec::new();
    for line in fixture.lines() {
        let Some((column, names)) = parse_assertion_line(line) else {
            source_lines.push(line);
            continue;
        };
        let row = source_lines.len().checked_sub(1).expect("assertion before any source line");
        for name in names.split_whitespace() {
            let (expected, name) = match name.strip_prefix('!') {
                Some(name) => (false, name),
                None => (true, name),
            };
            let capture = name.strip_prefix('@').unwrap_or_else(|| panic!("bad assertion `{line}`"));
            assertions.push(Assertion {
                point: tree_sitter::Point { row, column },
                capture: capture.to_owned(),
                expected,
            });
        }
    }
    (source_lines.join("\n") + "\n", assertions)
}

/// For `  //   ^ @a !@b` gives the caret column and the names; for `  // <- @a` the column of the `//`.
fn parse_assertion_line(line: &str) -> Option<(usize, &str)> {
    let comment_column = line.len() - line.trim_start().len();
    let rest = line.trim_start().strip_prefix("//")?;
    let marker = rest.trim_start();
    if let Some(names) = marker.strip_prefix("<-") {
        Some((comment_column, names))
    } else if let Some(names) = marker.strip_prefix('^') {
        Some((comment_column + 2 + (rest.len() - marker.len()), names))
    } else {
        None
    }
}

/// Every public capture of every query of `lang`, as (capture name, start point).
fn all_captures(lang: Lang, root: Node<'_>, source: &[u8]) -> Vec<(String, tree_sitter::Point)> {
    let queries = lang.queries();
    let mut captures = Vec::new();
    for query in
        [&queries.items, &queries.functions, &queries.tests, &queries.comments, &queries.imports, &queries.blocks]
    {
        let mut cursor = QueryCursor::new();
        let mut matches = cursor.matches(query, root, source);
        while let Some(query_match) = matches.next() {
            for capture in query_match.captures {
                let name = query.capture_names()[capture.index as usize];
                if !name.starts_with('_') {
                    captures.push((name.to_owned(), capture.node.start_position()));
                }
            }
        }
    }
    captures
}

/// Removes a leading newline and the common indentation, so fixtures can be indented like the code around them.
fn dedent(fixture: &str) -> String {
    let fixture = fixture.strip_prefix('\n').unwrap_or(fixture);
    let indent = fixture
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    fixture.lines().map(|line| line.get(indent..).unwrap_or("").trim_end()).collect::<Vec<_>>().join("\n")
}
