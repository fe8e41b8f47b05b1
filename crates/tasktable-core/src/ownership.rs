//! Who may act as a worker id. Through the HTTP API a worker id belongs to the token that
//! first used it (a heartbeat, or a claim naming an id the registry does not hold): no
//! other token may heartbeat, leave or claim as that id, so no token can overwrite
//! another's worker, make it leave, or take the tasks aimed at it. One token may own many
//! ids (a fleet shares a token); each token owns at most a configured number of live ids.
//!
//! Workers of the process protocol reach the database directly and are trusted with it:
//! their ids have no owner and no token may act as them. A pull worker's id without an
//! owner (registered by a server without tokens, or before owners were recorded) goes to
//! the first token that uses it.

use crate::worker::Protocol;

/// Why a caller may not act as a worker id, or register one more.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerRefusal {
    /// The id belongs to another token.
    #[error("worker id {id:?} belongs to another token; give each worker an id of its own")]
    NotOwned {
        /// The id asked for.
        id: String,
    },
    /// The id is an in-process worker's, which no token may act as.
    #[error("worker id {id:?} belongs to an in-process worker; give each worker an id of its own")]
    InProcess {
        /// The id asked for.
        id: String,
    },
    /// The token has as many live worker ids as it may.
    #[error("token {token:?} already has {limit} live workers, the most it may; stop one (it leaves) or let a silent one be marked gone, or ask the operator to raise --max-workers-per-token")]
    TooMany {
        /// The token's name.
        token: String,
        /// The cap.
        limit: u32,
    },
    /// A claim names groups its worker did not register with its heartbeat.
    #[error("worker {id:?} claims for the groups {} it did not register; send them in its heartbeat first", .groups.join(", "))]
    GroupsNotRegistered {
        /// The worker's id.
        id: String,
        /// The groups the claim named that the registry does not hold for it.
        groups: Vec<String>,
    },
}

/// How the registry holds an id now: its owner (a token's name) and its protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held<'a> {
    /// The token that owns the id; `None`: no token does.
    pub owner: Option<&'a str>,
    /// The protocol of its last heartbeat.
    pub protocol: Protocol,
}

/// Whether `caller` (a token's name; `None`: a caller bound to no token, an in-process
/// worker or a server without tokens) may act as worker `id`, which the registry holds
/// as `held` (`None`: not at all).
pub fn may_act_as(
    id: &str,
    held: Option<Held<'_>>,
    caller: Option<&str>,
) -> Result<(), WorkerRefusal> {
    let (Some(caller), Some(held)) = (caller, held) else {
        return Ok(());
    };
    match (held.owner, held.protocol) {
        (Some(owner), _) if owner == caller => Ok(()),
        (Some(_), _) => Err(WorkerRefusal::NotOwned { id: id.to_owned() }),
        (None, Protocol::Pull) => Ok(()),
        (None, Protocol::Process) => Err(WorkerRefusal::InProcess { id: id.to_owned() }),
    }
}

/// Whether `token`, holding `live` live workers besides the one it registers (or brings
/// back), may hold one more under a cap of `limit`.
pub fn may_register(token: &str, live: u64, limit: u32) -> Result<(), WorkerRefusal> {
    if live >= u64::from(limit) {
        return Err(WorkerRefusal::TooMany {
            token: token.to_owned(),
            limit,
        });
    }
    Ok(())
}

/// How many gone workers a token keeps when it registers a new id under a cap of `limit`:
/// its newest `limit - 1` (with the new one gone later, `limit`), so it holds at most as
/// many gone workers as live ones.
pub fn gone_kept(limit: u32) -> u32 {
    limit.saturating_sub(1)
}

/// Whose an id is after a heartbeat that may act as it ([`may_act_as`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerAfterBeat {
    /// No token's: an in-process worker's beat, bound to no token, takes its id back from
    /// a token that used it before the worker first started.
    NoOne,
    /// The owner it had; an id without one becomes the beating token's (if any).
    KeptOrGiven,
}

/// Whose an id is after a heartbeat by `caller` (a token's name, or `None`) of a worker
/// of `protocol`.
pub fn owner_after_beat(caller: Option<&str>, protocol: Protocol) -> OwnerAfterBeat {
    match (caller, protocol) {
        (None, Protocol::Process) => OwnerAfterBeat::NoOne,
        _ => OwnerAfterBeat::KeptOrGiven,
    }
}

/// The groups of `claimed` that are not among `registered`.
pub fn unregistered_groups(registered: &[String], claimed: &[String]) -> Vec<String> {
    claimed
        .iter()
        .filter(|g| !registered.contains(g))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(owner: Option<&str>, protocol: Protocol) -> Option<Held<'_>> {
        Some(Held { owner, protocol })
    }

    #[test]
    fn an_id_belongs_to_its_token_and_a_free_pull_id_to_the_first() {
        let pull = Protocol::Pull;
        assert_eq!(may_act_as("w", None, Some("a")), Ok(()));
        assert_eq!(may_act_as("w", held(Some("a"), pull), Some("a")), Ok(()));
        assert_eq!(
            may_act_as("w", held(Some("a"), pull), Some("b")),
            Err(WorkerRefusal::NotOwned { id: "w".into() })
        );
        assert_eq!(may_act_as("w", held(None, pull), Some("b")), Ok(()));
        assert_eq!(
            may_act_as("w", held(None, Protocol::Process), Some("b")),
            Err(WorkerRefusal::InProcess { id: "w".into() })
        );
        // A caller bound to no token is trusted with every id.
        assert_eq!(may_act_as("w", held(Some("a"), pull), None), Ok(()));
        assert_eq!(may_act_as("w", held(None, Protocol::Process), None), Ok(()));
    }

    #[test]
    fn a_token_registers_within_its_cap_and_keeps_as_many_gone() {
        assert_eq!(may_register("a", 2, 3), Ok(()));
        assert_eq!(
            may_register("a", 3, 3),
            Err(WorkerRefusal::TooMany {
                token: "a".into(),
                limit: 3
            })
        );
        assert_eq!((gone_kept(3), gone_kept(1)), (2, 0));
    }

    #[test]
    fn only_an_unbound_in_process_beat_clears_the_owner() {
        use OwnerAfterBeat::*;
        assert_eq!(owner_after_beat(None, Protocol::Process), NoOne);
        assert_eq!(owner_after_beat(None, Protocol::Pull), KeptOrGiven);
        assert_eq!(owner_after_beat(Some("a"), Protocol::Process), KeptOrGiven);
        assert_eq!(owner_after_beat(Some("a"), Protocol::Pull), KeptOrGiven);
    }

    #[test]
    fn a_claim_may_name_only_registered_groups() {
        let registered = vec!["gpu".to_owned(), "eu".to_owned()];
        assert!(unregistered_groups(&registered, &["gpu".into()]).is_empty());
        assert!(unregistered_groups(&registered, &[]).is_empty());
        assert_eq!(
            unregistered_groups(&registered, &["gpu".into(), "us".into()]),
            vec!["us".to_owned()]
        );
        let message = WorkerRefusal::GroupsNotRegistered {
            id: "w".into(),
            groups: vec!["us".into(), "ap".into()],
        }
        .to_string();
        assert!(message.contains("us, ap"), "{message}");
    }
}
