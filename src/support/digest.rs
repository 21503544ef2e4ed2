//! Content addresses: the SHA-256 of some bytes in lower-case hex, as manifests, site archives,
//! trace files and plan hashes name what they hold.

use sha2::{Digest, Sha256};

/// The SHA-256 of `bytes`, 64 lower-case hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_empty_input_has_the_known_digest() {
        assert_eq!(
            super::sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
