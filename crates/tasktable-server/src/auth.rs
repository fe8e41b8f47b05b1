//! Bearer tokens with roles. Tokens are kept only as SHA-256 digests and a presented token
//! is compared against every digest in constant time, so neither the configuration nor the
//! timing of a refusal gives a token away. Tokens never reach a log: [`TokenSet`]'s
//! `Debug` shows names and roles only.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;
use subtle::ConstantTimeEq;
use tasktable_core::worker::Queues;

/// What a token may do. Each endpoint needs one [`Access`]; see [`Role::allows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything.
    Admin,
    /// Read, submit, and intervene: cancel, retry, edit, hold, pause.
    Operator,
    /// The pull protocol only: claim, renew, checkpoint, complete, fail.
    Worker,
    /// Read only.
    Reader,
}

/// What an endpoint needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    /// Submit and intervene.
    Operate,
    /// The pull protocol.
    Work,
    /// Maintenance such as migrations.
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Admin, Role::Operator, Role::Worker, Role::Reader];

    pub fn allows(self, access: Access) -> bool {
        match self {
            Role::Admin => true,
            Role::Operator => matches!(access, Access::Read | Access::Operate),
            Role::Worker => access == Access::Work,
            Role::Reader => access == Access::Read,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Operator => "operator",
            Role::Worker => "worker",
            Role::Reader => "reader",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = TokenConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| {
                TokenConfigError(format!(
                    "unknown role {s:?}: use admin, operator, worker or reader"
                ))
            })
    }
}

/// Shortest token accepted, so a guessable word cannot become a credential.
pub const MIN_TOKEN_LEN: usize = 16;

/// A token configuration that cannot be used; the message says which line and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TokenConfigError(pub String);

/// What a worker token is limited to: the queues its workers may take and the groups
/// they may join. `None`: no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerLimits {
    /// The only queues its workers may register for and claim from.
    pub queues: Option<Vec<String>>,
    /// The only groups its workers may register in and claim for.
    pub groups: Option<Vec<String>>,
}

impl WorkerLimits {
    fn is_none(&self) -> bool {
        self.queues.is_none() && self.groups.is_none()
    }

    /// Whether its workers may claim tasks of `queue`.
    pub fn may_claim_from(&self, queue: &str) -> bool {
        self.queues
            .as_ref()
            .is_none_or(|queues| queues.iter().any(|q| q == queue))
    }

    /// The groups of `groups` its workers may not join.
    pub fn groups_outside<'a>(&self, groups: &'a [String]) -> Vec<&'a str> {
        outside(self.groups.as_deref(), groups)
    }

    /// The queues of `queues` its workers may not take: all of them when limited
    /// (`every queue`), or those not among its own.
    pub fn queues_outside<'a>(&self, queues: &'a Queues) -> Vec<&'a str> {
        match (queues, &self.queues) {
            (_, None) => Vec::new(),
            (Queues::All, Some(_)) => vec!["every queue"],
            (Queues::Listed(listed), allowed) => outside(allowed.as_deref(), listed),
        }
    }
}

/// The names of `asked` not among `allowed` (`None`: any name is allowed).
fn outside<'a>(allowed: Option<&[String]>, asked: &'a [String]) -> Vec<&'a str> {
    let Some(allowed) = allowed else {
        return Vec::new();
    };
    asked
        .iter()
        .filter(|name| !allowed.contains(name))
        .map(String::as_str)
        .collect()
}

#[derive(Clone)]
struct Entry {
    name: String,
    role: Role,
    digest: [u8; 32],
    limits: WorkerLimits,
}

/// Who a request authenticated as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub role: Role,
    /// What a worker token's workers are limited to (nothing for other roles).
    pub limits: WorkerLimits,
    /// Whether the caller presented a token: the worker ids it uses become that token's
    /// ([`tasktable_core::ownership`]). `false` only on a server without tokens.
    pub authenticated: bool,
}

impl Principal {
    /// Every caller of a server without tokens: an admin bound to no token, which the
    /// binary allows only on a loopback address.
    pub fn anonymous() -> Self {
        Principal {
            name: "anonymous".into(),
            role: Role::Admin,
            limits: WorkerLimits::default(),
            authenticated: false,
        }
    }

    /// This caller as the event log records it, reaching the server as `kind` (a token,
    /// the command line, the dashboard).
    pub fn actor(&self, kind: tasktable_core::ActorKind) -> tasktable_core::Actor {
        tasktable_core::Actor::new(kind, &self.name, Some(self.role.as_str()))
    }

    /// Whether this caller may claim tasks of `queue`.
    pub fn may_claim_from(&self, queue: &str) -> bool {
        self.limits.may_claim_from(queue)
    }

    /// The token worker ids used by this caller belong to; `None` on a server without
    /// tokens, where every caller is trusted alike.
    pub fn worker_owner(&self) -> Option<String> {
        self.authenticated.then(|| self.name.clone())
    }
}

/// Parses a queue list written `a,b` (tokens file) or `a+b` (environment): the queues a
/// worker token is limited to. Such names cannot hold whitespace or any of `: , + @ # |`;
/// a queue named so can only be claimed by an unlimited token.
pub fn parse_queue_list(text: &str, separator: char) -> Result<Vec<String>, TokenConfigError> {
    parse_list("queue", text, separator)
}

/// Parses a group list, written as a queue list ([`parse_queue_list`]): the groups a
/// worker token's workers may join.
pub fn parse_group_list(text: &str, separator: char) -> Result<Vec<String>, TokenConfigError> {
    parse_list("group", text, separator)
}

fn parse_list(what: &str, text: &str, separator: char) -> Result<Vec<String>, TokenConfigError> {
    let reserved = |c: char| c.is_whitespace() || c.is_control() || ":,+@#|".contains(c);
    let names: Vec<String> = text.split(separator).map(str::to_owned).collect();
    for n in &names {
        if n.is_empty() || n.chars().count() > 255 || n.chars().any(reserved) {
            return Err(TokenConfigError(format!(
                "{what} list {text:?}: each {what} must be 1 to 255 characters without spaces or \
                 any of : , + @ # |, separated by {separator:?}"
            )));
        }
    }
    Ok(names)
}

/// The configured tokens. Empty means authentication is off, which the binary allows only
/// on a loopback address.
#[derive(Clone, Default)]
pub struct TokenSet {
    entries: Vec<Entry>,
}

impl fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| (&e.name, e.role)))
            .finish()
    }
}

/// The name a token given in `TASKTABLE_TOKENS` goes by: `env-` and the first 8 hex
/// digits of its SHA-256 digest, which says nothing of the token but stays the same
/// wherever the token is listed.
pub fn env_token_name(token: &str) -> String {
    format!("env-{}", &token_digest(token)["sha256:".len()..][..8])
}

/// The SHA-256 digest of a token, as stored in a tokens file (`sha256:<hex>`).
pub fn token_digest(token: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(token.as_bytes())))
}

impl TokenSet {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// How many tokens have `role`.
    pub fn count(&self, role: Role) -> usize {
        self.entries.iter().filter(|e| e.role == role).count()
    }

    /// Adds a token given in plain text (from the environment or a test).
    pub fn add_plain(
        &mut self,
        name: &str,
        role: Role,
        token: &str,
    ) -> Result<(), TokenConfigError> {
        self.add_plain_with(name, role, token, WorkerLimits::default())
    }

    /// Adds a worker token, given in plain text, that may claim only from `queues`.
    pub fn add_plain_limited(
        &mut self,
        name: &str,
        token: &str,
        queues: Vec<String>,
    ) -> Result<(), TokenConfigError> {
        let limits = WorkerLimits {
            queues: Some(queues),
            groups: None,
        };
        self.add_plain_with(name, Role::Worker, token, limits)
    }

    /// Adds a worker token, given in plain text, with `limits`.
    pub fn add_plain_worker(
        &mut self,
        name: &str,
        token: &str,
        limits: WorkerLimits,
    ) -> Result<(), TokenConfigError> {
        self.add_plain_with(name, Role::Worker, token, limits)
    }

    fn add_plain_with(
        &mut self,
        name: &str,
        role: Role,
        token: &str,
        limits: WorkerLimits,
    ) -> Result<(), TokenConfigError> {
        if token.len() < MIN_TOKEN_LEN {
            return Err(TokenConfigError(format!(
                "token {name:?} is shorter than {MIN_TOKEN_LEN} characters; generate one with `tasktable token new`"
            )));
        }
        self.push(name, role, Sha256::digest(token.as_bytes()).into(), limits)
    }

    fn push(
        &mut self,
        name: &str,
        role: Role,
        digest: [u8; 32],
        limits: WorkerLimits,
    ) -> Result<(), TokenConfigError> {
        // One token under two names (or roles) would act as whichever matched last:
        // refused, so that a token has exactly one role.
        if let Some(other) = self.entries.iter().find(|e| e.digest == digest) {
            return Err(TokenConfigError(format!(
                "token {name:?} is the same token as {:?}, listed before it; give each role a token of its own",
                other.name
            )));
        }
        if self.entries.iter().any(|e| e.name == name) {
            return Err(TokenConfigError(format!(
                "token name {name:?} is used twice"
            )));
        }
        if !limits.is_none() && role != Role::Worker {
            return Err(TokenConfigError(format!(
                "token {name:?} has role {role}: only worker tokens can be limited to queues or groups"
            )));
        }
        self.entries.push(Entry {
            name: name.to_owned(),
            role,
            digest,
            limits,
        });
        Ok(())
    }

    /// Reads a tokens file: one token per line, `<role> <name> sha256:<hex digest>`, and
    /// for a worker token optionally ` queues=<queue>,<queue>` to limit the queues it may
    /// claim from and ` groups=<group>,<group>` to limit the groups its workers may join;
    /// blank lines and lines starting with `#` are ignored. Plain-text tokens are refused
    /// so the file is not itself a secret.
    pub fn add_file_contents(&mut self, text: &str) -> Result<(), TokenConfigError> {
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| TokenConfigError(format!("tokens file line {}: {why}", n + 1));
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [role, name, digest, ref rest @ ..] = fields[..] else {
                return Err(bad(
                    "expected `<role> <name> sha256:<hex>` and, for a worker, `queues=<a>,<b>` or `groups=<a>,<b>`",
                ));
            };
            let mut limits = WorkerLimits::default();
            for field in rest {
                let (slot, list) = if let Some(list) = field.strip_prefix("queues=") {
                    (&mut limits.queues, parse_queue_list(list, ','))
                } else if let Some(list) = field.strip_prefix("groups=") {
                    (&mut limits.groups, parse_group_list(list, ','))
                } else {
                    return Err(bad(
                        "the fields after the digest, if any, are queues=<queue>,<queue> and groups=<group>,<group>",
                    ));
                };
                if slot.is_some() {
                    return Err(bad(&format!("{field:?} is given twice")));
                }
                *slot = Some(list.map_err(|e| bad(&e.0))?);
            }
            let role: Role = role.parse().map_err(|e: TokenConfigError| bad(&e.0))?;
            let hex_digest = digest
                .strip_prefix("sha256:")
                .ok_or_else(|| bad("the token must be given as sha256:<hex>; `tasktable token new` prints such a line"))?;
            let bytes = hex::decode(hex_digest)
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| bad("sha256 digest must be 64 hex digits"))?;
            self.push(name, role, bytes, limits)
                .map_err(|e| bad(&e.0))?;
        }
        Ok(())
    }

    /// Reads `TASKTABLE_TOKENS`-style text: comma-separated `<role>:<token>` pairs; a
    /// worker token may be limited to queues as `worker@<queue>+<queue>:<token>`, to
    /// groups as `worker#<group>+<group>:<token>`, or to both, `worker@<q>#<g>:<token>`.
    /// Each is named `env-` and the first 8 hex digits of its digest ([`env_token_name`]):
    /// a name that stays with the token whatever its place in the list, since worker ids
    /// and the audit go by names.
    pub fn add_env_value(&mut self, value: &str) -> Result<(), TokenConfigError> {
        for (n, pair) in value
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .enumerate()
        {
            let (role, token) = pair.split_once(':').ok_or_else(|| {
                TokenConfigError(format!(
                    "TASKTABLE_TOKENS entry {}: expected <role>:<token>",
                    n + 1
                ))
            })?;
            let (role, groups) = match role.trim().split_once('#') {
                Some((role, list)) => (role, Some(parse_group_list(list, '+')?)),
                None => (role.trim(), None),
            };
            let (role, queues) = match role.split_once('@') {
                Some((role, list)) => (role, Some(parse_queue_list(list, '+')?)),
                None => (role, None),
            };
            let role: Role = role.parse()?;
            let limits = WorkerLimits { queues, groups };
            let token = token.trim();
            self.add_plain_with(&env_token_name(token), role, token, limits)
                .map_err(|e| {
                    TokenConfigError(format!("TASKTABLE_TOKENS entry {}: {}", n + 1, e.0))
                })?;
        }
        Ok(())
    }

    /// The principal a presented token belongs to. Every digest is compared, in constant
    /// time, whether or not an earlier one matched.
    pub fn authenticate(&self, token: &str) -> Option<Principal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for entry in &self.entries {
            if bool::from(entry.digest.ct_eq(&digest)) {
                found = Some(entry);
            }
        }
        found.map(|e| Principal {
            name: e.name.clone(),
            role: e.role,
            limits: e.limits.clone(),
            authenticated: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_listed_twice_is_refused_naming_where() {
        let line = |role: &str, name: &str| {
            format!(
                "{role} {name} {}\n",
                token_digest("same-token-of-32-characters-long")
            )
        };
        let mut set = TokenSet::default();
        let twice = format!("{}# comment\n{}", line("reader", "a"), line("admin", "b"));
        let err = set.add_file_contents(&twice).unwrap_err().0;
        assert!(err.contains("tokens file line 3"), "{err}");
        assert!(err.contains("the same token as \"a\""), "{err}");

        let mut set = TokenSet::default();
        set.add_file_contents(&line("reader", "a")).unwrap();
        let err = set
            .add_env_value("admin:same-token-of-32-characters-long")
            .unwrap_err()
            .0;
        let name = env_token_name("same-token-of-32-characters-long");
        assert!(
            err.contains("TASKTABLE_TOKENS entry 1")
                && err.contains(&format!("{name:?} is the same token as \"a\"")),
            "{err}"
        );
        assert_eq!(set.len(), 1, "nothing was added");
    }

    #[test]
    fn roles_allow_exactly_their_access() {
        use Access::*;
        let table = [
            (Role::Admin, [true, true, true, true]),
            (Role::Operator, [true, true, false, false]),
            (Role::Worker, [false, false, true, false]),
            (Role::Reader, [true, false, false, false]),
        ];
        for (role, expected) in table {
            let got = [Read, Operate, Work, Admin].map(|a| role.allows(a));
            assert_eq!(got, expected, "{role}");
        }
    }

    #[test]
    fn file_tokens_are_digests_and_authenticate() {
        let token = "a-long-enough-secret-token";
        let mut set = TokenSet::default();
        let file = format!("# ops\n\nworker ci {}\n", token_digest(token));
        set.add_file_contents(&file).unwrap();
        assert_eq!(set.authenticate(token).unwrap().role, Role::Worker);
        assert_eq!(set.authenticate("a-long-enough-secret-tokeN"), None);
        let debug = format!("{set:?}");
        assert!(!debug.contains(token) && !debug.contains(&token_digest(token)[7..]));
    }

    #[test]
    fn worker_tokens_may_be_limited_to_queues() {
        let mut set = TokenSet::default();
        let file = format!(
            "worker mail {} queues=emails,reports\nworker any {}\n",
            token_digest("mail-worker-token-123"),
            token_digest("any-worker-token-1234")
        );
        set.add_file_contents(&file).unwrap();
        set.add_env_value("worker@thumbs+video:env-worker-token-12345")
            .unwrap();
        let mail = set.authenticate("mail-worker-token-123").unwrap();
        assert!(mail.may_claim_from("emails") && mail.may_claim_from("reports"));
        assert!(!mail.may_claim_from("default") && !mail.may_claim_from("email"));
        let env = set.authenticate("env-worker-token-12345").unwrap();
        assert_eq!(
            env.limits.queues,
            Some(vec!["thumbs".into(), "video".into()])
        );
        assert!(set
            .authenticate("any-worker-token-1234")
            .unwrap()
            .may_claim_from("anything"));
    }

    #[test]
    fn worker_tokens_may_be_limited_to_groups() {
        let mut set = TokenSet::default();
        let file = format!(
            "worker gpu {} groups=gpu,eu queues=render\n",
            token_digest("gpu-worker-token-1234")
        );
        set.add_file_contents(&file).unwrap();
        set.add_env_value(
            "worker@thumbs#cpu+us:env-worker-token-12345, worker#ap:env-worker-token-67890",
        )
        .unwrap();
        let gpu = set.authenticate("gpu-worker-token-1234").unwrap();
        assert_eq!(gpu.limits.queues, Some(vec!["render".into()]));
        let asked = ["gpu".to_owned(), "us".to_owned()];
        assert_eq!(gpu.limits.groups_outside(&asked), ["us"]);
        let env = set.authenticate("env-worker-token-12345").unwrap();
        assert_eq!(
            (env.limits.queues, env.limits.groups),
            (
                Some(vec!["thumbs".into()]),
                Some(vec!["cpu".into(), "us".into()])
            )
        );
        let ap = set.authenticate("env-worker-token-67890").unwrap();
        assert_eq!(
            (ap.limits.queues.clone(), ap.limits.groups.clone()),
            (None, Some(vec!["ap".into()]))
        );
        let name = env_token_name("env-worker-token-67890");
        assert_eq!(ap.worker_owner(), Some(name.clone()));
        assert!(name.starts_with("env-") && name.len() == 12, "{name}");
        // A name stays with its token wherever it is listed.
        let mut reordered = TokenSet::default();
        reordered
            .add_env_value("worker#ap:env-worker-token-67890, worker:another-worker-token-1")
            .unwrap();
        let again = reordered.authenticate("env-worker-token-67890").unwrap();
        assert_eq!(again.name, name);
        let mut set = TokenSet::default();
        let twice = format!("worker w {} groups=a groups=b", token_digest("x"));
        let err = set.add_file_contents(&twice).unwrap_err().0;
        assert!(err.contains("given twice"), "{err}");
        let err = set
            .add_env_value("operator#gpu:0123456789abcdefxyz")
            .unwrap_err()
            .0;
        assert!(err.contains("only worker tokens"), "{err}");
        let err = set
            .add_env_value("worker#:0123456789abcdefxyz")
            .unwrap_err()
            .0;
        assert!(err.contains("group list"), "{err}");
        assert!(set.is_empty());
    }

    #[test]
    fn bad_configuration_says_what_is_wrong() {
        let mut set = TokenSet::default();
        let err = set
            .add_file_contents("worker ci plaintext-token-here-x")
            .unwrap_err();
        assert!(
            err.0.contains("line 1") && err.0.contains("sha256:"),
            "{err}"
        );
        let err = set.add_env_value("boss:0123456789abcdefxyz").unwrap_err();
        assert!(err.0.contains("unknown role \"boss\""), "{err}");
        let err = set.add_env_value("reader:short").unwrap_err();
        assert!(err.0.contains("shorter than 16"), "{err}");
        let err = set.add_file_contents("reader r sha256:abcd").unwrap_err();
        assert!(err.0.contains("64 hex digits"), "{err}");
        let err = set
            .add_env_value("reader@q:0123456789abcdefxyz")
            .unwrap_err();
        assert!(err.0.contains("only worker tokens"), "{err}");
        let err = set
            .add_file_contents(&format!("worker w {} queues=", token_digest("x")))
            .unwrap_err();
        assert!(
            err.0.contains("line 1") && err.0.contains("queue list"),
            "{err}"
        );
        let err = set
            .add_file_contents(&format!("worker w {} limit=a", token_digest("x")))
            .unwrap_err();
        assert!(
            err.0.contains("queues=") && err.0.contains("groups="),
            "{err}"
        );
        assert!(set.is_empty(), "a refused line adds nothing");
        set.add_env_value("reader:0123456789abcdef, admin:fedcba9876543210")
            .unwrap();
        assert_eq!(set.len(), 2);
        assert_eq!((set.count(Role::Reader), set.count(Role::Worker)), (1, 0));
        assert_eq!(
            set.authenticate("fedcba9876543210").unwrap().role,
            Role::Admin
        );
    }
}
