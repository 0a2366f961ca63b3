//! TypeScript values of the package's own types, pure: type aliases resolved (generic ones with their type
//! arguments), interfaces as object literals (with the members of what they extend), classes through their
//! constructors, unions, arrays, function types and conditional types; the type-text helpers they read with.

use spark_grammars::tree_sitter::Node;

use super::super::ts_array_element;
use super::{combine_few, slices, ts_values, Sources, MAX_VALUES};

impl Sources {
    /// Values of a TypeScript type: the built-in ones of [`ts_values`]; `any`, `unknown` and bare type
    /// parameters as a mix of kinds; the project's type aliases and interfaces (as object literals) resolved.
    pub fn ts_values(&self, ty: &str, type_parameters: &[String]) -> Vec<String> {
        self.ts_values_at(ty, type_parameters, 0)
    }

    fn ts_values_at(&self, ty: &str, type_parameters: &[String], depth: usize) -> Vec<String> {
        let ty = ty.trim();
        if matches!(ty, "any" | "unknown") || type_parameters.iter().any(|parameter| parameter == ty) {
            return ANY_VALUES.map(str::to_owned).to_vec();
        }
        // `A extends B ? X : Y`: the values of the last branch, the type it is when nothing is registered.
        if let Some(otherwise) = conditional_default(ty).filter(|_| depth <= 3) {
            return self.ts_values_at(otherwise, type_parameters, depth + 1);
        }
        // `(A | B)`: the type in the parentheses.
        let closing = at_depth(ty).find(|(_, ch, depth)| *ch == ')' && *depth == 0).map(|(at, ..)| at);
        if ty.starts_with('(') && closing == Some(ty.len() - 1) {
            return self.ts_values_at(&ty[1..ty.len() - 1], type_parameters, depth);
        }
        // `(a: A, b: B) => R`: functions written out that return values of `R`.
        if let Some(returned) = function_return(ty).filter(|_| depth <= 2) {
            let parameters = ty[..ty.len() - returned.len()].trim_end().trim_end_matches("=>").trim_end();
            let names = (0..split_arguments_count(parameters)).map(|idx| format!("_{idx}")).collect::<Vec<_>>();
            let returned = returned.trim();
            // A function that may return anything (`(b: B) => R`) computes with its argument, so that what is
            // made of it (composed, mapped, called twice) shows in the value: `(_0: any) => _0 + 1`.
            let open = matches!(returned, "any" | "unknown") || type_parameters.iter().any(|tp| tp == returned);
            if open && !names.is_empty() {
                let typed = names.iter().map(|name| format!("{name}: any")).collect::<Vec<_>>().join(", ");
                return ["+ 1", "* 2"]
                    .iter()
                    .map(|operation| format!("({typed}) => {} {operation}", names[0]))
                    .chain([format!("({typed}) => [{}]", names[0])])
                    .collect();
            }
            let values = match returned {
                "void" | "undefined" => vec!["undefined".to_owned()],
                returned => self.ts_values_at(returned, type_parameters, depth + 1),
            };
            return values.into_iter().take(3).map(|value| format!("({}) => ({value})", names.join(", "))).collect();
        }
        if ty == "Function" {
            return ["() => 1", "(x: number) => x + 1", "(x: number) => x * 2"].map(str::to_owned).to_vec();
        }
        let parts: Vec<&str> = split_union(ty);
        let literal = ty.starts_with(['"', '\'']) || ty.parse::<f64>().is_ok();
        if parts.len() == 1 && (literal || ["true", "false", "undefined", "null"].contains(&ty)) {
            return vec![ty.to_owned()];
        }
        let mut values = if parts.len() > 1 { Vec::new() } else { ts_values(ty) };
        if !values.is_empty() || depth > 4 {
            return values;
        }
        // `Item['key']`: the values of the member's declared type.
        if let Some((object, member)) = indexed_access(ty).filter(|_| parts.len() == 1) {
            return match self.ts_member_type(object, member, 0) {
                Some((member_ty, _)) => self.ts_values_at(&member_ty, type_parameters, depth + 1),
                None => values,
            };
        }
        if parts.len() > 1 {
            // Taken in turns from each part, so that the first few values are of every kind (`T | null`). A part
            // is a strict piece of the text, so it takes no level of depth (an array of a union of objects).
            let per_part: Vec<Vec<String>> =
                parts.iter().map(|part| self.ts_values_at(part, type_parameters, depth)).collect();
            let longest = per_part.iter().map(Vec::len).max().unwrap_or(0);
            for idx in 0..longest {
                for value in per_part.iter().filter_map(|values| values.get(idx)) {
                    if !values.contains(value) {
                        values.push(value.clone());
                    }
                }
            }
            values.truncate(2 * MAX_VALUES);
            return values;
        }
        if let Some(element) = ts_array_element(ty) {
            return slices(&self.ts_values_at(element, type_parameters, depth + 1), "[", "]");
        }
        if ty.starts_with('{') && ty.ends_with('}') {
            return self.ts_object_values(&ty[1..ty.len() - 1], type_parameters, depth);
        }
        let (name, arguments) = name_and_arguments(ty);
        if name.is_empty() || !name.chars().all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$') {
            return values;
        }
        let definitions = self.ts_definitions(name);
        // The definition's own type parameters take the arguments written (`Options<any, string>`), else their
        // defaults, else stay type parameters (values of every kind).
        let mut type_parameters = type_parameters.to_vec();
        match definitions.into_iter().next() {
            Some(TsDefinition::Alias { value, parameters }) => {
                let (aliased, unbound) = bind(&parameters, &arguments, &value);
                type_parameters.extend(unbound);
                self.ts_values_at(&aliased, &type_parameters, depth + 1)
            }
            Some(TsDefinition::Object { members, parameters, extends }) => {
                // An interface's members follow those of the interfaces it extends.
                let mut all = String::new();
                for base in extends {
                    let (base, _) = bind(&parameters, &arguments, &base);
                    let (base_name, base_arguments) = name_and_arguments(&base);
                    match self.ts_definitions(base_name).into_iter().next() {
                        Some(TsDefinition::Object { members, parameters: base_parameters, extends }) if depth < 2 => {
                            if !extends.is_empty() {
                                return values;
                            }
                            all.push_str(&bind(&base_parameters, &base_arguments, &members).0);
                            all.push('\n');
                        }
                        // A base that is not the project's own interface: its members are not known.
                        _ => return values,
                    }
                }
                let (members, unbound) = bind(&parameters, &arguments, &members);
                all.push_str(&members);
                type_parameters.extend(unbound);
                self.ts_object_values(&all, &type_parameters, depth)
            }
            Some(TsDefinition::Class { constructor: Some(parameters), .. }) => {
                let options: Vec<Vec<String>> = parameters
                    .iter()
                    .map(|ty| self.ts_values_at(ty, &type_parameters, depth + 1).into_iter().take(3).collect())
                    .collect();
                combine_few(&options).into_iter().map(|args| format!("new {name}({args})")).collect()
            }
            Some(TsDefinition::Class { constructor: None, .. }) => values,
            None => self.ts_builtin_values(name, &arguments, &type_parameters, depth),
        }
    }

    /// Argument lists (`"1, \"a\""`, without parentheses) for the function a TypeScript function returns, when
    /// its return type `ty` is a function type (`(a: A) => R`, `<T>(arg: T) => T`, or the project's alias of one,
    /// `Func<T, R>`): values of its parameter types, a rest parameter's element standing for one argument and an
    /// `any` for numbers and a string. Empty when `ty` is not a function's type.
    pub fn ts_returned_function_args(&self, ty: &str, type_parameters: &[String]) -> Vec<String> {
        self.ts_returned_function_args_at(ty.trim().trim_start_matches(':').trim(), type_parameters, 0)
    }

    fn ts_returned_function_args_at(&self, ty: &str, type_parameters: &[String], depth: usize) -> Vec<String> {
        let mut type_parameters = type_parameters.to_vec();
        // `<T>(arg: T) => T`: its own type parameters are bare ones.
        let ty = match ty.strip_prefix('<') {
            Some(rest) => {
                let close = at_depth(ty).find(|(_, ch, depth)| *ch == '>' && *depth == 0).map_or(0, |(at, ..)| at);
                if close == 0 {
                    return Vec::new();
                }
                for parameter in split_top_level(&rest[..close - 1], &[',']) {
                    let name = parameter.split_whitespace().next().unwrap_or("");
                    type_parameters.push(name.to_owned());
                }
                ty[close + 1..].trim()
            }
            None => ty,
        };
        if function_return(ty).is_none() {
            // `Func<T, R>`: an alias of a function type, resolved once or twice.
            let (name, arguments) = name_and_arguments(ty);
            if depth > 1 || name.is_empty() || !name.chars().all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$') {
                return Vec::new();
            }
            return match self.ts_definitions(name).into_iter().next() {
                Some(TsDefinition::Alias { value, parameters }) => {
                    let (aliased, unbound) = bind(&parameters, &arguments, &value);
                    type_parameters.extend(unbound);
                    self.ts_returned_function_args_at(aliased.trim(), &type_parameters, depth + 1)
                }
                _ => Vec::new(),
            };
        }
        let close = at_depth(ty).find(|(_, ch, depth)| *ch == ')' && *depth == 0).map_or(0, |(at, ..)| at);
        let inner = ty[1..close].trim().trim_end_matches(',');
        let mut options: Vec<Vec<String>> = Vec::new();
        for parameter in split_top_level(inner, &[',']).into_iter().map(str::trim).filter(|p| !p.is_empty()) {
            let (name, declared) = match at_depth(parameter).find(|(_, ch, depth)| *ch == ':' && *depth == 0) {
                Some((colon, ..)) => (parameter[..colon].trim(), parameter[colon + 1..].trim()),
                None => (parameter, "any"),
            };
            let rest = name.starts_with("...");
            let element = if rest { ts_array_element(declared).unwrap_or("any") } else { declared };
            let values = if matches!(element, "any" | "unknown") || type_parameters.iter().any(|tp| tp == element) {
                RETURNED_ANY.map(str::to_owned).to_vec()
            } else {
                self.ts_values(element, &type_parameters)
            };
            if values.is_empty() {
                return Vec::new();
            }
            options.push(values.into_iter().take(3).collect());
            if rest {
                break;
            }
        }
        if options.is_empty() {
            return vec![String::new()];
        }
        combine_few(&options)
    }

    /// Values of the standard library's types the project does not define: typed arrays, `ArrayBuffer`,
    /// `DataView`, `Date`, `RegExp`, `Map<K, V>`, `Set<T>`, `Record<K, V>`, and `Partial`/`Readonly`/`Required`
    /// of a type with values. Byte buffers hold a few bytes of every size (a view read at offsets 0 to 8 finds
    /// data), dates are instants written as milliseconds (the same value in every time zone).
    fn ts_builtin_values(
        &self,
        name: &str,
        arguments: &[String],
        type_parameters: &[String],
        depth: usize,
    ) -> Vec<String> {
        const BYTES: [&str; 4] = [
            "[]",
            "[1, 2, 3]",
            "[104, 101, 108, 108, 111]",
            "[0, 255, 128, 127, 1, 16, 32, 64, 200, 7, 9, 250, 3, 33, 66, 99]",
        ];
        const VIEW_BYTES: [&str; 3] = [
            "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]",
            "[255, 255, 255, 255, 255, 255, 255, 255, 128, 0, 0, 0, 0, 0, 0, 1]",
            "[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]",
        ];
        let argument = |idx: usize| -> Vec<String> {
            arguments
                .get(idx)
                .map(|ty| self.ts_values_at(ty, type_parameters, depth + 1))
                .unwrap_or_default()
                .into_iter()
                .filter(|value| value != "undefined")
                .take(3)
                .collect()
        };
        match name {
            "Uint8Array" | "Uint8ClampedArray" | "Int8Array" | "Uint16Array" | "Int16Array" | "Uint32Array"
            | "Int32Array" | "Float32Array" | "Float64Array" => {
                BYTES.iter().map(|bytes| format!("new {name}({bytes})")).collect()
            }
            "ArrayBuffer" | "ArrayBufferLike" => {
                BYTES.iter().map(|bytes| format!("new Uint8Array({bytes}).buffer")).collect()
            }
            "DataView" => {
                VIEW_BYTES.iter().map(|bytes| format!("new DataView(new Uint8Array({bytes}).buffer)")).collect()
            }
            "Date" => ["new Date(0)", "new Date(1700000000000)", "new Date(951782400000)", "new Date(-86400001)"]
                .map(str::to_owned)
                .to_vec(),
            "RegExp" => ["/a/", "/^[0-9]+$/", "/x/gi"].map(str::to_owned).to_vec(),
            "Set" | "ReadonlySet" => {
                let elements = argument(0);
                if elements.is_empty() {
                    return Vec::new();
                }
                let mut values = vec!["new Set()".to_owned(), format!("new Set([{}])", elements[0])];
                if elements.len() > 1 {
                    values.push(format!("new Set([{}])", elements.join(", ")));
                }
                values
            }
            "Map" | "ReadonlyMap" => {
                let (keys, items) = (argument(0), argument(1));
                if keys.is_empty() || items.is_empty() {
                    return Vec::new();
                }
                let entries: Vec<String> = keys
                    .iter()
                    .enumerate()
                    .map(|(idx, key)| format!("[{key}, {}]", items[idx % items.len()]))
                    .collect();
                let mut values = vec!["new Map()".to_owned(), format!("new Map([{}])", entries[0])];
                if entries.len() > 1 {
                    values.push(format!("new Map([{}])", entries.join(", ")));
                }
                values
            }
            "Record" => {
                let key = arguments.first().map(|key| key.trim()).unwrap_or("");
                let items = argument(1);
                if items.is_empty() {
                    return Vec::new();
                }
                let keys: Vec<String> = match key {
                    "string" | "PropertyKey" => ["\"a\"", "\"b\""].map(str::to_owned).to_vec(),
                    _ => {
                        let keys = self.ts_values_at(key, type_parameters, depth + 1);
                        if keys.is_empty() || !keys.iter().all(|key| key.starts_with(['"', '\''])) {
                            return Vec::new();
                        }
                        // A record over a union of literal keys has every key.
                        let all = keys
                            .iter()
                            .enumerate()
                            .map(|(idx, key)| format!("{key}: {}", items[idx % items.len()]))
                            .collect::<Vec<_>>();
                        return vec![format!("{{ {} }}", all.join(", "))];
                    }
                };
                let mut values = vec!["{}".to_owned(), format!("{{ {}: {} }}", keys[0], items[0])];
                if items.len() > 1 {
                    values.push(format!("{{ {}: {}, {}: {} }}", keys[0], items[0], keys[1], items[1]));
                }
                values
            }
            "Readonly" | "Required" => {
                arguments.first().map(|ty| self.ts_values_at(ty, type_parameters, depth + 1)).unwrap_or_default()
            }
            "Partial" => {
                let mut values = vec!["{}".to_owned()];
                if let Some(ty) = arguments.first() {
                    values.extend(self.ts_values_at(ty, type_parameters, depth + 1));
                }
                values
            }
            _ => Vec::new(),
        }
    }

    /// Object literals from an object type's members (`a: string; b?: number`): required members only, then
    /// with the optional ones; a member whose type has no values leaves the type without values.
    fn ts_object_values(&self, members: &str, type_parameters: &[String], depth: usize) -> Vec<String> {
        let mut required: Vec<(String, Vec<String>)> = Vec::new();
        let mut optional: Vec<(String, Vec<String>)> = Vec::new();
        let members = without_comments(members);
        for member in split_members(&members) {
            let Some((key, ty, is_optional)) = member_parts(member) else { return Vec::new() };
            if key.is_empty() || !key.chars().all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$') {
                return Vec::new();
            }
            let values: Vec<String> = self
                .ts_values_at(ty, type_parameters, depth + 1)
                .into_iter()
                .filter(|value| value != "undefined")
                .take(3)
                .collect();
            match (values.is_empty(), is_optional) {
                (true, true) => {}
                (true, false) => return Vec::new(),
                (false, true) => optional.push((key.to_owned(), values)),
                (false, false) => required.push((key.to_owned(), values)),
            }
        }
        let object = |fields: &[(String, Vec<String>)], pick: usize| -> String {
            let parts: Vec<String> = fields
                .iter()
                .enumerate()
                .map(|(idx, (key, values))| format!("{key}: {}", values[(pick + idx) % values.len()]))
                .collect();
            if parts.is_empty() {
                "{}".to_owned()
            } else {
                format!("{{ {} }}", parts.join(", "))
            }
        };
        let mut values = Vec::new();
        for pick in 0..3 {
            let value = object(&required, pick);
            if !values.contains(&value) {
                values.push(value);
            }
        }
        if !optional.is_empty() {
            let all: Vec<(String, Vec<String>)> = required.iter().chain(&optional).cloned().collect();
            for pick in 0..3 {
                let value = object(&all, pick);
                if !values.contains(&value) {
                    values.push(value);
                }
            }
        }
        values
    }
}

impl Sources {
    /// Objects that stand for a value of `ty` when it has none of its own (a member of a type Spark cannot make:
    /// a scope, a draft, a method, a class instance): only the members `used` (the paths the function reads off
    /// its parameter, `state.status` for `query.state.status`), each with values of its declared type (an
    /// optional one also absent), a member read only through its own members stood in for the same way, cast
    /// `as any`, since they are not whole values of `ty`; `{} as any` when the function reads none of its
    /// members. Empty when a used member's type is not found or has no values.
    pub fn ts_partial_values(&self, ty: &str, used: &[String], type_parameters: &[String]) -> Vec<String> {
        if used.is_empty() {
            // A parameter read for none of its members (passed on, compared, called): an empty object.
            return vec!["{} as any".to_owned()];
        }
        self.ts_partial_values_at(ty, used, type_parameters, 0)
    }

    fn ts_partial_values_at(&self, ty: &str, used: &[String], type_parameters: &[String], depth: usize) -> Vec<String> {
        if used.is_empty() || depth > 3 {
            return Vec::new();
        }
        // The paths grouped by their first member, in the order read: (member, read whole, the rest of each path).
        let mut grouped: Vec<(String, bool, Vec<String>)> = Vec::new();
        for path in used {
            let (first, rest) = match path.split_once('.') {
                Some((first, rest)) => (first, Some(rest)),
                None => (path.as_str(), None),
            };
            let at = match grouped.iter().position(|(member, ..)| member == first) {
                Some(at) => at,
                None => {
                    grouped.push((first.to_owned(), false, Vec::new()));
                    grouped.len() - 1
                }
            };
            match rest {
                Some(rest) => grouped[at].2.push(rest.to_owned()),
                None => grouped[at].1 = true,
            }
        }
        let mut fields: Vec<(String, Vec<String>)> = Vec::new();
        for (member, whole, deeper) in grouped {
            let Some((member_ty, optional)) = self.ts_member_type(ty, &member, 0) else { return Vec::new() };
            let whole_values = || -> Vec<String> {
                self.ts_values_at(&member_ty, type_parameters, 1)
                    .into_iter()
                    .filter(|value| value != "undefined")
                    .take(3)
                    .collect()
            };
            let partial = || self.ts_partial_values_at(&member_ty, &deeper, type_parameters, depth + 1);
            let mut values = if whole || deeper.is_empty() { whole_values() } else { partial() };
            if values.is_empty() {
                values = if whole || deeper.is_empty() { partial() } else { whole_values() };
            }
            if optional {
                values.insert(0, "undefined".to_owned());
            }
            if values.is_empty() {
                return Vec::new();
            }
            fields.push((member, values));
        }
        let longest = fields.iter().map(|(_, values)| values.len()).max().unwrap_or(0);
        let mut objects = Vec::new();
        for pick in 0..longest.max(2) {
            let parts: Vec<String> = fields
                .iter()
                .enumerate()
                .map(|(idx, (key, values))| (key, &values[(pick + idx) % values.len()]))
                .filter(|(_, value)| value.as_str() != "undefined")
                .map(|(key, value)| format!("{key}: {value}"))
                .collect();
            let object =
                if parts.is_empty() { "{} as any".to_owned() } else { format!("{{ {} }} as any", parts.join(", ")) };
            if !objects.contains(&object) {
                objects.push(object);
            }
        }
        objects
    }

    /// The declared type of `member` in `ty` (an interface with what it extends, a type alias, an object type,
    /// the first part of a union that has it), and whether it is optional.
    fn ts_member_type(&self, ty: &str, member: &str, depth: usize) -> Option<(String, bool)> {
        let ty = ty.trim();
        if depth > 4 {
            return None;
        }
        let parts = split_union(ty);
        if parts.len() > 1 {
            return parts.iter().find_map(|part| self.ts_member_type(part, member, depth + 1));
        }
        if ty.starts_with('{') && ty.ends_with('}') {
            return member_of(&ty[1..ty.len() - 1], member);
        }
        let (name, arguments) = name_and_arguments(ty);
        match self.ts_definitions(name).into_iter().next()? {
            TsDefinition::Alias { value, parameters } => {
                self.ts_member_type(&bind(&parameters, &arguments, &value).0, member, depth + 1)
            }
            TsDefinition::Object { members, parameters, extends } => {
                if let Some((found, optional)) = member_of(&members, member) {
                    return Some((bind(&parameters, &arguments, &found).0, optional));
                }
                extends
                    .iter()
                    .find_map(|base| self.ts_member_type(&bind(&parameters, &arguments, base).0, member, depth + 1))
            }
            TsDefinition::Class { members, parameters, .. } => {
                member_of(&members, member).map(|(found, optional)| (bind(&parameters, &arguments, &found).0, optional))
            }
        }
    }
}

/// The declared type of `member` among an object type's members (`key?: T;`), and whether it is optional.
fn member_of(members: &str, member: &str) -> Option<(String, bool)> {
    let members = without_comments(members);
    split_members(&members).into_iter().find_map(|declared| {
        let (key, ty, optional) = member_parts(declared)?;
        (key == member).then(|| (ty.trim().to_owned(), optional))
    })
}

/// A member declaration's key (without `readonly` and `?`), type and whether it is optional: `readonly a?: T`
/// → (`a`, ` T`, true). `None` without a `:`; a method `run(): T` comes back keyed `run()`, which callers refuse.
fn member_parts(member: &str) -> Option<(&str, &str, bool)> {
    let (key, ty) = member.split_once(':')?;
    let key = key.trim().trim_start_matches("readonly ").trim();
    Some(match key.strip_suffix('?') {
        Some(key) => (key.trim(), ty, true),
        None => (key, ty, false),
    })
}

/// Values of `any`, `unknown` or an unconstrained type parameter: one or two of each kind.
/// What an `any` argument of a returned function is given: numbers and a string, the values such functions
/// (composed, curried, bound) most often compute with.
const RETURNED_ANY: [&str; 3] = ["1", "2", "\"a\""];

pub const ANY_VALUES: [&str; 14] =
    ["undefined", "null", "0", "1", "-1", "\"\"", "\"a\"", "true", "false", "[]", "[1, 2]", "{}", "{ a: 1 }", "NaN"];

enum TsDefinition {
    /// A type alias: its value and type parameters (name, default).
    Alias { value: String, parameters: Vec<(String, Option<String>)> },
    /// An interface: its members, type parameters and the types it extends.
    Object { members: String, parameters: Vec<(String, Option<String>)>, extends: Vec<String> },
    /// A class: its constructor's parameter types (`Some(vec![])` for none; `None` when one is not plain), its
    /// typed fields and methods as an object type's members (`state: State<T>;`, `run: () => void;`), and its
    /// type parameters.
    Class { constructor: Option<Vec<String>>, members: String, parameters: Vec<(String, Option<String>)> },
}

impl Sources {
    /// The type aliases, interfaces and classes of the project named `name`.
    fn ts_definitions(&self, name: &str) -> Vec<TsDefinition> {
        self.collect(|node, text| {
            let named = node.child_by_field_name("name").is_some_and(|found| &text[found.byte_range()] == name);
            if !named {
                return None;
            }
            let parameters = || declared_type_parameters(node, text);
            match node.kind() {
                "type_alias_declaration" => {
                    let value = node.child_by_field_name("value")?;
                    Some(TsDefinition::Alias { value: text[value.byte_range()].to_owned(), parameters: parameters() })
                }
                "interface_declaration" => {
                    let body = node.child_by_field_name("body")?;
                    let inner = &text[body.byte_range()];
                    let mut cursor = node.walk();
                    let extends = node
                        .named_children(&mut cursor)
                        .filter(|child| child.kind() == "extends_type_clause")
                        .flat_map(|clause| {
                            let mut cursor = clause.walk();
                            clause
                                .named_children(&mut cursor)
                                .map(|base| text[base.byte_range()].to_owned())
                                .collect::<Vec<_>>()
                        })
                        .collect();
                    let members = inner[1..inner.len().saturating_sub(1)].to_owned();
                    Some(TsDefinition::Object { members, parameters: parameters(), extends })
                }
                "class_declaration" | "abstract_class_declaration" => Some(TsDefinition::Class {
                    constructor: class_constructor(node, text),
                    members: class_members(node, text),
                    parameters: parameters(),
                }),
                _ => None,
            }
        })
    }
}

/// The type parameters a declaration names, with their defaults (`<T, U = unknown>`).
fn declared_type_parameters(node: Node, text: &str) -> Vec<(String, Option<String>)> {
    let Some(list) = node.child_by_field_name("type_parameters") else { return Vec::new() };
    let mut cursor = list.walk();
    list.named_children(&mut cursor)
        .filter(|parameter| parameter.kind() == "type_parameter")
        .filter_map(|parameter| {
            let name = text[parameter.child_by_field_name("name")?.byte_range()].to_owned();
            let default = parameter
                .child_by_field_name("value")
                .map(|value| text[value.byte_range()].trim_start_matches('=').trim().to_owned());
            Some((name, default))
        })
        .collect()
}

/// A generic type's name and type arguments: `Options<any, string>` → `Options`, [`any`, `string`].
fn name_and_arguments(ty: &str) -> (&str, Vec<String>) {
    let ty = ty.trim();
    let name = ty.split('<').next().unwrap_or(ty).trim();
    (name, ty.strip_prefix(name).and_then(type_arguments).unwrap_or_default())
}

/// `text` with each declared type parameter replaced by its argument, else its default; the parameters left
/// with neither.
fn bind(declared: &[(String, Option<String>)], arguments: &[String], text: &str) -> (String, Vec<String>) {
    let mut text = text.to_owned();
    let mut unbound = Vec::new();
    for (idx, (parameter, default)) in declared.iter().enumerate() {
        match arguments.get(idx).or(default.as_ref()) {
            Some(argument) => text = replace_word(&text, parameter, argument),
            None => unbound.push(parameter.clone()),
        }
    }
    (text, unbound)
}

/// The type arguments of `<A, B<C>>` (what follows a generic type's name), split at the top level.
fn type_arguments(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('<')?.strip_suffix('>')?;
    Some(split_top_level(inner, &[',']).into_iter().map(str::to_owned).collect())
}

/// `text` with every whole-word `word` (an identifier) replaced by `with`.
fn replace_word(text: &str, word: &str, with: &str) -> String {
    let is_ident = |ch: char| ch.is_alphanumeric() || ch == '_' || ch == '$';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + word.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(is_ident) || after.is_some_and(is_ident) {
            out.push_str(word);
        } else {
            out.push_str(with);
        }
        rest = &rest[at + word.len()..];
    }
    out.push_str(rest);
    out
}

/// The parameter types of a class's constructor (none declared: no parameters).
fn class_constructor(class: Node, text: &str) -> Option<Vec<String>> {
    let body = class.child_by_field_name("body")?;
    let mut cursor = body.walk();
    let constructor = body.named_children(&mut cursor).find(|member| {
        member.kind() == "method_definition"
            && member.child_by_field_name("name").is_some_and(|name| &text[name.byte_range()] == "constructor")
    });
    let Some(constructor) = constructor else { return Some(Vec::new()) };
    let list = constructor.child_by_field_name("parameters")?;
    let mut cursor = list.walk();
    let mut types = Vec::new();
    for parameter in list.named_children(&mut cursor) {
        match parameter.kind() {
            "required_parameter" => {
                let ty = parameter.child_by_field_name("type")?;
                types.push(text[ty.byte_range()].trim_start_matches(':').trim().to_owned());
            }
            "optional_parameter" => {}
            _ => return None,
        }
    }
    Some(types)
}

/// An indexed access type's object type and member: `Item['key']` → (`Item`, `key`); `None` for another type
/// (an array `T[]`, a lookup by a type `T[K]`).
fn indexed_access(ty: &str) -> Option<(&str, &str)> {
    let inner = ty.strip_suffix("']").or_else(|| ty.strip_suffix("\"]"))?;
    let open = at_depth(ty).filter(|(_, ch, depth)| *ch == '[' && *depth == 1).map(|(at, ..)| at).last()?;
    let member = inner.get(open + 1..)?.strip_prefix(['\'', '"'])?;
    let object = ty[..open].trim();
    let plain = |text: &str| !text.is_empty() && text.chars().all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$');
    (plain(member) && !object.is_empty()).then_some((object, member))
}

/// A class's typed fields and methods written as an object type's members, for the members a function reads
/// off an instance: `state: State<T>;` (`?` kept), a method `run(a: A): R` as `run: (a: A) => R;`, a getter
/// `get size(): number` as `size: number;`. Static members, and members without a declared type, are left out.
fn class_members(class: Node, text: &str) -> String {
    let Some(body) = class.child_by_field_name("body") else { return String::new() };
    let mut out = String::new();
    let mut cursor = body.walk();
    for member in body.named_children(&mut cursor) {
        let Some(name) = member.child_by_field_name("name") else { continue };
        let key = &text[name.byte_range()];
        let mut tokens = member.walk();
        let words: Vec<&str> = member.children(&mut tokens).map(|child| &text[child.byte_range()]).collect();
        if words.contains(&"static")
            || key == "constructor"
            || !key.chars().all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$')
        {
            continue;
        }
        let optional = if words.contains(&"?") { "?" } else { "" };
        match member.kind() {
            "public_field_definition" => {
                let Some(ty) = member.child_by_field_name("type") else { continue };
                let ty = text[ty.byte_range()].trim_start_matches(':').trim();
                out.push_str(&format!("{key}{optional}: {ty};\n"));
            }
            "method_definition" | "method_signature" | "abstract_method_signature" => {
                let Some(returned) = member.child_by_field_name("return_type") else { continue };
                let returned = text[returned.byte_range()].trim_start_matches(':').trim();
                if words.contains(&"get") {
                    out.push_str(&format!("{key}: {returned};\n"));
                } else if !words.contains(&"set") {
                    let Some(parameters) = member.child_by_field_name("parameters") else { continue };
                    out.push_str(&format!("{key}{optional}: {} => {returned};\n", &text[parameters.byte_range()]));
                }
            }
            _ => {}
        }
    }
    out
}

/// A type's text with its `//` and `/* */` comments blanked out (string literal types kept as written): a
/// comment between an interface's members may hold commas and brackets of its own.
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(ch) = chars.next() {
        match (quote, ch) {
            (Some(open), _) => {
                out.push(ch);
                if ch == '\\' {
                    out.extend(chars.next());
                } else if ch == open {
                    quote = None;
                }
            }
            (None, '"' | '\'' | '`') => {
                quote = Some(ch);
                out.push(ch);
            }
            (None, '/') if chars.peek() == Some(&'/') => while chars.next_if(|next| *next != '\n').is_some() {},
            (None, '/') if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for next in chars.by_ref() {
                    if last == '*' && next == '/' {
                        break;
                    }
                    last = next;
                }
                out.push(' ');
            }
            _ => out.push(ch),
        }
    }
    out
}

/// The members of an object type's body, split at top-level `;`, `,` and line ends.
fn split_members(body: &str) -> Vec<&str> {
    let parts = split_top_level(body, &[';', ',', '\n']);
    parts
        .into_iter()
        .filter(|part| !part.starts_with("//") && !part.starts_with("/*") && !part.starts_with('*'))
        .collect()
}

/// The parts of `text` between the separators that stand outside every bracket and generic, trimmed, empty
/// ones left out.
fn split_top_level<'t>(text: &'t str, separators: &[char]) -> Vec<&'t str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (at, ch, depth) in at_depth(text) {
        if depth == 0 && separators.contains(&ch) {
            parts.push(text[start..at].trim());
            start = at + ch.len_utf8();
        }
    }
    parts.push(text[start..].trim());
    parts.retain(|part| !part.is_empty());
    parts
}

/// The depth-0 positions of `ty`'s characters: `(at, ch, depth)`, brackets and generics counted.
fn at_depth(ty: &str) -> impl Iterator<Item = (usize, char, i32)> + '_ {
    let mut depth = 0i32;
    ty.char_indices().map(move |(at, ch)| {
        match ch {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            '>' if !ty[..at].ends_with('=') => depth -= 1,
            _ => {}
        }
        (at, ch, depth)
    })
}

/// The last branch of a conditional type (`A extends B ? X : Y` → `Y`), where `ty` is one.
fn conditional_default(ty: &str) -> Option<&str> {
    let question = at_depth(ty).find(|(_, ch, depth)| *ch == '?' && *depth == 0)?.0;
    if !ty[..question].contains(" extends ") || ty[question + 1..].starts_with(['.', '?']) {
        return None;
    }
    let colon = at_depth(ty).filter(|(at, ch, depth)| *ch == ':' && *depth == 0 && *at > question).last()?.0;
    Some(ty[colon + 1..].trim())
}

/// The return type of a function type (`(a: A) => R` → `R`), where `ty` is one.
fn function_return(ty: &str) -> Option<&str> {
    if !ty.starts_with('(') {
        return None;
    }
    let close = at_depth(ty).find(|(_, ch, depth)| *ch == ')' && *depth == 0)?.0;
    let rest = ty[close + 1..].trim_start().strip_prefix("=>")?;
    Some(rest.trim())
}

/// How many parameters a function type's parameter list (`(a: A, b?: B)`) names.
fn split_arguments_count(parameters: &str) -> usize {
    let inner = parameters.trim().strip_prefix('(').and_then(|rest| rest.strip_suffix(')')).unwrap_or("");
    // A trailing comma (one parameter a line) ends the list, it does not start another.
    let inner = inner.trim().trim_end_matches(',');
    if inner.trim().is_empty() {
        return 0;
    }
    1 + at_depth(inner).filter(|(_, ch, depth)| *ch == ',' && *depth == 0).count()
}

/// The top-level parts of a union type.
fn split_union(ty: &str) -> Vec<&str> {
    split_top_level(ty, &['|'])
}
