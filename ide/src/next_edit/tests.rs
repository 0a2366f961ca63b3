use ropey::Rope;
use spark_grammars::Lang;

use super::*;

/// `before` with the user's edit: the first `old` after the marker `‸` replaced by `new` (the marker removed).
struct Case {
    text: String,
    tree: Tree,
    history: EditHistory,
    lang: Lang,
}

fn edited(lang: Lang, before: &str, old: &str, new: &str) -> Case {
    let marker = before.find('‸').expect("a ‸ marks the edit");
    let before = before.replace('‸', "");
    let start = marker + before[marker..].find(old).expect("old text after the marker");
    let mut rope = Rope::from_str(&before);
    let mut history = EditHistory::default();
    // As typed: the old text selected and replaced by the first character, then the rest one by one.
    let mut chars = new.char_indices();
    let first = chars.next().map_or(0, |(_, c)| c.len_utf8());
    let mut replace = |start: usize, end: usize, inserted: &str| {
        let removed = rope.byte_slice(start..end).to_string();
        let (from, to) = (rope.byte_to_char(start), rope.byte_to_char(end));
        rope.remove(from..to);
        rope.insert(from, inserted);
        history.record(start, &removed, inserted, &rope);
    };
    replace(start, start + old.len(), &new[..first]);
    for (offset, c) in chars {
        replace(start + offset, start + offset, &c.to_string());
    }
    let text = rope.to_string();
    // Without the server's parse time limit: a debug build on a loaded machine may take longer than it for the
    // huge documents below, and the case is about the rules, not the parse.
    let tree = lang.parser().parse(&text, None).expect("the grammar parses");
    Case { text, tree, history, lang }
}

fn applied(case: &Case, edits: &[Predicted]) -> String {
    let mut text = case.text.clone();
    for predicted in edits.iter().rev() {
        text.replace_range(predicted.start..predicted.end, &predicted.new_text);
    }
    text
}

fn predicted(case: &Case) -> Verified {
    next_edits(case.lang, &case.text, &case.tree, &case.history)
}

#[test]
fn renaming_a_local_renames_its_uses_in_that_function_only() {
    let case = edited(
        Lang::Rust,
        "fn a() -> u32 {\n    let ‸count = 1;\n    let y = count + 2;\n    println!(\"{}\", count);\n    y * count\n}\n\nfn b(count: u32) -> u32 {\n    count\n}\n",
        "count",
        "total",
    );
    let found = predicted(&case);
    assert_eq!(found.edits.len(), 3, "{found:?}");
    assert!(found.edits.iter().all(|edit| edit.source == Source::Rename && edit.label == "`count` → `total`"));
    assert!(found.all_together);
    assert_eq!(
        applied(&case, &found.edits),
        "fn a() -> u32 {\n    let total = 1;\n    let y = total + 2;\n    println!(\"{}\", total);\n    y * total\n}\n\nfn b(count: u32) -> u32 {\n    count\n}\n"
    );
}

#[test]
fn renaming_a_field_renames_member_uses_across_the_file_and_not_locals() {
    let case = edited(
        Lang::Rust,
        "struct S {\n    ‸len: usize,\n}\n\nimpl S {\n    fn get(&self, v: &[u8]) -> usize {\n        let len = 3;\n        self.len + len + v.len()\n    }\n}\n\nfn make() -> S {\n    S { len: 0 }\n}\n",
        "len",
        "size",
    );
    let text = applied(&case, &predicted(&case).edits);
    // `v.len()` calls a method of another type: left alone.
    assert_eq!(
        text,
        "struct S {\n    size: usize,\n}\n\nimpl S {\n    fn get(&self, v: &[u8]) -> usize {\n        let len = 3;\n        self.size + len + v.len()\n    }\n}\n\nfn make() -> S {\n    S { size: 0 }\n}\n"
    );
}

#[test]
fn pointing_a_use_at_an_existing_name_predicts_nothing() {
    let case = edited(Lang::Rust, "fn f(a: u32, b: u32) -> u32 {\n    let x = ‸a + 1;\n    a * b\n}\n", "a", "b");
    assert_eq!(predicted(&case), Verified::default());
}

#[test]
fn an_edit_that_is_not_one_name_for_another_predicts_no_rename() {
    let case = edited(Lang::Rust, "fn f(a: u32) -> u32 {\n    let x = ‸a + 1;\n    a * x\n}\n", "a + 1", "a * 2");
    assert!(predicted(&case).edits.is_empty());
}

#[test]
fn renaming_a_typescript_function_renames_its_calls_and_method_uses() {
    let case = edited(
        Lang::TypeScript,
        "export function ‸parseItem(raw: string): number {\n  return raw.length;\n}\n\nconst a = parseItem(\"x\");\nconst b = [\"y\"].map(parseItem);\nconst parseItemCount = 2;\n",
        "parseItem",
        "readItem",
    );
    let found = predicted(&case);
    assert_eq!(
        applied(&case, &found.edits),
        "export function readItem(raw: string): number {\n  return raw.length;\n}\n\nconst a = readItem(\"x\");\nconst b = [\"y\"].map(readItem);\nconst parseItemCount = 2;\n"
    );
}

#[test]
fn an_argument_added_at_one_call_is_added_to_the_calls_with_the_same_arguments() {
    let case = edited(
        Lang::Rust,
        "fn main() {\n    let a = load(‸path);\n    let b = load(other);\n    let c = load(x, y);\n    let d = loader.load(z);\n}\n",
        "path",
        "path, &config",
    );
    let found = predicted(&case);
    assert!(found.edits.iter().all(|edit| edit.source == Source::Call), "{found:?}");
    assert_eq!(
        applied(&case, &found.edits),
        "fn main() {\n    let a = load(path, &config);\n    let b = load(other, &config);\n    let c = load(x, y);\n    let d = loader.load(z);\n}\n"
    );
}

#[test]
fn an_argument_removed_at_one_call_is_removed_where_the_same_argument_is_passed() {
    let case = edited(Lang::TypeScript, "render(‸ctx, a);\nrender(ctx, b);\nrender(other, c);\n", "ctx, a", "a");
    assert_eq!(applied(&case, &predicted(&case).edits), "render(a);\nrender(b);\nrender(other, c);\n");
}

#[test]
fn a_prediction_that_adds_a_syntax_error_is_refused() {
    let case = edited(Lang::Rust, "fn f() {\n    let ‸count = 1;\n    g(count);\n}\n", "count", "total");
    let edit = case.history.last().unwrap();
    let at = case.text.find("g(count)").unwrap() + 2;
    let broken =
        Predicted { start: at, end: at + 5, new_text: "total)".into(), label: String::new(), source: Source::Rename };
    assert_eq!(
        check(case.lang, &case.text, &case.tree, edit, std::slice::from_ref(&broken)),
        Err(Refusal::AddsSyntaxError)
    );
    let fine = Predicted { new_text: "total".into(), ..broken };
    assert_eq!(check(case.lang, &case.text, &case.tree, edit, &[fine]), Ok(()));
}

#[test]
fn a_prediction_inside_or_undoing_the_users_edit_is_refused() {
    let case = edited(Lang::Rust, "fn f() {\n    let ‸count = 1;\n    g(total);\n}\n", "count", "total");
    let edit = case.history.last().unwrap();
    let inside = Predicted {
        start: edit.start + 1,
        end: edit.start + 2,
        new_text: "x".into(),
        label: String::new(),
        source: Source::Rename,
    };
    assert_eq!(check(case.lang, &case.text, &case.tree, edit, &[inside]), Err(Refusal::TouchesTheUsersEdit));
    let at = case.text.find("g(total)").unwrap() + 2;
    let undo =
        Predicted { start: at, end: at + 5, new_text: "count".into(), label: String::new(), source: Source::Rename };
    assert_eq!(check(case.lang, &case.text, &case.tree, edit, &[undo]), Err(Refusal::Reversal));
}

#[test]
fn without_an_edit_nothing_is_predicted() {
    let text = "fn f() {}\n";
    let tree = crate::parse::text(Lang::Rust, text).unwrap();
    assert_eq!(next_edits(Lang::Rust, text, &tree, &EditHistory::default()), Verified::default());
}

#[test]
fn a_change_to_one_match_arm_is_carried_to_the_arms_of_the_same_shape() {
    let case = edited(
        Lang::Rust,
        "fn f(k: Kind, x: &str) -> Result<u32, E> {\n    Ok(match k {\n        Kind::A => ‸parse_a(x),\n        Kind::B => parse_b(x),\n        Kind::C => 0,\n    })\n}\n",
        "parse_a(x)",
        "parse_a(x)?",
    );
    let found = predicted(&case);
    assert!(found.edits.iter().all(|edit| edit.source == Source::Sibling), "{found:?}");
    assert_eq!(
        applied(&case, &found.edits),
        "fn f(k: Kind, x: &str) -> Result<u32, E> {\n    Ok(match k {\n        Kind::A => parse_a(x)?,\n        Kind::B => parse_b(x)?,\n        Kind::C => 0,\n    })\n}\n"
    );
}

#[test]
fn a_field_made_optional_carries_to_the_fields_of_the_same_shape() {
    let case = edited(
        Lang::TypeScript,
        "interface Options {\n  ‸name: string;\n  label: string;\n  count: number;\n  handler(): void;\n}\n",
        "name",
        "name?",
    );
    assert_eq!(
        applied(&case, &predicted(&case).edits),
        "interface Options {\n  name?: string;\n  label?: string;\n  count?: number;\n  handler(): void;\n}\n"
    );
}

/// `case` with one more change made by hand: bytes `start..end` replaced by `inserted`.
fn then(mut case: Case, start: usize, end: usize, inserted: &str) -> Case {
    let mut rope = Rope::from_str(&case.text);
    let removed = rope.byte_slice(start..end).to_string();
    let (from, to) = (rope.byte_to_char(start), rope.byte_to_char(end));
    rope.remove(from..to);
    rope.insert(from, inserted);
    case.history.record(start, &removed, inserted, &rope);
    case.text = rope.to_string();
    case.tree = crate::parse::text(case.lang, &case.text).unwrap();
    case
}

#[test]
fn after_one_predicted_use_is_accepted_the_others_are_still_predicted_in_the_whole_scope() {
    let case = edited(
        Lang::Rust,
        "struct S {\n    ‸len: usize,\n}\n\nimpl S {\n    fn get(&self) -> usize {\n        self.len\n    }\n\n    fn put(&mut self) {\n        self.len = 1;\n    }\n}\n",
        "len",
        "size",
    );
    let first = predicted(&case).edits[0].clone();
    assert_eq!(&case.text[first.start..first.end], "len");
    // The user accepts the first (a use inside `get`): the one inside `put` is still predicted.
    let case = then(case, first.start, first.end, "size");
    let found = predicted(&case);
    assert_eq!(found.edits.len(), 1, "{found:?}");
    assert_eq!(
        applied(&case, &found.edits),
        "struct S {\n    size: usize,\n}\n\nimpl S {\n    fn get(&self) -> usize {\n        self.size\n    }\n\n    fn put(&mut self) {\n        self.size = 1;\n    }\n}\n"
    );
}

#[test]
fn an_expression_rewritten_once_is_rewritten_where_it_recurs_with_other_names() {
    let case = edited(
        Lang::Rust,
        "fn f(a: &Option<u8>, b: &Option<u8>) -> u8 {\n    let x = ‸a.clone().unwrap_or_default();\n    // b.clone().unwrap_or_default() stays in a comment\n    x + b.clone().unwrap_or_default() + a.unwrap_or(1)\n}\n",
        "a.clone().unwrap_or_default()",
        "a.unwrap_or_default()",
    );
    let found = predicted(&case);
    assert!(found.edits.iter().all(|edit| edit.source == Source::Pattern), "{found:?}");
    assert_eq!(
        applied(&case, &found.edits),
        "fn f(a: &Option<u8>, b: &Option<u8>) -> u8 {\n    let x = a.unwrap_or_default();\n    // b.clone().unwrap_or_default() stays in a comment\n    x + b.unwrap_or_default() + a.unwrap_or(1)\n}\n"
    );
}

#[test]
fn a_rewrite_without_a_kept_name_or_with_too_little_of_its_own_is_not_carried() {
    // No name kept: a plain replacement of text is not a pattern.
    let case = edited(Lang::Rust, "fn f() {\n    g(‸1 + 2);\n    g(1 + 2);\n}\n", "1 + 2", "3");
    assert!(predicted(&case).edits.is_empty());
    // A name kept but only an operator around it.
    let case = edited(Lang::Rust, "fn f(a: u8, b: u8) {\n    g(‸-a);\n    g(-b);\n}\n", "-a", "!a");
    assert!(predicted(&case).edits.is_empty());
}

#[test]
fn a_method_call_pointed_at_another_method_follows_on_the_same_receiver_only() {
    let case = edited(
        Lang::TypeScript,
        "class C {\n  update(key: string) {\n    this.store.‸setValue(key);\n    other.setValue(key);\n  }\n  reset() {\n    this.store.setValue(null);\n  }\n}\n",
        "setValue",
        "put",
    );
    assert_eq!(
        applied(&case, &predicted(&case).edits),
        "class C {\n  update(key: string) {\n    this.store.put(key);\n    other.setValue(key);\n  }\n  reset() {\n    this.store.put(null);\n  }\n}\n"
    );
    // The new name already called on that receiver: the user pointed one call at another method.
    let case = edited(
        Lang::TypeScript,
        "this.store.‸setValue(1);\nthis.store.put(2);\nthis.store.setValue(3);\n",
        "setValue",
        "put",
    );
    assert_eq!(predicted(&case), Verified::default());
}

#[test]
fn a_renamed_use_renames_the_other_uses_in_its_function() {
    // A local bound by `let`: renaming one use renames the binding and the other uses.
    let case = edited(Lang::Rust, "fn f() {\n    let count = 1;\n    g(‸count);\n    h(count);\n}\n", "count", "total");
    assert_eq!(
        applied(&case, &predicted(&case).edits),
        "fn f() {\n    let total = 1;\n    g(total);\n    h(total);\n}\n"
    );
    // A name from outside the function (a function called twice): its other calls there follow, not those in
    // other functions.
    let case = edited(
        Lang::Rust,
        "fn f() {\n    ‸old_helper(1);\n    old_helper(2);\n}\nfn g() {\n    old_helper(3);\n}\n",
        "old_helper",
        "new_helper",
    );
    assert_eq!(
        applied(&case, &predicted(&case).edits),
        "fn f() {\n    new_helper(1);\n    new_helper(2);\n}\nfn g() {\n    old_helper(3);\n}\n"
    );
}

#[test]
fn a_renamed_type_parameter_is_renamed_in_its_item_only() {
    let case =
        edited(Lang::TypeScript, "type Pair<‸State = any> = [State, State]\ntype Other<State> = State\n", "State", "S");
    assert_eq!(applied(&case, &predicted(&case).edits), "type Pair<S = any> = [S, S]\ntype Other<State> = State\n");
    let case = edited(
        Lang::Rust,
        "fn first<‸T: Clone>(items: &[T]) -> T {\n    items[0].clone()\n}\nstruct T;\n",
        "T",
        "Item",
    );
    assert_eq!(
        applied(&case, &predicted(&case).edits),
        "fn first<Item: Clone>(items: &[Item]) -> Item {\n    items[0].clone()\n}\nstruct T;\n"
    );
}

#[test]
fn a_huge_or_deeply_nested_document_gets_an_answer_without_stalling() {
    // Over the size limit a rename that would apply predicts nothing: the rules read the whole text.
    let filler = "// filler line of a generated file, nothing to rename here\n".repeat(MAX_DOCUMENT_BYTES / 56);
    let case =
        edited(Lang::Rust, &format!("fn f() {{\n    let ‸count = 1;\n    g(count);\n}}\n{filler}"), "count", "total");
    assert!(case.text.len() > MAX_DOCUMENT_BYTES);
    assert!(predicted(&case).edits.is_empty());
    // 20,000 nested blocks around the edit: every rule climbs a bounded number of steps from it.
    let deep = format!("fn f() {{\n{}let ‸a = b(c);{}\n}}\n", "{".repeat(20_000), "}".repeat(20_000));
    let case = edited(Lang::Rust, &deep, "b(c)", "b(c, d)");
    assert!(predicted(&case).edits.is_empty());
}
