//! 32-bit FNV-1a hash.
//!
//! Algorithm: start from the offset basis `0x811c9dc5`; for every input byte,
//! XOR the byte into the low bits of the state, then multiply the state by the
//! FNV prime `0x01000193` modulo 2^32 (wrapping multiplication).
//!
//! The function is pure and deterministic across platforms and releases, so
//! its output may be persisted or used to pick a shard for a key.

/// FNV-1a offset basis (32-bit).
const OFFSET_BASIS: u32 = 0x811c_9dc5;
/// FNV prime (32-bit).
const PRIME: u32 = 0x0100_0193;

/// Returns the 32-bit FNV-1a hash of `bytes`.
///
/// Complexity: O(len) time, O(1) space.
#[inline]
#[must_use]
pub fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(OFFSET_BASIS, |hash, &byte| {
        (hash ^ u32::from(byte)).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::fnv1a;

    #[test]
    fn empty_input_is_offset_basis() {
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
    }

    #[test]
    fn known_vectors() {
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn is_deterministic_and_input_sensitive() {
        assert_eq!(fnv1a(b"queue:emails"), fnv1a(b"queue:emails"));
        assert_ne!(fnv1a(b"queue:emails"), fnv1a(b"queue:email"));
        assert_ne!(fnv1a(b"ab"), fnv1a(b"ba"));
    }
}
