//! A file's Authenticode signer, read whole (`extract_signer`) and while the file streams
//! past in chunks (`SignatureCapture`, as downloads read it): both must give the same answer.
#![no_main]

use ingest::SignatureCapture;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = ingest::extract_signer(data);
    // The first byte picks the chunk size of the streamed read (1 to 256 bytes).
    let chunk = usize::from(data.first().copied().unwrap_or(0)) + 1;
    let mut capture = SignatureCapture::new(usize::MAX);
    for piece in data.chunks(chunk) {
        capture.push(piece);
    }
    assert_eq!(capture.finish(), whole);
});
