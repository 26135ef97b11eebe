//! The server's layering, checked on its source: route modules parse, call a service and
//! answer, so none of them reaches into another route module (shared shapes live in
//! `api.rs`, shared services in `services/` and modules such as `feed_cache.rs` and
//! `status.rs`); the console calls the same services, never a route handler.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `crate::routes::<module>` or `super::<module>::` (a sibling module) in a route module;
/// `mod.rs` files, which register the routes, may name their children.
fn reaches_into_another_route(source: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for pattern in ["crate::routes::", "super::"] {
            let mut rest = code;
            while let Some(at) = rest.find(pattern) {
                let after = &rest[at + pattern.len()..];
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let is_module = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                    && (after[name.len()..].starts_with("::") || pattern == "crate::routes::");
                if is_module {
                    found.push(format!("line {}: {}", n + 1, line.trim()));
                }
                rest = &after[name.len()..];
            }
        }
    }
    found
}

#[test]
fn route_modules_import_nothing_from_each_other() {
    let routes = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/routes");
    let mut files = Vec::new();
    rust_files(&routes, &mut files);
    assert!(files.len() > 10, "the route modules are where they were");
    let mut offences = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("mod.rs")) {
        let source = std::fs::read_to_string(file).unwrap();
        for hit in reaches_into_another_route(&source) {
            offences.push(format!("{}: {hit}", file.display()));
        }
    }
    assert!(
        offences.is_empty(),
        "route modules reach into other route modules:\n{}",
        offences.join("\n")
    );
}

/// Lines of a console module that name the route modules.
fn reaches_into_routes(source: &str) -> Vec<String> {
    source
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.split("//").next().unwrap_or("");
            code.contains("crate::routes") || code.contains("routes::{")
        })
        .map(|(n, line)| format!("line {}: {}", n + 1, line.trim()))
        .collect()
}

#[test]
fn the_console_calls_services_not_route_handlers() {
    let console = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/console");
    let mut files = Vec::new();
    rust_files(&console, &mut files);
    assert!(files.len() > 3, "the console modules are where they were");
    let mut offences = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        for hit in reaches_into_routes(&source) {
            offences.push(format!("{}: {hit}", file.display()));
        }
    }
    assert!(
        offences.is_empty(),
        "console modules call route modules instead of services:\n{}",
        offences.join("\n")
    );
}

/// Console routes are declared with their rule in `console/rules.rs`'s `ConsoleRoutes`
/// (its `get`, `post`, `any`); a console module building a method router itself would
/// serve a route without one.
#[test]
fn console_routes_are_declared_only_with_a_rule() {
    let console = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/console");
    let mut files = Vec::new();
    rust_files(&console, &mut files);
    let mut offences = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("rules.rs")) {
        let source = std::fs::read_to_string(file).unwrap();
        for (n, line) in source.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("axum::routing") || code.contains("MethodRouter") {
                offences.push(format!(
                    "{}: line {}: {}",
                    file.display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "console routes built outside the declared table:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_console_check_sees_route_imports() {
    assert_eq!(
        reaches_into_routes("use crate::routes::packages as api;").len(),
        1
    );
    assert_eq!(
        reaches_into_routes("    crate::routes::mfa::session_for_subject(&state, &s)").len(),
        1
    );
    assert!(reaches_into_routes("use crate::services::packages; // not crate::routes").is_empty());
}

#[test]
fn the_check_sees_both_spellings() {
    assert_eq!(
        reaches_into_another_route("use crate::routes::intel::parse_limit;").len(),
        1
    );
    assert_eq!(
        reaches_into_another_route("use super::keys::KeyJson;").len(),
        1
    );
    assert!(reaches_into_another_route("use super::MANAGE_KEYS;").is_empty());
    assert!(
        reaches_into_another_route("use crate::api::KeyJson; // not crate::routes::x").is_empty()
    );
}
