//! A results directory: the store a matrix writes run by run (`meta.json`, `runs.csv`,
//! `resources.csv`, raw records) and the statistics files computed from it (`summary.json`,
//! `summary.csv`, `comparisons.csv`). The matrix writes it; the report, `diagnose` and
//! `bench link` read it — all through this module.

pub mod attempts;
pub mod attrition;
pub mod compare_cells;
pub mod comparison;
pub mod csv;
pub mod resume_options;
pub mod row_identity;
pub mod rows;
pub mod shards;
pub mod store;
pub mod summary;
