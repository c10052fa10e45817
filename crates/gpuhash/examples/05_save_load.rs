//! A table saved to a file and loaded back, on this GPU or another: an image holds the
//! table's device arrays as they are, so loading copies them back without rehashing. A
//! damaged or foreign image is refused with an error.
//!
//! `cargo run --release -p gpuhash --example 05_save_load [PATH]`

use std::fs::File;
use std::io::{BufReader, BufWriter};

use gpuhash::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).map_or_else(
        || std::env::temp_dir().join("gpuhash-example.table"),
        Into::into,
    );
    let device = Device::default()?;
    let keys: Vec<u64> = (0..1_000_000u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    let values: Vec<u32> = (0..keys.len() as u32).collect();

    let table = CuckooTable::<u64, u32>::with_capacity(&device, keys.len())?;
    table.insert(&keys, &values)?;
    let mut out = BufWriter::new(File::create(&path)?);
    table.save(&mut out)?;
    drop(out);

    let mut input = BufReader::new(File::open(&path)?);
    let loaded = CuckooTable::<u64, u32>::load(&device, &mut input)?;
    assert_eq!(loaded.len()?, keys.len());
    assert_eq!(
        loaded.get(&keys[..5])?,
        values[..5].iter().copied().map(Some).collect::<Vec<_>>()
    );
    // The wrong type for the image is an error, not a wrong answer.
    let mut input = BufReader::new(File::open(&path)?);
    assert!(SlabHashMap::<u64, u32>::load(&device, &mut input).is_err());
    println!(
        "{} pairs saved to {} and loaded back",
        loaded.len()?,
        path.display()
    );
    Ok(())
}
