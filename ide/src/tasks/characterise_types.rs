//! Characterisation tests' inputs of the project's own types, pure: how the file and its crate or package make
//! a value of a type they define (Rust: `Type::new(..)` and other associated functions that return the type,
//! `Type::default()`, struct literals, enum variants, constants; TypeScript: type aliases, interfaces as object
//! literals, classes through their constructors), and the receivers of methods. The arguments these take are
//! values of their parameter types, one level deep, so an input cannot reach outside by itself.

use std::collections::HashMap;

use spark_grammars::tree_sitter::{Node, Tree};
use spark_grammars::Lang;

use super::{rust_values, slices, split_reference, ts_values};

#[path = "characterise_ts_types.rs"]
mod ts;

/// At most this many values of one of the project's own types.
const MAX_VALUES: usize = 8;

/// The standard library's number types.
const NUMERIC: [&str; 14] =
    ["u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32", "f64"];

/// Literals of the standard types, each with its type, for a parameter bound by a trait Spark cannot read: the
/// compiler keeps those that satisfy it. Unsigned sizes first (the usual value is the third), then a negative,
/// a float, a string, a character.
pub const TYPED_LITERALS: [&str; 8] = ["0u64", "1u64", "1000u64", "1048576u64", "-1i64", "2.5f64", "\"hello\"", "'a'"];

/// The source files of a crate or package, parsed: the file under test first.
pub struct Sources {
    files: Vec<(String, Tree)>,
}

impl Sources {
    /// Parses `texts` (the file under test first); a text that does not parse is left out.
    pub fn new(lang: Lang, texts: Vec<String>) -> Sources {
        let files =
            texts.into_iter().filter_map(|text| crate::parse::text(lang, &text).map(|tree| (text, tree))).collect();
        Sources { files }
    }

    /// Every node of the files' trees for which `visit` returns something, in file order.
    fn collect<T>(&self, mut visit: impl FnMut(Node, &str) -> Option<T>) -> Vec<T> {
        let mut out = Vec::new();
        for (text, tree) in &self.files {
            let mut stack = vec![tree.root_node()];
            while let Some(node) = stack.pop() {
                if let Some(found) = visit(node, text) {
                    out.push(found);
                }
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                stack.extend(children.into_iter().rev());
            }
        }
        out
    }

    /// Values of a Rust type: the built-in ones of [`rust_values`], else the project's own (see
    /// [`Sources::rust_own_values`]) and the constants of that type.
    pub fn rust_values(&self, ty: &str, header: &str) -> Vec<String> {
        self.rust_values_at(ty, header, 0)
    }

    fn rust_values_at(&self, ty: &str, header: &str, depth: usize) -> Vec<String> {
        let ty = ty.trim();
        let mut values = rust_values(ty, header);
        if !values.is_empty() {
            return values;
        }
        if let Some(generic) = self.rust_iterable(ty, header, depth) {
            return generic;
        }
        values.extend(self.rust_constants(ty));
        let (reference, bare) = split_reference(ty);
        if let Some(rest) = bare.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
            // An array `[T; N]`: each of a few values of `T` repeated.
            if let Some((element, length)) = rest.rsplit_once(';') {
                let length = length.trim();
                if length.chars().all(|ch| ch.is_ascii_digit()) {
                    for value in self.rust_values_at(element, header, depth + 1).into_iter().take(3) {
                        values.push(format!("{reference}[{value}; {length}]"));
                    }
                }
            }
            values.truncate(MAX_VALUES);
            return values;
        }
        if depth < 2 {
            for value in self.rust_own_values(bare, depth) {
                let value = format!("{reference}{value}");
                if !values.contains(&value) {
                    values.push(value);
                }
            }
        }
        if values.is_empty() && reference.is_empty() && depth < 2 {
            values = self.rust_bounded(bare, header, depth);
        }
        values.truncate(MAX_VALUES);
        values
    }

    /// Values of a parameter known only by its bounds. A conversion (`impl Into<u64>`, `T: AsRef<Options>`,
    /// `Borrow<X>`): values of its target, numbers with their type's suffix (`1000u64`: an unsuffixed literal
    /// would be an `i32`), the project's own values also borrowed. Any other trait (`impl ToF64 + Unsigned`, a
    /// trait of the crate implemented by a macro): literals of the standard types, each typed, and the compiler
    /// keeps those that satisfy the bounds (the probe drops an input it rejects).
    fn rust_bounded(&self, ty: &str, header: &str, depth: usize) -> Vec<String> {
        let bounds = super::type_bounds(ty, header);
        let closure = ["Fn(", "FnMut(", "FnOnce(", "Iterator"].iter().any(|word| bounds.contains(word));
        if bounds.trim_start_matches(':').trim().is_empty() || closure {
            return Vec::new();
        }
        for conversion in ["Into<", "AsRef<", "Borrow<"] {
            let Some(at) = bounds.find(conversion) else { continue };
            let rest = &bounds[at + conversion.len()..];
            let mut nesting = 0usize;
            let end = rest.char_indices().find_map(|(idx, ch)| match ch {
                '<' => {
                    nesting += 1;
                    None
                }
                '>' if nesting == 0 => Some(idx),
                '>' => {
                    nesting -= 1;
                    None
                }
                _ => None,
            });
            let target = rest[..end.unwrap_or(rest.len())].trim();
            let numeric = NUMERIC.contains(&target);
            let mut values: Vec<String> = if numeric {
                rust_values(target, header).into_iter().map(|value| format!("{value}{target}")).collect()
            } else {
                self.rust_values_at(target, header, depth + 1)
            };
            if conversion != "Into<" && !numeric {
                let borrowed: Vec<String> = values.iter().map(|value| format!("&{value}")).collect();
                values.extend(borrowed);
            }
            if !values.is_empty() {
                return values;
            }
        }
        TYPED_LITERALS.map(str::to_owned).to_vec()
    }

    /// A generic parameter bound by `IntoIterator<Item = X>` (or `Iterator`): vectors of values of `X`, of
    /// characters when `X` is itself a type parameter.
    fn rust_iterable(&self, ty: &str, header: &str, depth: usize) -> Option<Vec<String>> {
        let (reference, bare) = split_reference(ty);
        let bounds = super::type_bounds(bare, header);
        let item = bounds.split("Item").nth(1)?.trim_start().strip_prefix('=')?;
        let end = item.find(['>', ',']).unwrap_or(item.len());
        let item = item[..end].trim();
        let iterator = bounds.contains("IntoIterator") || bounds.contains("Iterator");
        if !iterator || depth > 1 {
            return None;
        }
        let is_parameter = !item.is_empty() && item.chars().all(|ch| ch.is_alphanumeric() || ch == '_');
        let elements = if is_parameter && rust_values(item, header).is_empty() && self.rust_type(item).is_none() {
            ["'a'", "'b'", "'c'", "'x'", "'z'"].map(str::to_owned).to_vec()
        } else if item.ends_with("[u8]") {
            // (A NUL last, as among the strings: some byte-string functions treat it apart.)
            ["&b\"a\"[..]", "&b\"\"[..]", "&b\"hello\"[..]", "&b\"a b\"[..]", "&b\"x'y\"[..]", "&b\"a\\0b\"[..]"]
                .map(str::to_owned)
                .to_vec()
        } else {
            self.rust_values_at(item, header, depth + 1)
        };
        if elements.is_empty() {
            return None;
        }
        let open = format!("{reference}vec![");
        Some(slices(&elements, &open, "]"))
    }

    /// Whether the project defines a type of this name (a struct, an enum, a type alias).
    fn rust_type(&self, name: &str) -> Option<()> {
        let found = self.collect(|node, text| {
            (matches!(node.kind(), "struct_item" | "enum_item" | "type_item")
                && node.child_by_field_name("name").is_some_and(|found| &text[found.byte_range()] == name))
            .then_some(())
        });
        found.into_iter().next()
    }

    /// Constants and statics of type `ty` (spelt the same, lifetimes aside), by name: as the file under test
    /// names them where it defines or mentions them (an import), else through the crate's root (`crate::BINARY`,
    /// as a crate re-exports its constants; one that is not is dropped by the compiler).
    fn rust_constants(&self, ty: &str) -> Vec<String> {
        let wanted = without_lifetimes(ty);
        let under_test = self.files.first().map_or("", |(text, _)| text.as_str());
        let mentioned = |name: &str| {
            under_test.match_indices(name).any(|(at, _)| {
                let word = |ch: char| ch.is_alphanumeric() || ch == '_';
                !under_test[..at].ends_with(word) && !under_test[at + name.len()..].starts_with(word)
            })
        };
        self.collect(|node, text| {
            if !matches!(node.kind(), "const_item" | "static_item") {
                return None;
            }
            let name = &text[node.child_by_field_name("name")?.byte_range()];
            let declared = &text[node.child_by_field_name("type")?.byte_range()];
            (without_lifetimes(declared) == wanted).then(|| {
                if mentioned(name) {
                    name.to_owned()
                } else {
                    format!("crate::{name}")
                }
            })
        })
    }

    /// How the project makes a value of its own type `ty` (a path's last segment, generics dropped): associated
    /// functions returning `Self` or the type whose arguments have values (`new()` first), `default()` where it
    /// derives or implements `Default`, unit and tuple enum variants, struct literals and tuple structs whose
    /// fields all have values.
    pub fn rust_own_values(&self, ty: &str, depth: usize) -> Vec<String> {
        let name = ty.split('<').next().unwrap_or(ty).rsplit("::").next().unwrap_or(ty).trim();
        if name.is_empty() || !name.chars().all(|ch| ch.is_alphanumeric() || ch == '_') {
            return Vec::new();
        }
        let mut values: Vec<String> = Vec::new();
        let push = |value: String, values: &mut Vec<String>| {
            if !values.contains(&value) {
                values.push(value);
            }
        };
        let first_values = |ty: &str| -> Vec<String> {
            let mut found = self.rust_values_at(ty, "", depth + 1);
            found.truncate(3);
            found
        };
        for (text, tree) in &self.files {
            let mut stack = vec![tree.root_node()];
            while let Some(node) = stack.pop() {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                stack.extend(children.iter().rev().copied());
                let named = node.child_by_field_name("name").is_some_and(|found| &text[found.byte_range()] == name);
                if matches!(node.kind(), "struct_item" | "enum_item") && named && derives_default(node, text) {
                    push(format!("{name}::default()"), &mut values);
                }
                match node.kind() {
                    "impl_item" => {
                        let Some(self_ty) = node.child_by_field_name("type") else { continue };
                        let self_name = text[self_ty.byte_range()].split('<').next().unwrap_or("").trim();
                        if self_name != name {
                            continue;
                        }
                        let trait_name = node.child_by_field_name("trait").map(|found| &text[found.byte_range()]);
                        if trait_name == Some("Default") {
                            push(format!("{name}::default()"), &mut values);
                            continue;
                        }
                        if trait_name.is_some() {
                            continue;
                        }
                        let Some(body) = node.child_by_field_name("body") else { continue };
                        let mut constructors = Vec::new();
                        let mut cursor = body.walk();
                        for item in body.named_children(&mut cursor) {
                            if let Some(made) = associated_constructor(item, text, name) {
                                constructors.push(made);
                            }
                        }
                        // `new` first: the usual way in.
                        constructors.sort_by_key(|(function, _)| function != "new");
                        for (function, parameters) in constructors {
                            let options: Vec<Vec<String>> = parameters.iter().map(|ty| first_values(ty)).collect();
                            for args in combine_few(&options) {
                                push(format!("{name}::{function}({args})"), &mut values);
                            }
                        }
                    }
                    "enum_item" if named => {
                        let Some(body) = node.child_by_field_name("body") else { continue };
                        let mut cursor = body.walk();
                        for variant in body.named_children(&mut cursor).filter(|item| item.kind() == "enum_variant") {
                            let Some(variant_name) = variant.child_by_field_name("name") else { continue };
                            let variant_name = &text[variant_name.byte_range()];
                            match variant.child_by_field_name("body") {
                                None => push(format!("{name}::{variant_name}"), &mut values),
                                Some(fields) if fields.kind() == "ordered_field_declaration_list" => {
                                    let options: Vec<Vec<String>> =
                                        tuple_fields(fields, text).iter().map(|ty| first_values(ty)).collect();
                                    for args in combine_few(&options).into_iter().take(2) {
                                        push(format!("{name}::{variant_name}({args})"), &mut values);
                                    }
                                }
                                Some(_) => {}
                            }
                        }
                    }
                    "struct_item" if named && generic_free(node) => match node.child_by_field_name("body") {
                        Some(fields) if fields.kind() == "field_declaration_list" => {
                            let named_fields = struct_fields(fields, text);
                            let options: Vec<Vec<String>> =
                                named_fields.iter().map(|(_, ty)| first_values(ty)).collect();
                            let field_names: Vec<&str> = named_fields.iter().map(|(field, _)| field.as_str()).collect();
                            for args in combine_few_parts(&options) {
                                let inits: Vec<String> = field_names
                                    .iter()
                                    .zip(&args)
                                    .map(|(field, value)| format!("{field}: {value}"))
                                    .collect();
                                push(format!("{name} {{ {} }}", inits.join(", ")), &mut values);
                            }
                        }
                        Some(fields) if fields.kind() == "ordered_field_declaration_list" => {
                            let options: Vec<Vec<String>> =
                                tuple_fields(fields, text).iter().map(|ty| first_values(ty)).collect();
                            for args in combine_few(&options) {
                                push(format!("{name}({args})"), &mut values);
                            }
                        }
                        _ => {}
                    },
                    _ => {}
                }
            }
        }
        // The crate's own constructors first, struct literals (which may break an invariant they keep) last.
        values.sort_by_key(|value| value.contains(" {"));
        values.truncate(MAX_VALUES);
        values
    }

    /// The receivers of a Rust method (a function in an `impl` block with a `self` parameter): values of the
    /// implementing type, and how each is spelt before `.method(..)`. `None` for a free function.
    pub fn rust_callees(&self, function: Node, source: &str, name: &str) -> Option<Vec<String>> {
        let list = function.parent().filter(|parent| parent.kind() == "declaration_list")?;
        let implementation = list.parent().filter(|parent| parent.kind() == "impl_item")?;
        let self_ty = &source[implementation.child_by_field_name("type")?.byte_range()];
        let self_name = self_ty.split('<').next().unwrap_or(self_ty).trim();
        let has_self = function.child_by_field_name("parameters").is_some_and(|list| {
            (0..list.named_child_count()).any(|idx| list.named_child(idx).is_some_and(|p| p.kind() == "self_parameter"))
        });
        if !has_self {
            return Some(vec![format!("{self_name}::{name}")]);
        }
        let receivers = self.rust_own_values(self_name, 0);
        if receivers.is_empty() {
            // A trait implemented for a type of the standard library (`impl ToHex for [u8]`): its values, by
            // reference, as receivers (method calls take the reference or dereference it as the method needs).
            let values = rust_values(&format!("&{self_ty}"), "");
            return Some(values.into_iter().map(|receiver| format!("({receiver}).{name}")).collect());
        }
        Some(receivers.into_iter().map(|receiver| format!("{receiver}.{name}")).collect())
    }
}

fn without_lifetimes(ty: &str) -> String {
    let mut out = String::new();
    let mut chars = ty.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == '\'' {
            while chars.peek().is_some_and(|next| next.is_alphanumeric() || *next == '_') {
                chars.next();
            }
            continue;
        }
        if !ch.is_whitespace() {
            out.push(ch);
        }
    }
    out
}

/// Whether a struct or enum carries `#[derive(.., Default, ..)]`.
fn derives_default(item: Node, text: &str) -> bool {
    let mut previous = item.prev_named_sibling();
    while let Some(attribute) = previous.filter(|node| node.kind() == "attribute_item") {
        let attribute_text = &text[attribute.byte_range()];
        if attribute_text.contains("derive") && attribute_text.contains("Default") {
            return true;
        }
        previous = attribute.prev_named_sibling();
    }
    false
}

/// A struct without type parameters (a literal of one with them needs types the test cannot guess).
fn generic_free(item: Node) -> bool {
    item.child_by_field_name("type_parameters").is_none()
}

/// An associated function without `self` that returns `Self` or the type: its name and parameter types.
fn associated_constructor(item: Node, text: &str, type_name: &str) -> Option<(String, Vec<String>)> {
    if item.kind() != "function_item" {
        return None;
    }
    let returns = text[item.child_by_field_name("return_type")?.byte_range()].trim();
    if returns != "Self" && returns.split('<').next() != Some(type_name) {
        return None;
    }
    let name = text[item.child_by_field_name("name")?.byte_range()].to_owned();
    let list = item.child_by_field_name("parameters")?;
    let mut cursor = list.walk();
    let mut types = Vec::new();
    for parameter in list.named_children(&mut cursor) {
        match parameter.kind() {
            "parameter" => types.push(text[parameter.child_by_field_name("type")?.byte_range()].to_owned()),
            "self_parameter" => return None,
            _ => {}
        }
    }
    Some((name, types))
}

fn tuple_fields(list: Node, text: &str) -> Vec<String> {
    let mut cursor = list.walk();
    let mut types = Vec::new();
    for field in list.named_children(&mut cursor) {
        if !matches!(field.kind(), "visibility_modifier" | "attribute_item" | "line_comment" | "block_comment") {
            types.push(text[field.byte_range()].to_owned());
        }
    }
    types
}

fn struct_fields(list: Node, text: &str) -> Vec<(String, String)> {
    let mut cursor = list.walk();
    let mut fields = Vec::new();
    for field in list.named_children(&mut cursor).filter(|field| field.kind() == "field_declaration") {
        let (Some(name), Some(ty)) = (field.child_by_field_name("name"), field.child_by_field_name("type")) else {
            continue;
        };
        fields.push((text[name.byte_range()].to_owned(), text[ty.byte_range()].to_owned()));
    }
    fields
}

/// Argument lists (joined with `, `) from each parameter's values: the first of each, then each parameter's
/// other values in turn; none when a parameter has none.
pub fn combine_few(options: &[Vec<String>]) -> Vec<String> {
    combine_few_parts(options).into_iter().map(|parts| parts.join(", ")).collect()
}

fn combine_few_parts(options: &[Vec<String>]) -> Vec<Vec<String>> {
    if options.iter().any(Vec::is_empty) {
        return Vec::new();
    }
    let mut out: Vec<Vec<String>> = vec![options.iter().map(|values| values[0].clone()).collect()];
    for (idx, values) in options.iter().enumerate() {
        for value in values.iter().skip(1) {
            let mut parts = out[0].clone();
            parts[idx] = value.clone();
            if !out.contains(&parts) {
                out.push(parts);
            }
        }
    }
    out.truncate(4);
    out
}

/// The type parameters a TypeScript function declares (`<T, K extends keyof X>` → `T`, `K`).
/// The constraints of a TypeScript function's type parameters: `T` → `QueryKey` for `<T extends QueryKey>`.
pub fn ts_type_constraints(function: Node, source: &str) -> HashMap<String, String> {
    let Some(list) = function.child_by_field_name("type_parameters") else { return HashMap::new() };
    let mut cursor = list.walk();
    list.named_children(&mut cursor)
        .filter_map(|parameter| {
            let name = parameter.child_by_field_name("name")?;
            let constraint = parameter.child_by_field_name("constraint")?;
            let ty = source[constraint.byte_range()].trim().trim_start_matches("extends").trim();
            Some((source[name.byte_range()].to_owned(), ty.to_owned()))
        })
        .collect()
}

pub fn ts_type_parameters(function: Node, source: &str) -> Vec<String> {
    let Some(list) = function.child_by_field_name("type_parameters") else { return Vec::new() };
    let mut cursor = list.walk();
    list.named_children(&mut cursor)
        .filter_map(|parameter| parameter.child_by_field_name("name"))
        .map(|name| source[name.byte_range()].to_owned())
        .collect()
}
