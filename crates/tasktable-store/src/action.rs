//! The key of an operator action: a change to every task a filter matches, however many
//! chunks and steps it takes, is one action, one row of the audit (see
//! [`bulk`](crate::bulk)). Its key marks every event it writes.

/// Longest action key.
pub const MAX_ACTION_KEY: usize = 64;

/// A key for a new operator action: 16 random hex digits.
pub fn new_action_key() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Refuses an action key that is empty, longer than [`MAX_ACTION_KEY`], or holds anything
/// but ASCII letters, digits, `-` and `_`.
pub fn check_action_key(key: &str) -> crate::StoreResult<()> {
    let fine = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if key.is_empty() || key.len() > MAX_ACTION_KEY || !key.chars().all(fine) {
        return Err(crate::StoreError::InvalidInput(format!(
            "an action key is 1 to {MAX_ACTION_KEY} letters, digits, '-' and '_', not {key:?}"
        )));
    }
    Ok(())
}
