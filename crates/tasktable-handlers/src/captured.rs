//! Output kept within fixed bounds: the first bytes of a response body or of stdout, the
//! last bytes of stderr, and how they become a task's result or an error message.

use serde_json::Value;

/// Most bytes of a response body or of stdout kept in a result.
pub(crate) const RESULT_LIMIT: usize = 64 * 1024;
/// Most bytes of stderr kept in a result: the end, where errors usually are.
pub(crate) const TAIL_LIMIT: usize = 4 * 1024;
/// Most characters of a body or of stderr quoted in an error message.
pub(crate) const SNIPPET_CHARS: usize = 1024;

/// The first `limit` bytes of a stream; the rest is counted as truncated and dropped.
#[derive(Debug)]
pub(crate) struct Head {
    bytes: Vec<u8>,
    limit: usize,
    truncated: bool,
}

impl Head {
    pub fn new(limit: usize) -> Self {
        Head {
            bytes: Vec::new(),
            limit,
            truncated: false,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        let room = self.limit - self.bytes.len();
        if chunk.len() > room {
            self.truncated = true;
        }
        self.bytes
            .extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    /// Whether bytes past the limit were dropped.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }

    /// The JSON value when the whole stream was kept and is JSON; otherwise the text.
    pub fn json_or_text(&self) -> Value {
        if !self.truncated {
            if let Ok(value) = serde_json::from_slice(&self.bytes) {
                return value;
            }
        }
        Value::String(self.text())
    }

    /// The bytes as text, without a character cut in half at the end.
    pub fn text(&self) -> String {
        let end = if self.truncated {
            complete_prefix(&self.bytes)
        } else {
            self.bytes.len()
        };
        String::from_utf8_lossy(&self.bytes[..end]).into_owned()
    }
}

/// The last `limit` bytes of a stream.
#[derive(Debug)]
pub(crate) struct Tail {
    bytes: Vec<u8>,
    limit: usize,
    dropped: bool,
}

impl Tail {
    pub fn new(limit: usize) -> Self {
        Tail {
            bytes: Vec::new(),
            limit,
            dropped: false,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        // Trim in bulk, not per chunk, so a long stream costs linear time.
        if self.bytes.len() >= 2 * self.limit {
            self.trim();
        }
    }

    /// Whether bytes before the last `limit` were (or will be) dropped.
    pub fn is_dropped(&self) -> bool {
        self.dropped || self.bytes.len() > self.limit
    }

    /// The bytes as text, without a character cut in half at the start.
    pub fn text(mut self) -> String {
        self.trim();
        let start = if self.dropped {
            continuation_len(&self.bytes)
        } else {
            0
        };
        String::from_utf8_lossy(&self.bytes[start..]).into_owned()
    }

    fn trim(&mut self) {
        if self.bytes.len() > self.limit {
            self.bytes.drain(..self.bytes.len() - self.limit);
            self.dropped = true;
        }
    }
}

/// The length of `bytes` without a UTF-8 sequence left incomplete at its end.
fn complete_prefix(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(4) {
        let b = bytes[len - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back for the lead byte
        }
        let needed = match b {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if needed > back { len - back } else { len };
    }
    len
}

/// How many continuation bytes (the rest of a character cut off before them) start `bytes`.
fn continuation_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| *b & 0xC0 == 0x80)
        .count()
}

/// At most the first `n` characters of `text`, marked when shortened.
pub(crate) fn first_chars(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// At most the last `n` characters of `text`, marked when shortened.
pub(crate) fn last_chars(text: &str, n: usize) -> String {
    let count = text.chars().count();
    if count <= n {
        return text.to_owned();
    }
    let (at, _) = text.char_indices().nth(count - n).expect("within the text");
    format!("...{}", &text[at..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn complete_json_is_parsed_and_anything_else_is_text() {
        let mut head = Head::new(100);
        head.push(b"{\"a\": [1, 2]}\n");
        assert_eq!(head.json_or_text(), json!({"a": [1, 2]}));

        let mut head = Head::new(100);
        head.push(b"hello");
        assert_eq!(head.json_or_text(), json!("hello"));
    }

    #[test]
    fn a_truncated_head_is_text_even_when_its_prefix_parses() {
        let mut head = Head::new(4);
        head.push(b"12345678");
        assert_eq!(head.json_or_text(), json!("1234"));
    }

    #[test]
    fn a_head_does_not_end_in_half_a_character() {
        let mut head = Head::new(4);
        head.push("abé€".as_bytes()); // a b (1 byte each) é (2) € (3)
        assert_eq!(head.text(), "abé");
        let mut head = Head::new(3);
        head.push("abé".as_bytes());
        assert_eq!(head.text(), "ab");
    }

    #[test]
    fn a_tail_keeps_the_last_bytes_without_half_a_character() {
        let mut tail = Tail::new(5);
        for chunk in ["first line\n", "é€", "!"] {
            tail.push(chunk.as_bytes());
        }
        // The last 5 bytes are the second byte of é, the 3 of € and !.
        assert_eq!(tail.text(), "€!");
    }

    #[test]
    fn snippets_mark_where_they_were_cut() {
        assert_eq!(first_chars("abcdef", 3), "abc...");
        assert_eq!(first_chars("abc", 3), "abc");
        assert_eq!(last_chars("abcdef", 2), "...ef");
        assert_eq!(last_chars("ab", 2), "ab");
    }
}
