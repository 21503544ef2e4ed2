//! A request's priority (RFC 9218 §4): what a browser asks with its `priority` field and
//! PRIORITY_UPDATE frames, read the same way by the embedded server (to schedule its
//! responses) and by the packet analysis (to check a server's send order).

use serde::{Deserialize, Serialize};

/// A request's priority (RFC 9218 §4): urgency 0 (highest) to 7, and whether its response is
/// useful in pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Priority {
    pub urgency: u8,
    pub incremental: bool,
}

impl Default for Priority {
    fn default() -> Self {
        Priority {
            urgency: 3,
            incremental: false,
        }
    }
}

impl Priority {
    pub const fn new(urgency: u8, incremental: bool) -> Priority {
        Priority {
            urgency,
            incremental,
        }
    }

    /// The `priority` header's value (a structured-field dictionary). Members other than `u`
    /// and `i`, and a `u` or `i` with an invalid value, are ignored as §4 asks.
    pub fn parse(value: &str) -> Priority {
        let mut p = Priority::default();
        for member in value.split(',') {
            // Parameters (`;…`) of a member carry nothing RFC 9218 defines.
            let member = member.split(';').next().unwrap_or("").trim();
            let (key, val) = match member.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (member, None),
            };
            match (key, val) {
                ("u", Some(v)) => {
                    if let Ok(u) = v.parse::<u8>() {
                        if u <= 7 && !v.starts_with('+') {
                            p.urgency = u;
                        }
                    }
                }
                ("i", None) | ("i", Some("?1")) => p.incremental = true,
                ("i", Some("?0")) => p.incremental = false,
                _ => {}
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn p(urgency: u8, incremental: bool) -> Priority {
        Priority::new(urgency, incremental)
    }

    #[test]
    fn the_header_as_rfc_9218_reads_it() {
        assert_eq!(Priority::parse("u=0"), p(0, false));
        assert_eq!(Priority::parse("u=4, i"), p(4, true));
        assert_eq!(Priority::parse("i, u=1"), p(1, true));
        assert_eq!(Priority::parse("u=5,i=?0"), p(5, false));
        assert_eq!(Priority::parse("i=?1"), p(3, true));
        assert_eq!(Priority::parse(""), Priority::default());
        // Invalid members are ignored, not guessed at.
        assert_eq!(Priority::parse("u=9"), p(3, false));
        assert_eq!(Priority::parse("u=-1, i"), p(3, true));
        assert_eq!(Priority::parse("u=2;foo=1, x=7"), p(2, false));
        assert_eq!(Priority::parse("i=1"), p(3, false));
    }

    #[test]
    fn an_integer_with_a_sign_is_no_urgency() {
        // RFC 8941 integers have no `+`; Rust's own parser would take `+2`.
        assert_eq!(Priority::parse("u=+2"), p(3, false));
        assert_eq!(Priority::parse("u=+2, i"), p(3, true));
    }
}
