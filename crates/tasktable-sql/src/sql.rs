//! A statement and its arguments, built once for any [`Dialect`].

use crate::Dialect;
use chrono::{DateTime, Utc};
use serde_json::Value;

/// An argument, typed by what it means; each backend binds it in its own column type
/// (a time is text on SQLite, a `DATETIME` on MySQL, a `timestamptz` on PostgreSQL).
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// A `BIGINT` (ids, counts, limits).
    Int(i64),
    /// An `INTEGER` column's value (priority, attempts): PostgreSQL wants it as `int4`.
    Int32(i32),
    /// A text column's value; `None` is NULL.
    Text(Option<String>),
    /// A nullable integer column's value; `None` is NULL (typed, as PostgreSQL wants).
    MaybeInt(Option<i64>),
    /// A `DOUBLE PRECISION` (`REAL` on SQLite); `None` is NULL.
    Float(Option<f64>),
    /// A boolean (an integer on SQLite and MySQL).
    Bool(bool),
    /// A time (fixed-format text on SQLite, `DATETIME(6)` on MySQL, `timestamptz` on
    /// PostgreSQL); `None` is NULL.
    Time(Option<DateTime<Utc>>),
    /// A JSON document (text on SQLite).
    Json(Value),
    /// A list of ids as one array argument: only written for PostgreSQL (`= ANY($n)`).
    Ints(Vec<i64>),
    /// A list of texts as one array argument: only written for PostgreSQL.
    Texts(Vec<String>),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}
impl From<i32> for Arg {
    fn from(v: i32) -> Self {
        Arg::Int32(v)
    }
}
impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}
impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_owned()))
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}
impl From<DateTime<Utc>> for Arg {
    fn from(v: DateTime<Utc>) -> Self {
        Arg::Time(Some(v))
    }
}

/// A statement under construction: text with the dialect's placeholders, and the
/// arguments they stand for, in order.
#[derive(Debug, Clone)]
pub struct Sql {
    dialect: Dialect,
    text: String,
    args: Vec<Arg>,
}

impl Sql {
    /// A statement in `dialect` that starts with `text`, which holds no placeholders
    /// (add them with [`Sql::bind`]).
    pub fn new(dialect: Dialect, text: impl Into<String>) -> Self {
        Sql {
            dialect,
            text: text.into(),
            args: Vec::new(),
        }
    }

    /// The dialect its placeholders and spellings are written in.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Appends SQL text as it is; values go through [`Sql::bind`], never into the text.
    pub fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends a placeholder for `arg`.
    pub fn bind(&mut self, arg: impl Into<Arg>) -> &mut Self {
        self.args.push(arg.into());
        let mark = self.dialect.placeholder(self.args.len());
        self.text.push_str(&mark);
        self
    }

    /// Appends `column IN (...)` for `ids`: one array argument on PostgreSQL, a JSON array
    /// read by `json_each` on SQLite (one argument however long the list), one
    /// placeholder per id on MySQL, which has neither (callers keep lists to at most
    /// [`Sql::MAX_IN_LIST`] ids there).
    pub fn push_in_ids(&mut self, column: &str, ids: &[i64]) -> &mut Self {
        self.push(column);
        match self.dialect {
            Dialect::Postgres => self.push(" = ANY(").bind(Arg::Ints(ids.to_vec())).push(")"),
            Dialect::Sqlite => {
                let json = serde_json::to_string(ids).expect("ids serialise");
                self.push(" IN (SELECT value FROM json_each(")
                    .bind(json)
                    .push("))")
            }
            Dialect::MySql => {
                self.push(" IN (");
                for (i, id) in ids.iter().enumerate() {
                    if i > 0 {
                        self.push(", ");
                    }
                    self.bind(*id);
                }
                self.push(")")
            }
        }
    }

    /// Appends `column IN (...)` for a few texts (states, say).
    pub fn push_in_texts(&mut self, column: &str, values: &[&str]) -> &mut Self {
        self.push(column);
        if self.dialect == Dialect::Postgres {
            let values = values.iter().map(|v| (*v).to_owned()).collect();
            return self.push(" = ANY(").bind(Arg::Texts(values)).push(")");
        }
        self.push(" IN (");
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.bind(*v);
        }
        self.push(")")
    }

    /// The statement's text, with the dialect's placeholders.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The arguments, in the order of their placeholders.
    pub fn args(&self) -> &[Arg] {
        &self.args
    }

    /// The text and the arguments, for a backend to send.
    pub fn into_parts(self) -> (String, Vec<Arg>) {
        (self.text, self.args)
    }

    /// Most ids one MySQL `IN (...)` list holds: a statement may have at most 65,535
    /// placeholders, and bulk changes send at most this many ids a chunk.
    pub const MAX_IN_LIST: usize = 1000;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_follow_the_dialect() {
        let texts: Vec<String> = Dialect::ALL
            .iter()
            .map(|d| {
                let mut s = Sql::new(*d, "SELECT 1 WHERE a = ");
                s.bind(1_i64).push(" AND ").push_in_ids("id", &[7, 8]);
                s.text().to_owned()
            })
            .collect();
        assert_eq!(
            texts,
            [
                "SELECT 1 WHERE a = ? AND id IN (SELECT value FROM json_each(?))",
                "SELECT 1 WHERE a = $1 AND id = ANY($2)",
                "SELECT 1 WHERE a = ? AND id IN (?, ?)",
            ]
        );
    }

    #[test]
    fn every_placeholder_has_its_argument() {
        for d in Dialect::ALL {
            let mut s = Sql::new(d, "x");
            s.push_in_texts("state", &["held", "pending"]).bind("q");
            let marks = s.text().matches(['?', '$']).count();
            assert_eq!(marks, s.args().len(), "{d:?}: {}", s.text());
        }
    }
}
