//! A bitmap of page ids.

/// One bit per page id, grown on demand (a page count of n costs n/8 bytes).
#[derive(Clone, Debug, Default)]
pub(super) struct Bitmap {
    words: Vec<u64>,
}

impl Bitmap {
    /// The words covering `[start, end)`, each with the mask of its bits in the range.
    fn spans(start: u64, end: u64) -> impl Iterator<Item = (usize, u64)> {
        let (first, last) = (start / 64, end.div_ceil(64));
        (first..last).map(move |w| {
            let lo = start.max(w * 64) - w * 64;
            let hi = end.min(w * 64 + 64) - w * 64;
            let mask = if hi - lo == 64 {
                u64::MAX
            } else {
                ((1u64 << (hi - lo)) - 1) << lo
            };
            (w as usize, mask)
        })
    }

    /// True if any bit in `[start, end)` is set.
    pub(super) fn any(&self, start: u64, end: u64) -> bool {
        let end = end.min(self.words.len() as u64 * 64);
        start < end && Self::spans(start, end).any(|(w, mask)| self.words[w] & mask != 0)
    }

    /// True if every bit in `[start, end)` is set.
    pub(super) fn all(&self, start: u64, end: u64) -> bool {
        end <= self.words.len() as u64 * 64
            && Self::spans(start, end).all(|(w, mask)| self.words[w] & mask == mask)
    }

    /// The maximal runs of set bits, as (start, length), in order.
    pub(super) fn runs(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (w, &word) in self.words.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let lo = bits.trailing_zeros() as u64;
                let ones = (bits >> lo).trailing_ones() as u64;
                let start = w as u64 * 64 + lo;
                match out.last_mut() {
                    Some((s, l)) if *s + *l == start => *l += ones,
                    _ => out.push((start, ones)),
                }
                bits = if lo + ones >= 64 {
                    0
                } else {
                    bits & !(((1u64 << ones) - 1) << lo)
                };
            }
        }
        out
    }

    /// Sets or clears `[start, end)`. Requires: `end <= PAGE_COUNT_MAX`.
    pub(super) fn set(&mut self, start: u64, end: u64, on: bool) {
        debug_assert!(end <= crate::limits::PAGE_COUNT_MAX);
        if on {
            let words = end.div_ceil(64) as usize;
            if self.words.len() < words {
                self.words.resize(words.max(self.words.len() * 2), 0);
            }
        }
        let end = end.min(self.words.len() as u64 * 64);
        if start >= end {
            return;
        }
        for (w, mask) in Self::spans(start, end) {
            if on {
                self.words[w] |= mask;
            } else {
                self.words[w] &= !mask;
            }
        }
    }
}
