//! The sliding window of indices a batch runner may start: from the saved low-water mark
//! (every index below it is done, and the database knows it) to `size` indices past it.
//! Only the mark is saved, and no index at or past the saved mark plus `size` starts, so
//! a takeover, which starts again at the saved mark, repeats at most `size` items and
//! never skips one.

use std::collections::VecDeque;

/// Indices `[low, saved + size)` may be handed out (`saved <= low`), of which
/// `[low, issued)` have been; `done` holds one flag per handed-out index, front first.
#[derive(Debug, Clone)]
pub struct Window {
    low: u64,
    saved: u64,
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
            saved: low,
            issued: low,
            size: size.max(1),
            end,
            done: VecDeque::new(),
        }
    }

    /// The next index to start, if the window and the end allow one.
    pub fn start_next(&mut self) -> Option<u64> {
        if self.issued >= self.saved.saturating_add(self.size) {
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
        self.saved = self.saved.min(self.low);
    }

    /// Every index below it is done: the offset to save.
    pub fn low(&self) -> u64 {
        self.low
    }

    /// The database holds `low` as the batch's offset now: the window may move up to it.
    pub fn mark_saved(&mut self, low: u64) {
        self.saved = low.clamp(self.saved, self.low);
    }

    /// How many indices past the saved mark may start.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Items done past the saved mark: what a takeover would repeat now.
    pub fn unsaved(&self) -> u64 {
        self.low - self.saved
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
