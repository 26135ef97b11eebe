//! Migrations, embedded in the binary from their directories (`migrations/<backend>/`, by
//! build.rs): each backend has its own numbered SQL files, applied in order on start, each
//! in its own transaction, and remembered in `schema_migrations`.

pub(crate) struct Migration {
    pub version: i64,
    pub sql: &'static str,
}

// `SQLITE` and `POSTGRES`: every file of `migrations/<backend>/`, in version order (build.rs).
include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

pub(crate) const CREATE_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_backends_embed_the_same_versions_in_order() {
        let versions = |list: &[Migration]| list.iter().map(|m| m.version).collect::<Vec<_>>();
        assert_eq!(versions(SQLITE), versions(POSTGRES));
        assert!(SQLITE.len() >= 17 && SQLITE.windows(2).all(|w| w[0].version < w[1].version));
        assert!(SQLITE[0].sql.contains("CREATE TABLE"));
    }
}
