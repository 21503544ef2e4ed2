//! The NSS key log a QUIC flow's secrets come from: `LABEL <client_random hex> <secret hex>`
//! lines, several secrets kept per label when logs disagree.

use std::collections::HashMap;

/// NSS key log: lines `LABEL <client_random hex> <secret hex>`; '#' comments and blank lines
/// skipped.
#[derive(Debug, Clone, Default)]
pub struct KeyLog {
    /// Several secrets per (client_random, label) are kept when logs disagree: the AEAD tag
    /// decides which one is right.
    secrets: HashMap<([u8; 32], String), Vec<Vec<u8>>>,
}

/// A key log line that is not `LABEL <client_random hex> <secret hex>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key log line {line}: {problem}")]
pub struct KeyLogError {
    /// 1-based line number.
    pub line: usize,
    pub problem: String,
}

impl KeyLog {
    pub fn parse(text: &str) -> Result<KeyLog, KeyLogError> {
        let mut log = KeyLog::default();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let error = |problem: String| KeyLogError {
                line: index + 1,
                problem,
            };
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            let [label, random, secret] = fields[..] else {
                return Err(error(format!(
                    "expected `LABEL <client_random hex> <secret hex>`, found {} field(s)",
                    fields.len()
                )));
            };
            if !label
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
            {
                return Err(error(format!(
                    "label `{label}` is not an NSS key log label (A-Z, 0-9 and '_' only)"
                )));
            }
            let random =
                hex::decode(random).map_err(|e| error(format!("client_random is not hex: {e}")))?;
            let random: [u8; 32] = random.as_slice().try_into().map_err(|_| {
                error(format!(
                    "client_random has {} bytes, expected 32",
                    random.len()
                ))
            })?;
            let secret =
                hex::decode(secret).map_err(|e| error(format!("secret is not hex: {e}")))?;
            if secret.is_empty() {
                return Err(error("secret is empty".to_string()));
            }
            log.insert(random, label.to_string(), secret);
        }
        Ok(log)
    }

    pub fn merge(&mut self, other: KeyLog) {
        for ((random, label), secrets) in other.secrets {
            for secret in secrets {
                self.insert(random, label.clone(), secret);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    fn insert(&mut self, random: [u8; 32], label: String, secret: Vec<u8>) {
        let entry = self.secrets.entry((random, label)).or_default();
        if !entry.contains(&secret) {
            entry.push(secret);
        }
    }

    /// Whether the log has a `label` line for the connection of `random`.
    pub fn has(&self, random: &[u8; 32], label: &str) -> bool {
        !self.get(random, label).is_empty()
    }

    /// Every secret of `label` for the connection of `random`.
    pub(crate) fn get(&self, random: &[u8; 32], label: &str) -> &[Vec<u8>] {
        self.secrets
            .get(&(*random, label.to_string()))
            .map_or(&[], Vec::as_slice)
    }
}
