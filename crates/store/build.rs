//! Embeds the migrations: every `migrations/<backend>/NNNN_name.sql` file becomes an entry
//! of that backend's list, in version order, so adding a migration is adding its file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a build script fails loudly, naming the file

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut out = String::new();
    for (constant, backend) in [("SQLITE", "sqlite"), ("POSTGRES", "postgres")] {
        let dir = root.join(backend);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<(i64, String)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .filter(|path| path.extension().is_some_and(|e| e == "sql"))
            .map(|path| {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let version = name
                    .split('_')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("{name}: a migration is named NNNN_what.sql"));
                (version, path.display().to_string())
            })
            .collect();
        files.sort();
        if let Some(pair) = files.windows(2).find(|w| w[0].0 == w[1].0) {
            panic!("two {backend} migrations share version {}", pair[0].0);
        }
        writeln!(out, "pub(crate) const {constant}: &[Migration] = &[").unwrap();
        for (version, path) in &files {
            writeln!(
                out,
                "    Migration {{ version: {version}, sql: include_str!({path:?}) }},"
            )
            .unwrap();
        }
        writeln!(out, "];").unwrap();
    }
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("migrations.rs");
    std::fs::write(dest, out).unwrap();
}
