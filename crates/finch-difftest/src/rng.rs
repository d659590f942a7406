//! A small deterministic random number generator (SplitMix64), so that a seed and a case
//! index name one program on every machine and in every version of the dependencies.

/// SplitMix64: 64 bits of state, good enough statistics for generating test cases.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The generator of case `index` (attempt `attempt`) of the run seeded `seed`: each
    /// case is independent of the others, so any one can be regenerated alone.
    pub fn for_case(seed: u64, index: u64, attempt: u32) -> Rng {
        let mut r = Rng(seed ^ 0x9E37_79B9_7F4A_7C15);
        let a = r.next_u64();
        let mut r = Rng(a ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let b = r.next_u64();
        Rng(b ^ u64::from(attempt).wrapping_mul(0xA24B_AED4_963E_E407))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }

    /// An index into `weights`, chosen with probability proportional to its weight.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut x = self.next_u64() % total.max(1);
        for (k, &w) in weights.iter().enumerate() {
            if x < u64::from(w) {
                return k;
            }
            x -= u64::from(w);
        }
        weights.len().saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::for_case(7, 3, 0).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            Rng::for_case(7, 3, 0).next_u64(),
            Rng::for_case(7, 4, 0).next_u64()
        );
        assert_ne!(
            Rng::for_case(7, 3, 0).next_u64(),
            Rng::for_case(7, 3, 1).next_u64()
        );
        let mut r = Rng::new(1);
        assert!((0..1000).all(|_| r.range(-2, 3) >= -2 && r.range(-2, 3) <= 3));
    }
}
