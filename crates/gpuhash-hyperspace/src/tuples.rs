//! Tuples on the host and on the device, and the checks every batch passes before it
//! reaches a kernel.
//!
//! A batch is structure of arrays: `keys[i]`, `values[i]`, and the attributes in one
//! column-major slice, attribute `a` of tuple `i` at `attributes[a * n + i]` (p columns of
//! n), the layout the kernels read.

use std::collections::HashMap;

use gpuhash_core::{DeviceBuffer, Stream, staging};
use gpuhash_slab_list::layouts::{GH_SLAB_EMPTY_WORD, GH_SLAB_REMOVED_WORD};

use crate::launch;
use crate::layouts::GH_HS_BUSY_KEY;
use crate::{HyperspaceError, Result};

/// Whether a key is one of the three words the index reserves (the slab lists' empty and
/// removed words, and the busy mark of an insert in flight), which no tuple may use.
pub fn is_reserved_key(key: u32) -> bool {
    key == GH_SLAB_EMPTY_WORD || key == GH_SLAB_REMOVED_WORD || key == GH_HS_BUSY_KEY
}

/// A batch of tuples on the host, as structure of arrays (see the module docs): attribute
/// `a` of tuple `i` is `attributes[a * keys.len() + i]`.
#[derive(Debug, Clone, Copy)]
pub struct TupleBatch<'a> {
    /// The keys, unique within the batch and never reserved ([`is_reserved_key`]).
    pub keys: &'a [u32],
    /// The attributes, column-major: p columns of `keys.len()`.
    pub attributes: &'a [u32],
    /// One value a key.
    pub values: &'a [u32],
}

impl TupleBatch<'_> {
    /// Tuples in the batch.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the batch holds no tuple.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// One tuple `(key, A1..Ap, value)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tuple {
    /// The key.
    pub key: u32,
    /// The p attributes, in order.
    pub attributes: Vec<u32>,
    /// The value.
    pub value: u32,
}

/// Tuples on the host, as structure of arrays (the layout of [`TupleBatch`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tuples {
    /// Attributes a tuple.
    pub attribute_count: usize,
    /// The keys.
    pub keys: Vec<u32>,
    /// The attributes, column-major: attribute `a` of tuple `i` at `a * keys.len() + i`.
    pub attributes: Vec<u32>,
    /// The values.
    pub values: Vec<u32>,
}

impl Tuples {
    /// How many tuples.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Tuple `i` (panics past the end, as indexing does).
    pub fn tuple(&self, i: usize) -> Tuple {
        let n = self.len();
        Tuple {
            key: self.keys[i],
            attributes: (0..self.attribute_count)
                .map(|a| self.attributes[a * n + i])
                .collect(),
            value: self.values[i],
        }
    }

    /// Every tuple, in order.
    pub fn iter(&self) -> impl Iterator<Item = Tuple> + '_ {
        (0..self.len()).map(|i| self.tuple(i))
    }

    /// The tuples as a batch.
    pub fn as_batch(&self) -> TupleBatch<'_> {
        TupleBatch {
            keys: &self.keys,
            attributes: &self.attributes,
            values: &self.values,
        }
    }
}

/// Tuples on the device, in the layout of [`TupleBatch`].
#[derive(Debug)]
pub struct DeviceTuples {
    /// The keys.
    pub keys: DeviceBuffer<u32>,
    /// The attributes, column-major: p columns of `keys.len()`.
    pub attributes: DeviceBuffer<u32>,
    /// The values.
    pub values: DeviceBuffer<u32>,
}

impl DeviceTuples {
    /// `n` tuples of `p` attributes, for a kernel to write.
    pub fn unfilled(stream: &Stream, p: usize, n: usize) -> Result<Self> {
        let attribute_words = p
            .checked_mul(n)
            .ok_or_else(|| gpuhash_core::Error::InvalidInput(format!("{n} tuples of {p}")))?;
        Ok(Self {
            keys: DeviceBuffer::unfilled(stream, n)?,
            attributes: DeviceBuffer::unfilled(stream, attribute_words)?,
            values: DeviceBuffer::unfilled(stream, n)?,
        })
    }

    /// A copy of a host batch, as it is (its shape and keys are not checked).
    pub fn from_batch(stream: &Stream, batch: TupleBatch<'_>) -> Result<Self> {
        Ok(Self {
            keys: staging::upload(stream, batch.keys)?,
            attributes: staging::upload(stream, batch.attributes)?,
            values: staging::upload(stream, batch.values)?,
        })
    }

    /// How many tuples.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The tuples, of `p` attributes, copied to the host through pinned memory (host
    /// threads empty its chunks while the next ones cross the bus, [`staging::download`]);
    /// waits for the stream.
    pub fn to_host(&self, stream: &Stream, p: usize) -> Result<Tuples> {
        Ok(Tuples {
            attribute_count: p,
            keys: staging::downloaded(stream, &self.keys)?,
            attributes: staging::downloaded(stream, &self.attributes)?,
            values: staging::downloaded(stream, &self.values)?,
        })
    }

    /// [`DeviceTuples::to_host`] into `out`, whose vectors are reused: cut to length, or
    /// lengthened within their capacity (new vectors only past it). Memory that held
    /// answers before is written again without the page faults of fresh memory, and
    /// vectors the caller registered ([`gpuhash_core::Device::register`]) take one DMA
    /// each. Waits for the stream.
    pub fn copy_to_host_into(&self, stream: &Stream, p: usize, out: &mut Tuples) -> Result<()> {
        out.attribute_count = p;
        for (device, host) in [
            (&self.keys, &mut out.keys),
            (&self.attributes, &mut out.attributes),
            (&self.values, &mut out.values),
        ] {
            download_reusing(stream, device, host)?;
        }
        Ok(())
    }
}

/// Copies `device` into `host`, of its length after the call, reusing the vector's memory
/// while its capacity suffices.
pub(crate) fn download_reusing<T: bytemuck::Pod + Send + Sync>(
    stream: &Stream,
    device: &DeviceBuffer<T>,
    host: &mut Vec<T>,
) -> Result<()> {
    let n = device.len();
    if n > host.capacity() {
        // Fresh memory is faulted in by the copy threads, not zeroed here first.
        *host = bytemuck::zeroed_vec(n);
    } else {
        host.resize(n, T::zeroed());
    }
    Ok(staging::download(stream, device, host)?)
}

/// Checks the shape of a batch of `p` attributes a tuple: as many values as keys, p
/// columns of attributes.
pub(crate) fn check_shape(p: usize, batch: TupleBatch<'_>) -> Result<()> {
    check_lengths(p, batch.len(), batch.values.len(), batch.attributes.len())
}

/// Checks the lengths of `n` tuples of `p` attributes: `values` values, `attributes`
/// attribute words (on the host or the device).
pub(crate) fn check_lengths(p: usize, n: usize, values: usize, attributes: usize) -> Result<()> {
    if values != n {
        return Err(gpuhash_core::Error::LengthMismatch {
            what: "keys and values",
            left: n,
            right: values,
        }
        .into());
    }
    if Some(attributes) != p.checked_mul(n) {
        return Err(HyperspaceError::AttributeCount {
            expected: p,
            tuples: n,
            words: attributes,
        });
    }
    Ok(())
}

/// Checks a batch's keys, uploaded as `keys` (and given on the host as `host` where the
/// caller has them): none reserved, none twice. A batch of [`HOST_CHECK_BELOW`] host keys
/// or more is checked on the device first (one kernel and one wait: a host map of millions
/// of keys cost more than a build's device work); only when that finds a fault, or when
/// its table finds no room, are the keys scanned on the host, read back if need be, to
/// name the first fault in batch order.
pub(crate) fn check_keys_on(
    stream: &Stream,
    keys: &DeviceBuffer<u32>,
    host: Option<&[u32]>,
) -> Result<()> {
    if let Some(host) = host
        && host.len() < HOST_CHECK_BELOW
    {
        return check_keys(host);
    }
    match device_finds_fault(stream, keys) {
        Ok(false) => return Ok(()),
        Ok(true) | Err(gpuhash_core::Error::OutOfDeviceMemory) => {}
        Err(error) => return Err(error.into()),
    }
    match host {
        Some(host) => check_keys(host),
        None => check_keys(&staging::downloaded(stream, keys)?),
    }
}

/// Host keys below which a batch is checked on the host alone: a map of so few costs
/// less than a kernel and a wait.
const HOST_CHECK_BELOW: usize = 1 << 10;

/// The seed of the device check's hash, apart from every space's.
const KEY_CHECK_SEED: u32 = 0x6b65_7973;

/// Whether some key is reserved or repeated, by [`launch::key_faults`] through a table of
/// twice as many slots or more. Batches past 2^31 keys, whose table would pass 2^32 slots,
/// are left to the host, as if out of device memory.
fn device_finds_fault(stream: &Stream, keys: &DeviceBuffer<u32>) -> gpuhash_core::Result<bool> {
    if keys.is_empty() {
        return Ok(false);
    }
    if keys.len() > 1 << 31 {
        return Err(gpuhash_core::Error::OutOfDeviceMemory);
    }
    let mut table = DeviceBuffer::<u32>::zeroed(stream, (keys.len() * 2).next_power_of_two())?;
    let mut fault = DeviceBuffer::<u32>::zeroed(stream, 1)?;
    launch::key_faults(stream, keys, &mut table, KEY_CHECK_SEED, &mut fault)?;
    Ok(fault.to_host(stream)?[0] != 0)
}

/// Checks host keys, exactly: the first reserved key, or the first key met again, in
/// batch order.
pub(crate) fn check_keys(keys: &[u32]) -> Result<()> {
    let mut seen = HashMap::with_capacity(keys.len());
    for (index, &key) in keys.iter().enumerate() {
        if is_reserved_key(key) {
            return Err(HyperspaceError::ReservedKey { index, key });
        }
        if let Some(first) = seen.insert(key, index) {
            return Err(HyperspaceError::DuplicateKey {
                first,
                second: index,
                key,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_reserved_keys_are_the_highest() {
        assert!(is_reserved_key(u32::MAX));
        assert!(is_reserved_key(u32::MAX - 1));
        assert!(is_reserved_key(u32::MAX - 2));
        assert!(!is_reserved_key(u32::MAX - 3));
        assert!(!is_reserved_key(0));
    }

    /// A whole batch checked on the host: its shape, then its keys.
    fn check_batch(p: usize, batch: TupleBatch<'_>) -> Result<()> {
        check_shape(p, batch)?;
        check_keys(batch.keys)
    }

    #[test]
    fn batches_are_checked_for_shape_reserved_and_repeated_keys() {
        let ok = TupleBatch {
            keys: &[1, 2],
            attributes: &[10, 20, 11, 21],
            values: &[5, 6],
        };
        assert!(check_batch(2, ok).is_ok());
        assert!(matches!(
            check_batch(3, ok),
            Err(HyperspaceError::AttributeCount { expected: 3, .. })
        ));
        let short_values = TupleBatch { values: &[5], ..ok };
        assert!(matches!(
            check_batch(2, short_values),
            Err(HyperspaceError::Device(
                gpuhash_core::Error::LengthMismatch { .. }
            ))
        ));
        let reserved = TupleBatch {
            keys: &[1, u32::MAX - 2],
            ..ok
        };
        assert!(matches!(
            check_batch(2, reserved),
            Err(HyperspaceError::ReservedKey { index: 1, .. })
        ));
        let repeated = TupleBatch {
            keys: &[7, 7],
            ..ok
        };
        assert!(matches!(
            check_batch(2, repeated),
            Err(HyperspaceError::DuplicateKey {
                first: 0,
                second: 1,
                key: 7
            })
        ));
    }

    #[test]
    fn host_tuples_read_column_major_attributes() {
        let tuples = Tuples {
            attribute_count: 2,
            keys: vec![1, 2],
            attributes: vec![10, 20, 11, 21],
            values: vec![5, 6],
        };
        assert_eq!(
            tuples.tuple(1),
            Tuple {
                key: 2,
                attributes: vec![20, 21],
                value: 6
            }
        );
        assert_eq!(tuples.iter().count(), 2);
    }
}
