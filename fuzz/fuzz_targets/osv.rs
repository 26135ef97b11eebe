//! An OSV advisory as `knowngood advisories import` and the scheduled refresh read it, then
//! matched against versions the way an SBOM scan matches its components.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(osv) = packages::advisories::read_osv(data) else {
        return;
    };
    for skipped in &osv.skipped {
        let _ = skipped.category();
    }
    let Some(advisory) = osv.advisory else { return };
    for affected in &advisory.affected {
        // Every version the document names, and a few a component may carry.
        let named = affected
            .versions
            .iter()
            .cloned()
            .chain(affected.ranges.iter().flatten().map(|event| match event {
                packages::advisories::Event::Introduced(v)
                | packages::advisories::Event::Fixed(v)
                | packages::advisories::Event::LastAffected(v) => v.clone(),
            }));
        for version in named.chain(["0.0.1", "v1.13.5", "go1.21rc2", "4.2.11"].map(String::from)) {
            let _ = affected.affects(&version);
        }
    }
});
