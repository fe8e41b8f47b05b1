//! The bounds every name and count a caller gives is held to: how long a name may be, what
//! it may hold, how many attempts a task may have. Kept apart so that the modules that
//! check names (tasks, targets, workers, runs) all look down to it and at none of each
//! other.

/// Upper bound for `max_attempts`.
pub const MAX_ATTEMPTS_LIMIT: u32 = 10_000;

/// Longest accepted kind, queue, key or idempotency key, in characters (Unicode scalar
/// values): what JSON Schema's `maxLength` counts, so the API can state the limit exactly,
/// and what a MySQL `VARCHAR(255)` holds.
pub const MAX_NAME_LEN: usize = 255;

/// Longest worker id, group, host or version, in characters.
pub const MAX_NAME_CHARS: usize = MAX_NAME_LEN;

/// What separates the names a stored target holds (`|w:a|g:b|`): no member may contain it.
pub const SEPARATOR: char = '|';

/// 1 to [`MAX_NAME_CHARS`] characters, not all whitespace, none of them control
/// characters.
pub fn valid_name(s: &str) -> bool {
    !s.trim().is_empty() && s.chars().count() <= MAX_NAME_CHARS && !s.chars().any(char::is_control)
}

/// A worker id or group name a target may hold (and a worker may have).
pub fn valid_member(s: &str) -> bool {
    valid_name(s) && !s.contains(SEPARATOR)
}
