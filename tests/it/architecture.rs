//! The code's shape, checked by reading `src/`: the rules ARCHITECTURE.md states hold,
//! and a change that breaks one fails here with the file and line.
//!
//! - modules import each other in one direction only (no cycle among `crate::` paths),
//!   and only modules of the layers below their own (`LAYERS`);
//! - the engine files' `impl Store` methods call each other in one direction only;
//! - quads are built, and vocabulary terms named, only in `src/rdf/` (and `vocab.rs`);
//!   the storage seam may rebuild the quads a store answers, but names no term;
//! - only the storage seam (`src/storage/`) names `oxigraph::store::Store`;
//! - no function is longer than 120 lines unless a `// Long:` comment above it says why.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `src/`, with its text (comments and string contents kept:
/// each check strips what it must).
fn sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    walk(&root.join("src"), &mut out);
    out.into_iter()
        .map(|(p, t)| (p.strip_prefix(root).unwrap().to_path_buf(), t))
        .collect()
}

/// `text` without `//` comments and without the contents of string literals, line
/// breaks kept (so line numbers still match).
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_string = false;
        let mut escaped = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if in_string {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    in_string = false;
                    out.push('"');
                }
                continue;
            }
            if c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            // A char literal such as '"' is not a string.
            if c == '\'' {
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with("\"'") || rest.starts_with("\\\"'") {
                    out.push_str("'?'");
                    for _ in 0..rest.find('\'').unwrap() + 1 {
                        chars.next();
                    }
                    continue;
                }
            }
            if c == '"' {
                in_string = true;
            }
            out.push(c);
        }
        out.push('\n');
    }
    out
}

/// The top-level module a file belongs to: `src/io/graphs.rs` → `io`.
fn module_of(path: &Path) -> String {
    let rel = path.strip_prefix("src").unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_str()
        .unwrap();
    first.trim_end_matches(".rs").to_string()
}

/// Words made of `[A-Za-z0-9_]` that directly follow `prefix` in `code`.
fn words_after<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    words_and_next(code, prefix)
        .into_iter()
        .map(|(w, _)| w)
        .collect()
}

/// Each word after `prefix`, with the character after it.
fn words_and_next<'a>(code: &'a str, prefix: &str) -> Vec<(&'a str, Option<char>)> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        out.push((&rest[..end], rest[end..].chars().next()));
    }
    out
}

/// A cycle in `graph`, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

/// What `src/lib.rs` re-exports at the crate root, by name, with the module it comes
/// from (`binding_value` → `query`).
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for statement in code_only(lib).split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, names)) = path.split_once("::") else {
            continue;
        };
        for name in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if !name.is_empty() {
                out.insert(name.to_string(), module.to_string());
            }
        }
    }
    out
}

/// The modules of `src/` and, for each, the modules it imports (`crate::` paths, an
/// item of the root's `pub use` list counted as its module's).
fn module_graph(files: &[(PathBuf, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files.iter().map(|(p, _)| module_of(p)).collect();
    let lib = &files
        .iter()
        .find(|(p, _)| p == Path::new("src/lib.rs"))
        .unwrap()
        .1;
    let exports = root_exports(lib);
    assert_eq!(
        exports.get("binding_value").map(String::as_str),
        Some("query")
    );
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let module = module_of(path);
        // The crate roots and the binary only assemble and use the library.
        if ["lib", "main", "cli"].contains(&module.as_str()) {
            continue;
        }
        let code = code_only(text);
        let deps = graph.entry(module.clone()).or_default();
        for used in words_after(&code, "crate::") {
            let target = if modules.contains(used) {
                used.to_string()
            } else if let Some(from) = exports.get(used) {
                from.clone()
            } else if lib.contains(&format!(" {used}:")) {
                continue; // an item of lib.rs itself (`ONTOLOGY`)
            } else {
                panic!(
                    "{} uses crate::{used}, which the scan cannot place",
                    path.display()
                )
            };
            if target != module {
                deps.insert(target);
            }
        }
    }
    assert!(
        graph["rdf"].contains("storage") && graph["store"].contains("rdf"),
        "the scan misses imports: {graph:?}"
    );
    graph
}

#[test]
fn modules_import_each_other_in_one_direction() {
    let graph = module_graph(&sources());
    if let Some(cycle) = find_cycle(&graph) {
        panic!("import cycle among src/ modules: {}", cycle.join(" -> "));
    }
}

/// The layers of `src/`, first to last, as ARCHITECTURE.md's table orders them: a
/// module imports only modules of earlier layers (the crate roots and the binary,
/// which only assemble and use the library, are left out).
const LAYERS: &[&[&str]] = &[
    &["error", "vocab", "secrets"],
    &["tls"],
    &["model"],
    &["storage"],
    &["rdf"],
    &["store"],
    &["query"],
    &["engine"],
    &["io"],
    &["whatif"],
    &["proxy"],
    &["experiment"],
    &["html"],
    &["mcp"],
    &["server"],
];

/// Every import of a module from its own layer or a later one, said as a sentence.
fn layer_breaks(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let layer = |module: &str| LAYERS.iter().position(|l| l.contains(&module));
    let mut breaks = Vec::new();
    for (module, deps) in graph {
        let Some(here) = layer(module) else {
            breaks.push(format!("src/{module} is in no layer: add it to LAYERS"));
            continue;
        };
        for dep in deps {
            match layer(dep) {
                Some(there) if there < here => {}
                _ => breaks.push(format!("{module} imports {dep}, which is not below it")),
            }
        }
    }
    breaks
}

#[test]
fn modules_import_only_the_layers_below_them() {
    let mut graph = module_graph(&sources());
    let breaks = layer_breaks(&graph);
    assert!(breaks.is_empty(), "{}", breaks.join("; "));
    // The check sees an upward import, and an import inside one layer.
    graph.get_mut("model").unwrap().insert("store".into());
    graph.get_mut("error").unwrap().insert("vocab".into());
    assert_eq!(
        layer_breaks(&graph),
        [
            "error imports vocab, which is not below it",
            "model imports store, which is not below it"
        ]
    );
}

/// The methods each file adds to `Store`, by name.
fn store_methods(files: &[(PathBuf, String)]) -> BTreeMap<String, PathBuf> {
    let mut defined = BTreeMap::new();
    for (path, text) in files {
        let code = code_only(text);
        let mut inside = false;
        for line in code.lines() {
            if line.starts_with("impl Store {") || line.starts_with("impl<'s> Store {") {
                inside = true;
            } else if inside && line == "}" {
                inside = false;
            } else if inside {
                let trimmed = line.trim_start();
                let indent = line.len() - trimmed.len();
                let signature = trimmed
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub(super) ")
                    .trim_start_matches("pub ");
                if indent == 4 {
                    if let Some(name) = words_after(signature, "fn ").first() {
                        let earlier = defined.insert(name.to_string(), path.clone());
                        assert!(
                            earlier.is_none(),
                            "Store::{name} is defined in {} and {}",
                            earlier.unwrap().display(),
                            path.display()
                        );
                    }
                }
            }
        }
    }
    defined
}

#[test]
fn engine_files_call_each_other_in_one_direction() {
    let files = sources();
    let defined = store_methods(&files);
    assert!(
        defined.len() > 50 && defined.contains_key("replay") && defined.contains_key("fork"),
        "the scan misses Store methods: {defined:?}"
    );
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut why: BTreeMap<(String, String), String> = BTreeMap::new();
    for (path, text) in &files {
        if path.starts_with("src/cli") || path.starts_with("src/server") {
            continue;
        }
        let code = code_only(text);
        let here = path.display().to_string();
        // Calls on a store: `self.` inside `impl Store`, and the stores other types hold.
        for receiver in ["self.", "store.", "scratch."] {
            for (name, next) in words_and_next(&code, receiver) {
                let Some(owner) = defined.get(name) else {
                    continue;
                };
                let owner = owner.display().to_string();
                if owner != here && next == Some('(') {
                    graph.entry(here.clone()).or_default().insert(owner.clone());
                    why.insert((here.clone(), owner), name.to_string());
                }
            }
        }
    }
    assert!(
        graph["src/engine/write.rs"].contains("src/engine/read.rs"),
        "the scan misses calls: {graph:?}"
    );
    if let Some(cycle) = find_cycle(&graph) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let name = &why[&(w[0].clone(), w[1].clone())];
                format!("{} calls {name} of {}", w[0], w[1])
            })
            .collect();
        panic!(
            "engine files call each other both ways: {}",
            steps.join("; ")
        );
    }
}

#[test]
fn quads_and_terms_are_made_only_in_src_rdf() {
    let vocabularies = ["ft::", "prov::", "dcterms::", "rdf::", "rdfs::", "xsd::"];
    let builders = ["Quad::new", "QuadRef::new", "Triple::new"];
    let mut found = Vec::new();
    let mut seen_in_rdf = 0;
    for (path, text) in sources() {
        let in_rdf = path.starts_with("src/rdf") || path == Path::new("src/vocab.rs");
        // A backend turns a store's answers back into quads; it names no term.
        let in_storage = path.starts_with("src/storage");
        for (n, line) in code_only(&text).lines().enumerate() {
            let mut hits: Vec<String> = Vec::new();
            for vocabulary in vocabularies {
                for word in words_after(line, vocabulary) {
                    // Constants only (`ft::BRANCH`); `NS` names a namespace, not a term.
                    let is_constant = !word.is_empty()
                        && word.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                        && word != "NS"
                        && !line.contains(&format!("crate::{vocabulary}{word}"));
                    if is_constant {
                        hits.push(format!("{vocabulary}{word}"));
                    }
                }
            }
            for builder in builders {
                if line.contains(builder) && !in_storage {
                    hits.push(builder.to_string());
                }
            }
            if in_rdf {
                seen_in_rdf += hits.len();
            } else {
                for hit in hits {
                    found.push(format!("{}:{}: {hit}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(seen_in_rdf > 100, "the scan misses terms in src/rdf/");
    assert!(
        found.is_empty(),
        "quads or vocabulary terms outside src/rdf/:\n{}",
        found.join("\n")
    );
}

#[test]
fn long_functions_say_why() {
    const LIMIT: usize = 120;
    let mut long = Vec::new();
    let mut measured = 0;
    for (path, text) in sources() {
        let code = code_only(&text);
        let lines: Vec<&str> = code.lines().collect();
        let original: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            let signature = trimmed
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub(super) ")
                .trim_start_matches("pub ")
                .trim_start_matches("async ")
                .trim_start_matches("const ");
            if !signature.starts_with("fn ") {
                continue;
            }
            // A body ends at the first `}` at the signature's indentation.
            let close = format!("{indent}}}");
            let Some(end) = lines[i + 1..].iter().position(|l| *l == close) else {
                continue;
            };
            measured += 1;
            let length = end + 2;
            if length <= LIMIT {
                continue;
            }
            let comment_above = original[..i]
                .iter()
                .rev()
                .take_while(|l| {
                    let t = l.trim_start();
                    t.starts_with("//") || t.starts_with("#[")
                })
                .any(|l| l.trim_start().starts_with("// Long:"));
            if !comment_above {
                long.push(format!("{}:{} ({length} lines)", path.display(), i + 1));
            }
        }
    }
    assert!(measured > 300, "the scan misses functions ({measured})");
    assert!(
        long.is_empty(),
        "functions over {LIMIT} lines without a `// Long:` comment saying why:\n{}",
        long.join("\n")
    );
}

#[test]
fn only_the_storage_seam_names_the_oxigraph_store() {
    let mut found = Vec::new();
    let mut in_storage = 0;
    for (path, text) in sources() {
        for (n, line) in code_only(&text).lines().enumerate() {
            if !line.contains("oxigraph::store::Store") || line.contains("StorageError") {
                continue;
            }
            // The public escape hatch to an embedded store is the one exception.
            let escape_hatch = line.contains("pub fn oxigraph(&self)");
            if path.starts_with("src/storage") {
                in_storage += 1;
            } else if !escape_hatch {
                found.push(format!("{}:{}", path.display(), n + 1));
            }
        }
    }
    assert!(in_storage > 0, "the scan misses the seam itself");
    assert!(
        found.is_empty(),
        "oxigraph::store::Store named outside src/storage/: {found:?}"
    );
}

/// A file's module path: `src/io/transcripts/family.rs` → `io::transcripts::family`,
/// `src/io/mod.rs` → `io`, `src/lib.rs` → `` (the crate).
fn file_module(path: &Path) -> String {
    let rel = path.strip_prefix("src").unwrap().with_extension("");
    let mut parts: Vec<&str> = rel.iter().map(|p| p.to_str().unwrap()).collect();
    if matches!(parts.last(), Some(&"mod") | Some(&"lib") | Some(&"main")) {
        parts.pop();
    }
    parts.join("::")
}

/// The paths `code` names, as written: each `crate::…`, `super::…` and `self::…` path,
/// and in a folder's `mod.rs` each `child::…` path, with a `{…}` group spread into one
/// path per member. Re-exports (`pub use`) and `mod` lines are left out: a folder's
/// `mod.rs` re-exporting its files does not depend on them.
fn named_paths(code: &str, children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut kept = String::new();
    for statement in code.split_inclusive([';', '{', '}']) {
        let t = statement.trim_start();
        let is_reexport = ["pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .any(|p| t.starts_with(p));
        if !is_reexport && !t.starts_with("mod ") && !t.contains(" mod ") {
            kept.push_str(statement);
        }
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let bytes: Vec<char> = kept.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if !word(bytes[i]) || (i > 0 && (word(bytes[i - 1]) || bytes[i - 1] == ':')) {
            i += 1;
            continue;
        }
        // A path: words joined by `::`, maybe ending in a `{…}` group.
        let mut segments = Vec::new();
        let mut j = i;
        loop {
            let start = j;
            while j < bytes.len() && word(bytes[j]) {
                j += 1;
            }
            segments.push(bytes[start..j].iter().collect::<String>());
            if bytes[j..].starts_with(&[':', ':']) && j + 2 < bytes.len() {
                j += 2;
                if bytes[j] == '{' {
                    let close = (j..bytes.len())
                        .scan(0i32, |depth, k| {
                            *depth += match bytes[k] {
                                '{' => 1,
                                '}' => -1,
                                _ => 0,
                            };
                            Some((k, *depth))
                        })
                        .find(|(_, d)| *d == 0)
                        .map_or(bytes.len(), |(k, _)| k);
                    let group: String = bytes[j + 1..close].iter().collect();
                    for member in group.split(',') {
                        let first: String =
                            member.trim().chars().take_while(|c| word(*c)).collect();
                        if !first.is_empty() && first != "self" {
                            let mut path = segments.clone();
                            path.push(first);
                            out.push(path);
                        }
                    }
                    segments.clear();
                    j = close;
                    break;
                }
                continue;
            }
            break;
        }
        let head = segments.first().map(String::as_str);
        if segments.len() > 1
            && (matches!(head, Some("crate" | "super" | "self"))
                || head.is_some_and(|h| children.contains(h)))
        {
            out.push(segments);
        }
        i = j.max(i + 1);
    }
    out
}

/// For every folder of `src/`, which of its files import which others of the folder (a
/// `mod.rs`'s re-exports resolved to the file that defines the item). A folder's
/// `mod.rs` is its entrance: it and the files below it may use each other (it
/// dispatches to them, they share what it holds), so those edges are not counted.
fn file_graph(files: &[(PathBuf, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files.iter().map(|(p, _)| file_module(p)).collect();
    // What each folder's mod.rs re-exports, by item, with the child it comes from.
    let mut reexported: BTreeMap<String, String> = BTreeMap::new();
    for (path, text) in files {
        let here = file_module(path);
        for statement in code_only(text).split(';') {
            let t = statement.trim();
            let Some(rest) = ["pub use ", "pub(crate) use ", "pub(super) use ", "use "]
                .iter()
                .find_map(|p| t.strip_prefix(p))
            else {
                continue;
            };
            let rest = rest.trim_start_matches("self::");
            let Some((child, names)) = rest.split_once("::") else {
                continue;
            };
            let child = format!("{here}::{child}");
            if !modules.contains(&child) || here.is_empty() {
                continue;
            }
            for name in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                if !name.is_empty() && name != "self" {
                    reexported.insert(format!("{here}::{name}"), child.clone());
                }
            }
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let here = file_module(path);
        if here.is_empty() || here == "main" {
            continue;
        }
        let own: Vec<&str> = here.split("::").collect();
        let children: BTreeSet<String> = modules
            .iter()
            .filter_map(|m| m.strip_prefix(&format!("{here}::")))
            .filter(|rest| !rest.contains("::"))
            .map(str::to_string)
            .collect();
        let top = here.split("::").next().unwrap().to_string();
        for segments in named_paths(&code_only(text), &children) {
            // `self` is the file's own module, each `super` one module up, `crate` the
            // root, and a child module's name that child.
            let mut absolute: Vec<String> = own.iter().map(|s| s.to_string()).collect();
            let mut rest = &segments[..];
            match rest[0].as_str() {
                "crate" => {
                    absolute.clear();
                    rest = &rest[1..];
                }
                "self" => rest = &rest[1..],
                _ => {}
            }
            while rest.first().is_some_and(|s| s == "super") {
                absolute.pop();
                rest = &rest[1..];
            }
            absolute.extend(rest.iter().cloned());
            // The longest prefix that is a file, or the file a folder re-exports it from.
            let mut target = None;
            for n in (1..=absolute.len()).rev() {
                let candidate = absolute[..n].join("::");
                if modules.contains(&candidate) {
                    target = Some(
                        absolute
                            .get(n)
                            .and_then(|item| reexported.get(&format!("{candidate}::{item}")))
                            .cloned()
                            .unwrap_or(candidate),
                    );
                    break;
                }
            }
            let Some(target) = target else { continue };
            // A folder's entrance (its mod.rs) and the files inside it are one unit.
            let related = |a: &str, b: &str| a.starts_with(&format!("{b}::"));
            if target != here
                && target.split("::").next() == Some(top.as_str())
                && !related(&here, &target)
                && !related(&target, &here)
            {
                graph.entry(here.clone()).or_default().insert(target);
            }
        }
    }
    graph
}

#[test]
fn files_import_each_other_in_one_direction() {
    let mut graph = file_graph(&sources());
    assert!(
        graph["rdf::turn"].contains("rdf::session")
            && graph["io::transcripts::codex"].contains("io::root"),
        "the scan misses imports between files: {graph:?}"
    );
    // Every circle, each found one broken at its first step to find the next.
    let mut left = graph.clone();
    let mut circles = Vec::new();
    while let Some(cycle) = find_cycle(&left) {
        left.get_mut(&cycle[0]).unwrap().remove(&cycle[1]);
        circles.push(cycle.join(" -> "));
    }
    assert!(
        circles.is_empty(),
        "import circles among the files of src/:\n{}",
        circles.join("\n")
    );
    // The check sees a planted circle: the file turns are made in imports the one
    // sessions are made in, which imports it back.
    graph
        .entry("rdf::session".into())
        .or_default()
        .insert("rdf::turn".into());
    assert!(find_cycle(&graph).is_some());
}

#[test]
fn long_files_say_why() {
    const LIMIT: usize = 1_000;
    let mut long = Vec::new();
    for (path, text) in sources() {
        let lines = text.lines().count();
        let says_why = text
            .lines()
            .take_while(|l| l.starts_with("//!") || l.starts_with("#!") || l.is_empty())
            .any(|l| l.starts_with("//! Long:"));
        if lines > LIMIT && !says_why {
            long.push(format!("{} ({lines} lines)", path.display()));
        }
    }
    assert!(
        long.is_empty(),
        "files over {LIMIT} lines without a `//! Long:` line in their module doc saying why:\n{}",
        long.join("\n")
    );
}

/// Every `.rs` file under `dir` (relative to the crate), sorted.
fn rust_files(dir: &str) -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    walk(&root.join(dir), &mut found);
    let mut out: Vec<String> = found
        .iter()
        .map(|p| p.strip_prefix(root).unwrap().display().to_string())
        .collect();
    out.sort();
    out
}

/// ARCHITECTURE.md names every source and test file, in its folder's row of a table
/// (`` `src/store/tx.rs` ``, or `` `tx.rs` `` in a row that names `` `src/store/` ``),
/// and every path it names exists.
#[test]
fn the_architecture_names_every_file_and_no_stale_path() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with('|')).collect();
    let mut unnamed = Vec::new();
    let files: Vec<String> = rust_files("src")
        .into_iter()
        .chain(rust_files("tests"))
        .collect();
    assert!(files.len() > 100, "the scan misses files: {files:?}");
    for file in &files {
        let (folder, name) = file.rsplit_once('/').unwrap();
        let whole = format!("`{file}`");
        let short = format!("`{name}`");
        let in_row = rows.iter().any(|row| {
            row.contains(&whole) || (row.contains(&format!("`{folder}/`")) && row.contains(&short))
        });
        if !in_row {
            unnamed.push(file.clone());
        }
    }
    assert!(
        unnamed.is_empty(),
        "files ARCHITECTURE.md's tables do not name:\n{}",
        unnamed.join("\n")
    );
    let mut stale = Vec::new();
    for (start, _) in doc.match_indices('`') {
        let rest = &doc[start + 1..];
        let Some(end) = rest.find('`') else { break };
        let path = &rest[..end];
        let named_path = (path.starts_with("src/") || path.starts_with("tests/"))
            && !path.contains(' ')
            && !path.contains('*');
        if named_path && !root.join(path).exists() {
            stale.push(path.to_string());
        }
    }
    stale.sort();
    stale.dedup();
    assert!(
        stale.is_empty(),
        "paths ARCHITECTURE.md names that do not exist: {stale:?}"
    );
}

/// `src/store/mod.rs`'s module doc lists every public and crate-visible method of
/// `Store` with the file that defines it (`` //! - `replay` — engine/read.rs: … ``), so
/// finding one is one hop; a method added, moved or removed changes its line.
#[test]
fn the_store_index_lists_every_method_by_its_file() {
    let files = sources();
    let mut defined = BTreeMap::new();
    for (path, text) in &files {
        let mut inside = false;
        for line in code_only(text).lines() {
            if line.starts_with("impl Store {") {
                inside = true;
            } else if inside && line == "}" {
                inside = false;
            } else if inside {
                let visible = ["    pub fn ", "    pub(crate) fn "]
                    .iter()
                    .find_map(|p| line.strip_prefix(p));
                if let Some(rest) = visible {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    let file = path.strip_prefix("src").unwrap().display().to_string();
                    defined.insert(name, file);
                }
            }
        }
    }
    assert!(defined.len() > 100, "the scan misses methods: {defined:?}");
    let index = &files
        .iter()
        .find(|(p, _)| p == Path::new("src/store/mod.rs"))
        .unwrap()
        .1;
    let mut listed = BTreeMap::new();
    for line in index.lines() {
        let Some(rest) = line.strip_prefix("//! - `") else {
            continue;
        };
        let (name, rest) = rest.split_once('`').unwrap();
        let file = rest.trim_start_matches(" — ").split(':').next().unwrap();
        listed.insert(name.to_string(), file.to_string());
    }
    let mut wrong = Vec::new();
    for (name, file) in &defined {
        match listed.get(name) {
            Some(at) if at == file => {}
            Some(at) => wrong.push(format!("{name} is in {file}, listed in {at}")),
            None => wrong.push(format!("{name} ({file}) is not listed")),
        }
    }
    for name in listed.keys().filter(|n| !defined.contains_key(*n)) {
        wrong.push(format!("{name} is listed but defined nowhere"));
    }
    assert!(
        wrong.is_empty(),
        "src/store/mod.rs's index of Store methods:\n{}",
        wrong.join("\n")
    );
}
