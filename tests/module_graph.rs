//! The crate reads top-down: `src/lib.rs` lists its modules in layers, and every file imports
//! only from its own layer or the layers below it, with no import cycle between files.
//!
//! The graph comes from the source text: every `crate::a::b` and `super::a` path outside
//! comments and string literals (so `use` declarations and paths written inline alike), resolved
//! to the file that defines the module. A file reading its own ancestors' items (`super::Item`
//! in a child of a `mod.rs`) stays inside one module and is not an edge; test code
//! (`#[cfg(test)]` modules and `tests.rs` files) is left out, since tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`mcn::plan`) of every source file under `src/`, with the file's text.
fn source_files() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let module = module_of(&root, &path);
                if module.rsplit("::").next() == Some("tests") || module == "main" {
                    continue;
                }
                files.insert(module, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    files
}

fn module_of(root: &Path, file: &Path) -> String {
    let relative: PathBuf = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts.join("::")
}

/// The text without comments, string and char literals, and `#[cfg(test)]` items.
fn code_only(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'r' if bytes.get(i + 1) == Some(&b'#') || bytes.get(i + 1) == Some(&b'"') => {
                // A raw string: r"..." or r#"..."#.
                let mut hashes = 0;
                let mut j = i + 1;
                while bytes.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if bytes.get(j) != Some(&b'"') || is_ident_byte(bytes.get(i.wrapping_sub(1))) {
                    out.push('r');
                    i += 1;
                    continue;
                }
                let closing: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                j += 1;
                while j < bytes.len() && !bytes[j..].starts_with(&closing) {
                    j += 1;
                }
                i = j + closing.len();
                out.push_str("\"\"");
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            b'\'' if bytes.get(i + 2) == Some(&b'\'') || bytes.get(i + 1) == Some(&b'\\') => {
                // A char literal ('x', '\n', '\''); a lifetime has no closing quote.
                i += 1;
                while i < bytes.len() && bytes[i] != b'\'' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("' '");
            }
            byte => {
                out.push(byte as char);
                i += 1;
            }
        }
    }
    without_test_items(&out)
}

fn is_ident_byte(byte: Option<&u8>) -> bool {
    byte.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// Drops every item annotated `#[cfg(test)]` (a `mod tests { ... }` block or `mod tests;`).
fn without_test_items(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let brace = item.find('{');
        let semicolon = item.find(';');
        rest = match (brace, semicolon) {
            (Some(b), Some(s)) if s < b => &item[s + 1..],
            (Some(b), _) => {
                let mut depth = 0;
                let mut end = item.len();
                for (k, c) in item[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                &item[end..]
            }
            (None, Some(s)) => &item[s + 1..],
            (None, None) => "",
        };
    }
    out.push_str(rest);
    out
}

/// The files `module` refers to through `crate::` and `super::` paths.
fn references(module: &str, code: &str, files: &BTreeSet<String>) -> BTreeSet<String> {
    let path_re = regex::Regex::new(r"\b(crate|super)((?:::(?:super|[a-z_][a-z0-9_]*))+)").unwrap();
    let own: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
    // `super` of a file `a/b.rs` (module a::b) is `a`; of `a/b/mod.rs` (also a::b) it is `a` too.
    let resolve = |head: &str, tail: &str| -> Option<String> {
        let mut base: Vec<&str> = if head == "crate" {
            Vec::new()
        } else {
            own[..own.len().saturating_sub(1)].to_vec()
        };
        let mut segments = tail.split("::").filter(|s| !s.is_empty()).peekable();
        while segments.peek() == Some(&"super") {
            segments.next();
            base.pop();
        }
        base.extend(segments);
        // The longest prefix that names a file.
        while !base.is_empty() {
            let candidate = base.join("::");
            if files.contains(&candidate) {
                return Some(candidate);
            }
            base.pop();
        }
        None
    };
    let mut found = BTreeSet::new();
    for captures in path_re.captures_iter(code) {
        if let Some(target) = resolve(&captures[1], &captures[2]) {
            found.insert(target);
        }
    }
    // `use super::{a, b::c}` and `use crate::{a, b}`: each member of the group.
    let member_re =
        regex::Regex::new(r"\b(crate|super)((?:::(?:super|[a-z_][a-z0-9_]*))*)::\{([^}]*)\}")
            .unwrap();
    for captures in member_re.captures_iter(code) {
        for member in captures[3].split(',') {
            let member = member.trim().split("::").next().unwrap_or_default().trim();
            if member
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_lowercase())
                && member != "self"
            {
                let tail = format!("{}::{member}", &captures[2]);
                if let Some(target) = resolve(&captures[1], &tail) {
                    found.insert(target);
                }
            }
        }
    }
    // A file reading its ancestors' items stays inside its module.
    found.retain(|target| {
        target != module && !module.starts_with(&format!("{target}::")) && !target.is_empty()
    });
    found
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = source_files();
    let names: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(module, text)| {
            let code = code_only(text);
            (module.clone(), references(module, &code, &names))
        })
        .collect()
}

/// The layers `src/lib.rs` declares, top first: the lines `//! N. [`a`], [`b`]: ...` under
/// its `# Layers` heading.
fn declared_layers() -> Vec<Vec<String>> {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let section = lib
        .split("//! # Layers")
        .nth(1)
        .expect("src/lib.rs has a `# Layers` section");
    let item = regex::Regex::new(r"^//! *\d+\. (.*)$").unwrap();
    let name = regex::Regex::new(r"\[`([a-z_]+)`\]").unwrap();
    let mut layers = Vec::new();
    for line in section.lines().skip(1) {
        if !line.starts_with("//!") {
            break;
        }
        if line.starts_with("//! #") {
            break;
        }
        if let Some(captures) = item.captures(line) {
            let head = captures[1].split(':').next().unwrap_or_default();
            layers.push(name.captures_iter(head).map(|c| c[1].to_string()).collect());
        }
    }
    layers
}

#[test]
fn every_module_is_in_exactly_one_layer() {
    let layers = declared_layers();
    let top_level: BTreeSet<String> = graph()
        .keys()
        .filter_map(|m| {
            m.split("::")
                .next()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        })
        .collect();
    let mut declared = BTreeSet::new();
    for layer in &layers {
        for module in layer {
            assert!(declared.insert(module.clone()), "{module} is in two layers");
        }
    }
    assert_eq!(
        declared, top_level,
        "src/lib.rs's layers name every top-level module, no more"
    );
}

#[test]
fn no_module_imports_from_a_layer_above_it() {
    let layers = declared_layers();
    let layer_of = |module: &str| {
        let top = module.split("::").next().unwrap_or_default();
        layers.iter().position(|l| l.iter().any(|m| m == top))
    };
    let mut upward = Vec::new();
    for (from, targets) in graph() {
        let Some(from_layer) = layer_of(&from) else {
            continue;
        };
        for to in targets {
            if let Some(to_layer) = layer_of(&to) {
                // Layers are listed top first: a lower index is a higher layer.
                if to_layer < from_layer {
                    upward.push(format!("{from} -> {to}"));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports from a layer above:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_import_cycle_between_files() {
    let graph = graph();
    let cycles = strongly_connected(&graph);
    assert!(
        cycles.is_empty(),
        "import cycles between files:\n{}",
        cycles
            .iter()
            .map(|c| c.join(" <-> "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The components of more than one file (Tarjan).
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        state.index.insert(node, state.next);
        state.low.insert(node, state.next);
        state.next += 1;
        state.stack.push(node);
        state.on_stack.insert(node);
        let graph = state.graph;
        for next in graph.get(node).into_iter().flatten() {
            let next = next.as_str();
            if !state.index.contains_key(next) {
                visit(state, next);
                let low = state.low[node].min(state.low[next]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(next) {
                let low = state.low[node].min(state.index[next]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member.to_string());
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found
}

#[test]
fn the_checker_sees_imports_through_use_groups_super_and_inline_paths() {
    let files: BTreeSet<String> = ["a", "a::b", "a::c", "d", "d::e"]
        .into_iter()
        .map(str::to_string)
        .collect();
    let code = code_only(
        "use super::{b::X, c};\n// use crate::d;\nlet s = \"crate::d::e\";\nfn f() { crate::d::e::g(); }\n#[cfg(test)]\nmod tests { use crate::d; }\n",
    );
    let found = references("a::x", &code, &files);
    let expected: BTreeSet<String> = ["a::b", "a::c", "d::e"]
        .into_iter()
        .map(str::to_string)
        .collect();
    assert_eq!(found, expected);
    // A child reading its parent's items is inside the module.
    let found = references("a::b", &code_only("use super::Thing;"), &files);
    assert!(found.is_empty(), "{found:?}");
    // Cycles are found, chains are not.
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    graph.entry("x".into()).or_default().insert("y".into());
    graph.entry("y".into()).or_default().insert("z".into());
    assert!(strongly_connected(&graph).is_empty());
    graph.entry("z".into()).or_default().insert("x".into());
    assert_eq!(
        strongly_connected(&graph),
        vec![vec!["x".to_string(), "y".into(), "z".into()]]
    );
}
