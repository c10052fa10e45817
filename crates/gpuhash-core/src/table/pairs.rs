//! Pairs and rows, on the host and on the device, as exports and `get_all` give them, and
//! their copies into the caller's memory.

use bytemuck::Pod;

use super::host::check_lengths;
use crate::staging::{download, downloaded, parallel_collect};
use crate::{DeviceBuffer, Error, Stream};

/// Pairs on the host, as `export` returns them.
pub type Pairs<K, V> = Vec<(K, V)>;

/// Pairs on the device: `keys[i]` with `values[i]`.
#[derive(Debug)]
pub struct DevicePairs<K, V> {
    /// The keys.
    pub keys: DeviceBuffer<K>,
    /// Their values, one a key.
    pub values: DeviceBuffer<V>,
}

impl<K: Pod + Send + Sync, V: Pod + Send + Sync> DevicePairs<K, V> {
    /// The pairs, copied to the host through pinned memory and zipped on several threads;
    /// waits for the stream.
    pub fn to_host(&self, stream: &Stream) -> Result<Pairs<K, V>, Error> {
        check_lengths("pairs: keys and values", self.keys.len(), self.values.len())?;
        let keys = downloaded(stream, &self.keys)?;
        let values = downloaded(stream, &self.values)?;
        Ok(parallel_collect(keys.len(), |i| (keys[i], values[i])))
    }

    /// Copies the pairs into the front of the caller's buffers, queued on `stream`, and
    /// returns how many; buffers with room for fewer are [`Error::InvalidInput`], and
    /// nothing is written.
    pub fn copy_into(
        &self,
        stream: &Stream,
        keys: &mut DeviceBuffer<K>,
        values: &mut DeviceBuffer<V>,
    ) -> Result<usize, Error> {
        check_room("export_into", self.keys.len(), keys.len().min(values.len()))?;
        keys.copy_from_at(stream, 0, &self.keys)?;
        values.copy_from_at(stream, 0, &self.values)?;
        Ok(self.keys.len())
    }

    /// Copies the pairs into the front of the caller's slices (through pinned memory, or
    /// straight into registered ones) and returns how many; slices with room for fewer
    /// are [`Error::InvalidInput`], and nothing is written. Waits for the copies.
    pub fn download_into(
        &self,
        stream: &Stream,
        keys: &mut [K],
        values: &mut [V],
    ) -> Result<usize, Error> {
        let n = self.keys.len();
        check_room("export_into", n, keys.len().min(values.len()))?;
        download(stream, &self.keys, &mut keys[..n])?;
        download(stream, &self.values, &mut values[..n])?;
        Ok(n)
    }
}

/// Values of many keys on the device, as compressed rows: key i's values are
/// `values[offsets[i]..offsets[i + 1]]`.
#[derive(Debug)]
pub struct DeviceRows<V> {
    /// One more than the keys; the last is the number of values.
    pub offsets: DeviceBuffer<u64>,
    /// Every key's values, laid end to end in key order.
    pub values: DeviceBuffer<V>,
}

/// [`Error::InvalidInput`] unless `room` holds `needed` answers.
pub(super) fn check_room(what: &str, needed: usize, room: usize) -> Result<(), Error> {
    if needed <= room {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!(
            "{what}: room for {room}, the table holds {needed}"
        )))
    }
}
