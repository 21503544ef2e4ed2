//! Reference numbers from numpy/scipy/statsmodels (`tests/fixtures/stats/*.json`, written by
//! `make_fixtures.py`), embedded at compile time so the tests do no IO.

use serde::Deserialize;

macro_rules! fixture_text {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/stats/",
            $name
        ))
    };
}

fn parse<T: serde::de::DeserializeOwned>(name: &str, text: &str) -> T {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("fixture {name} does not parse: {e}"))
}

pub fn descriptive() -> DescriptiveFixture {
    parse("descriptive.json", fixture_text!("descriptive.json"))
}

pub fn mann_whitney() -> MannWhitneyFixture {
    parse("mann_whitney.json", fixture_text!("mann_whitney.json"))
}

pub fn holm() -> HolmFixture {
    parse("holm.json", fixture_text!("holm.json"))
}

pub fn censored() -> CensoredFixture {
    parse("censored.json", fixture_text!("censored.json"))
}

pub fn fisher() -> FisherFixture {
    parse("fisher.json", fixture_text!("fisher.json"))
}

pub fn hodges_lehmann() -> HodgesLehmannFixture {
    parse("hodges_lehmann.json", fixture_text!("hodges_lehmann.json"))
}

pub fn bootstrap() -> BootstrapFixture {
    parse("bootstrap.json", fixture_text!("bootstrap.json"))
}

/// `|got − want| ≤ rel·max(|want|, 1e-300)`; `rel = 0` demands bit equality (up to ±0).
pub fn assert_close(got: f64, want: f64, rel: f64, what: &str) {
    let tolerance = rel * want.abs().max(1e-300);
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: got {got:e}, reference {want:e} (relative tolerance {rel:e})"
    );
}

#[derive(Deserialize)]
pub struct DescriptiveFixture {
    pub cases: Vec<DescriptiveCase>,
}

#[derive(Deserialize)]
pub struct DescriptiveCase {
    pub name: String,
    pub values: Vec<f64>,
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
    pub iqr: f64,
    pub quantiles: Vec<QuantileRef>,
}

#[derive(Deserialize)]
pub struct QuantileRef {
    pub p: f64,
    pub value: f64,
}

#[derive(Deserialize)]
pub struct MannWhitneyFixture {
    pub cases: Vec<MannWhitneyCase>,
}

#[derive(Deserialize)]
pub struct MannWhitneyCase {
    pub name: String,
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    pub u: f64,
    pub p: f64,
    pub method: String,
    pub p_exact: f64,
    pub p_asymptotic: f64,
}

#[derive(Deserialize)]
pub struct CensoredFixture {
    pub cases: Vec<CensoredCase>,
}

/// Finished values plus a number of DNFs per side; scipy's U and p with DNFs as `inf`.
#[derive(Deserialize)]
pub struct CensoredCase {
    pub name: String,
    pub a: Vec<f64>,
    pub a_dnf: usize,
    pub b: Vec<f64>,
    pub b_dnf: usize,
    pub u: f64,
    pub p: f64,
    pub method: String,
    /// `None`: the median is a DNF.
    pub median_a: Option<f64>,
    pub median_b: Option<f64>,
}

#[derive(Deserialize)]
pub struct HolmFixture {
    pub cases: Vec<HolmCase>,
}

#[derive(Deserialize)]
pub struct HolmCase {
    pub name: String,
    pub p: Vec<f64>,
    pub adjusted: Vec<f64>,
}

#[derive(Deserialize)]
pub struct BootstrapFixture {
    pub n_resamples: usize,
    pub median: MedianBootstrapRef,
    pub ratio: RatioBootstrapRef,
}

#[derive(Deserialize)]
pub struct MedianBootstrapRef {
    pub values: Vec<f64>,
    pub median: f64,
    pub sorted: Vec<f64>,
    /// P(bootstrap median ≤ k-th order statistic), k = 1..n, from the binomial formula.
    pub exact_bootstrap_cdf: Vec<f64>,
    pub scipy_low: Vec<f64>,
    pub scipy_high: Vec<f64>,
}

#[derive(Deserialize)]
pub struct RatioBootstrapRef {
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    pub ratio: f64,
    pub scipy_low: Vec<f64>,
    pub scipy_high: Vec<f64>,
}

#[derive(Deserialize)]
pub struct FisherFixture {
    pub cases: Vec<FisherCase>,
}

/// A 2 × 2 table `[[events a, non-events a], [events b, non-events b]]` and scipy's two-sided p.
#[derive(Deserialize)]
pub struct FisherCase {
    pub name: String,
    pub table: [[u64; 2]; 2],
    pub p: f64,
}

#[derive(Deserialize)]
pub struct HodgesLehmannFixture {
    pub cases: Vec<HodgesLehmannCase>,
}

/// numpy's median of the pairwise differences `a_i − b_j` and Moses' CI (order statistics
/// `rank` and `m·n + 1 − rank`; `None`: rank below 1).
#[derive(Deserialize)]
pub struct HodgesLehmannCase {
    pub name: String,
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    pub level: f64,
    pub estimate: f64,
    pub rank: usize,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
}
