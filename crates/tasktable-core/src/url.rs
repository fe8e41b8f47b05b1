//! Where a URL carries its user's password (`scheme://user:password@host/...`), so that
//! whoever shows a URL can leave the password out: an error naming a database, a reader
//! seeing an `http` task's URL.

use std::ops::Range;

/// The byte range of the password in `url`: after the first `:` of the user information
/// (everything up to the last `@` of the authority); `None` when it has none.
pub fn password_range(url: &str) -> Option<Range<usize>> {
    let start = url.find("://")? + 3;
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let at = authority.rfind('@')?;
    let colon = authority[..at].find(':')?;
    Some(start + colon + 1..start + at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn password(url: &str) -> Option<&str> {
        password_range(url).map(|r| &url[r])
    }

    #[test]
    fn the_password_is_what_follows_the_users_first_colon() {
        assert_eq!(
            password("postgres://app:s3cr%40t@db:5432/x?y=1"),
            Some("s3cr%40t")
        );
        assert_eq!(password("mysql://u:p:q@h/db"), Some("p:q"));
        assert_eq!(password("https://u:p@h/path@x"), Some("p"));
        assert_eq!(password("https://user@h/x"), None);
        assert_eq!(password("https://h/x?a=b:c@d"), None);
        assert_eq!(password("sqlite://tasks.db"), None);
        assert_eq!(password("no scheme"), None);
    }
}
