//! Where the three databases spell the same thing differently. Everything else in this
//! crate is plain SQL that all three accept.

/// One of the SQL dialects tasktable speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// SQLite 3: `?` placeholders, times and JSON stored as text, no row locks (its
    /// write transaction holds the whole database).
    Sqlite,
    /// PostgreSQL: `$n` placeholders, arrays as arguments, `FOR UPDATE SKIP LOCKED`.
    Postgres,
    /// MySQL 8.0.17+ and MariaDB 10.6+: `?` placeholders, one per id of a list, index
    /// hints where InnoDB would lock what it scans.
    MySql,
}

impl Dialect {
    /// Every dialect, for tests that render a statement in each.
    pub const ALL: [Dialect; 3] = [Dialect::Sqlite, Dialect::Postgres, Dialect::MySql];

    /// The placeholder of the `n`th argument (1-based).
    pub(crate) fn placeholder(self, n: usize) -> String {
        match self {
            Dialect::Postgres => format!("${n}"),
            Dialect::Sqlite | Dialect::MySql => "?".to_owned(),
        }
    }

    /// The position of `needle` in `haystack`, 0 when absent: a case-sensitive substring
    /// test with no wildcards to escape (unlike `LIKE`). MySQL's columns use a binary
    /// collation, so its `INSTR` is case-sensitive too.
    pub(crate) fn position_fn(self) -> &'static str {
        match self {
            Dialect::Postgres => "strpos",
            Dialect::Sqlite | Dialect::MySql => "instr",
        }
    }

    /// A JSON `null` and a SQL NULL of the JSON column type, for the light task columns.
    pub(crate) fn json_literals(self) -> (&'static str, &'static str) {
        match self {
            Dialect::Postgres => ("'null'::jsonb", "NULL::jsonb"),
            Dialect::Sqlite | Dialect::MySql => ("'null'", "NULL"),
        }
    }

    /// What follows a `SELECT` that locks the rows it reads until the transaction ends.
    /// SQLite has no row locks: its write transaction (`BEGIN IMMEDIATE`) holds the whole
    /// database.
    pub(crate) fn lock_rows(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Postgres | Dialect::MySql => " FOR UPDATE",
        }
    }

    /// What ends a claim's read of candidate tasks (aliased `t`): locks them, passing over
    /// rows another transaction holds, so claimers never wait for each other.
    pub(crate) fn skip_locked(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Postgres => " FOR UPDATE OF t SKIP LOCKED",
            Dialect::MySql => " FOR UPDATE SKIP LOCKED",
        }
    }

    /// The tasks table read by primary key only. SQLite's planner may prefer an index on
    /// state or queue for the rest of the clause and scan it; InnoDB would lock every row
    /// such a scan passes.
    pub(crate) fn tasks_by_primary_key(self) -> &'static str {
        match self {
            Dialect::Sqlite => "tasktable_tasks NOT INDEXED",
            Dialect::Postgres => "tasktable_tasks",
            Dialect::MySql => "tasktable_tasks FORCE INDEX (PRIMARY)",
        }
    }

    /// `col` cut to the start of its minute, as a time.
    pub(crate) fn minute(self, col: &str) -> String {
        match self {
            // Stored times are fixed-format text: the minute is the first 16 characters.
            Dialect::Sqlite => format!("substr({col}, 1, 16) || ':00.000Z'"),
            Dialect::Postgres => format!("date_trunc('minute', {col})"),
            Dialect::MySql => {
                format!("CAST(DATE_FORMAT({col}, '%Y-%m-%d %H:%i:00') AS DATETIME(6))")
            }
        }
    }

    /// Milliseconds from `earlier` to `later`.
    pub(crate) fn millis_between(self, later: &str, earlier: &str) -> String {
        match self {
            // Rounded: the stored times have millisecond precision, julianday not quite.
            Dialect::Sqlite => {
                format!("round((julianday({later}) - julianday({earlier})) * 86400000.0)")
            }
            Dialect::Postgres => format!("(extract(epoch FROM ({later} - {earlier})) * 1000)"),
            Dialect::MySql => format!("(TIMESTAMPDIFF(MICROSECOND, {earlier}, {later}) / 1000)"),
        }
    }

    /// The larger of two values (`max` is an aggregate on PostgreSQL and MySQL).
    pub(crate) fn greatest(self) -> &'static str {
        match self {
            Dialect::Sqlite => "max",
            Dialect::Postgres | Dialect::MySql => "greatest",
        }
    }

    /// The tail of an `INSERT` that replaces `columns` of a row whose `key` exists.
    pub(crate) fn upsert(self, key: &[&str], columns: &[&str]) -> String {
        let set: Vec<String> = columns
            .iter()
            .map(|c| format!("{c} = {}", self.inserted(c)))
            .collect();
        format!("{}{}", self.on_conflict(key), set.join(", "))
    }

    /// What starts the `SET` list of an upsert on `key`.
    pub(crate) fn on_conflict(self, key: &[&str]) -> String {
        match self {
            Dialect::Sqlite | Dialect::Postgres => {
                format!(" ON CONFLICT ({}) DO UPDATE SET ", key.join(", "))
            }
            Dialect::MySql => " ON DUPLICATE KEY UPDATE ".to_owned(),
        }
    }

    /// In an upsert's `SET` list, the value the `INSERT` tried to write to `column`.
    pub(crate) fn inserted(self, column: &str) -> String {
        match self {
            Dialect::Sqlite | Dialect::Postgres => format!("excluded.{column}"),
            Dialect::MySql => format!("VALUES({column})"),
        }
    }

    /// The migrations table, created if missing.
    pub(crate) fn create_migrations_table(self) -> &'static str {
        match self {
            Dialect::Sqlite => {
                "CREATE TABLE IF NOT EXISTS tasktable_migrations (\
                 version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            }
            Dialect::Postgres => {
                "CREATE TABLE IF NOT EXISTS tasktable_migrations (\
                 version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
            }
            Dialect::MySql => {
                "CREATE TABLE IF NOT EXISTS tasktable_migrations (\
                 version BIGINT NOT NULL PRIMARY KEY, name VARCHAR(255) NOT NULL, \
                 applied_at DATETIME(6) NOT NULL) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4"
            }
        }
    }
}
