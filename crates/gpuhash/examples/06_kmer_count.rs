//! k-mer counting: how often each 31-base substring of a DNA sequence occurs, a k-mer
//! packed in a u64 (2 bits a base) and counted on the GPU with one combining upsert
//! (`Combine::Add`), beside a CPU version on every core, checked equal and timed.
//!
//! `cargo run --release -p gpuhash --example 06_kmer_count [FASTA] [--bases N]`
//!
//! Without a FASTA file it generates a sequence (seeded, 2^26 bases by default) in which
//! some stretches repeat, as in a genome. Counts are of canonical k-mers: a k-mer and its
//! reverse complement are one key (the smaller of the two), as DNA is read from either
//! strand. Bases other than A, C, G, T end a run; no k-mer spans them.

#[allow(dead_code, reason = "the TPC-H generator of examples 07 and 08")]
mod common;

use std::collections::HashMap;
use std::time::Instant;

use common::{mix64, ms, threads};
use gpuhash::prelude::*;

const K: usize = 31;
const MASK: u64 = (1 << (2 * K)) - 1;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (path, bases) = arguments()?;
    let sequence = match &path {
        Some(path) => read_fasta(path)?,
        None => generated_sequence(bases, 0x6b6d_6572),
    };
    let started = Instant::now();
    let kmers = canonical_kmers(&sequence);
    println!(
        "{} bases, {} k-mers (k = {K}) extracted on the CPU in {:.1} ms",
        sequence.len(),
        kmers.len(),
        ms(started)
    );

    let (cpu_counts, cpu_ms) = count_on_cpu(&kmers);
    let (gpu_counts, [device_ms, with_copies_ms, registered_ms]) = count_on_gpu(&kmers)?;
    assert_eq!(gpu_counts.len(), cpu_counts.len(), "distinct k-mers differ");
    for (kmer, count) in &gpu_counts {
        assert_eq!(
            cpu_counts.get(kmer),
            Some(count),
            "count of k-mer {kmer:#x} differs"
        );
    }
    println!(
        "{} distinct k-mers, GPU and CPU counts equal",
        cpu_counts.len()
    );
    let rate = |ms: f64| kmers.len() as f64 / ms / 1e3;
    println!(
        "GPU (device buffers): {device_ms:.1} ms, {:.0} M k-mers/s",
        rate(device_ms)
    );
    println!(
        "GPU (from host memory, with copies): {with_copies_ms:.1} ms, {:.0} M k-mers/s",
        rate(with_copies_ms)
    );
    println!(
        "GPU (from registered host memory, with copies): {registered_ms:.1} ms, {:.0} M k-mers/s",
        rate(registered_ms)
    );
    println!(
        "CPU ({} threads): {cpu_ms:.1} ms, {:.0} M k-mers/s",
        threads(),
        rate(cpu_ms)
    );
    let mut top: Vec<(u64, u32)> = gpu_counts.into_iter().collect();
    top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (kmer, count) in top.iter().take(5) {
        println!("{count:>10}  {}", decode(*kmer));
    }
    Ok(())
}

/// Counts on the GPU three times, into emptied maps: from device buffers (the upsert alone, timed
/// with CUDA events) and from host memory (the host form, copies included). Returns the
/// counts and the three times in ms (the third from registered host memory).
fn count_on_gpu(kmers: &[u64]) -> gpuhash::Result<(HashMap<u64, u32>, [f64; 3])> {
    let device = Device::default()?;
    let stream = device.new_stream()?;
    let ones = vec![1u32; kmers.len()];
    let map = SlabHashMap::<u64, u32>::with_capacity(&device, kmers.len())?;
    let device_kmers = DeviceBuffer::from_host(&stream, kmers)?;
    let device_ones = DeviceBuffer::from_host(&stream, &ones)?;
    let timer = EventTimer::start(&stream)?;
    map.upsert_async(&stream, &device_kmers, &device_ones, Combine::Add)?;
    let device_ms = f64::from(timer.stop()?);
    drop((device_kmers, device_ones));

    map.clear()?;
    let started = Instant::now();
    map.upsert(kmers, &ones, Combine::Add)?;
    let pairs = map.export()?;
    let with_copies_ms = ms(started);

    // Again with the k-mers page-locked in place (registration timed too): the copies
    // then go straight from them, with no staging.
    map.clear()?;
    let started = Instant::now();
    let (kmers, ones) = (device.register(kmers)?, device.register(&ones[..])?);
    map.upsert(&kmers, &ones, Combine::Add)?;
    assert_eq!(map.export()?.len(), pairs.len());
    let registered_ms = ms(started);
    let counts = pairs.into_iter().collect();
    Ok((counts, [device_ms, with_copies_ms, registered_ms]))
}

/// Counts on every core ([`common::group_by`]); the per-thread maps joined into one std
/// map only to compare, outside the timed work.
fn count_on_cpu(kmers: &[u64]) -> (HashMap<u64, u32>, f64) {
    let (maps, elapsed) = common::group_by(kmers, |count: &mut u32, _| *count += 1);
    (maps.into_iter().flatten().collect(), elapsed)
}

/// Every canonical k-mer of the sequence, in order, extracted on every core.
fn canonical_kmers(sequence: &[u8]) -> Vec<u64> {
    let n = threads();
    let chunk = sequence.len().div_ceil(n).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..sequence.len())
            .step_by(chunk)
            .map(|start| {
                // A chunk's k-mers start in it; their last bases may lie in the next one.
                let end = (start + chunk + K - 1).min(sequence.len());
                scope.spawn(move || kmers_of(&sequence[start..end]))
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("worker"))
            .collect()
    })
}

fn kmers_of(bases: &[u8]) -> Vec<u64> {
    let mut out = Vec::with_capacity(bases.len());
    let (mut forward, mut reverse, mut run) = (0u64, 0u64, 0usize);
    for &base in bases {
        let Some(code) = code_of(base) else {
            run = 0;
            continue;
        };
        forward = ((forward << 2) | code) & MASK;
        reverse = (reverse >> 2) | ((3 - code) << (2 * (K - 1)));
        run += 1;
        if run >= K {
            out.push(forward.min(reverse));
        }
    }
    out
}

fn code_of(base: u8) -> Option<u64> {
    match base {
        b'A' | b'a' => Some(0),
        b'C' | b'c' => Some(1),
        b'G' | b'g' => Some(2),
        b'T' | b't' => Some(3),
        _ => None,
    }
}

fn decode(kmer: u64) -> String {
    (0..K)
        .rev()
        .map(|i| b"ACGT"[((kmer >> (2 * i)) & 3) as usize] as char)
        .collect()
}

/// The bases of a FASTA file: header lines (`>`) and line breaks dropped, records joined
/// with an `N` so that no k-mer spans two of them.
fn read_fasta(path: &str) -> std::io::Result<Vec<u8>> {
    let text = std::fs::read(path)?;
    let mut bases = Vec::with_capacity(text.len());
    for line in text.split(|&b| b == b'\n') {
        if line.first() == Some(&b'>') {
            bases.push(b'N');
        } else {
            bases.extend(line.iter().filter(|b| !b.is_ascii_whitespace()));
        }
    }
    Ok(bases)
}

/// `bases` random bases, with stretches of 1 to 4 kb copied from earlier in the sequence
/// now and then (a tenth of it), so that some k-mers occur many times.
fn generated_sequence(bases: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(state)
    };
    let mut sequence = Vec::with_capacity(bases);
    while sequence.len() < bases {
        let word = next();
        if word % 100 < 1 && sequence.len() > 8192 {
            let length = (1024 + (word >> 8) % 3072) as usize;
            let from = ((word >> 24) % (sequence.len() as u64 - length as u64)) as usize;
            let length = length.min(bases - sequence.len());
            sequence.extend_from_within(from..from + length);
        } else {
            sequence.extend((0..32).map(|i| b"ACGT"[((word >> (2 * i)) & 3) as usize]));
        }
    }
    sequence.truncate(bases);
    sequence
}

fn arguments() -> Result<(Option<String>, usize), String> {
    let mut path = None;
    let mut bases = 1usize << 26;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--bases" {
            bases = args
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or("--bases takes a number")?;
        } else {
            path = Some(arg);
        }
    }
    Ok((path, bases))
}
