//! The public partition that layers above split batches with: every key lands in the part
//! the host's [`Spread`] names, under the children's seed and under another, once each.

use gpuhash_core::DeviceBuffer;
use gpuhash_swap::partition::Partition;
use gpuhash_swap::policy::Spread;
use gpuhash_test_support::{SeededRng, adversarial_keys, stream};

fn check_split(keys: &[u64], spread: Spread) {
    let on_device = DeviceBuffer::from_host(stream(), keys).expect("keys up");
    let values: Vec<u32> = (0..keys.len() as u32).collect();
    let values_on = DeviceBuffer::from_host(stream(), &values).expect("values up");
    let split = Partition::by_part(stream(), spread, &on_device, Some(&values_on)).expect("split");
    let ranges = split.ranges();
    assert_eq!(ranges.len(), spread.parts as usize);
    let mut seen = vec![false; keys.len()];
    for (part, range) in ranges.iter().enumerate() {
        let part_keys = split.keys_of(stream(), range.clone()).expect("keys");
        let places = split.places_of(stream(), range.clone()).expect("places");
        let part_values = split.values_of(stream(), range.clone()).expect("values");
        let (part_keys, places, part_values) = (
            part_keys.to_host(stream()).expect("down"),
            places.to_host(stream()).expect("down"),
            part_values.to_host(stream()).expect("down"),
        );
        for ((key, place), value) in part_keys.iter().zip(&places).zip(&part_values) {
            let place = *place as usize;
            assert_eq!(keys[place], *key, "part {part}: a key away from its place");
            assert_eq!(
                values[place], *value,
                "part {part}: a value away from its key"
            );
            assert_eq!(
                spread.part_of(*key) as usize,
                part,
                "key {key} in part {part}"
            );
            assert!(
                !std::mem::replace(&mut seen[place], true),
                "place {place} twice"
            );
        }
    }
    assert!(seen.iter().all(|&s| s), "every key in some part");
}

#[test]
#[ignore = "needs a CUDA device"]
fn batches_split_by_part_as_the_host_spreads_them() {
    let mut rng = SeededRng::new(61);
    let random: Vec<u64> = (0..100_000).map(|_| rng.next_u64()).collect();
    let adversarial: Vec<u64> = adversarial_keys::<u64>();
    let repeated = vec![0xdead_beef_u64; 5000];
    for keys in [&random, &adversarial, &repeated] {
        for parts in [1u32, 2, 3, 8, 16] {
            check_split(keys, Spread::children(parts));
            check_split(
                keys,
                Spread {
                    parts,
                    seed: 0x0bd5_c3a1_e7f2_9d47,
                },
            );
        }
    }
}
