//! [`SwapOptions`]: the budgets and children of a [`crate::SwapTable`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use gpuhash_core::Device;
use gpuhash_core::table::{Key, Table, Value};
use gpuhash_cuckoo::CuckooTable;

use crate::policy::CostModel;
pub use crate::policy::DEFAULT_SCRATCH_BYTES;

/// Builds a child table of a capacity (in pairs) on a device.
pub type MakeChild<T> = Arc<dyn Fn(&Device, usize) -> Result<T, <T as Table>::Error> + Send + Sync>;

/// The paper's child table: one million pairs.
pub const DEFAULT_CHILD_CAPACITY: usize = 1 << 20;
/// Bits of a child's miss filter for each pair the child is made for, unless set: about
/// 0.5% of the misses to a full child on the host get past its filter (3.3% at 8 bits, 1.3%
/// at 10, 0.13% at 16). Measured on an H100 (docs/benchmarks/swap.md), lookups of misses of
/// 2^26 keys run 1.9 times as fast at 12 bits as at 8, for half again the filters' bytes
/// (1.5 bytes a pair the table is made for, in device memory, within the budget).
pub const DEFAULT_FILTER_BITS_PER_KEY: u32 = 12;
/// How long a page-out waits for the work queued on the child it takes off the device,
/// unless set: far longer than any batch's share of one child takes.
pub const DEFAULT_PAGE_OUT_WAIT: Duration = Duration::from_secs(60);

/// How a [`crate::SwapTable`] divides its keys and its memory. Built by setters:
/// `SwapOptions::with_capacity(n).device_budget(bytes)`.
#[non_exhaustive]
pub struct SwapOptions<T: Table> {
    /// Pairs the table is made for: with [`SwapOptions::child_capacity`], it sets how
    /// many children there are unless [`SwapOptions::children`] is set.
    pub capacity: usize,
    /// Pairs a child is made for (the paper's default: one million). Children grow past
    /// it as their own tables do; the budget counts a child at this capacity.
    pub child_capacity: usize,
    /// Children, when set; otherwise `capacity / child_capacity`, rounded up, at least 1.
    pub children: Option<usize>,
    /// Device bytes for resident children and scratch (default: no limit, every child
    /// resident).
    pub device_budget: u64,
    /// Host bytes for the children's images, when limited: the cap of the table's pool of
    /// mapped pinned memory, which pins each image in a power-of-two size class.
    pub host_budget: Option<u64>,
    /// Device bytes, within the device budget, for partitioning a batch: a batch is
    /// processed in segments of as many elements as this holds. Unless set, a quarter of
    /// the device budget (at least [`DEFAULT_SCRATCH_BYTES`]), or no bound with no budget
    /// ([`crate::policy::scratch_bytes`]).
    pub scratch_bytes: Option<u64>,
    /// Bits of a child's miss filter (in device memory, within the device budget) for
    /// each of the [`SwapOptions::child_capacity`] pairs it is made for.
    pub filter_bits_per_key: u32,
    /// The rates that choose between paging a child in and probing it in place.
    pub cost_model: CostModel,
    /// The longest a page-out waits for the work queued on its child (the kernels of
    /// earlier visits, on any stream) before it fails with an error of kind `Device`,
    /// the child staying resident and unchanged: work that never finishes shows up as an
    /// error, not as a batch that never returns.
    pub page_out_wait: Duration,
    /// Builds a child.
    pub make_child: MakeChild<T>,
}

impl<K: Key, V: Value> Default for SwapOptions<CuckooTable<K, V>> {
    fn default() -> Self {
        Self {
            capacity: DEFAULT_CHILD_CAPACITY,
            child_capacity: DEFAULT_CHILD_CAPACITY,
            children: None,
            device_budget: u64::MAX,
            host_budget: None,
            scratch_bytes: None,
            filter_bits_per_key: DEFAULT_FILTER_BITS_PER_KEY,
            cost_model: CostModel::default(),
            page_out_wait: DEFAULT_PAGE_OUT_WAIT,
            make_child: Arc::new(|device, capacity| CuckooTable::with_capacity(device, capacity)),
        }
    }
}

impl<K: Key, V: Value> SwapOptions<CuckooTable<K, V>> {
    /// The defaults, for `capacity` pairs.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::default().capacity(capacity)
    }
}

macro_rules! setters {
    ($($(#[$doc:meta])* $field:ident: $type:ty),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $field(mut self, $field: $type) -> Self {
                self.$field = $field.into();
                self
            }
        )*
    };
}

impl<T: Table> SwapOptions<T> {
    setters! {
        /// Sets [`SwapOptions::capacity`].
        capacity: usize,
        /// Sets [`SwapOptions::child_capacity`].
        child_capacity: usize,
        /// Sets [`SwapOptions::children`].
        children: usize,
        /// Sets [`SwapOptions::device_budget`].
        device_budget: u64,
        /// Sets [`SwapOptions::host_budget`].
        host_budget: u64,
        /// Sets [`SwapOptions::scratch_bytes`].
        scratch_bytes: u64,
        /// Sets [`SwapOptions::filter_bits_per_key`].
        filter_bits_per_key: u32,
        /// Sets [`SwapOptions::cost_model`].
        cost_model: CostModel,
        /// Sets [`SwapOptions::page_out_wait`].
        page_out_wait: Duration,
    }

    /// The same options with children that `make_child(device, capacity)` builds.
    pub fn make_child<U: Table>(
        self,
        make_child: impl Fn(&Device, usize) -> Result<U, U::Error> + Send + Sync + 'static,
    ) -> SwapOptions<U> {
        SwapOptions {
            capacity: self.capacity,
            child_capacity: self.child_capacity,
            children: self.children,
            device_budget: self.device_budget,
            host_budget: self.host_budget,
            scratch_bytes: self.scratch_bytes,
            filter_bits_per_key: self.filter_bits_per_key,
            cost_model: self.cost_model,
            page_out_wait: self.page_out_wait,
            make_child: Arc::new(make_child),
        }
    }

    /// How many children the table has.
    pub fn children_count(&self) -> usize {
        self.children
            .unwrap_or_else(|| self.capacity.div_ceil(self.child_capacity.max(1)))
            .max(1)
    }
}

impl<T: Table> Clone for SwapOptions<T> {
    fn clone(&self) -> Self {
        Self {
            make_child: Arc::clone(&self.make_child),
            ..*self
        }
    }
}

impl<T: Table> fmt::Debug for SwapOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SwapOptions")
            .field("capacity", &self.capacity)
            .field("child_capacity", &self.child_capacity)
            .field("children", &self.children)
            .field("device_budget", &self.device_budget)
            .field("host_budget", &self.host_budget)
            .field("scratch_bytes", &self.scratch_bytes)
            .field("filter_bits_per_key", &self.filter_bits_per_key)
            .field("cost_model", &self.cost_model)
            .field("page_out_wait", &self.page_out_wait)
            .finish_non_exhaustive()
    }
}
