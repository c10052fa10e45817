//! One function, every map: the tables share the contract of `gpuhash_core::table`, so
//! switching tables is a change of one type. Then the set and the multimap, which speak
//! the same verbs for their shapes.
//!
//! `cargo run --release -p gpuhash --example 03_every_table`

use gpuhash::prelude::*;

/// Counts what `map` holds after a few batches; the same code for every `Map`.
fn exercise<M: Map<Key = u64, Value = u32>>(name: &str, map: &M) -> gpuhash::Result<()>
where
    gpuhash::Error: From<M::Error>,
{
    let keys: Vec<u64> = (0..100_000u64).map(|i| i * 7919).collect();
    let values: Vec<u32> = (0..keys.len() as u32).collect();
    map.insert(&keys, &values)?;
    map.remove(&keys[..1000])?;
    let answers = map.get(&keys[..2000])?;
    assert!(answers[..1000].iter().all(Option::is_none));
    assert_eq!(answers[1000], Some(1000));
    assert_eq!(map.count_hits(&keys)?, keys.len() - 1000);
    println!(
        "{name:>16}: {} pairs, {} device bytes",
        map.len()?,
        map.memory()?.bytes_reserved
    );
    Ok(())
}

fn main() -> gpuhash::Result<()> {
    let device = Device::default()?;
    exercise(
        "SlabHashMap",
        &SlabHashMap::<u64, u32>::with_capacity(&device, 1 << 17)?,
    )?;
    exercise(
        "CuckooTable",
        &CuckooTable::<u64, u32>::with_capacity(&device, 1 << 17)?,
    )?;
    exercise(
        "SwapMap",
        &SwapMap::<u64, u32>::new(&device, SwapOptions::with_capacity(1 << 17))?,
    )?;

    // A set holds keys alone; a multimap holds every value given for a key.
    let set = SlabHashSet::<u32>::with_capacity(&device, 1024)?;
    set.insert(&[3, 1, 3, u32::MAX])?;
    assert_eq!(
        set.contains(&[1, 2, 3, u32::MAX])?,
        vec![true, false, true, true]
    );
    let multimap = SlabHashMultiMap::<u32, u32>::with_capacity(&device, 1024)?;
    multimap.insert(&[5, 5, 5, 9], &[50, 51, 52, 90])?;
    assert_eq!(multimap.count(&[5, 9, 1])?, vec![3, 1, 0]);
    println!(
        "set of {} keys, multimap of {} pairs",
        set.len()?,
        multimap.len()?
    );
    Ok(())
}
