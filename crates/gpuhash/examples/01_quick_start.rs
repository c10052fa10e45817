//! The README's first example: a map of u64 keys to u32 values on device 0.
//!
//! `cargo run -p gpuhash --example 01_quick_start`; without a GPU it reports why and exits.

use gpuhash::prelude::*;

fn main() -> gpuhash::Result<()> {
    let device = Device::default()?; // Err(NoDriver) / Err(NoDevice), never a panic
    let map = SlabHashMap::<u64, u32>::with_capacity(&device, 1 << 20)?;
    let keys: Vec<u64> = (0..1000).chain([u64::MAX]).collect(); // every key value is usable
    let values: Vec<u32> = (0..keys.len() as u32).collect();
    map.insert(&keys, &values)?;
    assert_eq!(
        map.get(&[7, u64::MAX, 5000])?,
        vec![Some(7), Some(1000), None]
    );
    map.remove(&keys[..10])?;
    assert_eq!(map.len()?, keys.len() - 10);
    println!("{} pairs on {}", map.len()?, device.properties().name);
    Ok(())
}
