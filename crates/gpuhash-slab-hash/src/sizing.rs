//! How many slabs a table needs: pure functions, tested on the CPU.
//!
//! Under a uniform hash, the entries of a bucket follow a Poisson law with mean
//! entries / buckets, and a bucket of c entries takes max(1, ceil(c / per_slab)) slabs.

/// Expected slabs of one bucket whose entry count is Poisson with `mean`, `per_slab`
/// entries to a slab (the head slab counts even when empty).
pub fn expected_slabs_per_bucket(mean: f64, per_slab: u64) -> f64 {
    let slabs = |count: u64| count.div_ceil(per_slab).max(1) as f64;
    // Walk out from the mode by ratios of neighbouring terms: e^-mean alone underflows for
    // the means of long lists.
    let mode = mean.floor() as u64;
    let ln_factorial = |n: u64| {
        let n = n as f64;
        if n < 1.0 {
            0.0
        } else {
            n * n.ln() - n + 0.5 * (2.0 * std::f64::consts::PI * n).ln() + 1.0 / (12.0 * n)
        }
    };
    let at_mode =
        (-mean + mode as f64 * mean.max(f64::MIN_POSITIVE).ln() - ln_factorial(mode)).exp();
    let reach = (12.0 * mean.sqrt() + 40.0) as u64;
    let mut total = at_mode * slabs(mode);
    let mut pmf = at_mode;
    for count in mode + 1..=mode + reach {
        pmf *= mean / count as f64;
        total += pmf * slabs(count);
    }
    pmf = at_mode;
    for count in (mode.saturating_sub(reach)..mode).rev() {
        pmf *= (count + 1) as f64 / mean;
        total += pmf * slabs(count);
    }
    total
}

/// Expected slabs, heads included, of `entries` entries over `buckets` buckets.
pub fn expected_slabs(entries: u64, buckets: u32, per_slab: u64) -> f64 {
    f64::from(buckets) * expected_slabs_per_bucket(entries as f64 / f64::from(buckets), per_slab)
}

/// The bucket count at which `entries` key-value pairs (15 to a slab, 8 bytes each) fill
/// slab memory to `utilization`, the SlabHash paper's measure: pair bytes over slab bytes. Useful
/// values lie below 15/16, where every slab is full.
pub fn buckets_for_utilization(entries: u64, utilization: f64) -> u32 {
    let utilization_at =
        |buckets: f64| entries as f64 * 8.0 / (128.0 * expected_slabs(entries, buckets as u32, 15));
    let (mut low, mut high) = (1.0f64, entries.max(1) as f64);
    for _ in 0..64 {
        let middle = (low * high).sqrt();
        // Fewer buckets: longer lists, fuller slabs.
        if utilization_at(middle) > utilization {
            low = middle;
        } else {
            high = middle;
        }
    }
    high.round() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_buckets_take_one_slab_and_dense_ones_fill_theirs() {
        assert!((expected_slabs_per_bucket(0.01, 15) - 1.0).abs() < 1e-9);
        let dense = expected_slabs_per_bucket(1500.0, 15);
        assert!((100.0..101.0).contains(&dense), "{dense}");
    }

    #[test]
    fn utilization_targets_are_met_by_the_chosen_bucket_count() {
        for target in [0.3, 0.5, 0.8, 0.9] {
            let buckets = buckets_for_utilization(1 << 24, target);
            let got = (1u64 << 24) as f64 * 8.0 / (128.0 * expected_slabs(1 << 24, buckets, 15));
            assert!(
                (got - target).abs() < 0.01,
                "{target}: {got} with {buckets} buckets"
            );
        }
    }
}
