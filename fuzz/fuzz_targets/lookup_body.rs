//! The body of `POST /api/v1/intel/lookup` (and `/lookup/historical`), read exactly as the
//! routes read it: the JSON checks every route applies, then the batch rules.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = server::parse_lookup_body(data) {
        // An accepted batch holds 1 to 100 distinct hashes, sorted, each lowercase hex of
        // an MD5, SHA-1 or SHA-256 length.
        assert!(!batch.is_empty() && batch.len() <= 100);
        for pair in batch.windows(2) {
            assert!(pair[0].as_str() < pair[1].as_str());
        }
        for hash in &batch {
            let text = hash.as_str();
            assert!(matches!(text.len(), 32 | 40 | 64), "{text:?}");
            assert!(text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "{text:?}");
        }
    }
});
