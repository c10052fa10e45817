//! [`SwapTable`]: construction, budgets and the paging counts.

use gpuhash_core::Device;
use gpuhash_core::image::Image;
use gpuhash_core::table::Map;
use gpuhash_cuckoo::CuckooTable;
use parking_lot::Mutex;

use crate::options::SwapOptions;
use crate::policy::{Plan, plan, scratch_per_element};
use crate::residency::{Residency, SwapStats};

/// A map larger than the device's memory: children of type `T`, each key in one of them,
/// at most as many resident on the device as the budget holds, the rest as images on the
/// host. See the crate docs.
pub struct SwapTable<T: Map + Image> {
    pub(crate) device: Device,
    pub(crate) plan: Plan,
    pub(crate) residency: Mutex<Residency<T>>,
}

/// The default: DyHash children.
pub type SwapMap<K, V> = SwapTable<CuckooTable<K, V>>;

impl<T: Map + Image> std::fmt::Debug for SwapTable<T> {
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

impl<T: Map + Image> SwapTable<T> {
    /// A table by `options`: builds one child to measure it and take its empty image, which
    /// every child starts from. A device budget that holds no child beside the scratch, or
    /// scratch that holds no batch element, or a host budget that holds no empty children,
    /// is an error of kind `InvalidInput`.
    pub fn new(device: &Device, options: SwapOptions<T>) -> Result<Self, T::Error> {
        let children = options.children_count();
        let first = (options.make_child)(device, options.child_capacity)?;
        let child_bytes = first.memory()?.bytes_reserved;
        let element_bytes = scratch_per_element(size_of::<T::Key>(), size_of::<T::Value>());
        let plan = plan(
            options.device_budget,
            options.scratch_bytes,
            child_bytes,
            element_bytes,
            children,
        )
        .map_err(gpuhash_core::Error::InvalidInput)?;
        let residency = Residency::<T>::new(
            first.to_image()?,
            children,
            plan.resident,
            options.host_budget,
        )?;
        Ok(Self {
            device: device.clone(),
            plan,
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

    /// Batch elements partitioned at once; longer batches run in segments of this many.
    pub fn segment_len(&self) -> usize {
        self.plan.segment
    }

    /// Paging counts since the table was made.
    pub fn stats(&self) -> SwapStats {
        self.residency.lock().stats()
    }
}
