//! The test harness of the workspace's integration tests (a dev-dependency only):
//!
//! - [`db`]: scratch databases, a fresh SQLite file or a fresh PostgreSQL schema, and [`Db`],
//!   a store over one with raw SQL access behind its back;
//! - [`backend_tests!`]: the backend matrix, each test body run on SQLite and PostgreSQL;
//! - `app` (feature `app`, for the server's and the binary's tests): `TestApp`, a real
//!   server on loopback over a scratch database;
//! - [`fixtures`]: timestamps and record builders;
//! - [`pki`]: certificate authorities, code signing and CRLs for tests;
//! - [`rpmdb`]: rpm's BerkeleyDB `Packages` file holding given headers;
//! - [`vendor`]: a fake vendor channel served over loopback HTTPS or HTTP (with the `apt`
//!   feature, a signed Debian-format archive on it).
//!
//! PostgreSQL runs when `KNOWNGOOD_TEST_POSTGRES_URL` names a reachable database (e.g.
//! `postgres://postgres:postgres@127.0.0.1:5432/postgres`); each test gets its own schema,
//! dropped afterwards. Whether it is set is read when the tests are built: without it the
//! PostgreSQL variants are marked ignored (and reported so); a URL set but unreachable
//! fails them.

// Test code: a failed step panics with its cause.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(feature = "app")]
pub mod app;
pub mod db;
pub mod fixtures;
pub mod pki;
pub mod rpmdb;
pub mod vendor;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt as _;

#[cfg(feature = "app")]
pub use app::{
    KEY_SECRET, Resp, TestApp, Upkeep, app_state, app_state_with, jwt_pkcs8, test_settings,
};
pub use db::{Backend, Db, PG_ENV, RECORD_SECRET, Scratch};
pub use fixtures::{go, hex_of, putty, pypi, q, rec, start_time, t};

/// What a matrix test body receives, built over a fresh scratch database.
pub trait Fixture: Sized {
    /// What `name with configure` in [`backend_tests!`] adjusts before the start.
    type Config;

    fn config() -> Self::Config;

    fn start(scratch: &Arc<Scratch>, config: Self::Config) -> impl Future<Output = Self>;

    /// The store closed once the body is done.
    fn store(&self) -> Arc<dyn store::Store>;
}

/// Runs `body` on a fixture over a fresh database of `backend`, then drops the database
/// (also when the body panics). A PostgreSQL run without a database prints `SKIPPED`.
pub async fn run<T, F, Fut>(
    backend: Backend,
    name: &str,
    configure: impl FnOnce(&mut T::Config),
    body: F,
) where
    T: Fixture,
    F: FnOnce(T) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(scratch) = Scratch::new(backend, name).await else {
        return;
    };
    let scratch = Arc::new(scratch);
    let mut config = T::config();
    configure(&mut config);
    let result = AssertUnwindSafe(async {
        let fixture = T::start(&scratch, config).await;
        let store = fixture.store();
        body(fixture).await;
        store.close().await;
    })
    .catch_unwind()
    .await;
    scratch.cleanup().await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// The backend matrix: for each `name` (an `async fn name(fixture)` in the invoking module,
/// the fixture being any [`Fixture`], e.g. `TestApp` or [`Db`]) a test `sqlite::name`
/// and a test `postgres::name`. `name with configure` first passes the fixture's config to
/// `fn configure(&mut Config)` of the invoking module.
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident $(with $configure:ident)?),+ $(,)?) => {
        $crate::backend_tests!(@on sqlite Sqlite; $($name $(with $configure)?),+);
        $crate::backend_tests!(@on postgres Postgres; $($name $(with $configure)?),+);
    };
    (@on $module:ident $backend:ident; $($name:ident $(with $configure:ident)?),+) => {
        mod $module {
            $(
                $crate::backend_test! { $backend
                async fn $name() {
                    $crate::run(
                        $crate::Backend::$backend,
                        stringify!($name),
                        |_config| { $(super::$configure(_config);)? },
                        super::$name,
                    )
                    .await;
                }
                }
            )+
        }
    };
}

/// One test of the backend matrix: a `#[tokio::test]`, ignored on PostgreSQL when the tests
/// were built without `KNOWNGOOD_TEST_POSTGRES_URL`.
#[doc(hidden)]
#[macro_export]
macro_rules! backend_test {
    (Sqlite $test:item) => {
        #[tokio::test]
        $test
    };
    (Postgres $test:item) => {
        $crate::postgres_test! { $test }
    };
}

/// A test that signs files with `osslsigncode`: marked ignored, not passed, when it did not
/// run where the tests were built.
#[cfg(osslsigncode_installed)]
#[macro_export]
macro_rules! needs_osslsigncode {
    ($($test:item)*) => {
        $($test)*
    };
}

/// A test that signs files with `osslsigncode`: marked ignored, not passed, when it did not
/// run where the tests were built.
#[cfg(not(osslsigncode_installed))]
#[macro_export]
macro_rules! needs_osslsigncode {
    ($($test:item)*) => {
        $(
            #[ignore = "osslsigncode did not run when the tests were built (apt-get install osslsigncode)"]
            $test
        )*
    };
}

#[cfg(postgres_configured)]
#[doc(hidden)]
#[macro_export]
macro_rules! postgres_test {
    ($test:item) => {
        #[tokio::test]
        $test
    };
}

#[cfg(not(postgres_configured))]
#[doc(hidden)]
#[macro_export]
macro_rules! postgres_test {
    ($test:item) => {
        #[tokio::test]
        #[ignore = "KNOWNGOOD_TEST_POSTGRES_URL was not set when the tests were built"]
        $test
    };
}
