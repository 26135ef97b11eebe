//! A certificate revocation list as the revocation check reads it (DER).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(crl) = revocation::parse(data) {
        assert_eq!(crl.is_empty(), crl.len() == 0);
        // A lookup by serial never panics, whatever the serial.
        let _ = crl.entry(&revocation::serial_key(data.get(..20).unwrap_or(data)));
        let _ = crl.entry("");
        // Checking the signature against an arbitrary "CA certificate" fails cleanly.
        let _ = crl.verify(data);
    }
});
