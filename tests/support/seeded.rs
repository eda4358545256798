//! A small deterministic generator (xorshift) for the property tests: the same cases on every
//! run, so a failure found once is found again.

/// Numbers from a seed, the same sequence on every run.
pub(crate) struct Seeded(pub(crate) u64);

impl Seeded {
    /// The next number below `n`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
