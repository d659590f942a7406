//! Drawing choices from a fuzz input: each call consumes bytes from the front, and an
//! exhausted input gives zeros, so every input (even an empty one) decodes to something
//! and a mutation of one byte changes one choice.

/// A cursor over a fuzz input.
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { data }
    }

    /// The next byte (0 once the input is used up).
    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// A number in `0..n` (`0` when `n` is 0), from one byte, or two when `n > 256`.
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let x = if n > 256 {
            usize::from(self.byte()) << 8 | usize::from(self.byte())
        } else {
            usize::from(self.byte())
        };
        x % n
    }

    /// One element of a non-empty slice.
    pub fn pick<'b, T>(&mut self, xs: &'b [T]) -> &'b T {
        &xs[self.below(xs.len())]
    }

    /// Eight bytes as a `u64`.
    pub fn u64(&mut self) -> u64 {
        (0..8).fold(0, |x, _| x << 8 | u64::from(self.byte()))
    }

    /// Whether any input is left.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The rest of the input.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exhausted_input_gives_zeros_and_small_ranges_use_one_byte() {
        let mut b = Bytes::new(&[7, 1, 2]);
        assert_eq!(b.below(5), 2);
        assert_eq!(b.below(1000), 258);
        assert!(b.is_empty());
        assert_eq!(b.byte(), 0);
        assert_eq!(b.u64(), 0);
        assert_eq!(*b.pick(&["a", "b"]), "a");
    }
}
