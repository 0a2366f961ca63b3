//! Structural predictors: from the user's last edit and the syntax tree, the edits that follow from it. No model:
//! each rule needs evidence in the text (the renamed name's other uses; other calls of the function with the
//! arguments the edited call had), so what it predicts is the user's own change carried on.

use spark_grammars::tree_sitter::{Node, Tree};
use spark_grammars::{smallest_capture, Lang};

use crate::edit_history::Edit;

/// Predictions from one edit are capped: a rename with hundreds of uses is a refactoring tool's job.
pub const MAX_PREDICTIONS: usize = 32;

/// How far a rule climbs from the edit towards the root: each step costs the tree's depth (tree-sitter finds a
/// parent from the root down), and a pathological nesting must not stall a request.
const MAX_CLIMB: usize = 48;

/// The node's parent, while `steps` (counted down) lasts.
fn climb<'t>(node: Node<'t>, steps: &mut usize) -> Option<Node<'t>> {
    *steps = steps.checked_sub(1)?;
    node.parent()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Other uses of a name the user renamed.
    Rename,
    /// Other calls of a function whose arguments the user changed at one call.
    Call,
    /// The same change in the siblings of the edited item that have its shape (match arms, fields, variants,
    /// object properties).
    Sibling,
    /// The same rewrite of an expression elsewhere in the file, its names carried (`x as T` → `T::from(x)`
    /// makes `y as T` → `T::from(y)`).
    Pattern,
    /// The model's rewrite of the lines after the edit.
    Model,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Rename => "rename",
            Source::Call => "call",
            Source::Sibling => "sibling",
            Source::Pattern => "pattern",
            Source::Model => "model",
        }
    }
}

/// Replace bytes `start..end` of the current text with `new_text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predicted {
    pub start: usize,
    pub end: usize,
    pub new_text: String,
    pub label: String,
    pub source: Source,
}

/// Every rule, in order, from the user's recent edits (the last one first); the first that finds evidence
/// answers.
pub fn predict(lang: Lang, text: &str, tree: &Tree, history: &[Edit]) -> Vec<Predicted> {
    let Some(edit) = history.last() else { return Vec::new() };
    let mut predicted = rename(lang, text, tree, history);
    if predicted.is_empty() {
        predicted = call_arguments(lang, text, tree, edit);
    }
    if predicted.is_empty() {
        predicted = siblings(text, tree, edit);
    }
    if predicted.is_empty() {
        predicted = pattern(text, tree, edit);
    }
    predicted.sort_by_key(|p| p.start);
    predicted.dedup_by(|later, earlier| later.start < earlier.end);
    predicted.truncate(MAX_PREDICTIONS);
    predicted
}

// --- rename ---------------------------------------------------------------------------------------------------

/// Which names can stand for the same thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Value,
    Member,
    Type,
}

fn family(kind: &str) -> Option<Family> {
    match kind {
        "identifier" => Some(Family::Value),
        "field_identifier" | "property_identifier" | "private_property_identifier" => Some(Family::Member),
        "type_identifier" => Some(Family::Type),
        // Shorthands (`{ count }`) name a property and a value at once: renaming one side changes the other's
        // meaning, so they are never predicted.
        _ => None,
    }
}

fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$'
}

fn is_identifier(token: &str) -> bool {
    token.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'$')
        && token.bytes().all(is_word_byte)
}

/// Words, runs of white space and single other characters, with their byte offsets.
fn lex(text: &str) -> Vec<(usize, &str)> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        if is_word_byte(bytes[i]) {
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
        } else if bytes[i].is_ascii_whitespace() {
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
        } else {
            i += text[i..].chars().next().map_or(1, char::len_utf8);
        }
        tokens.push((start, &text[start..i]));
    }
    tokens
}

/// The edit widened to whole words on both sides: (start, old, new) with the same context added to both.
fn widened(text: &str, edit: &Edit) -> (usize, String, String) {
    let bytes = text.as_bytes();
    let mut start = edit.start;
    while start > 0 && is_word_byte(bytes[start - 1]) {
        start -= 1;
    }
    let mut end = edit.end();
    while end < bytes.len() && is_word_byte(bytes[end]) {
        end += 1;
    }
    let (before, after) = (&text[start..edit.start], &text[edit.end()..end]);
    (start, format!("{before}{}{after}", edit.old), format!("{before}{}{after}", edit.new))
}

/// The one name substitution `from` → `to` the edit made (the same pair wherever the edit differs), and the
/// byte where the first new name starts.
fn substitution(text: &str, edit: &Edit) -> Option<(String, String, usize)> {
    let (start, old, new) = widened(text, edit);
    let (old_tokens, new_tokens) = (lex(&old), lex(&new));
    if old_tokens.len() != new_tokens.len() {
        return None;
    }
    let mut found: Option<(&str, &str, usize)> = None;
    for ((_, o), (offset, n)) in old_tokens.iter().zip(&new_tokens) {
        if o == n {
            continue;
        }
        if !is_identifier(o) || !is_identifier(n) {
            return None;
        }
        match found {
            None => found = Some((o, n, start + offset)),
            Some((from, to, _)) if from == *o && to == *n => {}
            Some(_) => return None,
        }
    }
    found.map(|(from, to, at)| (from.to_owned(), to.to_owned(), at))
}

const ITEM_KINDS: [&str; 18] = [
    "function_item",
    "function_signature_item",
    "struct_item",
    "enum_item",
    "union_item",
    "trait_item",
    "type_item",
    "const_item",
    "static_item",
    "field_declaration",
    "enum_variant",
    "function_declaration",
    "generator_function_declaration",
    "method_definition",
    "class_declaration",
    "interface_declaration",
    "type_alias_declaration",
    "enum_declaration",
];

const MEMBER_DECLARATIONS: [&str; 5] = [
    "field_declaration",
    "public_field_definition",
    "property_signature",
    "method_signature",
    "abstract_method_signature",
];

const FIELD_DECLARATIONS: [&str; 3] = ["field_declaration", "public_field_definition", "property_signature"];

/// The item whose type parameter `site` declares (`fn f<T>`, `interface I<State = any>`), if it declares one.
fn type_parameter_owner(site: Node) -> Option<Node> {
    let parent = site.parent()?;
    let list = match parent.kind() {
        "type_parameters" => parent,
        "type_parameter" | "constrained_type_parameter" | "optional_type_parameter" => {
            let name = parent.child_by_field_name("name").or_else(|| parent.child_by_field_name("left"));
            if name != Some(site) {
                return None;
            }
            parent.parent().filter(|list| list.kind() == "type_parameters")?
        }
        _ => return None,
    };
    list.parent()
}

/// The text of the expression a member is accessed on (`this.map` in `this.map.get`).
fn receiver_text<'s>(member: Node, source: &'s [u8]) -> Option<&'s str> {
    let access = member.parent().filter(|p| matches!(p.kind(), "field_expression" | "member_expression"))?;
    let object = access.child_by_field_name("object").or_else(|| access.child_by_field_name("value"))?;
    let name = access.child_by_field_name("property").or_else(|| access.child_by_field_name("field"));
    (name == Some(member)).then(|| object.utf8_text(source).ok()).flatten()
}

/// Whether a member name is the method called (`x.len()`), not a field read.
fn is_method_name(node: Node) -> bool {
    let Some(access) = node.parent().filter(|p| matches!(p.kind(), "field_expression" | "member_expression")) else {
        return false;
    };
    access
        .parent()
        .is_some_and(|call| call.kind() == "call_expression" && call.child_by_field_name("function") == Some(access))
}

/// The leaves named `name` of the given families inside `scope`, in document order.
fn named_leaves<'t>(scope: Node<'t>, source: &[u8], name: &str, families: &[Family]) -> Vec<Node<'t>> {
    let mut found = Vec::new();
    let mut cursor = scope.walk();
    'walk: loop {
        let node = cursor.node();
        if node.child_count() == 0 {
            if family(node.kind()).is_some_and(|f| families.contains(&f))
                && node.utf8_text(source).is_ok_and(|t| t == name)
            {
                found.push(node);
            }
        } else if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() || cursor.node() == scope {
                break 'walk;
            }
        }
    }
    found
}

fn rename(lang: Lang, text: &str, tree: &Tree, history: &[Edit]) -> Vec<Predicted> {
    let Some(last) = history.last() else { return Vec::new() };
    let Some((from, to, _)) = substitution(text, last) else { return Vec::new() };
    // The user's edits of this rename so far (the declaration, then uses renamed by hand or accepted): the
    // first is where the name's scope is read; none of them is predicted or counts as another use of `to`.
    let own: Vec<(usize, usize)> = history
        .iter()
        .filter_map(|edit| {
            let (f, t, at) = substitution(text, edit)?;
            (f == from && t == to).then(|| (edit.start.min(at), edit.end().max(at + to.len())))
        })
        .collect();
    let Some(at) = history
        .iter()
        .find_map(|edit| substitution(text, edit).filter(|(f, t, _)| *f == from && *t == to).map(|(_, _, at)| at))
    else {
        return Vec::new();
    };
    let source = text.as_bytes();
    let root = tree.root_node();
    let Some(site) = root.descendant_for_byte_range(at, at + to.len()) else { return Vec::new() };
    let Some(site_family) = family(site.kind()) else { return Vec::new() };
    if site.start_byte() != at || site.end_byte() != at + to.len() {
        return Vec::new();
    }
    let declared_item = site.parent().filter(|parent| {
        (ITEM_KINDS.contains(&parent.kind()) || MEMBER_DECLARATIONS.contains(&parent.kind()))
            && parent.child_by_field_name("name") == Some(site)
    });
    // A type parameter (`<T: Clone>`, `<State = any>`) is used in the item that declares it.
    let generic_owner = (site_family == Family::Type).then(|| type_parameter_owner(site)).flatten();
    // A use renamed (not the declaration): a type named at one use may be another type that exists elsewhere,
    // so it predicts nothing; a value's other uses in the function follow (when the new name is new there).
    // A member named at a use (`x.get(k)` made `x.set(k)`) may be another member that exists elsewhere: its
    // other uses follow only on the same receiver (the same expression before the `.`: the same type), across the
    // file.
    let member_use = declared_item.is_none() && generic_owner.is_none() && site_family == Family::Member;
    let receiver = if member_use {
        match receiver_text(site, source) {
            Some(receiver) => Some(receiver),
            None => return Vec::new(),
        }
    } else {
        None
    };
    if declared_item.is_none() && generic_owner.is_none() && site_family == Family::Type {
        return Vec::new();
    }
    // A declared item's name is used across the file; any other name in the function it is in (or the file).
    let (scope, families) = match declared_item {
        _ if generic_owner.is_some() => (generic_owner.unwrap_or(root), vec![Family::Type]),
        _ if member_use => (root, vec![Family::Member]),
        Some(item) if MEMBER_DECLARATIONS.contains(&item.kind()) => (root, vec![Family::Member]),
        Some(item) if item.kind().contains("function") || item.kind().contains("method") => {
            (root, vec![Family::Value, Family::Member])
        }
        Some(_) if site_family == Family::Type => (root, vec![Family::Type, Family::Value]),
        Some(_) => (root, vec![site_family]),
        None => {
            let function = smallest_capture(&lang.queries().functions, "function", root, source, at, at + to.len());
            (function.unwrap_or(root), vec![site_family])
        }
    };
    // A field's name in a method call (`v.len()`) names a method of some other type.
    let field = declared_item.is_some_and(|item| FIELD_DECLARATIONS.contains(&item.kind()));
    let outside = |node: &Node| {
        own.iter().all(|&(start, end)| node.end_byte() <= start || node.start_byte() >= end)
            && !(field && is_method_name(*node))
            && receiver.is_none_or(|receiver| receiver_text(*node, source) == Some(receiver))
    };
    // The new name must be new here: if it is already used, the user pointed one use at another name.
    if named_leaves(scope, source, &to, &families).iter().any(outside) {
        return Vec::new();
    }
    let label = format!("`{from}` → `{to}`");
    named_leaves(scope, source, &from, &families)
        .into_iter()
        .filter(outside)
        .map(|node| Predicted {
            start: node.start_byte(),
            end: node.end_byte(),
            new_text: to.clone(),
            label: label.clone(),
            source: Source::Rename,
        })
        .collect()
}

// --- call arguments -------------------------------------------------------------------------------------------

const CALL_KINDS: [&str; 2] = ["call_expression", "new_expression"];

/// The name a call is made through (`f`, `x.f`, `a::f`, `new F`), and whether it is a method-style call.
fn callee(call: Node, source: &[u8]) -> Option<(String, bool)> {
    let mut function = call.child_by_field_name("function").or_else(|| call.child_by_field_name("constructor"))?;
    if function.kind() == "generic_function" {
        function = function.child_by_field_name("function")?;
    }
    let (name, method) = match function.kind() {
        "field_expression" => (function.child_by_field_name("field")?, true),
        "member_expression" => (function.child_by_field_name("property")?, true),
        "scoped_identifier" => (function.child_by_field_name("name")?, false),
        "identifier" => (function, false),
        _ => return None,
    };
    Some((name.utf8_text(source).ok()?.to_owned(), method))
}

/// The argument nodes of a call (comments left out).
fn arguments<'t>(call: Node<'t>) -> Option<(Node<'t>, Vec<Node<'t>>)> {
    let list = call.child_by_field_name("arguments")?;
    let mut cursor = list.walk();
    let args = list.named_children(&mut cursor).filter(|node| !node.kind().contains("comment")).collect();
    Some((list, args))
}

fn texts<'s>(nodes: &[Node], source: &'s [u8]) -> Vec<&'s str> {
    nodes.iter().map(|node| node.utf8_text(source).unwrap_or("")).collect()
}

/// `longer` is `shorter` with one element put in: its index.
fn one_inserted(shorter: &[&str], longer: &[&str]) -> Option<usize> {
    if longer.len() != shorter.len() + 1 {
        return None;
    }
    let index = shorter.iter().zip(longer).position(|(a, b)| a != b).unwrap_or(shorter.len());
    (longer[..index] == shorter[..index] && longer[index + 1..] == shorter[index..]).then_some(index)
}

fn call_arguments(lang: Lang, text: &str, tree: &Tree, edit: &Edit) -> Vec<Predicted> {
    let source = text.as_bytes();
    let root = tree.root_node();
    let Some(mut node) = root.descendant_for_byte_range(edit.start, edit.end()) else { return Vec::new() };
    // The innermost call whose argument list holds the whole edit.
    let mut steps = MAX_CLIMB;
    let call = loop {
        if CALL_KINDS.contains(&node.kind()) {
            if let Some(list) = node.child_by_field_name("arguments") {
                if list.start_byte() < edit.start && edit.end() < list.end_byte() {
                    break node;
                }
            }
        }
        match climb(node, &mut steps) {
            Some(parent) => node = parent,
            None => return Vec::new(),
        }
    };
    let Some((name, method)) = callee(call, source) else { return Vec::new() };
    let Some((_, after_nodes)) = arguments(call) else { return Vec::new() };
    let after = texts(&after_nodes, source);
    // The same call before the edit, from the text with the edit undone.
    let old_text = format!("{}{}{}", &text[..edit.start], edit.old, &text[edit.end()..]);
    let Some(old_tree) = crate::parse::text(lang, &old_text) else { return Vec::new() };
    let old_source = old_text.as_bytes();
    let list_start = call.child_by_field_name("arguments").map_or(0, |list| list.start_byte());
    let Some(old_call) = call_at(old_tree.root_node(), call.start_byte(), list_start) else { return Vec::new() };
    if callee(old_call, old_source) != Some((name.clone(), method)) {
        return Vec::new();
    }
    let Some((_, before_nodes)) = arguments(old_call) else { return Vec::new() };
    let before = texts(&before_nodes, old_source);

    enum Change<'a> {
        Insert(usize, &'a str),
        Remove(usize, &'a str),
    }
    let change = if let Some(index) = one_inserted(&before, &after) {
        Change::Insert(index, after[index])
    } else if let Some(index) = one_inserted(&after, &before) {
        Change::Remove(index, before[index])
    } else {
        return Vec::new();
    };
    let label = match change {
        Change::Insert(_, arg) => format!("add `{arg}` to the calls of `{name}`"),
        Change::Remove(_, arg) => format!("remove `{arg}` from the calls of `{name}`"),
    };
    let mut predicted = Vec::new();
    let mut cursor = root.walk();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        stack.extend(node.children(&mut cursor));
        if node == call || !CALL_KINDS.contains(&node.kind()) || callee(node, source) != Some((name.clone(), method)) {
            continue;
        }
        let Some((list, args)) = arguments(node) else { continue };
        if args.len() != before.len() || node.has_error() {
            continue;
        }
        let replacement = match change {
            Change::Insert(_, arg) if args.is_empty() => (list.start_byte() + 1, list.start_byte() + 1, arg.into()),
            Change::Insert(index, arg) if index == args.len() => {
                let end = args[index - 1].end_byte();
                (end, end, format!(", {arg}"))
            }
            Change::Insert(index, arg) => {
                let start = args[index].start_byte();
                (start, start, format!("{arg}, "))
            }
            Change::Remove(index, arg) => {
                if args[index].utf8_text(source).ok() != Some(arg) {
                    continue;
                }
                match (index > 0, index + 1 < args.len()) {
                    (true, _) => (args[index - 1].end_byte(), args[index].end_byte(), String::new()),
                    (false, true) => (args[index].start_byte(), args[index + 1].start_byte(), String::new()),
                    (false, false) => (args[index].start_byte(), args[index].end_byte(), String::new()),
                }
            }
        };
        let (start, end, new_text) = replacement;
        predicted.push(Predicted { start, end, new_text, label: label.clone(), source: Source::Call });
    }
    predicted
}

/// The call that starts at `start` with its argument list at `list_start` (the text before both is unchanged).
fn call_at(root: Node<'_>, start: usize, list_start: usize) -> Option<Node<'_>> {
    let mut node = root.descendant_for_byte_range(list_start, list_start)?;
    let mut steps = MAX_CLIMB;
    loop {
        let list = node.child_by_field_name("arguments");
        if CALL_KINDS.contains(&node.kind())
            && node.start_byte() == start
            && list.is_some_and(|list| list.start_byte() == list_start)
        {
            return Some(node);
        }
        node = climb(node, &mut steps)?;
    }
}

// --- siblings -------------------------------------------------------------------------------------------------

/// Lists of like items: an edit of one item is carried to the others of the same shape.
const LIST_KINDS: [&str; 13] = [
    "match_block",
    "field_declaration_list",
    "field_initializer_list",
    "enum_variant_list",
    "use_list",
    "array_expression",
    "object",
    "object_type",
    "interface_body",
    "enum_body",
    "switch_body",
    "array",
    "named_imports",
];

/// The non-blank tokens of `text` with their offsets.
fn words(text: &str) -> Vec<(usize, &str)> {
    lex(text).into_iter().filter(|(_, token)| !token.trim().is_empty()).collect()
}

fn is_word(token: &str) -> bool {
    token.bytes().all(is_word_byte)
}

/// Two tokens that can stand in the same place of two items of the same shape: the same text, or two names,
/// or two numbers.
fn same_place(a: &str, b: &str) -> bool {
    a == b || (is_word(a) && is_word(b) && a.as_bytes()[0].is_ascii_digit() == b.as_bytes()[0].is_ascii_digit())
}

fn siblings(text: &str, tree: &Tree, edit: &Edit) -> Vec<Predicted> {
    if edit.old.contains('\n') || edit.new.contains('\n') {
        return Vec::new();
    }
    let root = tree.root_node();
    let Some(mut node) = root.descendant_for_byte_range(edit.start, edit.end()) else { return Vec::new() };
    let mut steps = MAX_CLIMB;
    let item = loop {
        let Some(parent) = climb(node, &mut steps) else { return Vec::new() };
        if LIST_KINDS.contains(&parent.kind()) && node.is_named() && !node.kind().contains("comment") {
            break node;
        }
        node = parent;
    };
    if item.start_byte() > edit.start || edit.end() > item.end_byte() || item.has_error() {
        return Vec::new();
    }
    let now = &text[item.byte_range()];
    let at = edit.start - item.start_byte();
    let before = format!("{}{}{}", &now[..at], edit.old, &now[at + edit.new.len()..]);
    let (old, new) = (words(&before), words(now));
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a.1 == b.1).count();
    let max_suffix = old.len().min(new.len()) - prefix;
    let suffix = old.iter().rev().zip(new.iter().rev()).take(max_suffix).take_while(|(a, b)| a.1 == b.1).count();
    let (i, j, new_j) = (prefix, old.len() - suffix, new.len() - suffix);
    if i == j && prefix == new_j {
        return Vec::new();
    }
    // The user's replacement: the text between the unchanged tokens around it.
    let span = |tokens: &[(usize, &str)], len: usize, from: usize, to: usize| {
        let start = if from > 0 { tokens[from - 1].0 + tokens[from - 1].1.len() } else { 0 };
        let end = if to < tokens.len() { tokens[to].0 } else { len };
        (start, end)
    };
    let (new_start, new_end) = span(&new, now.len(), i, new_j);
    let replacement = &now[new_start..new_end];
    let label = format!("like line {}: `{}`", item.start_position().row + 1, replacement.trim());

    let source = text.as_bytes();
    let mut predicted = Vec::new();
    let mut cursor = item.parent().map(|parent| parent.walk());
    let Some(cursor) = cursor.as_mut() else { return Vec::new() };
    let Some(parent) = item.parent() else { return Vec::new() };
    for sibling in parent.named_children(cursor) {
        if sibling == item || sibling.kind() != item.kind() || sibling.has_error() {
            continue;
        }
        let Ok(sibling_text) = sibling.utf8_text(source) else { continue };
        let theirs = words(sibling_text);
        if theirs.len() != old.len() || !old.iter().zip(&theirs).all(|(a, b)| same_place(a.1, b.1)) {
            continue;
        }
        // The replaced part must be the same text in the sibling; the names that differ elsewhere are renamed
        // in the replacement (`parse_a(x)?` in the arm of `A` is `parse_b(x)?` in the arm of `B`).
        if old[i..j].iter().zip(&theirs[i..j]).any(|(a, b)| a.1 != b.1) {
            continue;
        }
        let mut names: Vec<(&str, &str)> = Vec::new();
        let mut consistent = true;
        for (a, b) in old.iter().zip(&theirs) {
            if a.1 != b.1 {
                match names.iter().find(|(from, _)| *from == a.1) {
                    Some((_, to)) if *to != b.1 => consistent = false,
                    Some(_) => {}
                    None => names.push((a.1, b.1)),
                }
            }
        }
        if !consistent {
            continue;
        }
        let carried: String = lex(replacement)
            .into_iter()
            .map(|(_, token)| names.iter().find(|(from, _)| *from == token).map_or(token, |(_, to)| to))
            .collect();
        let (start, end) = span(&theirs, sibling_text.len(), i, j);
        predicted.push(Predicted {
            start: sibling.start_byte() + start,
            end: sibling.start_byte() + end,
            new_text: carried,
            label: label.clone(),
            source: Source::Sibling,
        });
    }
    predicted
}

// --- pattern --------------------------------------------------------------------------------------------------

/// Words that stay themselves in a pattern (keywords, primitive and built-in types): every other name the edit
/// kept is a hole that matches any name.
const LITERAL_WORDS: [&str; 56] = [
    "as",
    "async",
    "await",
    "bool",
    "break",
    "char",
    "const",
    "continue",
    "crate",
    "dyn",
    "else",
    "enum",
    "f32",
    "f64",
    "false",
    "fn",
    "for",
    "i128",
    "i16",
    "i32",
    "i64",
    "i8",
    "if",
    "impl",
    "in",
    "isize",
    "let",
    "match",
    "mod",
    "move",
    "mut",
    "new",
    "of",
    "pub",
    "ref",
    "return",
    "self",
    "str",
    "super",
    "this",
    "true",
    "typeof",
    "u128",
    "u16",
    "u32",
    "u64",
    "u8",
    "usize",
    "where",
    "while",
    "string",
    "number",
    "boolean",
    "null",
    "undefined",
    "void",
];

fn is_hole(word: &str) -> bool {
    is_identifier(word) && word.as_bytes()[0].is_ascii_lowercase() && !LITERAL_WORDS.contains(&word)
}

/// A one-line rewrite of an expression with at least one name kept (`x as usize` → `usize::from(x)`), made at
/// the other places of the file with the same tokens around other names. The rewritten part must hold at least
/// two tokens besides the names, one of them a word, so that a lone operator or number is never carried.
fn pattern(text: &str, tree: &Tree, edit: &Edit) -> Vec<Predicted> {
    if edit.old.contains('\n') || edit.new.contains('\n') || edit.old.len() > 200 || edit.new.len() > 200 {
        return Vec::new();
    }
    let root = tree.root_node();
    // What changed, token by token, and the smallest named node around it now: the rewritten expression.
    let (start, old, new) = widened(text, edit);
    let (old_tokens, new_tokens) = (words(&old), words(&new));
    let prefix = old_tokens.iter().zip(&new_tokens).take_while(|(a, b)| a.1 == b.1).count();
    let max_suffix = old_tokens.len().min(new_tokens.len()) - prefix;
    let suffix =
        old_tokens.iter().rev().zip(new_tokens.iter().rev()).take(max_suffix).take_while(|(a, b)| a.1 == b.1).count();
    // The changed part of the new text, from the end of the last token kept in front to the start of the first
    // one kept behind; a pure deletion leaves an empty span, which the node must hold inside.
    let changed_from = if prefix == 0 { 0 } else { new_tokens[prefix - 1].0 + new_tokens[prefix - 1].1.len() };
    let changed_to = new_tokens.get(new_tokens.len() - suffix).map_or(new.len(), |t| t.0).max(changed_from);
    let (from, to) = (start + changed_from, start + changed_to);
    let (low, high) = if from == to { (from.saturating_sub(1), (to + 1).min(text.len())) } else { (from, to) };
    let Some(mut node) = root.descendant_for_byte_range(low, high) else { return Vec::new() };
    let mut steps = MAX_CLIMB;
    while !node.is_named() {
        let Some(parent) = climb(node, &mut steps) else { return Vec::new() };
        node = parent;
    }
    let (node_start, node_end) = (node.start_byte(), node.end_byte());
    if node_end - node_start > 200 || text[node_start..node_end].contains('\n') {
        return Vec::new();
    }
    // The same span before the edit (the text with the edit undone): a part of the edit inside the node's span
    // but outside what changed must be the same text before and after.
    let before = format!("{}{}{}", &text[..edit.start], edit.old, &text[edit.end()..]);
    let same_start =
        node_start <= edit.start || (node_start <= edit.end() && edit.old.starts_with(&text[edit.start..node_start]));
    if !same_start {
        return Vec::new();
    }
    let old_start = node_start;
    let old_end = if node_end >= edit.end() {
        node_end + edit.old.len() - edit.new.len()
    } else if node_end >= edit.start && edit.old.ends_with(&text[node_end..edit.end()]) {
        edit.start + edit.old.len() - (edit.end() - node_end)
    } else {
        return Vec::new();
    };
    if old_end < old_start || !before.is_char_boundary(old_start) || !before.is_char_boundary(old_end) {
        return Vec::new();
    }
    let rewritten_old = &before[old_start..old_end];
    let replacement = &text[node_start..node_end];
    let (pattern, template) = (words(rewritten_old), words(replacement));
    if pattern.len() < 2 || template.is_empty() || pattern.len() > 24 {
        return Vec::new();
    }
    let kept: Vec<&str> = template.iter().map(|t| t.1).filter(|word| is_hole(word)).collect();
    let hole = |token: &str| is_hole(token) && kept.contains(&token);
    let literals: Vec<&str> = pattern.iter().map(|t| t.1).filter(|token| !hole(token)).collect();
    if literals.len() == pattern.len() || literals.len() < 2 || !literals.iter().any(|token| is_word(token)) {
        return Vec::new();
    }
    let (user_from, user_to) = (node_start, node_end);
    let label = format!("`{rewritten_old}` → `{replacement}`");

    let tokens = words(text);
    let mut predicted = Vec::new();
    let mut i = 0;
    while i + pattern.len() <= tokens.len() && predicted.len() < MAX_PREDICTIONS {
        let candidate = &tokens[i..i + pattern.len()];
        let mut names: Vec<(&str, &str)> = Vec::new();
        let matches = pattern.iter().zip(candidate).all(|(p, c)| {
            if !hole(p.1) {
                return p.1 == c.1;
            }
            if !is_identifier(c.1) {
                return false;
            }
            match names.iter().find(|(from, _)| *from == p.1) {
                Some((_, to)) => *to == c.1,
                None => {
                    names.push((p.1, c.1));
                    true
                }
            }
        });
        let (from, to) = (candidate[0].0, candidate[candidate.len() - 1].0 + candidate[candidate.len() - 1].1.len());
        // Whole words only, outside the user's edit, in code (not a comment or a string).
        let in_code = || {
            root.descendant_for_byte_range(from, to).is_some_and(|node| {
                !node.kind().contains("comment") && !node.kind().contains("string") && !node.kind().contains("char")
            })
        };
        let whole = from == 0 || !is_word_byte(text.as_bytes()[from - 1]);
        if matches && whole && (to <= user_from || from >= user_to) && in_code() {
            let carried: String = lex(replacement)
                .into_iter()
                .map(|(_, token)| names.iter().find(|(name, _)| *name == token).map_or(token, |(_, to)| to))
                .collect();
            predicted.push(Predicted {
                start: from,
                end: to,
                new_text: carried,
                label: label.clone(),
                source: Source::Pattern,
            });
            i += pattern.len();
        } else {
            i += 1;
        }
    }
    predicted
}
