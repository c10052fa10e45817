//! [`SwapTable`]: construction, budgets and the paging counts.

use gpuhash_core::Device;
use gpuhash_core::image::ProbeInPlace;
use gpuhash_cuckoo::CuckooTable;
use parking_lot::Mutex;

use crate::filter::Filters;
use crate::launch::filter_words;
use crate::options::SwapOptions;
use crate::policy::{
    CostModel, Fixed, Plan, filter_blocks, plan, scratch_bytes, scratch_per_element,
};
use crate::residency::{Residency, SwapStats};

/// A map larger than the device's memory: children of type `T`, each key in one of them,
/// at most as many resident on the device as the budget holds, the rest as images on the
/// host. See the crate docs.
pub struct SwapTable<T: ProbeInPlace> {
    pub(crate) device: Device,
    pub(crate) plan: Plan,
    pub(crate) cost_model: Mutex<CostModel>,
    pub(crate) residency: Mutex<Residency<T>>,
}

/// The default: DyHash children.
pub type SwapMap<K, V> = SwapTable<CuckooTable<K, V>>;

impl<T: ProbeInPlace> std::fmt::Debug for SwapTable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwapTable")
            .field("plan", &self.plan)
            .field("children", &self.children())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<K: gpuhash_core::table::Key, V: gpuhash_core::table::Value> SwapMap<K, V> {
    /// A table of DyHash children for `capacity` pairs with no device budget (every child
    /// resident): [`SwapTable::new`] with [`SwapOptions::with_capacity`].
    pub fn with_capacity(
        device: &Device,
        capacity: usize,
    ) -> Result<Self, gpuhash_cuckoo::CuckooError> {
        Self::new(device, SwapOptions::with_capacity(capacity))
    }
}

impl<T: ProbeInPlace> SwapTable<T> {
    /// A table by `options`: builds one child to measure it and take its empty image, which
    /// every child starts from. A device budget that holds no child beside the scratch and
    /// the filters, or scratch that holds no batch element, or a host budget that holds no
    /// empty children, is an error of kind `InvalidInput`.
    pub fn new(device: &Device, options: SwapOptions<T>) -> Result<Self, T::Error> {
        let children = options.children_count();
        let first = (options.make_child)(device, options.child_capacity)?;
        let child_bytes = first.memory()?.bytes_reserved;
        let element_bytes = scratch_per_element(size_of::<T::Key>(), size_of::<T::Value>());
        let blocks = filter_blocks(options.child_capacity, options.filter_bits_per_key);
        let fixed = Fixed {
            scratch_bytes: scratch_bytes(options.device_budget, options.scratch_bytes),
            filter_bytes: (filter_words(blocks) * 4 * children) as u64,
        };
        let plan = plan(
            options.device_budget,
            fixed,
            child_bytes,
            element_bytes,
            children,
        )
        .map_err(gpuhash_core::Error::InvalidInput)?;
        let filters = {
            let stream = device.lend_stream()?;
            let filters = Filters::new(&stream, children, blocks)?;
            stream.synchronize()?;
            filters
        };
        let residency = Residency::<T>::new(
            device,
            &first,
            children,
            plan.resident,
            options.host_budget,
            filters,
            options.page_out_wait,
        )?;
        Ok(Self {
            device: device.clone(),
            plan,
            cost_model: Mutex::new(options.cost_model),
            residency: Mutex::new(residency),
        })
    }

    /// How many children the table has.
    pub fn children(&self) -> usize {
        self.residency.lock().count()
    }

    /// How many children may be resident at once.
    pub fn resident_limit(&self) -> usize {
        self.plan.resident
    }

    /// Batch elements partitioned at once; longer batches run in segments of this many
    /// (a pass that partitions only some children's keys reads longer segments, as many
    /// keys as its share of them lets the scratch hold: [`crate::policy::SegmentRoom`]).
    pub fn segment_len(&self) -> usize {
        self.plan.segment
    }

    /// The children on the device now, in no particular order.
    pub fn resident_children(&self) -> Vec<usize> {
        self.residency.lock().resident()
    }

    /// The rates that choose between paging a child in and probing it in place.
    pub fn cost_model(&self) -> CostModel {
        *self.cost_model.lock()
    }

    /// Replaces the cost model, for the batches that start after the call: with the rates
    /// measured on the machine, say.
    pub fn set_cost_model(&self, cost_model: CostModel) {
        *self.cost_model.lock() = cost_model;
    }

    /// Paging counts, and counts of failed batches taken back, since the table was made.
    pub fn stats(&self) -> SwapStats {
        self.residency.lock().stats()
    }
}
