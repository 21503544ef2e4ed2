//! Identity types that travel from the plan to the report: which phase a run belongs to (and, as
//! they come, server and browser ids). Strings only at the parsers and the file formats.

use serde::{Deserialize, Serialize};

/// Whether a run counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Warmup,
    Measure,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Warmup => "warmup",
            Phase::Measure => "measure",
        }
    }
}

impl std::str::FromStr for Phase {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Phase> {
        match s {
            "warmup" => Ok(Phase::Warmup),
            "measure" => Ok(Phase::Measure),
            other => anyhow::bail!("unknown phase {other:?}: warmup or measure"),
        }
    }
}
