//! The hash functions of gpuhash, on the host and on the device.
//!
//! The device versions live in `cuda-src/include/gpuhash/hash.cuh`, where every table's
//! kernels include them; the functions here compute the same values on the host, for host
//! models, for host-side placement logic, and for tests that hold the two together.
//! [`hash_on_device`] runs the device versions over a buffer.

use bytemuck::Pod;

use crate::launch::{Kernel, KernelImage, KernelParams, LaunchShape};
use crate::layouts::{
    GH_HASH_FMIX, GH_HASH_UNIVERSAL, GH_PRIME32, GH_PRIME61, GhHash32Params, GhHash64Params,
    GhUniversal32, GhUniversal64,
};
use crate::{DeviceBuffer, Error, Result, Stream};

static HASH_IMAGE: KernelImage = crate::kernel_image!("hash");
static HASH32: Kernel<GhHash32Params> = Kernel::new(&HASH_IMAGE, "gh_hash32");
static HASH64: Kernel<GhHash64Params> = Kernel::new(&HASH_IMAGE, "gh_hash64");

// SAFETY: bindgen's repr(C) copies of the C structs the kernels take.
unsafe impl KernelParams for GhHash32Params {}
// SAFETY: as above.
unsafe impl KernelParams for GhHash64Params {}

/// MurmurHash3's 32-bit finalizer: a bijection on `u32` that mixes every input bit into
/// every output bit.
pub const fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// MurmurHash3's 64-bit finalizer, a bijection on `u64`.
pub const fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// A member of the universal family `((a * k + b) mod p) mod buckets` over 32-bit keys,
/// with p = 2^32 - 5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Universal32(GhUniversal32);

/// A member of the universal family `((a * k + b) mod p) mod buckets` over 64-bit keys,
/// with p = 2^61 - 1. Keys are first reduced mod p, so keys that differ by a multiple of p
/// always collide; for keys below 2^61 the family is universal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Universal64(GhUniversal64);

impl Universal32 {
    /// The function with these coefficients; needs `0 < a < p`, `b < p`, `buckets > 0`.
    pub fn new(a: u32, b: u32, buckets: u32) -> Result<Self> {
        check_coefficients(a.into(), b.into(), buckets.into(), GH_PRIME32.into())?;
        Ok(Self(GhUniversal32 { a, b, buckets }))
    }

    /// A member of the family drawn from `seed` (the same seed gives the same function).
    pub fn from_seed(seed: u64, buckets: u32) -> Result<Self> {
        let (a, b) = draw_coefficients(seed, GH_PRIME32.into());
        Self::new(a as u32, b as u32, buckets)
    }

    /// The coefficients as the kernels take them.
    pub fn layout(&self) -> GhUniversal32 {
        self.0
    }

    /// The bucket of `key`.
    pub fn hash(&self, key: u32) -> u32 {
        let GhUniversal32 { a, b, buckets } = self.0;
        let mixed = u64::from(a) * u64::from(key) + u64::from(b);
        (mixed % u64::from(GH_PRIME32)) as u32 % buckets
    }
}

impl Universal64 {
    /// The function with these coefficients; needs `0 < a < p`, `b < p`, `buckets > 0`.
    pub fn new(a: u64, b: u64, buckets: u64) -> Result<Self> {
        check_coefficients(a, b, buckets, GH_PRIME61)?;
        Ok(Self(GhUniversal64 { a, b, buckets }))
    }

    /// A member of the family drawn from `seed` (the same seed gives the same function).
    pub fn from_seed(seed: u64, buckets: u64) -> Result<Self> {
        let (a, b) = draw_coefficients(seed, GH_PRIME61);
        Self::new(a, b, buckets)
    }

    /// The bucket of `key`.
    pub fn hash(&self, key: u64) -> u64 {
        let GhUniversal64 { a, b, buckets } = self.0;
        let p = u128::from(GH_PRIME61);
        let k = u128::from(key) % p;
        ((u128::from(a) * k + u128::from(b)) % p) as u64 % buckets
    }
}

fn check_coefficients(a: u64, b: u64, buckets: u64, prime: u64) -> Result<()> {
    if a == 0 || a >= prime || b >= prime || buckets == 0 {
        return Err(Error::InvalidInput(format!(
            "universal hash needs 0 < a < {prime}, b < {prime} and buckets > 0 (got a = {a}, b = {b}, buckets = {buckets})"
        )));
    }
    Ok(())
}

/// Two coefficients `0 < a < prime`, `b < prime` from splitmix64 steps of `seed`.
fn draw_coefficients(seed: u64, prime: u64) -> (u64, u64) {
    let a = 1 + splitmix64(seed) % (prime - 1);
    let b = splitmix64(seed ^ 0x9e37_79b9_7f4a_7c15) % prime;
    (a, b)
}

fn splitmix64(x: u64) -> u64 {
    let z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A hash function of 32-bit keys that can run on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hash32 {
    /// [`fmix32`].
    Fmix,
    /// A [`Universal32`] function.
    Universal(Universal32),
}

/// A hash function of 64-bit keys that can run on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hash64 {
    /// [`fmix64`].
    Fmix,
    /// A [`Universal64`] function.
    Universal(Universal64),
}

/// A hash function with a device kernel that applies it to a buffer.
pub trait DeviceHash: Copy {
    /// The key type it hashes, which is also the type of its output.
    type Key: Pod;
    /// Hashes one key on the host.
    fn hash(&self, key: Self::Key) -> Self::Key;
    #[doc(hidden)]
    type Params: KernelParams + 'static;
    #[doc(hidden)]
    fn kernel() -> &'static Kernel<Self::Params>;
    #[doc(hidden)]
    fn params(&self, input: u64, output: u64, count: u64) -> Self::Params;
}

impl DeviceHash for Hash32 {
    type Key = u32;
    type Params = GhHash32Params;

    fn hash(&self, key: u32) -> u32 {
        match self {
            Hash32::Fmix => fmix32(key),
            Hash32::Universal(u) => u.hash(key),
        }
    }

    fn kernel() -> &'static Kernel<GhHash32Params> {
        &HASH32
    }

    fn params(&self, input: u64, output: u64, count: u64) -> GhHash32Params {
        let (kind, universal) = match self {
            Hash32::Fmix => (GH_HASH_FMIX, GhUniversal32::default()),
            Hash32::Universal(u) => (GH_HASH_UNIVERSAL, u.0),
        };
        GhHash32Params {
            input: input as *const u32,
            output: output as *mut u32,
            count,
            kind,
            universal,
        }
    }
}

impl DeviceHash for Hash64 {
    type Key = u64;
    type Params = GhHash64Params;

    fn hash(&self, key: u64) -> u64 {
        match self {
            Hash64::Fmix => fmix64(key),
            Hash64::Universal(u) => u.hash(key),
        }
    }

    fn kernel() -> &'static Kernel<GhHash64Params> {
        &HASH64
    }

    fn params(&self, input: u64, output: u64, count: u64) -> GhHash64Params {
        let (kind, universal) = match self {
            Hash64::Fmix => (GH_HASH_FMIX, GhUniversal64::default()),
            Hash64::Universal(u) => (GH_HASH_UNIVERSAL, u.0),
        };
        GhHash64Params {
            input: input as *const u64,
            output: output as *mut u64,
            count,
            kind,
            universal,
        }
    }
}

/// Queues `output[i] = hash(input[i])` on `stream`; the buffers must have equal lengths.
pub fn hash_on_device<H: DeviceHash>(
    stream: &Stream,
    hash: H,
    input: &DeviceBuffer<H::Key>,
    output: &mut DeviceBuffer<H::Key>,
) -> Result<()> {
    if input.len() != output.len() {
        return Err(Error::LengthMismatch {
            what: "hash_on_device: input and output",
            left: input.len(),
            right: output.len(),
        });
    }
    if input.is_empty() {
        return Ok(());
    }
    let count = input.len() as u64;
    let shape = LaunchShape::grid_stride(stream.device(), count, 256);
    let source = input.address(stream);
    let target = output.address_mut(stream);
    let params = hash.params(source.address, target.address, count);
    // SAFETY: both addresses are live buffers of `count` values of the key type, held by
    // their guards until the launch is queued; the kernel reads input[i] and writes
    // output[i] for i < count only.
    unsafe { H::kernel().launch(stream, shape, params) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmix32_matches_murmur3_reference_values() {
        assert_eq!(fmix32(0), 0);
        assert_eq!(fmix32(1), 0x514e_28b7);
        assert_eq!(fmix64(0), 0);
        assert_eq!(fmix64(1), 0xb456_bcfc_34c2_cb2c);
    }

    #[test]
    fn universal_rejects_coefficients_outside_the_family() {
        assert!(Universal32::new(0, 1, 10).is_err());
        assert!(Universal32::new(1, GH_PRIME32, 10).is_err());
        assert!(Universal32::new(1, 1, 0).is_err());
        assert!(Universal64::new(GH_PRIME61, 1, 10).is_err());
        assert!(Universal64::new(3, 4, 10).is_ok());
    }

    #[test]
    fn universal32_is_the_textbook_formula() {
        let h = Universal32::new(GH_PRIME32 - 1, GH_PRIME32 - 1, 1 << 20).unwrap();
        for key in [0u32, 1, 12345, u32::MAX] {
            let expected = ((u128::from(GH_PRIME32 - 1) * u128::from(key)
                + u128::from(GH_PRIME32 - 1))
                % u128::from(GH_PRIME32)
                % (1 << 20)) as u32;
            assert_eq!(h.hash(key), expected);
        }
    }

    #[test]
    fn seeded_functions_stay_in_range_and_repeat() {
        let h = Universal64::from_seed(7, 1000).unwrap();
        assert_eq!(h, Universal64::from_seed(7, 1000).unwrap());
        assert!(
            (0..10_000u64)
                .map(|k| h.hash(k * 0x1_0000_0001))
                .all(|b| b < 1000)
        );
    }

    quickcheck::quickcheck! {
        fn fmix32_is_a_bijection_on_samples(a: u32, b: u32) -> bool {
            (a == b) == (fmix32(a) == fmix32(b))
        }
    }
}
