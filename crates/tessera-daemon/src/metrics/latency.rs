//! A request latency histogram updated without a lock: two relaxed atomic additions per
//! request (its bucket, the sum). prometheus-client's own histogram takes a mutex per
//! observation, which concurrent requests of one service would contend for on the path of
//! the 1.5 µs null request; this one is encoded as the same histogram type.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets: up to 1 µs, 4 µs, 16 µs, ... 4^10 µs (about 1 s), then everything longer.
const BUCKETS: usize = 12;

/// Shared by its clones (the one the family encodes, the one the router updates).
#[derive(Clone, Debug, Default)]
pub struct Latency {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    counts: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

/// The bucket of a duration of `ns` nanoseconds: the first whose bound is at least it.
fn bucket_of(ns: u64) -> usize {
    let mut bound = 1_000u64;
    for i in 0..BUCKETS - 1 {
        if ns <= bound {
            return i;
        }
        bound *= 4;
    }
    BUCKETS - 1
}

/// The upper bound of bucket `i`, in seconds.
fn bound_of(i: usize) -> f64 {
    if i == BUCKETS - 1 {
        f64::INFINITY
    } else {
        1e-6 * 4f64.powi(i as i32)
    }
}

impl Latency {
    pub fn observe(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.inner.counts[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
        self.inner.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

impl TypedMetric for Latency {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Latency {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets: Vec<(f64, u64)> = (0..BUCKETS)
            .map(|i| (bound_of(i), self.inner.counts[i].load(Ordering::Relaxed)))
            .collect();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = self.inner.sum_ns.load(Ordering::Relaxed) as f64 * 1e-9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bounds_rise_by_fours_from_a_microsecond() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1_000), 0);
        assert_eq!(bucket_of(1_001), 1);
        assert_eq!(bucket_of(4_000), 1);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bound_of(1), 4e-6);
        assert!(bound_of(BUCKETS - 1).is_infinite());
    }

    proptest! {
        /// Every duration lands in the first bucket whose bound holds it.
        #[test]
        fn a_duration_lands_in_the_first_bucket_that_holds_it(ns in any::<u64>()) {
            let i = bucket_of(ns);
            let secs = ns as f64 * 1e-9;
            prop_assert!(secs <= bound_of(i) * (1.0 + 1e-12));
            if i > 0 {
                prop_assert!(secs > bound_of(i - 1) * (1.0 - 1e-12));
            }
        }
    }
}
