//! A small stable hash for file formats and cache keys (checkpoint checksums, the SPIR-V
//! cache): its values are part of those formats, so it must never change.

/// 64-bit FNV-1a over `parts`, each followed by a separator, so that `("ab", "c")` and
/// `("a", "bc")` differ.
pub fn fnv1a64(parts: &[&[u8]]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(PRIME);
        }
        h ^= 0xff;
        h = h.wrapping_mul(PRIME);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_stable() {
        assert_eq!(fnv1a64(&[]), 0xcbf2_9ce4_8422_2325);
        // A value files depend on: changing the hash breaks every checkpoint.
        assert_eq!(fnv1a64(&[b"kernel"]), 0xc087_71bb_0205_0985);
        assert_ne!(fnv1a64(&[b"ab", b"c"]), fnv1a64(&[b"a", b"bc"]));
    }
}
