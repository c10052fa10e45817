//! Several host threads share one table: every verb takes `&self`, and each call runs on a
//! stream of its own, so batches from different threads proceed side by side. Writers
//! insert disjoint ranges while readers look keys up; a reader only ever sees a key's own
//! value or nothing.
//!
//! `cargo run --release -p gpuhash --example 04_threads`

use gpuhash::prelude::*;

const WRITERS: u32 = 4;
const PER_WRITER: u32 = 1 << 18;

fn value_of(key: u32) -> u32 {
    key ^ 0xa5a5_a5a5
}

fn main() -> gpuhash::Result<()> {
    let device = Device::default()?;
    let map = SlabHashMap::<u32, u32>::with_capacity(&device, (WRITERS * PER_WRITER) as usize)?;
    std::thread::scope(|scope| -> gpuhash::Result<()> {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let map = &map;
                scope.spawn(move || -> gpuhash::Result<()> {
                    let keys: Vec<u32> = (w * PER_WRITER..(w + 1) * PER_WRITER).collect();
                    let values: Vec<u32> = keys.iter().map(|&k| value_of(k)).collect();
                    for (k, v) in keys.chunks(1 << 14).zip(values.chunks(1 << 14)) {
                        map.insert(k, v)?;
                    }
                    Ok(())
                })
            })
            .collect();
        let reader = scope.spawn(|| -> gpuhash::Result<usize> {
            let keys: Vec<u32> = (0..WRITERS * PER_WRITER).step_by(97).collect();
            let mut seen = 0;
            for _ in 0..20 {
                for (key, answer) in keys.iter().zip(map.get(&keys)?) {
                    if let Some(value) = answer {
                        assert_eq!(value, value_of(*key), "a value nobody wrote");
                        seen += 1;
                    }
                }
            }
            Ok(seen)
        });
        for writer in writers {
            writer.join().expect("writer thread")?;
        }
        let seen = reader.join().expect("reader thread")?;
        println!("the reader saw {seen} written pairs while the writers ran");
        Ok(())
    })?;
    assert_eq!(map.len()?, (WRITERS * PER_WRITER) as usize);
    println!("{} pairs from {WRITERS} threads", map.len()?);
    Ok(())
}
