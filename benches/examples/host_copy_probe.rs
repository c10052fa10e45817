//! Probe behind docs/benchmarks/contract.md: how fast the host side of a host-slice batch
//! can go on this host. Copies of 512 MiB from a vector into pinned memory and back with
//! 1 to 16 threads, pieces of 4 to 64 MiB, and the first write of a fresh vector (page
//! faults) with the same threads, in GB/s. `cargo run --release -p gpuhash-bench --example
//! host_copy_probe`.

use std::time::Instant;

use gpuhash_core::{Device, PinnedBuffer};

const BYTES: usize = 512 << 20;

fn gbps(seconds: f64) -> f64 {
    BYTES as f64 / seconds / 1e9
}

/// Best of 5 timings of `once`.
fn best(mut once: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let start = Instant::now();
            once();
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn split_copy(target: &mut [u64], source: &[u64], threads: usize) {
    let piece = source.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for (t, s) in target.chunks_mut(piece).zip(source.chunks(piece)) {
            scope.spawn(move || t.copy_from_slice(s));
        }
    });
}

fn main() -> gpuhash_core::Result<()> {
    let device = Device::default()?;
    let n = BYTES / 8;
    let source: Vec<u64> = (0..n as u64).collect();
    let mut pinned = PinnedBuffer::<u64>::zeroed(&device, n)?;
    let mut back = vec![0u64; n];
    for threads in [1, 2, 4, 8, 16] {
        let into = best(|| split_copy(&mut pinned, &source, threads));
        let out = best(|| split_copy(&mut back, &pinned, threads));
        let fresh = best(|| {
            // Zeroed by the allocator's fresh pages: the writes below fault them in.
            let mut v = vec![0u64; n];
            let piece = n.div_ceil(threads);
            std::thread::scope(|scope| {
                for part in v.chunks_mut(piece) {
                    scope.spawn(move || part.fill(7));
                }
            });
            std::hint::black_box(&v);
        });
        println!(
            "PROBE|threads {threads}|vec->pinned {:.1} GB/s|pinned->vec {:.1} GB/s|fresh vec first write {:.1} GB/s",
            gbps(into),
            gbps(out),
            gbps(fresh)
        );
    }
    for piece_mib in [4usize, 16, 64] {
        let piece = (piece_mib << 20) / 8;
        let t = best(|| {
            for (t, s) in pinned.chunks_mut(piece).zip(source.chunks(piece)) {
                split_copy(t, s, 8);
            }
        });
        println!(
            "PROBE|pieces of {piece_mib} MiB, 8 threads each|vec->pinned {:.1} GB/s",
            gbps(t)
        );
    }
    Ok(())
}
