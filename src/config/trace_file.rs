//! A capacity trace a network profile names (`down_trace`/`up_trace`): the path as written,
//! where it was read from and its SHA-256, and reading it (from a file, the stored source or
//! the compiled-in traces).

use crate::support::digest::sha256_hex;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::capacity::CapacityTrace;

/// A recorded capacity trace named by a profile. Written in TOML as a path relative to the
/// profile file; stored in a results directory's `meta.json` with where it was read from and
/// its SHA-256, so a resumed matrix finds the same trace (and refuses a changed one).
#[derive(Debug, Clone, Serialize)]
pub struct TraceFile {
    /// As the profile wrote it.
    pub path: String,
    /// Where it was read from: a file, or `built-in:<file name>` (compiled into pagebench).
    pub source: String,
    pub sha256: String,
    pub mean_mbit: f64,
    #[serde(skip)]
    trace: Option<Arc<CapacityTrace>>,
}

impl PartialEq for TraceFile {
    /// The same trace: the same path and content (wherever it was read from).
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path && self.sha256 == other.sha256
    }
}

impl<'de> Deserialize<'de> for TraceFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Path(String),
            Stored {
                path: String,
                source: String,
                sha256: String,
                #[serde(default)]
                mean_mbit: f64,
            },
        }
        Ok(match Form::deserialize(d)? {
            Form::Path(path) => TraceFile::unresolved(&path),
            Form::Stored {
                path,
                source,
                sha256,
                mean_mbit,
            } => TraceFile {
                path,
                source,
                sha256,
                mean_mbit,
                trace: None,
            },
        })
    }
}

/// Where a profile's relative trace paths are looked up.
#[derive(Debug, Clone, Copy)]
pub enum TraceBase<'a> {
    /// The directory of the profile file (then the compiled-in traces for `traces/<file>`).
    Dir(&'a Path),
    /// A compiled-in profile: the compiled-in traces.
    BuiltIn,
}

impl TraceFile {
    /// A trace named by `path`, not read yet.
    pub fn unresolved(path: &str) -> TraceFile {
        TraceFile {
            path: path.to_string(),
            source: String::new(),
            sha256: String::new(),
            mean_mbit: 0.0,
            trace: None,
        }
    }

    /// The parsed trace (`None` until [`TraceFile::resolve`]).
    pub fn trace(&self) -> Option<&Arc<CapacityTrace>> {
        self.trace.as_ref()
    }

    /// Reads the trace: from where it was stored (`source`, checking its SHA-256), else
    /// relative to `base`. The error says what was looked for and how to fix it.
    pub fn resolve(&mut self, base: TraceBase) -> Result<(), String> {
        if self.trace.is_some() {
            return Ok(());
        }
        let (text, source) = if !self.source.is_empty() {
            let text = read_trace_source(&self.source)?;
            if !self.sha256.is_empty() && sha256_hex(text.as_bytes()) != self.sha256 {
                return Err(format!(
                    "trace {} ({}) has changed since it was stored (SHA-256 differs): restore it or start new results",
                    self.path, self.source
                ));
            }
            (text, self.source.clone())
        } else {
            let built_in_name = self.path.strip_prefix("traces/");
            let file = match base {
                TraceBase::Dir(dir) => Some(dir.join(&self.path)),
                TraceBase::BuiltIn => None,
            };
            match (
                &file,
                built_in_name.and_then(crate::config::capacity::built_in),
            ) {
                (Some(f), _) if f.is_file() => {
                    let text = std::fs::read_to_string(f)
                        .map_err(|e| format!("cannot read trace {}: {e}", f.display()))?;
                    let abs = std::fs::canonicalize(f).unwrap_or_else(|_| f.clone());
                    (text, abs.display().to_string())
                }
                (_, Some((_, text))) => (
                    text.to_string(),
                    format!("built-in:{}", built_in_name.unwrap_or_default()),
                ),
                (file, None) => {
                    let shipped: Vec<String> = crate::config::capacity::BUILT_IN
                        .iter()
                        .map(|(n, _)| format!("traces/{n}"))
                        .collect();
                    return Err(format!(
                        "trace {:?} not found{}: give a path relative to the profile file, or one of the shipped traces ({})",
                        self.path,
                        file.as_ref()
                            .map(|f| format!(" (looked for {})", f.display()))
                            .unwrap_or_default(),
                        shipped.join(", ")
                    ));
                }
            }
        };
        let trace = match source.strip_prefix("built-in:") {
            Some(name) => crate::config::capacity::built_in(name)
                .map(|(t, _)| t)
                .ok_or_else(|| format!("no built-in trace {name:?}"))?,
            None => Arc::new(
                CapacityTrace::parse(&text)
                    .map_err(|e| format!("trace {} is not a mahimahi trace: {e}", source))?,
            ),
        };
        self.sha256 = sha256_hex(text.as_bytes());
        self.mean_mbit = (trace.mean_rate_bps() / 1e6 * 1000.0).round() / 1000.0;
        self.source = source;
        self.trace = Some(trace);
        Ok(())
    }
}

fn read_trace_source(source: &str) -> Result<String, String> {
    match source.strip_prefix("built-in:") {
        Some(name) => crate::config::capacity::built_in(name)
            .map(|(_, text)| text.to_string())
            .ok_or_else(|| format!("trace {source}: this pagebench has no such built-in trace")),
        None => std::fs::read_to_string(source)
            .map_err(|e| format!("cannot read trace {source} (where the results found it): {e}")),
    }
}
