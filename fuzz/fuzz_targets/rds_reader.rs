//! An NSRL RDS v3 database as `knowngood nsrl import` reads it: the input is written to a
//! file and imported into a fresh corpus directory (layout detection, the PKG, VERSION and
//! FILE tables, hash columns, sorting, the generation's tables, and its full verification).
#![no_main]

use corpus::{ImportOptions, NoProgress, SetName, Verify};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    let input = dir.path().join("input.db");
    if std::fs::write(&input, data).is_err() {
        return;
    }
    let options = ImportOptions {
        // The smallest budget the importer takes.
        memory_budget: 0,
        imported_at: None,
        verify: Verify::Full,
        publish: true,
    };
    let out = dir.path().join("corpus");
    if let Ok(info) = corpus::import_with(&[(input, SetName::Modern)], &out, &options, &NoProgress)
    {
        // The published generation opens, and every SHA-256 key it holds is found.
        let opened = corpus::Corpus::open(&out).expect("an imported corpus opens");
        let generation = opened.current().expect("the import is published");
        assert_eq!(generation.len(), info.entries);
        for key in generation.keys(corpus::HashAlg::Sha256) {
            let hash = corpus::HashBytes::from_slice(key).expect("a stored key is a hash");
            assert!(generation.lookup(&hash).is_some());
        }
    }
});
