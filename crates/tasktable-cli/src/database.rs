//! Opening the store a URL names, for the commands that use a database directly
//! (`serve`, `worker`, `migrate`), and the `migrate` command itself.

use crate::error::CliError;
use clap::Args;
use std::sync::Arc;
use tasktable::Store;

/// The environment variable that names the database when `--database-url` does not.
pub const URL_ENV: &str = "DATABASE_URL";

#[derive(Args, Debug)]
pub struct DatabaseArgs {
    /// The database: sqlite://FILE (created if missing), postgres://USER@HOST/DB, or
    /// mysql://USER@HOST/DB (MySQL 8.0.17+ or MariaDB 10.6+; mariadb:// works too).
    #[arg(
        long = "database-url",
        env = URL_ENV,
        hide_env_values = true,
        value_name = "URL",
        default_value = "sqlite://tasktable.db"
    )]
    pub url: String,
}

/// The store at `args.url`. Errors name the URL without its password.
pub async fn open(args: &DatabaseArgs) -> Result<Arc<dyn Store>, CliError> {
    tasktable::connect(&args.url)
        .await
        .map_err(|e| CliError::failure(format!("cannot open the database: {e}")))
}

pub async fn migrate(store: &dyn Store) -> Result<(), CliError> {
    store.migrate().await.map_err(|e| {
        CliError::failure(format!(
            "cannot migrate the {} database: {e}",
            store.backend()
        ))
    })
}

/// `tasktable migrate`.
pub async fn run_migrate(args: &DatabaseArgs) -> Result<(), CliError> {
    let store = open(args).await?;
    migrate(store.as_ref()).await?;
    crate::output::line(format!("the {} database is up to date", store.backend()))
}
