//! The table lent to the caller's own kernels: [`CuckooTable::device_view`].

use gpuhash_core::table::{Key, Value};
use gpuhash_core::{Error, Stream};
use parking_lot::RwLockReadGuard;

use super::CuckooTable;
use super::order::Order;
use crate::Result;
use crate::layouts::GhCuckooView;

/// A table lent to the caller's kernels on one stream: the [`GhCuckooView`] they take by
/// value, valid while this lives. Made by [`CuckooTable::device_view`]; see
/// [`crate::view`] for the device side.
///
/// While it lives the table is a reading batch in progress: other reading batches (`get`,
/// `contains`, exports, other views) run beside it, and writing batches (`insert`,
/// `remove`, `clear`, resizes, `shrink_to`) wait on the host until it is dropped, so the
/// arrays it points to stay where they are and hold what they hold. On the device, the
/// stream has waited for the last writing batch, and the next writing batch waits for
/// everything queued on the stream before the view was dropped. So: queue the kernels
/// that read the view on [`DeviceView::stream`], then drop the view.
///
/// A thread that holds a view and then starts a writing batch of the same table waits for
/// itself forever; drop the view first. (A reading batch of the same table from that
/// thread may also wait, if a writer of another thread is waiting meanwhile.)
pub struct DeviceView<'a> {
    raw: GhCuckooView,
    stream: Stream,
    order: &'a Order,
    _gate: RwLockReadGuard<'a, ()>,
}

impl std::fmt::Debug for DeviceView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceView")
            .field("subtables", &self.raw.table.subtables)
            .field("key_words", &self.raw.key_words)
            .field("value_words", &self.raw.table.value_words)
            .finish_non_exhaustive()
    }
}

impl DeviceView<'_> {
    /// The view to pass by value to a kernel that takes a `GhCuckooView`
    /// (`gpuhash/cuckoo_view.cuh`); with cudarc, `builder.arg(view.raw())`. Its pointers
    /// are device addresses of the table, valid for kernels queued on
    /// [`DeviceView::stream`] before this guard is dropped.
    pub fn raw(&self) -> &GhCuckooView {
        &self.raw
    }

    /// The stream the view is valid on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }
}

impl Drop for DeviceView<'_> {
    fn drop(&mut self) {
        // Writing batches wait for what the stream holds now. Recording an event fails
        // only with a broken context, where every later batch fails as well.
        let _ = self.order.after_read(&self.stream);
    }
}

impl<K: Key, V: Value> CuckooTable<K, V> {
    /// Lends the table to the caller's own kernels on `stream` (a kernel of theirs that
    /// probes it with `gh_cuckoo_find_u32` / `_u64`, fused with their other work); see
    /// [`DeviceView`] for how long the view is valid and [`crate::view`] for the headers
    /// and the NVRTC compile.
    ///
    /// ```no_run
    /// use gpuhash_core::Device;
    /// use gpuhash_core::table::Map;
    /// use gpuhash_cuckoo::CuckooTable;
    ///
    /// # fn main() -> gpuhash_cuckoo::Result<()> {
    /// let device = Device::default()?;
    /// let table = CuckooTable::<u32, u32>::with_capacity(&device, 1024)?;
    /// table.insert(&[1, 2], &[10, 20])?;
    /// let stream = device.new_stream()?;
    /// let view = table.device_view(&stream)?;
    /// // ... launch kernels taking `*view.raw()` on `view.stream()` ...
    /// drop(view); // now the table may change again
    /// # Ok(()) }
    /// ```
    pub fn device_view<'a>(&'a self, stream: &Stream) -> Result<DeviceView<'a>> {
        if stream.device().properties().ordinal != self.device.properties().ordinal {
            return Err(Error::InvalidInput(
                "device_view: the stream is of another device than the table".into(),
            )
            .into());
        }
        let gate = self.gate.read();
        self.order.before_read(stream)?;
        let raw = {
            let view = self.view();
            let mut guards = Vec::new();
            GhCuckooView {
                table: self.describe(&view, stream, &mut guards),
                home: self.home(&view, false),
                key_words: K::WORDS,
                pad: 0,
            }
        };
        Ok(DeviceView {
            raw,
            stream: stream.clone(),
            order: &self.order,
            _gate: gate,
        })
    }
}
