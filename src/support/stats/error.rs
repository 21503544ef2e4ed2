//! The one error type of the statistics module: every variant names the offending input and
//! says how to fix it.

/// Bad input to a statistics function.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("{what} is empty: at least one value is needed")]
    Empty { what: String },

    #[error(
        "{what}[{index}] is {value}: statistics need finite numbers \
         (a run without a finite timing must be counted as invalid or DNF, not passed as a value)"
    )]
    NonFinite {
        what: String,
        index: usize,
        value: f64,
    },

    #[error(
        "{what}[{index}] is {value}: a ratio of medians needs strictly positive values \
         (durations in ms); check how the values were derived"
    )]
    NonPositive {
        what: String,
        index: usize,
        value: f64,
    },

    #[error(
        "{what}[{index}] is {value} ms, not below the timeout of {timeout} ms that its series' \
         DNF runs stand for: a finished run cannot be slower than the timeout"
    )]
    NotBelowTimeout {
        what: String,
        index: usize,
        value: f64,
        timeout: f64,
    },

    #[error("{what} is {value}: it must be a probability between 0 and 1 inclusive")]
    ProbabilityOutOfRange { what: String, value: f64 },

    #[error("{what} is {value}: it must lie strictly between 0 and 1 (e.g. 0.95 or 0.05)")]
    OpenUnitIntervalRequired { what: &'static str, value: f64 },

    #[error("{what}: a count of events cannot exceed its count of trials")]
    InvalidCount { what: String },

    #[error("bootstrap resamples is {got}: use at least {min} (the default is {default})")]
    TooFewResamples {
        got: usize,
        min: usize,
        default: usize,
    },
}

/// Rejects empty or non-finite input; `what` names the input in the error.
pub(crate) fn check_finite(values: &[f64], what: &str) -> Result<(), StatsError> {
    if values.is_empty() {
        return Err(StatsError::Empty { what: what.into() });
    }
    match values.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(StatsError::NonFinite {
            what: what.into(),
            index,
            value: values[index],
        }),
        None => Ok(()),
    }
}

/// Rejects empty, non-finite or non-positive input (for ratios of medians).
pub(crate) fn check_positive(values: &[f64], what: &str) -> Result<(), StatsError> {
    check_finite(values, what)?;
    match values.iter().position(|v| *v <= 0.0) {
        Some(index) => Err(StatsError::NonPositive {
            what: what.into(),
            index,
            value: values[index],
        }),
        None => Ok(()),
    }
}

/// Requires `0 < value < 1` (confidence levels, significance levels).
pub(crate) fn check_open_unit(value: f64, what: &'static str) -> Result<(), StatsError> {
    if value > 0.0 && value < 1.0 {
        Ok(())
    } else {
        Err(StatsError::OpenUnitIntervalRequired { what, value })
    }
}
