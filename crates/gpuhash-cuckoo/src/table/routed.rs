//! A lookup whose keys each name their table: the children of a larger table, some on the
//! device and some imaged in mapped host memory, answered in one launch with nothing
//! partitioned first ([`ProbeInPlace::get_routed`]).
//!
//! [`ProbeInPlace::get_routed`]: gpuhash_core::image::ProbeInPlace::get_routed

use gpuhash_core::image::{Route, Routed, check_routed};
use gpuhash_core::table::{Key, Value};
use gpuhash_core::{DeviceBuffer, Error, Stream};

use super::CuckooTable;
use crate::layouts::GhCuckooView;
use crate::{BucketLayout, Result, launch};

impl<K: Key, V: Value> CuckooTable<K, V> {
    /// [`ProbeInPlace::get_routed`] in one launch of the routed find kernel
    /// ([`launch::find_routed`]), for routes of one bucket layout (the children of one
    /// table share it; others are an [`Error::InvalidInput`], with nothing written). Each
    /// table on the device reads as a reading batch does ([`CuckooTable::reading_each`]);
    /// each image is read where it lies.
    ///
    /// [`ProbeInPlace::get_routed`]: gpuhash_core::image::ProbeInPlace::get_routed
    pub(super) fn find_routed(
        stream: &Stream,
        routes: &[Route<'_, Self>],
        batch: Routed<'_, K>,
        found: &mut DeviceBuffer<u8>,
        values: Option<&mut DeviceBuffer<V>>,
    ) -> Result<()> {
        let values_len = values.as_deref().map(DeviceBuffer::len);
        check_routed(routes, &batch, found.len(), values_len)?;
        // No routes: no key is looked up, and nothing is written.
        if routes.is_empty() {
            return Ok(());
        }
        let maps: Vec<&Self> = routes
            .iter()
            .filter_map(|route| match route {
                Route::Device(map) => Some(*map),
                Route::InPlace(_) => None,
            })
            .collect();
        Self::reading_each(stream, &maps, || {
            let views: Vec<_> = maps.iter().map(|map| map.view()).collect();
            let mut device_views = maps.iter().zip(&views);
            let mut guards = Vec::new();
            let mut mapped = Vec::new();
            let mut described = Vec::with_capacity(routes.len());
            let mut layouts = Vec::with_capacity(routes.len());
            for route in routes {
                let (table, home, layout) = match route {
                    Route::Device(_) => {
                        let (map, view) = device_views.next().expect("a view a device route");
                        let table = map.describe(view, stream, &mut guards);
                        (table, map.home(view, false), map.layout)
                    }
                    Route::InPlace(image) => {
                        let (address, in_place) = Self::in_place(stream, image)?;
                        mapped.push(address);
                        (in_place.table, in_place.home, in_place.layout)
                    }
                };
                layouts.push(layout);
                described.push(GhCuckooView {
                    table,
                    home,
                    key_words: K::WORDS,
                    pad: 0,
                });
            }
            let buffers = launch::FindRouted {
                batch,
                found,
                values,
            };
            let layout = one_layout(&layouts)?;
            launch::find_routed(stream, layout.code(), &described, buffers)
        })
    }
}

/// The layout every route shares (there is one at least), or an error naming two that
/// differ.
fn one_layout(layouts: &[BucketLayout]) -> Result<BucketLayout> {
    if let Some(pair) = layouts.windows(2).find(|pair| pair[0] != pair[1]) {
        return Err(Error::InvalidInput(format!(
            "get_routed: routes of bucket layouts {:?} and {:?}",
            pair[0], pair[1]
        ))
        .into());
    }
    Ok(layouts[0])
}
