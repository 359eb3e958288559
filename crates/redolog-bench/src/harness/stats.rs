//! The figures every workload computes the same way: medians over rounds and
//! latency histograms.

use hdrhistogram::Histogram;

/// The median of `values` (0 for none): what a table reports over rounds.
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

/// A latency histogram in µs, 1 µs to 60 s. Bounded, because
/// `saturating_record` never grows a histogram: an unbounded `Histogram::new`
/// would clamp every value past its first buckets (~2 ms) to its lowest.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 2).expect("constant bounds")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `saturating_record` does not grow a histogram: the raft benchmarks
    /// once used an unbounded `Histogram::new(3)` and reported every write
    /// slower than ~2 ms as 2 µs.
    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(Vec::new()), 0.0);
    }

    #[test]
    fn latencies_past_two_milliseconds_are_kept() {
        let mut latency = new_histogram();
        for micros in [5_000, 40_000, 2_000_000] {
            latency.saturating_record(micros);
        }
        assert!(latency.value_at_quantile(0.5) >= 39_000, "{}", latency.value_at_quantile(0.5));
        assert!(latency.max() >= 1_900_000);
    }
}
