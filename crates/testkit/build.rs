//! Whether the PostgreSQL variants of the backend matrix can run is known when the tests are
//! built: without `KNOWNGOOD_TEST_POSTGRES_URL` they are marked ignored, so a run without
//! PostgreSQL reports them as ignored rather than counting them as passed. Tests that sign
//! files with `osslsigncode` are marked ignored the same way when it does not run here.

fn main() {
    println!("cargo::rerun-if-env-changed=KNOWNGOOD_TEST_POSTGRES_URL");
    println!("cargo::rustc-check-cfg=cfg(postgres_configured)");
    if std::env::var_os("KNOWNGOOD_TEST_POSTGRES_URL").is_some_and(|url| !url.is_empty()) {
        println!("cargo::rustc-cfg=postgres_configured");
    }
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rustc-check-cfg=cfg(osslsigncode_installed)");
    let signs = std::process::Command::new("osslsigncode")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if signs {
        println!("cargo::rustc-cfg=osslsigncode_installed");
    }
}
