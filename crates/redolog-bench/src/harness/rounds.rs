//! The one round driver of every workload: interleaved, paired rounds.
//!
//! On this machine the same binary against itself varies by ±5–20 %, so a
//! figure counts only as a ratio against a baseline measured in the same run.
//! Every round visits every count (threads, clients or batch sizes) and, at
//! each, every system; the systems' order alternates from one point to the
//! next (by round and by count), so no system always runs first on a warm or
//! a cold machine, and each ratio pairs figures measured seconds apart.

use super::BoxError;

/// One point to measure.
#[derive(Clone, Copy, Debug)]
pub struct Visit<'a, S> {
    /// The round, from 0.
    pub round: usize,
    /// The count (threads, clients, entries per append).
    pub count: usize,
    /// The count's place in the sweep, from 0.
    pub point: usize,
    /// The system measured.
    pub system: &'a S,
}

/// What one point measured, with where it was measured (the openraft
/// workloads read where; the others only the result).
#[derive(Debug)]
#[cfg_attr(not(feature = "raft"), allow(dead_code))]
pub struct Measured<'a, S, P> {
    pub count: usize,
    pub system: &'a S,
    pub result: P,
}

/// The points of a sweep in the order they run: `rounds` rounds, each over
/// every count and, at each count, every system that `runs_at` it, in an
/// order that alternates from point to point.
pub fn schedule<'a, S>(
    rounds: usize,
    counts: &[usize],
    systems: &'a [S],
    runs_at: impl Fn(&S, usize) -> bool,
) -> Vec<Visit<'a, S>> {
    let mut visits = Vec::new();
    for round in 0..rounds.max(1) {
        for (point, &count) in counts.iter().enumerate() {
            let mut order: Vec<&S> = systems.iter().filter(|system| runs_at(system, count)).collect();
            if (round + point) % 2 == 1 {
                order.reverse();
            }
            visits.extend(order.into_iter().map(|system| Visit { round, count, point, system }));
        }
    }
    visits
}

/// Measures every point of [`schedule`] with `measure`, in that order, and
/// returns what each measured. The first error stops the sweep.
pub fn interleave<'a, S, P>(
    rounds: usize,
    counts: &[usize],
    systems: &'a [S],
    runs_at: impl Fn(&S, usize) -> bool,
    mut measure: impl FnMut(Visit<'a, S>) -> Result<P, BoxError>,
) -> Result<Vec<Measured<'a, S, P>>, BoxError> {
    schedule(rounds, counts, systems, runs_at)
        .into_iter()
        .map(|visit| {
            let Visit { count, system, .. } = visit;
            Ok(Measured { count, system, result: measure(visit)? })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(rounds: usize, counts: &[usize], systems: &[&'static str]) -> Vec<(usize, usize, &'static str)> {
        schedule(rounds, counts, systems, |system, count| *system != "raw" || count == 1)
            .into_iter()
            .map(|visit| (visit.round, visit.count, *visit.system))
            .collect()
    }

    #[test]
    fn every_point_runs_once_per_round_and_the_order_alternates() {
        let visits = order(2, &[1, 4], &["redolog", "mutex", "raw"]);
        assert_eq!(
            visits,
            [
                (0, 1, "redolog"),
                (0, 1, "mutex"),
                (0, 1, "raw"),
                (0, 4, "mutex"),
                (0, 4, "redolog"),
                (1, 1, "raw"),
                (1, 1, "mutex"),
                (1, 1, "redolog"),
                (1, 4, "redolog"),
                (1, 4, "mutex"),
            ]
        );
    }

    #[test]
    fn the_first_error_stops_the_sweep() {
        let mut measured = 0;
        let result = interleave(
            3,
            &[1, 2],
            &["a", "b"],
            |_, _| true,
            |visit| {
                measured += 1;
                if visit.round == 1 {
                    Err("disk full".into())
                } else {
                    Ok(visit.count)
                }
            },
        );
        assert_eq!(result.map(|points| points.len()).map_err(|error| error.to_string()), Err("disk full".into()));
        assert_eq!(measured, 5, "round 0's four points and the first of round 1");
    }
}
