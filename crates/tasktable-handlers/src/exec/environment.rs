//! The environment a command starts with: a few of the worker's own variables (never all
//! of them: the worker's may hold its database password or API token), then the payload's
//! `env`, whose names an allow-list must allow.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt;
use std::str::FromStr;

/// The worker's variables every command gets, when the worker has them: where to find
/// programs, who and where the user is, language, time zone and temporary directory.
/// `LC_*` means every variable whose name starts with `LC_`.
pub const INHERITED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_*", "TZ", "TMPDIR",
];

/// The name of an environment variable: letters, digits and `_`, not starting with a digit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EnvName(String);

impl EnvName {
    /// Whether the dynamic loader reads this variable (`LD_*`, `DYLD_*`): it changes the
    /// code of every program, so under an allow-list no payload may set it, allowed or not.
    pub fn is_loader_variable(&self) -> bool {
        loader_variable(&self.0)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for EnvName {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut chars = text.chars();
        let valid = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if valid {
            Ok(EnvName(text.to_owned()))
        } else {
            Err(format!(
                "{text:?} is not an environment variable name: use letters, digits and _, \
                 not starting with a digit"
            ))
        }
    }
}

impl fmt::Display for EnvName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn loader_variable(name: &str) -> bool {
    name.starts_with("LD_") || name.starts_with("DYLD_")
}

fn inherited_by_default(name: &str) -> bool {
    name.starts_with("LC_") || INHERITED_ENV.contains(&name)
}

/// Which variables a command gets besides the payload's, and which the payload may set.
#[derive(Debug, Clone, Default)]
pub(super) struct EnvRules {
    /// Names a payload may set under an allow-list.
    pub settable: BTreeSet<EnvName>,
    /// The worker's variables passed on besides [`INHERITED_ENV`].
    pub inherited: BTreeSet<EnvName>,
}

impl EnvRules {
    /// Why the payload's `env` cannot be used, if it cannot. `any`: the policy allows any
    /// program, and so any variable.
    pub fn check(&self, env: &BTreeMap<String, String>, any: bool) -> Result<(), String> {
        for (name, value) in env {
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(format!("env name {name:?} is not a valid variable name"));
            }
            if value.contains('\0') {
                // The value may be a secret: name the variable only.
                return Err(format!("env {name:?} has a value with a NUL byte"));
            }
            if any {
                continue;
            }
            if loader_variable(name) {
                return Err(format!(
                    "env {name:?} is not allowed: it changes which code every program loads, \
                     so no payload may set it while the worker allows only listed programs \
                     (only --exec-allow-any lifts this)"
                ));
            }
            if !self.settable.iter().any(|allowed| allowed.as_str() == name) {
                return Err(format!(
                    "env {name:?} is not allowed: payloads may set only the variables this \
                     worker allows ({}); to let them set it, start the worker with \
                     --exec-allow-env {name} (ExecPolicy::allow_env)",
                    self.describe_settable()
                ));
            }
        }
        Ok(())
    }

    /// The command's environment: the worker's variables it inherits, then the payload's.
    pub fn build(&self, env: &BTreeMap<String, String>) -> Vec<(OsString, OsString)> {
        let inherited = std::env::vars_os().filter(|(name, _)| {
            name.to_str().is_some_and(|name| {
                inherited_by_default(name) || self.inherited.iter().any(|i| i.as_str() == name)
            })
        });
        inherited
            .chain(env.iter().map(|(k, v)| (k.into(), v.into())))
            .collect()
    }

    fn describe_settable(&self) -> String {
        if self.settable.is_empty() {
            return "none".into();
        }
        let names: Vec<&str> = self.settable.iter().map(EnvName::as_str).collect();
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn settable(names: &[&str]) -> EnvRules {
        EnvRules {
            settable: names.iter().map(|n| n.parse().unwrap()).collect(),
            ..EnvRules::default()
        }
    }

    #[test]
    fn only_allowed_names_may_be_set_and_a_refusal_says_how_to_allow_it() {
        let rules = settable(&["GREETING"]);
        assert_eq!(rules.check(&env(&[("GREETING", "hi")]), false), Ok(()));
        let err = rules.check(&env(&[("PATH", "/tmp")]), false).unwrap_err();
        assert!(err.contains("\"PATH\" is not allowed"), "{err}");
        assert!(err.contains("(GREETING)"), "{err}");
        assert!(err.contains("--exec-allow-env PATH"), "{err}");
        let err = EnvRules::default()
            .check(&env(&[("PATH", "/tmp")]), false)
            .unwrap_err();
        assert!(err.contains("(none)"), "{err}");
    }

    #[test]
    fn loader_variables_are_refused_under_an_allow_list_even_when_listed() {
        let rules = settable(&["LD_PRELOAD"]);
        let err = rules
            .check(&env(&[("LD_PRELOAD", "/x.so")]), false)
            .unwrap_err();
        assert!(
            err.contains("changes which code every program loads"),
            "{err}"
        );
        assert_eq!(rules.check(&env(&[("LD_PRELOAD", "/x.so")]), true), Ok(()));
        assert!("DYLD_INSERT_LIBRARIES"
            .parse::<EnvName>()
            .unwrap()
            .is_loader_variable());
    }

    #[test]
    fn names_and_values_the_system_cannot_hold_are_refused_in_any_mode() {
        let rules = EnvRules::default();
        for bad in [
            env(&[("", "x")]),
            env(&[("A=B", "x")]),
            env(&[("A\0", "x")]),
        ] {
            let err = rules.check(&bad, true).unwrap_err();
            assert!(err.contains("not a valid variable name"), "{err}");
        }
        let err = rules
            .check(&env(&[("TOKEN", "s3cret\0")]), true)
            .unwrap_err();
        assert!(err.contains("NUL") && !err.contains("s3cret"), "{err}");
    }

    #[test]
    fn env_names_are_letters_digits_and_underscores() {
        for good in ["PATH", "_X", "lower_9"] {
            assert_eq!(good.parse::<EnvName>().unwrap().as_str(), good);
        }
        for bad in ["", "9LIVES", "A-B", "A=B", "A B"] {
            assert!(bad.parse::<EnvName>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_worker_passes_on_only_the_inherited_variables_and_the_payloads() {
        let rules = EnvRules {
            inherited: ["CARGO_MANIFEST_DIR".parse().unwrap()].into(),
            ..EnvRules::default()
        };
        let built = rules.build(&env(&[("GREETING", "hi"), ("PATH", "/payload")]));
        let names: Vec<String> = built
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        // Cargo sets both for test binaries: one is passed on by request, one is not.
        assert!(
            names.contains(&"CARGO_MANIFEST_DIR".to_owned()),
            "{names:?}"
        );
        assert!(!names.contains(&"CARGO_PKG_NAME".to_owned()), "{names:?}");
        for name in &names {
            assert!(
                inherited_by_default(name)
                    || ["CARGO_MANIFEST_DIR", "GREETING"].contains(&name.as_str()),
                "{name} should not be passed on"
            );
        }
        // The payload's variables come last, so they win over the inherited ones.
        let last_path = built.iter().rev().find(|(k, _)| k == "PATH").unwrap();
        assert_eq!(last_path.1, "/payload");
    }
}
