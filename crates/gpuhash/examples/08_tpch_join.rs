//! A TPC-H join, end to end from host arrays: the orders of 1995 (`o_orderdate` in
//! 1995-01-01 ..= 1995-12-31) go into a table, `o_orderkey -> o_orderdate`; every
//! `lineitem` row probes it with `l_orderkey`; the answer is the count of the matching
//! rows and the sum of their `l_extendedprice`. Data from the `tpchgen` crate.
//!
//! Three ways, for each table (DyHash's `CuckooTable` and the slab hash map):
//! - **host slices**: `get_into` answers every row (found flag and value), and the host
//!   sums the prices of the rows found;
//! - **compact answers**: `get_hits` ships back only the hits (row index and value), and
//!   the host sums their prices;
//! - **fused**: one kernel of this program's, compiled at run time with NVRTC against the
//!   table's public device view (`gpuhash::cuckoo::view`, `gpuhash::slab_hash::view`),
//!   reads the `lineitem` columns on the device, probes, keeps the rows whose order date
//!   lies in the range and adds count and sum with atomics; two numbers come back. Once
//!   with the columns staged up from the host arrays, once reading them in place from
//!   mapped pinned memory (where a loader writing for the GPU would put them), so that
//!   copy and probe are one pass over the bus.
//!
//! A CPU version on every core (a std `HashMap` built, then probed by one thread a core)
//! runs in the same program; every answer must equal it (the program exits with an error
//! otherwise). The H2D and D2H rates of pinned copies are measured in the same run, and
//! each way's time set against its bus bound: the bytes that must cross (keys and values
//! of the build, the probe's columns in, its answers out) over those rates.
//!
//! `cargo run --release -p gpuhash --example 08_tpch_join [--scale SF]` (default 0.1:
//! 600k rows; 10 gives 60M). Needs the NVRTC library of CUDA 13 (`libnvrtc`) for the
//! fused kernel.

#[allow(
    dead_code,
    reason = "the group-by of example 07, which this one does not use"
)]
mod common;

use std::time::Instant;

use common::ms;
use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use gpuhash::core::hits::DeviceHits;
use gpuhash::core::nvrtc::Headers;
use gpuhash::core::{PinnedBuffer, staging};
use gpuhash::prelude::*;
use tpchgen::generators::{LineItemGenerator, OrderGenerator};

/// 1995-01-01 and 1996-01-01 in days since 1970-01-01: the orders' date range.
const FROM_DAY: u32 = 9131;
const UNTIL_DAY: u32 = 9496;

/// The fused kernel: filter, probe and reduce in one pass over `lineitem`'s columns, for
/// any table whose view header the prelude includes and whose view and find it names
/// (`ORDERS_VIEW`, `FIND_ORDER`).
const FUSED_JOIN: &str = r#"
extern "C" __global__ void join_count_sum(ORDERS_VIEW view, const uint32_t *orderkeys,
                                          const unsigned long long *prices, unsigned long long rows,
                                          uint32_t from_day, uint32_t until_day,
                                          unsigned long long *count_and_sum) {
    // The view in shared memory: a find indexes it by numbers known at run time.
    __shared__ ORDERS_VIEW orders;
    if (threadIdx.x == 0) orders = view;
    __syncthreads();
    unsigned long long count = 0, sum = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < rows;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        uint32_t day;
        if (FIND_ORDER(&orders, orderkeys[i], &day) && day >= from_day && day < until_day) {
            count += 1;
            sum += prices[i];
        }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        count += __shfl_down_sync(0xffffffffu, count, offset);
        sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    if ((threadIdx.x & 31u) == 0 && count != 0) {
        atomicAdd(count_and_sum, count);
        atomicAdd(count_and_sum + 1, sum);
    }
}
"#;

/// The addresses and numbers the fused kernel takes after the view.
struct JoinArgs {
    orders: u64,
    prices: u64,
    rows: u64,
    out: u64,
}

/// A table the fused kernel probes through its device view.
trait ProbedInKernel: Map<Key = u32, Value = u32> {
    /// Its name in the table of results.
    const NAME: &'static str;
    /// What goes before [`FUSED_JOIN`]: the view header, `ORDERS_VIEW` and `FIND_ORDER`.
    const PRELUDE: &'static str;
    /// The headers the view header needs.
    const HEADERS: Headers;

    /// Queues `kernel` on `stream` with the table's view and then `args`.
    fn launch_join(
        &self,
        stream: &Stream,
        kernel: &CudaFunction,
        config: LaunchConfig,
        args: &JoinArgs,
    ) -> Result<(), Box<dyn std::error::Error>>;
}

/// The two tables' [`ProbedInKernel`]s, alike but for their view types.
macro_rules! probed_in_kernel {
    ($table:ty, $name:literal, $headers:expr, $prelude:literal) => {
        impl ProbedInKernel for $table {
            const NAME: &'static str = $name;
            const PRELUDE: &'static str = $prelude;
            const HEADERS: Headers = $headers;

            fn launch_join(
                &self,
                stream: &Stream,
                kernel: &CudaFunction,
                config: LaunchConfig,
                args: &JoinArgs,
            ) -> Result<(), Box<dyn std::error::Error>> {
                let view = self.device_view(stream)?;
                let mut launch = stream.cuda_stream().launch_builder(kernel);
                launch
                    .arg(view.raw())
                    .arg(&args.orders)
                    .arg(&args.prices)
                    .arg(&args.rows)
                    .arg(&FROM_DAY)
                    .arg(&UNTIL_DAY)
                    .arg(&args.out);
                // SAFETY: the caller's `args` address `rows` keys and prices and two
                // counters, alive until the stream is read; the table's view lives until
                // the launch is queued on its stream.
                unsafe { launch.launch(config) }?;
                Ok(())
            }
        }
    };
}

probed_in_kernel!(
    CuckooTable<u32, u32>,
    "DyHash",
    gpuhash::cuckoo::view::HEADERS,
    "#include \"gpuhash/cuckoo_view.cuh\"\n#define ORDERS_VIEW GhCuckooView\n#define FIND_ORDER gh_cuckoo_find_u32\n"
);
probed_in_kernel!(
    SlabHashMap<u32, u32>,
    "slab hash",
    gpuhash::slab_hash::view::HEADERS,
    "#include \"gpuhash/slab_hash_view.cuh\"\n#define ORDERS_VIEW GhSlabView\n#define FIND_ORDER gh_slab_find_u32\n"
);

/// The columns the query reads.
struct Columns {
    /// Orders of the date range: keys and dates (days since 1970-01-01).
    order_keys: Vec<u32>,
    order_days: Vec<u32>,
    /// `lineitem`: the order of each row and its price in cents.
    line_orders: Vec<u32>,
    line_prices: Vec<u64>,
}

/// The query's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Answer {
    rows: u64,
    cents: u64,
}

/// Where one way's time went, in ms, and the bytes it moved.
struct Split {
    table: &'static str,
    way: &'static str,
    build: f64,
    /// The probe from host arrays to the answer, host work included.
    probe: f64,
    /// The probe's device work alone, its inputs already on the device (CUDA events).
    kernels: f64,
    /// The probe's passes on the host (host clock).
    host: f64,
    bytes_in: u64,
    bytes_out: u64,
}

/// Measured pinned copy rates, GB/s.
struct Bus {
    h2d: f64,
    d2h: f64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scale = scale_factor()?;
    let started = Instant::now();
    let columns = generate(scale);
    println!(
        "TPC-H at scale factor {scale}: {} orders of 1995, {} lineitem rows, generated in {:.1} s",
        columns.order_keys.len(),
        columns.line_orders.len(),
        ms(started) / 1e3
    );
    let (expected, cpu_build, cpu_probe) = join_on_cpu(&columns);
    println!(
        "CPU, {} threads: {} rows, {} cents; build {cpu_build:.1} ms, probe {cpu_probe:.1} ms",
        common::threads(),
        expected.rows,
        expected.cents
    );

    let device = Device::default()?;
    let stream = device.new_stream()?;
    let bus = measure_bus(&device, &stream, columns.line_prices.len() * 8)?;
    println!(
        "bus, pinned copies: {:.1} GB/s in, {:.1} GB/s out",
        bus.h2d, bus.d2h
    );

    let mut splits = Vec::new();
    let mut mismatches = Vec::new();
    let mut check = |split: Split, answer: Answer| {
        if answer != expected {
            mismatches.push(format!(
                "{} {}: {answer:?}, the CPU {expected:?}",
                split.table, split.way
            ));
        }
        splits.push(split);
    };

    let orders = columns.order_keys.len();
    let cuckoo = CuckooTable::<u32, u32>::with_capacity(&device, orders)?;
    for (split, answer) in every_way(&cuckoo, &stream, &columns)? {
        check(split, answer);
    }
    drop(cuckoo);
    let slab = SlabHashMap::<u32, u32>::with_capacity(&device, orders)?;
    for (split, answer) in every_way(&slab, &stream, &columns)? {
        check(split, answer);
    }

    print_splits(&splits, &bus, cpu_build + cpu_probe);
    if mismatches.is_empty() {
        println!("every answer equals the CPU's");
        Ok(())
    } else {
        Err(format!("answers differ from the CPU's: {}", mismatches.join("; ")).into())
    }
}

/// Builds `table` from the orders, then probes it every way: host slices, compact answers,
/// the fused kernel.
fn every_way<T: ProbedInKernel>(
    table: &T,
    stream: &Stream,
    columns: &Columns,
) -> Result<Vec<(Split, Answer)>, Box<dyn std::error::Error>> {
    let build = build_table(table, columns)?;
    let mut ways = host_ways(table, T::NAME, build, stream, columns)?;
    ways.extend(fused(table, build, stream, columns)?);
    Ok(ways)
}

/// Inserts the orders from host slices; the time in ms of the second build (the first, into
/// the table emptied after it, loads the kernels).
fn build_table<M: Map<Key = u32, Value = u32>>(
    map: &M,
    columns: &Columns,
) -> Result<f64, M::Error> {
    map.insert(&columns.order_keys, &columns.order_days)?;
    map.clear()?;
    let started = Instant::now();
    map.insert(&columns.order_keys, &columns.order_days)?;
    Ok(ms(started))
}

/// Ways (a) and (b): host slices with every row's answer, and compact answers.
fn host_ways<M: Map<Key = u32, Value = u32>>(
    map: &M,
    table: &'static str,
    build: f64,
    stream: &Stream,
    columns: &Columns,
) -> Result<Vec<(Split, Answer)>, Box<dyn std::error::Error>> {
    let keys = &columns.line_orders;
    let rows = keys.len();
    let bytes_build = columns.order_keys.len() as u64 * 8;
    let (kernels_rows, kernels_hits) = device_work(map, stream, keys)?;

    // Each way runs twice and the second run counts: the first touches the answer
    // buffers' pages and the pinned pool's.
    let mut found = vec![0u8; rows];
    let mut days = vec![0u32; rows];
    let (mut every_row, mut probe_rows, mut host_rows) = (Answer::default(), 0.0, 0.0);
    let (mut compact, mut probe_hits, mut host_hits) = (Answer::default(), 0.0, 0.0);
    for _ in 0..2 {
        let started = Instant::now();
        map.get_into(keys, &mut found, &mut days)?;
        let host_started = Instant::now();
        every_row = sum_prices(&columns.line_prices, |i| found[i] != 0);
        host_rows = ms(host_started);
        probe_rows = ms(started);

        let started = Instant::now();
        let hits = map.get_hits(keys)?;
        let host_started = Instant::now();
        let index = &hits.index;
        compact = sum_over(index.len(), |h| columns.line_prices[index[h] as usize]);
        host_hits = ms(host_started);
        probe_hits = ms(started);
    }

    Ok(vec![
        (
            Split {
                table,
                way: "host slices",
                build,
                probe: probe_rows,
                kernels: kernels_rows,
                host: host_rows,
                bytes_in: bytes_build + rows as u64 * 4,
                bytes_out: rows as u64 * 5,
            },
            every_row,
        ),
        (
            Split {
                table,
                way: "compact answers",
                build,
                probe: probe_hits,
                kernels: kernels_hits,
                host: host_hits,
                bytes_in: bytes_build + rows as u64 * 4,
                bytes_out: compact.rows * 8 + 8,
            },
            compact,
        ),
    ])
}

/// The device work of ways (a) and (b) alone, on keys already on the device, timed with
/// CUDA events after one untimed run: the lookup, and the lookup with the hits gathered.
fn device_work<M: Map<Key = u32, Value = u32>>(
    map: &M,
    stream: &Stream,
    keys: &[u32],
) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let on_device = DeviceBuffer::from_host(stream, keys)?;
    let mut found = DeviceBuffer::<u8>::unfilled(stream, keys.len())?;
    let mut values = DeviceBuffer::<u32>::unfilled(stream, keys.len())?;
    let mut hits = DeviceHits::<u32>::with_capacity(stream, keys.len())?;
    let mut timed = |gather: bool| -> Result<f64, Box<dyn std::error::Error>> {
        let mut best = f64::INFINITY;
        for _ in 0..2 {
            let timer = EventTimer::start(stream)?;
            map.get_async(stream, &on_device, &mut found, &mut values)?;
            if gather {
                hits.gather(stream, 0, &found, &values)?;
            }
            best = best.min(f64::from(timer.stop()?));
        }
        Ok(best)
    };
    Ok((timed(false)?, timed(true)?))
}

/// Way (c): the fused kernel, compiled with NVRTC and probing the table through its view.
fn fused<T: ProbedInKernel>(
    table: &T,
    build: f64,
    stream: &Stream,
    columns: &Columns,
) -> Result<Vec<(Split, Answer)>, Box<dyn std::error::Error>> {
    let source = format!("{}{FUSED_JOIN}", T::PRELUDE);
    let ptx = T::HEADERS.compile_ptx(stream.device(), &source)?;
    let module = stream.cuda_stream().context().load_module(ptx)?;
    let kernel = module.load_function("join_count_sum")?;
    let rows = columns.line_orders.len();
    let split = |way, probe, kernels| Split {
        table: T::NAME,
        way,
        build,
        probe,
        kernels,
        host: 0.0,
        bytes_in: columns.order_keys.len() as u64 * 8 + rows as u64 * 12,
        bytes_out: 16,
    };

    // Untimed, to load the module and warm the table's lines; then the kernel alone.
    let on_device = |orders: &DeviceBuffer<u32>, prices: &DeviceBuffer<u64>| {
        let (o, p) = (orders.address(stream), prices.address(stream));
        launch_fused(table, &kernel, stream, o.address, p.address, rows)
    };
    let orders = DeviceBuffer::from_host(stream, &columns.line_orders)?;
    let prices = DeviceBuffer::from_host(stream, &columns.line_prices)?;
    on_device(&orders, &prices)?;
    let timer = EventTimer::start(stream)?;
    on_device(&orders, &prices)?;
    let kernels = f64::from(timer.stop()?);
    drop((orders, prices));

    // End to end: the columns staged up through pinned memory, the kernel, two numbers
    // back; the second of two runs (the first fills the pinned pool).
    let (mut staged, mut probe) = (Answer::default(), 0.0);
    for _ in 0..2 {
        let started = Instant::now();
        let orders = staging::upload(stream, &columns.line_orders)?;
        let prices = staging::upload(stream, &columns.line_prices)?;
        staged = on_device(&orders, &prices)?;
        probe = ms(started);
    }

    // The columns in mapped pinned memory, where a loader that knows its data goes to the
    // GPU writes them (untimed here): the kernel reads them over the bus as it probes, so
    // copy and probe are one pass. The second of two runs.
    let device = stream.device();
    let mut mapped_orders = PinnedBuffer::<u32>::zeroed_mapped(device, rows)?;
    mapped_orders.copy_from_slice(&columns.line_orders);
    let mut mapped_prices = PinnedBuffer::<u64>::zeroed_mapped(device, rows)?;
    mapped_prices.copy_from_slice(&columns.line_prices);
    let (mut mapped, mut probe_mapped) = (Answer::default(), 0.0);
    for _ in 0..2 {
        let started = Instant::now();
        let o = mapped_orders.mapped_address(stream)?;
        let p = mapped_prices.mapped_address(stream)?;
        mapped = launch_fused(table, &kernel, stream, o.address, p.address, rows)?;
        probe_mapped = ms(started);
    }
    Ok(vec![
        (split("fused kernel", probe, kernels), staged),
        (split("fused, mapped", probe_mapped, probe_mapped), mapped),
    ])
}

/// Runs the fused kernel over `rows` rows of the columns at `orders` and `prices` (device
/// addresses the caller keeps valid) and reads its two numbers back, waiting for them.
fn launch_fused<T: ProbedInKernel>(
    table: &T,
    kernel: &CudaFunction,
    stream: &Stream,
    orders: u64,
    prices: u64,
    rows: usize,
) -> Result<Answer, Box<dyn std::error::Error>> {
    let mut count_and_sum = DeviceBuffer::<u64>::zeroed(stream, 2)?;
    {
        let out_at = count_and_sum.address_mut(stream);
        let rows = rows as u64;
        let properties = stream.device().properties();
        let blocks = rows
            .div_ceil(256)
            .clamp(1, u64::from(properties.multiprocessors) * 8);
        let config = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let args = JoinArgs {
            orders,
            prices,
            rows,
            out: out_at.address,
        };
        table.launch_join(stream, kernel, config, &args)?;
    }
    let out = count_and_sum.to_host(stream)?;
    Ok(Answer {
        rows: out[0],
        cents: out[1],
    })
}

/// The pinned copy rates, from copies of `bytes` (at least 64 MiB) each way, the faster
/// of two.
fn measure_bus(device: &Device, stream: &Stream, bytes: usize) -> gpuhash::Result<Bus> {
    let bytes = bytes.max(64 << 20);
    let mut pinned = PinnedBuffer::<u8>::zeroed(device, bytes)?;
    let mut on_device = DeviceBuffer::<u8>::unfilled(stream, bytes)?;
    let (mut h2d, mut d2h) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..2 {
        let timer = EventTimer::start(stream)?;
        on_device.copy_from_pinned_async(stream, &pinned)?;
        h2d = h2d.min(f64::from(timer.stop()?));
        let timer = EventTimer::start(stream)?;
        on_device.copy_to_pinned_async(stream, &mut pinned)?;
        d2h = d2h.min(f64::from(timer.stop()?));
    }
    let rate = |ms: f64| bytes as f64 / ms / 1e6;
    Ok(Bus {
        h2d: rate(h2d),
        d2h: rate(d2h),
    })
}

fn print_splits(splits: &[Split], bus: &Bus, cpu_ms: f64) {
    println!(
        "\n{:<10} {:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6}",
        "table",
        "way",
        "total ms",
        "build",
        "probe",
        "kernels",
        "copies",
        "host",
        "bound",
        "%bound",
        "vs CPU"
    );
    for s in splits {
        let total = s.build + s.probe;
        let bound = s.bytes_in as f64 / bus.h2d / 1e6 + s.bytes_out as f64 / bus.d2h / 1e6;
        println!(
            "{:<10} {:<16} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>6.0}% {:>5.1}x",
            s.table,
            s.way,
            total,
            s.build,
            s.probe,
            s.kernels,
            (s.probe - s.kernels - s.host).max(0.0),
            s.host,
            bound,
            100.0 * bound / total,
            cpu_ms / total
        );
    }
    println!(
        "(total = build + probe, from host arrays to the answer; kernels: the probe's device \
         work alone on device-resident columns, CUDA events; copies: the rest of the probe \
         beyond kernels and host passes, copies overlapping kernels; bound: the bytes the \
         way moves over the measured pinned rates)"
    );
}

/// The CPU version: a std map of the orders, probed by one thread a core. The answer and
/// the build and probe times in ms.
fn join_on_cpu(columns: &Columns) -> (Answer, f64, f64) {
    let started = Instant::now();
    let mut orders =
        common::FastMap::with_capacity_and_hasher(columns.order_keys.len(), Default::default());
    for (&key, &day) in columns.order_keys.iter().zip(&columns.order_days) {
        orders.insert(u64::from(key), day);
    }
    let build = ms(started);
    let started = Instant::now();
    let keys = &columns.line_orders;
    let answer = sum_prices(&columns.line_prices, |i| {
        orders
            .get(&u64::from(keys[i]))
            .is_some_and(|&day| (FROM_DAY..UNTIL_DAY).contains(&day))
    });
    (answer, build, ms(started))
}

/// Count and sum of `prices[i]` over the rows `i` that `keep`, on every core.
fn sum_prices(prices: &[u64], keep: impl Fn(usize) -> bool + Sync) -> Answer {
    let kept = |i: usize| if keep(i) { Some(prices[i]) } else { None };
    sum_parts(prices.len(), &kept)
}

/// Count and sum of `price(h)` for `h < n`, on every core.
fn sum_over(n: usize, price: impl Fn(usize) -> u64 + Sync) -> Answer {
    sum_parts(n, &|h| Some(price(h)))
}

/// Count and sum of the prices `kept` gives for `0..n` (none for a row left out), on every
/// core.
fn sum_parts<F: Fn(usize) -> Option<u64> + Sync>(n: usize, kept: &F) -> Answer {
    let chunk = n.div_ceil(common::threads()).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..n)
            .step_by(chunk)
            .map(|first| {
                scope.spawn(move || {
                    let mut part = Answer::default();
                    for price in (first..n.min(first + chunk)).filter_map(kept) {
                        part.rows += 1;
                        part.cents += price;
                    }
                    part
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .fold(Answer::default(), |a, b| Answer {
                rows: a.rows + b.rows,
                cents: a.cents + b.cents,
            })
    })
}

/// The orders of the date range and `lineitem`'s two columns, generated in parts on every
/// core.
fn generate(scale: f64) -> Columns {
    let pieces = common::in_parts(|part, parts| {
        let mut columns = Columns {
            order_keys: Vec::new(),
            order_days: Vec::new(),
            line_orders: Vec::new(),
            line_prices: Vec::new(),
        };
        for order in OrderGenerator::new(scale, part, parts) {
            let day = order.o_orderdate.to_unix_epoch() as u32;
            if (FROM_DAY..UNTIL_DAY).contains(&day) {
                columns.order_keys.push(order_key(order.o_orderkey));
                columns.order_days.push(day);
            }
        }
        for row in LineItemGenerator::new(scale, part, parts) {
            columns.line_orders.push(order_key(row.l_orderkey));
            columns.line_prices.push(row.l_extendedprice.0 as u64);
        }
        columns
    });
    let mut all = Columns {
        order_keys: Vec::new(),
        order_days: Vec::new(),
        line_orders: Vec::new(),
        line_prices: Vec::new(),
    };
    for piece in pieces {
        all.order_keys.extend(piece.order_keys);
        all.order_days.extend(piece.order_days);
        all.line_orders.extend(piece.line_orders);
        all.line_prices.extend(piece.line_prices);
    }
    all
}

/// An order key as a table key: TPC-H's order keys (up to 24M a unit of scale factor)
/// stay below 2^32 up to scale factor 178.
fn order_key(key: i64) -> u32 {
    u32::try_from(key).expect("order keys below 2^32")
}

fn scale_factor() -> Result<f64, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(0.1),
        [flag, value] if flag == "--scale" => value
            .parse()
            .ok()
            .filter(|sf: &f64| *sf > 0.0)
            .ok_or_else(|| format!("--scale takes a positive number, not {value}")),
        _ => Err("usage: 08_tpch_join [--scale SF]".into()),
    }
}
