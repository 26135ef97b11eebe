//! ARCHITECTURE.md's crate table says which workspace crates each crate depends on; this
//! compares it with `cargo metadata`, so the map cannot drift from the manifests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

type Deps = BTreeMap<String, BTreeSet<String>>;

/// Each workspace crate and the workspace crates it depends on (normal dependencies,
/// optional ones included), as cargo resolves the manifests.
fn from_cargo(root: &Path) -> Deps {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let members: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|n| members.contains(*n))
                .map(str::to_string)
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// The crate table of ARCHITECTURE.md (the table headed `| crate | depends on | … |`): rows
/// `| \`crate\` | dependencies | role |`, the dependencies being every workspace crate named
/// in the second column.
fn from_map(text: &str, members: &BTreeSet<String>) -> Deps {
    text.lines()
        .skip_while(|line| !line.starts_with("| crate | depends on |"))
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let deps = cells
                .get(2)?
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| members.contains(*w))
                .map(str::to_string)
                .collect();
            Some((name.to_string(), deps))
        })
        .collect()
}

#[test]
fn the_architecture_map_matches_the_manifests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let actual = from_cargo(&root);
    let members: BTreeSet<String> = actual.keys().cloned().collect();
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let drawn = from_map(&map, &members);
    for (name, deps) in &actual {
        assert_eq!(
            drawn.get(name),
            Some(deps),
            "ARCHITECTURE.md's row for `{name}` must name exactly what its Cargo.toml uses"
        );
    }
    let extra: Vec<&String> = drawn.keys().filter(|n| !actual.contains_key(*n)).collect();
    assert!(
        extra.is_empty(),
        "ARCHITECTURE.md names crates that do not exist: {extra:?}"
    );
}
