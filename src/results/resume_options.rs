//! What a results directory stores beside the plan so that `matrix --resume DIR` alone can
//! rebuild the request (the conversions from and to the request live in `matrix::resume`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::embedded_server::ServerKnobs;

/// What `meta.json` needs beside the plan and the profiles to rebuild a matrix's request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredOptions {
    pub servers: ServerFlags,
    /// The knobs as requested (file, then flags, then the default congestion control).
    pub knobs: ServerKnobs,
    pub settle_max_ms: u64,
    pub steer_receive: bool,
    /// Every load recorded its screen (`--visual`)…
    #[serde(default)]
    pub visual: bool,
    /// …this way (results from before video: the screencast).
    #[serde(default = "crate::evidence::visual::VisualSource::before_video")]
    pub visual_source: crate::evidence::visual::VisualSource,
    /// What every run kept beside its record (`--capture`).
    #[serde(default, skip_serializing_if = "crate::packets::CaptureSet::is_empty")]
    pub capture: crate::packets::CaptureSet,
    /// What a repeat view did with the HTTP cache (`--repeat-cache`).
    #[serde(default)]
    pub repeat_cache: crate::config::identity::RepeatCache,
    /// The pages tree the matrix used (absolute); a resume reuses it unless given `--pages`.
    pub pages: PathBuf,
    /// How site workloads were replayed.
    #[serde(default)]
    pub sites: crate::config::workload::site_plan::SiteOptions,
    /// `--dns` (older results: none, the only way then).
    #[serde(
        default,
        skip_serializing_if = "crate::config::name_lookup::DnsMode::is_none"
    )]
    pub dns: crate::config::name_lookup::DnsMode,
    /// The archive directory of each site workload, by workload name (`site-x` → `/a/x`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub site_dirs: std::collections::BTreeMap<String, PathBuf>,
}

/// `--servers`, `--server-cmd`, `--server-log-format` and `--server-log`, as they parse back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerFlags {
    pub servers: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cmd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_log_format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_log: Option<String>,
}
