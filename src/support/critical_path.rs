//! The critical path of a page load (pure): the chain of requests that ended last before the
//! headline event — its last step the response that ended last, each step's predecessor the
//! response that ended last before it started, the first the navigation. The same rule for a
//! measured load (`evidence::round_trips`) and a recorded one (a site's recording).

/// A response that ended this close after the step started still counts as before it
/// (Resource Timing rounds to 0.1 ms, and a parser acts on a response in the same task).
const ORDER_SLACK_MS: f64 = 1.0;

/// The chain of requests that ended last before `headline_ms`, as indices into `spans`
/// (each a request's start and end, ms; 0 is the navigation), navigation first: the last
/// step is the response that ended last, each step's predecessor the response that ended
/// last before it started.
pub fn chain(spans: &[(f64, f64)], headline_ms: f64) -> Vec<usize> {
    chain_from(spans, ended_by(spans, headline_ms + ORDER_SLACK_MS, 0))
}

/// The chain that ends at `last` (an index into `spans`; 0: the navigation alone): what a
/// paint waited for when the browser said which request it was.
pub fn chain_to(spans: &[(f64, f64)], last: usize) -> Vec<usize> {
    chain_from(spans, (last > 0 && last < spans.len()).then_some(last))
}

/// The response (not the navigation, not `skip`) that ended last by `limit`.
fn ended_by(spans: &[(f64, f64)], limit: f64, skip: usize) -> Option<usize> {
    (1..spans.len())
        .filter(|&i| i != skip && spans[i].1 > 0.0 && spans[i].1 <= limit)
        .max_by(|&a, &b| spans[a].1.total_cmp(&spans[b].1))
}

/// The chain back from `last` to the navigation, navigation first.
fn chain_from(spans: &[(f64, f64)], last: Option<usize>) -> Vec<usize> {
    let ended_by = |limit: f64, skip: usize| ended_by(spans, limit, skip);
    let mut path = Vec::new();
    let mut at = last;
    while let Some(i) = at {
        path.push(i);
        // What this step waited for ended before it started (and before it ended).
        let limit = spans[i].0 + ORDER_SLACK_MS;
        at = ended_by(limit.min(spans[i].1 - f64::EPSILON), i).filter(|p| !path.contains(p));
    }
    path.push(0);
    path.reverse();
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_follows_what_each_step_waited_for() {
        // 0: the page; 1 a stylesheet it named; 2 a font the stylesheet named; 3 an image
        // beside them that ended early; 4 a request after the headline.
        let spans = [
            (0.0, 100.0),
            (110.0, 200.0),
            (205.0, 300.0),
            (110.0, 150.0),
            (400.0, 500.0),
        ];
        assert_eq!(chain(&spans, 350.0), [0, 1, 2]);
        // Without anything but the page, the page alone.
        assert_eq!(chain(&spans[..1], 350.0), [0]);
        // Ending where told: at the image (the font ended later), or at the page.
        assert_eq!(chain_to(&spans, 3), [0, 3]);
        assert_eq!(chain_to(&spans, 2), [0, 1, 2]);
        assert_eq!(chain_to(&spans, 0), [0]);
        // A response ending 0.5 ms after its successor started still counts as before it.
        assert_eq!(
            chain(&[(0.0, 10.0), (10.0, 20.5), (20.0, 30.0)], 30.0),
            [0, 1, 2]
        );
    }
}
