//! The sliding window of indices a batch runner may start: from the low-water mark (every
//! index below it is done) to `size` indices past it. Only the mark is saved, so a
//! takeover repeats at most the window and never skips an index.

use std::collections::VecDeque;

/// Indices `[low, low + size)`, of which `[low, issued)` have been handed out; `done`
/// holds one flag per handed-out index, front first.
#[derive(Debug, Clone)]
pub struct Window {
    low: u64,
    issued: u64,
    size: u64,
    end: Option<u64>,
    done: VecDeque<bool>,
}

impl Window {
    /// A window from `low` (the saved offset), `size` wide, over items below `end` (if
    /// known).
    pub fn new(low: u64, size: u64, end: Option<u64>) -> Self {
        Window {
            low,
            issued: low,
            size: size.max(1),
            end,
            done: VecDeque::new(),
        }
    }

    /// The next index to start, if the window and the end allow one.
    pub fn start_next(&mut self) -> Option<u64> {
        if self.issued >= self.low.saturating_add(self.size) {
            return None;
        }
        if self.end.is_some_and(|end| self.issued >= end) {
            return None;
        }
        let index = self.issued;
        self.issued += 1;
        self.done.push_back(false);
        Some(index)
    }

    /// Marks `index` done (succeeded, or failed for good); answers whether the low-water
    /// mark moved. An index not handed out, or done already, changes nothing.
    pub fn finish(&mut self, index: u64) -> bool {
        if index < self.low || index >= self.issued {
            return false;
        }
        let slot = usize::try_from(index - self.low).expect("a window fits in memory");
        self.done[slot] = true;
        let before = self.low;
        while self.done.front() == Some(&true) {
            self.done.pop_front();
            self.low += 1;
        }
        self.low != before
    }

    /// The handler said `index` is past the last item: nothing at or above it is
    /// started, and those handed out already count as done.
    pub fn end_at(&mut self, index: u64) {
        let end = self.end.map_or(index, |e| e.min(index));
        self.end = Some(end);
        if self.issued > end {
            let keep = usize::try_from(end.saturating_sub(self.low)).unwrap_or(usize::MAX);
            self.done.truncate(keep);
            self.issued = end.max(self.low);
        }
        if self.low > end {
            self.low = end;
        }
    }

    /// Every index below it is done: the offset to save.
    pub fn low(&self) -> u64 {
        self.low
    }

    /// The end, when known.
    pub fn end(&self) -> Option<u64> {
        self.end
    }

    /// Indices handed out and not yet done.
    pub fn in_flight(&self) -> u64 {
        self.done.iter().filter(|d| !**d).count() as u64
    }

    /// Every item is done: the end is known and the mark reached it.
    pub fn is_complete(&self) -> bool {
        self.end.is_some_and(|end| self.low >= end)
    }
}
