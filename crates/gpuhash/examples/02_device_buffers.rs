//! Keys that are already on the GPU stay there: the `_async` forms queue work on a stream
//! and return at once, and nothing crosses the bus until the program asks for it. Timed
//! with CUDA events.
//!
//! `cargo run --release -p gpuhash --example 02_device_buffers`

use gpuhash::prelude::*;

fn main() -> gpuhash::Result<()> {
    let device = Device::default()?;
    let stream = device.new_stream()?;
    let n: u32 = 1 << 22;
    // An odd multiplier is a bijection of u32: every key is distinct.
    let keys: Vec<u32> = (0..n).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
    let values: Vec<u32> = (0..n).collect();
    let device_keys = DeviceBuffer::from_host(&stream, &keys)?;
    let device_values = DeviceBuffer::from_host(&stream, &values)?;

    let map = CuckooTable::<u32, u32>::with_capacity(&device, n as usize)?;
    let timer = EventTimer::start(&stream)?;
    map.insert_async(&stream, &device_keys, &device_values)?;
    let insert_ms = timer.stop()?;

    let mut found = DeviceBuffer::<u8>::zeroed(&stream, n as usize)?;
    let mut answers = DeviceBuffer::<u32>::zeroed(&stream, n as usize)?;
    let timer = EventTimer::start(&stream)?;
    map.get_async(&stream, &device_keys, &mut found, &mut answers)?;
    let get_ms = timer.stop()?;

    // Only now do answers travel back, and only to check them.
    assert!(found.to_host(&stream)?.iter().all(|&f| f == 1));
    assert_eq!(answers.to_host(&stream)?, values);
    let rate = |ms: f32| f64::from(n) / f64::from(ms) / 1e3;
    println!(
        "{n} pairs on {}: insert {insert_ms:.3} ms ({:.0} M/s), get {get_ms:.3} ms ({:.0} M/s)",
        device.properties().name,
        rate(insert_ms),
        rate(get_ms)
    );
    Ok(())
}
