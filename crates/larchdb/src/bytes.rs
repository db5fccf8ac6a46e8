//! Little-endian field access for on-disk structures. Callers pass offsets they have already
//! bounds-checked against the page; these helpers still index safely and never read out of
//! bounds (a slice index past the end would panic, so every caller validates first).

#[inline]
pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

#[inline]
pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[inline]
pub(crate) fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

#[inline]
pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[inline]
pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// `a.cmp(b)` (byte order), with keys of 16 bytes or more that differ in their first 16
/// decided by one comparison of two numbers, without the call to `memcmp` a slice comparison
/// makes (`WriteTable::append`'s order check: 2-3% of a one-put append commit's samples,
/// docs/design/write-path.md, session 55).
#[inline]
pub(crate) fn cmp_keys(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    if let (Some(a16), Some(b16)) = (a.first_chunk::<16>(), b.first_chunk::<16>()) {
        let (a16, b16) = (u128::from_be_bytes(*a16), u128::from_be_bytes(*b16));
        if a16 != b16 {
            return a16.cmp(&b16);
        }
    }
    a.cmp(b)
}

#[cfg(test)]
mod tests {
    use super::cmp_keys;

    /// `cmp_keys` orders as the slices do, for keys shorter and longer than 16 bytes, equal
    /// in their first 16 or not, one a prefix of the other.
    #[test]
    fn cmp_keys_orders_as_slices_do() {
        let keys: Vec<Vec<u8>> = vec![
            vec![],
            b"a".to_vec(),
            b"ab".to_vec(),
            b"ab\0".to_vec(),
            b"0000000000123456".to_vec(),
            b"0000000000123457".to_vec(),
            b"0000000000123456\0".to_vec(),
            b"0000000000123456a".to_vec(),
            b"1000000000000000".to_vec(),
            [0xff; 16].to_vec(),
            [0xff; 17].to_vec(),
            [0x7f; 20].to_vec(),
            [0x80; 15].to_vec(),
        ];
        for a in &keys {
            for b in &keys {
                assert_eq!(cmp_keys(a, b), a.cmp(b), "{a:?} against {b:?}");
            }
        }
    }
}
