//! Probing a table's device view from a kernel compiled at run time, as a user's own code
//! would: the kernels of a view test take `(view, keys, n, found, values)`.

use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use gpuhash_core::nvrtc::Headers;
use gpuhash_core::{DeviceBuffer, Stream};

use crate::gpu::device;

/// `found` and values of `queries` as `kernel` of `source`, compiled with NVRTC against
/// `headers`, answers them through `view` (a table's raw view, lent on `stream` and kept
/// by the caller until this returns). The kernel must read `n` keys of `queries`' width
/// and write `n` flag bytes and `n` values of `V`'s width.
pub fn probe_through_view<R: DeviceRepr, Q: bytemuck::Pod, V: bytemuck::Pod>(
    headers: &Headers,
    source: &str,
    kernel: &str,
    stream: &Stream,
    view: &R,
    queries: &[Q],
) -> (Vec<u8>, Vec<V>) {
    let ptx = headers
        .compile_ptx(device(), source)
        .expect("the probes compile");
    let module = stream.cuda_stream().context().load_module(ptx).unwrap();
    let function = module.load_function(kernel).unwrap();
    let keys = DeviceBuffer::from_host(stream, queries).unwrap();
    let mut found = DeviceBuffer::<u8>::zeroed(stream, queries.len()).unwrap();
    let mut values = DeviceBuffer::<V>::zeroed(stream, queries.len()).unwrap();
    {
        let keys_at = keys.address(stream);
        let found_at = found.address_mut(stream);
        let values_at = values.address_mut(stream);
        let n = queries.len() as u64;
        let mut launch = stream.cuda_stream().launch_builder(&function);
        launch
            .arg(view)
            .arg(&keys_at.address)
            .arg(&n)
            .arg(&found_at.address)
            .arg(&values_at.address);
        let config = LaunchConfig {
            grid_dim: (n.div_ceil(256).clamp(1, 1024) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the kernel reads `n` keys and writes `n` flags and `n` values of the
        // widths the caller names, all allocated above with those lengths; the caller
        // keeps the view valid until this returns, after the kernel has run.
        unsafe { launch.launch(config) }.unwrap();
    }
    (
        found.to_host(stream).unwrap(),
        values.to_host(stream).unwrap(),
    )
}

/// Panics unless every quoted `#include` of a shipped header names a shipped header.
pub fn assert_includes_are_shipped(headers: &Headers) {
    let names: Vec<&str> = headers.0.iter().map(|(name, _)| *name).collect();
    for (_, source) in headers.0 {
        for line in source.lines().filter(|l| l.starts_with("#include \"")) {
            let included = line.trim_start_matches("#include \"").trim_end_matches('"');
            assert!(names.contains(&included), "{included} is not shipped");
        }
    }
}
