//! Who `exec` commands run as: a user of this machine, looked up once when the worker is
//! set up, and whether this process may start commands as anyone but itself.
//!
//! A command running as the worker's own user can read whatever the worker can: its
//! database file, its tokens file, its memory and environment through `/proc`. Running
//! commands as another user (`nobody` by default in `tasktable`) is what keeps them out.

use nix::unistd::{Uid, User};

/// The user an `exec` command runs as, with that user's primary group. When it is not the
/// worker's own, the command also loses the worker's supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecUser {
    name: String,
    uid: u32,
    gid: u32,
}

impl ExecUser {
    /// The user called `spec`, or whose numeric uid `spec` is, as the user database
    /// (`/etc/passwd`, NSS) knows it; an error says it does not exist. A uid the database
    /// does not know is refused too: it would have no primary group to run with.
    pub fn lookup(spec: &str) -> Result<Self, String> {
        let found = match spec.parse::<u32>() {
            Ok(uid) => User::from_uid(Uid::from_raw(uid)),
            Err(_) => User::from_name(spec),
        };
        match found {
            Ok(Some(user)) => Ok(ExecUser {
                name: user.name,
                uid: user.uid.as_raw(),
                gid: user.gid.as_raw(),
            }),
            Ok(None) => Err(format!("no user {spec:?} on this machine")),
            Err(e) => Err(format!("cannot look up user {spec:?}: {e}")),
        }
    }

    /// This process's own effective user and group: commands started as it need no switch.
    pub fn current() -> Self {
        let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
        let name = match User::from_uid(uid) {
            Ok(Some(user)) => user.name,
            _ => format!("uid {uid}"),
        };
        ExecUser {
            name,
            uid: uid.as_raw(),
            gid: gid.as_raw(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn uid(&self) -> u32 {
        self.uid
    }

    pub fn gid(&self) -> u32 {
        self.gid
    }

    /// Whether this is the user and group this process runs as, so that starting a
    /// command as it changes neither.
    pub fn is_current(&self) -> bool {
        self.uid == nix::unistd::geteuid().as_raw() && self.gid == nix::unistd::getegid().as_raw()
    }

    /// Whether this process may start commands as this user: it is the process's own, or
    /// the process [can switch users](can_switch_users).
    pub fn is_reachable(&self) -> bool {
        self.is_current() || can_switch_users()
    }
}

impl std::fmt::Display for ExecUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (uid {}, gid {})", self.name, self.uid, self.gid)
    }
}

/// Whether this process may start commands as another user and group: it holds both
/// `CAP_SETUID` and `CAP_SETGID` in its effective capability set (root normally does;
/// a root process whose capabilities were dropped, in a container say, may not). Where
/// `/proc/self/status` cannot be read, whether its effective uid is 0.
pub fn can_switch_users() -> bool {
    const CAP_SETGID: u32 = 6;
    const CAP_SETUID: u32 = 7;
    match effective_capabilities() {
        Some(caps) => caps & (1 << CAP_SETUID) != 0 && caps & (1 << CAP_SETGID) != 0,
        None => nix::unistd::geteuid().is_root(),
    }
}

/// The `CapEff` mask of `/proc/self/status`.
fn effective_capabilities() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_found_by_name_or_by_uid_and_an_unknown_one_is_refused() {
        let root = ExecUser::lookup("root").unwrap();
        assert_eq!((root.name(), root.uid(), root.gid()), ("root", 0, 0));
        assert_eq!(ExecUser::lookup("0").unwrap(), root);
        let err = ExecUser::lookup("no-such-user-of-tasktable").unwrap_err();
        assert!(
            err.contains("no user \"no-such-user-of-tasktable\""),
            "{err}"
        );
        let err = ExecUser::lookup("4000000000").unwrap_err();
        assert!(err.contains("no user \"4000000000\""), "{err}");
    }

    #[test]
    fn the_current_user_needs_no_switch_and_is_always_reachable() {
        let me = ExecUser::current();
        assert!(me.is_current() && me.is_reachable(), "{me}");
        assert_eq!(me.uid(), nix::unistd::geteuid().as_raw());
    }

    #[test]
    fn only_a_process_with_both_capabilities_can_switch_users() {
        let caps = effective_capabilities().expect("Linux has /proc/self/status");
        assert_eq!(can_switch_users(), caps & 0xc0 == 0xc0);
    }
}
