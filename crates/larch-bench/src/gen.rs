//! Key and value streams, identical for every engine given the same flags and seed.

use crate::flags::KeyFormat;

/// LevelDB's `util/random.h` Park-Miller generator (seed * 16807 mod 2^31-1), bit for bit, so
/// that values match db_bench's.
#[derive(Debug, Clone)]
pub struct LevelDbRandom {
    seed: u32,
}

impl LevelDbRandom {
    pub fn new(s: u32) -> Self {
        let mut seed = s & 0x7fff_ffff;
        if seed == 0 || seed == 2_147_483_647 {
            seed = 1;
        }
        LevelDbRandom { seed }
    }

    pub fn next_u32(&mut self) -> u32 {
        const M: u32 = 2_147_483_647;
        const A: u64 = 16807;
        let product = self.seed as u64 * A;
        let mut seed = ((product >> 31) + (product & M as u64)) as u32;
        if seed > M {
            seed -= M;
        }
        self.seed = seed;
        seed
    }

    pub fn uniform(&mut self, n: u32) -> u32 {
        self.next_u32() % n
    }
}

/// Bytes of value data generated once, as db_bench's `RandomGenerator` (1 MiB at least).
pub const VALUE_POOL_BYTES_MIN: usize = 1 << 20;

/// db_bench's compressible value generator: 100-byte pieces, each `100 * ratio` random
/// printable bytes repeated, from `Random(301)`; `generate(len)` returns successive slices.
#[derive(Debug, Clone)]
pub struct ValueGenerator {
    data: Vec<u8>,
    pos: usize,
}

impl ValueGenerator {
    pub fn new(compression_ratio: f64, value_size: usize) -> Self {
        let mut rnd = LevelDbRandom::new(301);
        let target = VALUE_POOL_BYTES_MIN.max(value_size.saturating_mul(2));
        let mut data = Vec::with_capacity(target + 100);
        let mut raw = Vec::with_capacity(100);
        while data.len() < target {
            // test::CompressibleString(&rnd, ratio, 100, &piece)
            let raw_len = ((100.0 * compression_ratio) as usize).max(1);
            raw.clear();
            for _ in 0..raw_len {
                raw.push(b' ' + rnd.uniform(95) as u8);
            }
            let start = data.len();
            while data.len() - start < 100 {
                data.extend_from_slice(&raw);
            }
            data.truncate(start + 100);
        }
        ValueGenerator { data, pos: 0 }
    }

    /// The next `len` bytes of the pool (wrapping). Requires: len <= pool size, which `new`
    /// guarantees for the value size it was built for.
    pub fn generate(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.data.len());
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        self.pos += len;
        &self.data[self.pos - len..self.pos]
    }
}

/// Formats integer keys into a reusable buffer.
#[derive(Debug, Clone)]
pub struct KeyGen {
    format: KeyFormat,
    key_size: usize,
    buf: Vec<u8>,
}

impl KeyGen {
    pub fn new(format: KeyFormat, key_size: usize) -> Self {
        KeyGen {
            format,
            key_size,
            buf: Vec::with_capacity(key_size + 1),
        }
    }

    /// The key for `k`; `%0<key_size>d` for Decimal (wider when `k` needs more digits).
    pub fn key(&mut self, k: u64) -> &[u8] {
        self.buf.clear();
        match self.format {
            KeyFormat::Decimal => {
                let mut digits = [0u8; 20];
                let mut n = k;
                let mut i = digits.len();
                loop {
                    i -= 1;
                    digits[i] = b'0' + (n % 10) as u8;
                    n /= 10;
                    if n == 0 {
                        break;
                    }
                }
                let width = digits.len() - i;
                for _ in width..self.key_size {
                    self.buf.push(b'0');
                }
                self.buf.extend_from_slice(&digits[i..]);
            }
            KeyFormat::RocksDb => {
                self.buf.extend_from_slice(&k.to_be_bytes());
                while self.buf.len() < self.key_size {
                    self.buf.push(b'0');
                }
                self.buf.truncate(self.key_size.max(8));
            }
        }
        &self.buf
    }

    /// A key that is never present: LevelDB's readmissing appends '.' to the key.
    pub fn missing_key(&mut self, k: u64) -> &[u8] {
        self.key(k);
        self.buf.push(b'.');
        &self.buf
    }
}

/// SplitMix64: the per-thread key stream. Seeded from `--seed` and the thread id so that every
/// engine sees the same keys in the same order.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64, stream: u64) -> Self {
        Rng {
            state: seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// db_bench's `rand % num` (repeats allowed: about 63% of keys are hit by num draws).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// A seeded permutation of `0..n` in O(1) memory (RocksDB's filluniquerandom, Symas'
/// `--shuffle`): a bijective mixer on the next power of two, cycle-walked into range.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    bits: u32,
    mask: u64,
    keys: [u64; 3],
}

impl Permutation {
    pub fn new(n: u64, seed: u64) -> Self {
        let bits = (64 - n.max(2).saturating_sub(1).leading_zeros()).max(2);
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let mut r = Rng::new(seed, 0xA11CE);
        Permutation {
            n,
            bits,
            mask,
            keys: [r.next_u64() | 1, r.next_u64() | 1, r.next_u64()],
        }
    }

    fn mix(&self, mut x: u64) -> u64 {
        // Each step is a bijection on `bits`-bit integers: xor with a constant, multiply by an
        // odd constant mod 2^bits, and xor-shift right.
        let s = (self.bits / 2).max(1);
        for k in self.keys {
            x = (x ^ (k & self.mask)) & self.mask;
            x = x.wrapping_mul(k | 1) & self.mask;
            x ^= x >> s;
        }
        x
    }

    /// The i-th element of the permutation. Requires: i < n.
    pub fn get(&self, i: u64) -> u64 {
        let mut x = self.mix(i);
        // Cycle walking terminates because mix permutes [0, 2^bits) and i is in [0, n).
        while x >= self.n {
            x = self.mix(x);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leveldb_random_matches_reference_sequence() {
        // Park-Miller with seed 301: 301*16807 = 5058907, then 5058907*16807 mod (2^31-1).
        let mut r = LevelDbRandom::new(301);
        assert_eq!(r.next_u32(), 5_058_907);
        assert_eq!(
            r.next_u32(),
            ((5_058_907u64 * 16807) % 2_147_483_647) as u32
        );
    }

    #[test]
    fn decimal_keys_are_zero_padded() {
        let mut g = KeyGen::new(KeyFormat::Decimal, 16);
        assert_eq!(g.key(0), b"0000000000000000");
        assert_eq!(g.key(1234), b"0000000000001234");
        assert_eq!(g.missing_key(7), b"0000000000000007.");
        let mut g8 = KeyGen::new(KeyFormat::Decimal, 4);
        assert_eq!(g8.key(12345), b"12345");
    }

    #[test]
    fn rocksdb_keys_are_big_endian_then_padded() {
        let mut g = KeyGen::new(KeyFormat::RocksDb, 16);
        let k = g.key(0x0102).to_vec();
        assert_eq!(&k[..8], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(&k[8..], b"00000000");
        // Lexical order equals numeric order.
        let a = g.key(255).to_vec();
        let b = g.key(256).to_vec();
        assert!(a < b);
    }

    #[test]
    fn values_are_compressible_printable_and_deterministic() {
        let mut a = ValueGenerator::new(0.5, 100);
        let mut b = ValueGenerator::new(0.5, 100);
        let va = a.generate(100).to_vec();
        assert_eq!(va, b.generate(100));
        assert!(va.iter().all(|c| (b' '..=b'~').contains(c)));
        // With ratio 0.5 each 100-byte piece is a 50-byte string repeated twice.
        assert_eq!(va[..50], va[50..]);
        // Successive values differ.
        assert_ne!(va, a.generate(100));
    }

    #[test]
    fn value_generator_wraps_without_panicking() {
        let mut g = ValueGenerator::new(0.5, 300_000);
        for _ in 0..20 {
            assert_eq!(g.generate(300_000).len(), 300_000);
        }
    }

    #[test]
    fn rng_is_deterministic_per_stream() {
        let mut a = Rng::new(42, 1);
        let mut b = Rng::new(42, 1);
        let mut c = Rng::new(42, 2);
        let xa: Vec<u64> = (0..8).map(|_| a.below(1000)).collect();
        let xb: Vec<u64> = (0..8).map(|_| b.below(1000)).collect();
        let xc: Vec<u64> = (0..8).map(|_| c.below(1000)).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
        assert!(xa.iter().all(|&x| x < 1000));
    }

    #[test]
    fn permutation_is_a_permutation() {
        for n in [1u64, 2, 3, 10, 1000, 4097] {
            let p = Permutation::new(n, 7);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let x = p.get(i);
                assert!(x < n);
                assert!(!seen[x as usize], "duplicate {x} for n={n}");
                seen[x as usize] = true;
            }
        }
        // Not the identity.
        let p = Permutation::new(1000, 7);
        assert!((0..1000).filter(|&i| p.get(i) == i).count() < 100);
    }
}
