//! CRC-32C arithmetic for checksums derived instead of recomputed.
//!
//! A page's checksum is the CRC-32C of its bytes after the checksum field, less the unused gap:
//! `P ++ C`, where `P` is the header and slot array (about a hundred bytes) and `C` the cell
//! area at the end of the page (most of it). A copy-on-write copy changes `P` and, for a put,
//! a cell or two of `C`; recomputing the CRC of the whole page for that cost about a tenth of a
//! random put (docs/design/performance.md). The CRC is linear, so the writer instead derives
//! the CRC of `C` from the checksum the copied page already carries, updates it for each
//! change it makes to `C`, and at sealing combines it with the CRC of the new `P`. The result
//! is the same checksum, bit for bit, as `page_checksum` computes (debug builds compare the
//! two for every page sealed this way).
//!
//! Notation: `crc0` is the CRC with a zero initial value and no final XOR, which is linear:
//! `crc0(a ^ b) = crc0(a) ^ crc0(b)` for equal lengths, and `crc0(a ++ b) =
//! shift(crc0(a), |b|) ^ crc0(b)`, where `shift(c, n)` multiplies `c` by `x^(8n)` modulo the
//! CRC polynomial. The standard CRC of `m` bytes is `crc0 ^ zeros(m)`, where `zeros(m)` is the
//! standard CRC of `m` zero bytes. Polynomials are 32-bit values in the CRC's reflected form
//! (bit 31 is the coefficient of `x^0`).

use crate::layout::{header, unused_gap};

/// CRC-32C's polynomial, reflected.
const POLY: u32 = 0x82F6_3B78;

/// `x^0`, reflected.
const ONE: u32 = 0x8000_0000;

/// `a * b` modulo the polynomial, bit by bit (zlib's `multmodp`). Used to build the tables and
/// where the CPU has no carry-less multiply.
fn mul_soft(a: u32, mut b: u32) -> u32 {
    let mut p = 0u32;
    let mut m = ONE;
    while m != 0 {
        if a & m != 0 {
            p ^= b;
        }
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
        m >>= 1;
    }
    p
}

/// `a * b` modulo the polynomial with one carry-less multiply and one CRC instruction for the
/// reduction: the product, shifted left by one, holds `x^k` at bit `63 - k`; its low half is
/// the part of degree 32 and more, which the CRC instruction reduces (it computes
/// `M(x) * x^32 mod P` for a 32-bit message `M`), and its high half is the rest, already of
/// degree below 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "pclmulqdq,sse4.2")]
unsafe fn mul_clmul(a: u32, b: u32) -> u32 {
    use std::arch::x86_64::{
        _mm_clmulepi64_si128, _mm_crc32_u32, _mm_cvtsi128_si64, _mm_set_epi64x,
    };
    let prod = _mm_clmulepi64_si128(_mm_set_epi64x(0, a as i64), _mm_set_epi64x(0, b as i64), 0);
    let c = (_mm_cvtsi128_si64(prod) as u64) << 1;
    _mm_crc32_u32(0, c as u32) ^ (c >> 32) as u32
}

/// `crc0` of `bytes` with the CRC instruction, which computes exactly that (no initial value,
/// no final XOR): eight bytes per instruction, with no call and no dispatch, for the short
/// inputs this module sees (a page's head, a cell, a reference).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc0_hw(bytes: &[u8]) -> u32 {
    // SAFETY: the caller's CPU has SSE4.2, as this function's own contract requires.
    unsafe { crc_hw(0, bytes) }
}

/// The CRC register `c` after `bytes`, with the CRC instruction (`crc0_hw` from register 0).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc_hw(c: u32, bytes: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let (words, tail) = bytes.as_chunks::<8>();
    let mut c = c as u64;
    for w in words {
        c = _mm_crc32_u64(c, u64::from_le_bytes(*w));
    }
    let mut c = c as u32;
    for &b in tail {
        c = _mm_crc32_u8(c, b);
    }
    c
}

/// Longest input `crc32c_parts` takes through the CRC instruction: one dependent instruction
/// per eight bytes, ahead of `crc_fast`'s folding (which first pays a dispatch and a
/// `Digest` per part) below about this length.
const PARTS_HW_MAX: usize = 256;

/// The standard CRC-32C of the concatenation of `parts`. Short inputs (a one-put commit's log
/// record: its position, header and body) go through the CRC instruction with no call or
/// dispatch: 14-23 ns a record of 24-140 bytes of body, against 21-40 ns through a
/// `crc_fast::Digest` with an update a part (performance.md). Long ones go to `crc_fast`.
pub(crate) fn crc32c_parts(parts: &[&[u8]]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if parts.iter().map(|p| p.len()).sum::<usize>() <= PARTS_HW_MAX
        && std::arch::is_x86_feature_detected!("sse4.2")
    {
        let mut c = !0u32;
        for p in parts {
            // SAFETY: the CPU has SSE4.2 (checked above).
            c = unsafe { crc_hw(c, p) };
        }
        return !c;
    }
    let mut crc = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    for p in parts {
        crc.update(p);
    }
    crc.finalize() as u32
}

/// The shift and zero-run tables for one page size.
#[derive(Debug)]
pub(crate) struct Shifts {
    /// `x^(8n) mod P` for `n` in `0..=page_bytes`.
    x8: Box<[u32]>,
    /// The standard CRC of `n` zero bytes, for `n` in `0..=page_bytes`.
    zeros: Box<[u32]>,
    hw: bool,
}

impl Shifts {
    /// Tables for messages up to `page_bytes` long (a page).
    pub(crate) fn new(page_bytes: usize) -> Shifts {
        let mut x8 = Vec::with_capacity(page_bytes + 1);
        let mut zeros = Vec::with_capacity(page_bytes + 1);
        let byte = ONE >> 8;
        let mut p = ONE;
        for _ in 0..=page_bytes {
            x8.push(p);
            // The CRC register starts all ones; `n` zero bytes multiply it by x^(8n); the
            // final XOR flips it again.
            zeros.push(mul_soft(!0, p) ^ !0);
            p = mul_soft(p, byte);
        }
        #[cfg(target_arch = "x86_64")]
        let hw = std::arch::is_x86_feature_detected!("pclmulqdq")
            && std::arch::is_x86_feature_detected!("sse4.2");
        #[cfg(not(target_arch = "x86_64"))]
        let hw = false;
        Shifts {
            x8: x8.into_boxed_slice(),
            zeros: zeros.into_boxed_slice(),
            hw,
        }
    }

    /// The longest message the tables cover.
    pub(crate) fn page_bytes(&self) -> usize {
        self.x8.len() - 1
    }

    #[inline]
    fn mul(&self, a: u32, b: u32) -> u32 {
        #[cfg(target_arch = "x86_64")]
        if self.hw {
            // SAFETY: `hw` is set only where the CPU has both instructions.
            return unsafe { mul_clmul(a, b) };
        }
        mul_soft(a, b)
    }

    /// `c * x^(8n)`: the `crc0` of a message followed by `n` more bytes, without them.
    /// Requires: `n <= page_bytes`.
    #[inline]
    pub(crate) fn shift(&self, c: u32, n: usize) -> u32 {
        debug_assert!(n <= self.page_bytes());
        self.mul(c, self.x8[n])
    }

    /// The standard CRC of `n` zero bytes. Requires: `n <= page_bytes`.
    #[inline]
    pub(crate) fn zeros(&self, n: usize) -> u32 {
        debug_assert!(n <= self.page_bytes());
        self.zeros[n]
    }

    /// `crc0` of `bytes`. Requires: `bytes.len() <= page_bytes`.
    #[inline]
    pub(crate) fn crc0(&self, bytes: &[u8]) -> u32 {
        debug_assert!(bytes.len() <= self.page_bytes());
        #[cfg(target_arch = "x86_64")]
        if self.hw {
            // SAFETY: `hw` is set only where the CPU has SSE4.2.
            return unsafe { crc0_hw(bytes) };
        }
        crc32c(bytes) ^ self.zeros[bytes.len()]
    }
}

/// The derived `crc0` of one dirty node's cell area, as `WritePages::node_mut` hands it out
/// with the page: every change the caller makes to the cell area must be reported here (or
/// `invalidate` called), so that sealing can derive the checksum from it.
pub(crate) struct CellsCrc<'a> {
    cells: &'a mut Option<u32>,
    shifts: &'a Shifts,
}

impl<'a> CellsCrc<'a> {
    pub(crate) fn new(cells: &'a mut Option<u32>, shifts: &'a Shifts) -> CellsCrc<'a> {
        CellsCrc { cells, shifts }
    }

    /// True while the cell area's CRC is known (only then is `crc0` worth computing).
    #[inline]
    pub(crate) fn is_tracked(&self) -> bool {
        self.cells.is_some()
    }

    /// `crc0` of `bytes` if tracked, else 0 (unused).
    #[inline]
    pub(crate) fn crc0(&self, bytes: &[u8]) -> u32 {
        if self.is_tracked() {
            self.shifts.crc0(bytes)
        } else {
            0
        }
    }

    /// `bytes` now lie just in front of the cell area, which was `area` bytes long.
    #[inline]
    pub(crate) fn prepended(&mut self, bytes: &[u8], area: usize) {
        if let Some(c) = *self.cells {
            *self.cells = Some(c ^ self.shifts.shift(self.shifts.crc0(bytes), area));
        }
    }

    /// Bytes of the cell area whose `crc0` was `old` (from `crc0` above) now hold `new`, the
    /// same length, ending `tail` bytes before the end of the page.
    #[inline]
    pub(crate) fn overwritten(&mut self, old: u32, new: &[u8], tail: usize) {
        if let Some(c) = *self.cells {
            let delta = old ^ self.shifts.crc0(new);
            *self.cells = Some(c ^ self.shifts.shift(delta, tail));
        }
    }

    /// Bytes of the cell area ending `tail` bytes before the end of the page changed by the
    /// XOR `delta` (old ^ new).
    #[inline]
    pub(crate) fn changed(&mut self, delta: &[u8], tail: usize) {
        if let Some(c) = *self.cells {
            *self.cells = Some(c ^ self.shifts.shift(self.shifts.crc0(delta), tail));
        }
    }

    /// The cell area changed in a way not reported: sealing recomputes the checksum.
    #[inline]
    pub(crate) fn invalidate(&mut self) {
        *self.cells = None;
    }
}

/// `crc0` of the cell area of committed node page `old` (from its unused gap to the end),
/// derived from its checksum: `crc0(P ++ C) = shift(crc0(P), |C|) ^ crc0(C)`, where `P` is the
/// page from after the checksum field to the gap. `None` if the page's layout gives no gap.
pub(crate) fn cells_crc(shifts: &Shifts, old: &[u8]) -> Option<u32> {
    let (start, end) = unused_gap(old);
    let len = old.len();
    if start < header::CHECKED_FROM || start > end || end > len || len > shifts.page_bytes() {
        return None;
    }
    let head = &old[header::CHECKED_FROM..start];
    let whole = header::checksum(old) ^ shifts.zeros(head.len() + (len - end));
    Some(whole ^ shifts.shift(shifts.crc0(head), len - end))
}

/// The standard CRC-32C of `bytes`.
#[inline]
pub(crate) fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn parts_crc_is_the_crc_of_the_concatenation() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        for _ in 0..500 {
            let n = rng.gen_range(0..4);
            let parts: Vec<Vec<u8>> = (0..n)
                .map(|_| {
                    // Around `PARTS_HW_MAX`, on both sides of it.
                    let len = rng.gen_range(0..PARTS_HW_MAX / 2 + 40);
                    (0..len).map(|_| rng.gen()).collect()
                })
                .collect();
            let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
            assert_eq!(crc32c_parts(&refs), crc32c::crc32c(&parts.concat()));
        }
        assert_eq!(crc32c_parts(&[]), crc32c::crc32c(b""));
    }

    #[test]
    fn crc0_and_shift_compose_like_concatenation() {
        let s = Shifts::new(4096);
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for _ in 0..300 {
            let a: Vec<u8> = (0..rng.gen_range(0..2000)).map(|_| rng.gen()).collect();
            let b: Vec<u8> = (0..rng.gen_range(0..2000)).map(|_| rng.gen()).collect();
            let ab = [&a[..], &b[..]].concat();
            assert_eq!(crc32c(&ab), crc32c::crc32c(&ab));
            assert_eq!(s.zeros(ab.len()), crc32c::crc32c(&vec![0u8; ab.len()]));
            assert_eq!(
                s.crc0(&ab),
                s.shift(s.crc0(&a), b.len()) ^ s.crc0(&b),
                "lengths {} {}",
                a.len(),
                b.len()
            );
            // Linearity: XOR of equal-length messages.
            let c: Vec<u8> = (0..a.len()).map(|_| rng.gen()).collect();
            let ac: Vec<u8> = a.iter().zip(&c).map(|(x, y)| x ^ y).collect();
            assert_eq!(s.crc0(&ac), s.crc0(&a) ^ s.crc0(&c));
        }
    }

    #[test]
    fn hardware_multiply_matches_the_bitwise_one() {
        let s = Shifts::new(64);
        let mut rng = rand::rngs::StdRng::seed_from_u64(6);
        for _ in 0..10_000 {
            let (a, b) = (rng.gen::<u32>(), rng.gen::<u32>());
            assert_eq!(s.mul(a, b), mul_soft(a, b), "{a:#x} * {b:#x}");
        }
        assert_eq!(mul_soft(ONE, 0x1234_5678), 0x1234_5678);
        for len in 0..64 {
            let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            assert_eq!(
                s.crc0(&bytes),
                crc32c(&bytes) ^ s.zeros(len),
                "length {len}"
            );
        }
    }
}
