//! An SBOM as `POST /api/v1/packages/sbom` reads it: CycloneDX (JSON or XML) or SPDX
//! (JSON, tag-value or 3.0 JSON-LD), recognised by content.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(sbom) = packages::sbom::parse(data) {
        for component in &sbom.components {
            // Every purl the SBOM names parses again on its own.
            if let Some(purl) = &component.purl {
                let _ = packages::Purl::parse(purl);
            }
            let _ = component.analysed_ecosystem();
        }
    }
});
