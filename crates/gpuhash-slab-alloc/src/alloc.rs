//! The host side of SlabAlloc: reserving, growing, accounting and resetting the memory that
//! the device-side allocator hands out.

use std::sync::atomic::{AtomicU32, Ordering};

use gpuhash_core::{DeviceAddress, DeviceBuffer, Stream};

use crate::address::{INVALID_SLAB, SlabAddress};
use crate::growth;
use crate::launch;
use crate::layouts::{
    GH_BITMAP_WORDS, GH_SLAB_ALLOC_LIGHT, GH_SLAB_ALLOC_REGULAR, GH_SLAB_WORDS, GH_SLABS_PER_BLOCK,
    GhSlabAllocContext,
};
use crate::{Result, SlabAllocError};

mod sections;

/// How slab addresses map to memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Variant {
    /// Super blocks added as the allocator grows, each a separate allocation; decoding
    /// reads the super block's base from a small table. Grows without moving a slab.
    #[default]
    Regular,
    /// One contiguous array; decoding is one multiply-add (the SlabHash paper reports up to 25%
    /// faster lookups). Growing moves every slab into an array twice as large, so it needs
    /// the old and the new array at once for a moment.
    Light,
}

/// Options of a [`SlabAlloc`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlabAllocOptions {
    /// Regular or light addressing.
    pub variant: Variant,
    /// Slabs to reserve at the start, rounded up to whole memory blocks of 1024.
    pub initial_slabs: u64,
}

impl Default for SlabAllocOptions {
    /// Regular addressing, 64 memory blocks (65536 slabs, 8 MiB) to start with.
    fn default() -> Self {
        Self {
            variant: Variant::Regular,
            initial_slabs: 1 << 16,
        }
    }
}

/// Which elements of an address buffer an allocation fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Every element gets a new slab.
    All,
    /// Only elements that hold [`INVALID_SLAB`] get one: the retry after growth.
    Invalid,
}

/// How a warp serves the requests of its lanes in a bulk allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// One slab per call of the device allocator, each a separate `atomicOr`: the pattern
    /// of slab-list inserts, and of the SlabHash paper's benchmark.
    One,
    /// Up to 32 slabs of one bitmap word per `atomicOr`, as many as the warp has requests.
    Runs,
}

/// SlabAlloc: memory blocks of 1024 slabs of 128 bytes, handed out one slab at a time by
/// warps on the device, with 32-bit addresses.
///
/// Kernels of other crates allocate through the device header
/// `cuda-src/slab_alloc/slab_alloc.cuh` with the parameters of [`SlabAlloc::context`].
/// Allocation and deallocation on the device are safe to run from many kernels at once,
/// on any streams; growing and resetting take `&mut self`, so no kernel can be using the
/// allocator then. All memory is freed on drop.
#[derive(Debug)]
pub struct SlabAlloc {
    variant: Variant,
    storage: Storage,
    launches: AtomicU32,
}

/// The flag through which warps of one launch report that they found no free slab. Each
/// launch gets its own, so batches on other streams cannot raise or clear it.
#[derive(Debug)]
pub struct Exhaustion {
    flag: DeviceBuffer<u32>,
}

impl Exhaustion {
    /// A cleared flag.
    pub fn new(stream: &Stream) -> Result<Self> {
        Ok(Self {
            flag: DeviceBuffer::zeroed(stream, 1)?,
        })
    }

    /// Whether a warp of the launches that used this flag, queued on `stream` before the
    /// call, found no free slab; waits for the stream.
    pub fn happened(&self, stream: &Stream) -> Result<bool> {
        Ok(self.flag.to_host(stream)?[0] != 0)
    }

    /// The flag's address for one launch on `stream` that may raise it.
    pub fn address<'a>(&'a mut self, stream: &'a Stream) -> DeviceAddress<'a> {
        self.flag.address_mut(stream)
    }

    /// The flag's address for launches on several streams at once that may all raise it:
    /// ordered as a read, so that those launches do not wait for each other. A later
    /// [`Exhaustion::happened`] on a stream sees what the launches queued before it on
    /// that stream raised (raising is an idempotent store of 1).
    pub fn shared_address<'a>(&'a self, stream: &'a Stream) -> DeviceAddress<'a> {
        self.flag.address(stream)
    }

    /// Lowers the flag, ordered after every launch that used it.
    pub fn clear(&mut self, stream: &Stream) -> Result<()> {
        Ok(self.flag.fill_zero(stream)?)
    }
}

#[derive(Debug)]
enum Storage {
    Regular {
        super_blocks: Vec<SuperBlock>,
        /// The device copy of the super block table, as `GhSuperBlock` records of three
        /// 64-bit words: bitmaps, slabs, then memory_blocks and first_block packed.
        table: DeviceBuffer<u64>,
    },
    Light {
        memory: BlockMemory,
    },
}

/// Bitmaps and slabs of a run of memory blocks.
#[derive(Debug)]
struct BlockMemory {
    bitmaps: DeviceBuffer<u32>,
    slabs: DeviceBuffer<u32>,
    blocks: u32,
}

#[derive(Debug)]
struct SuperBlock {
    memory: BlockMemory,
    first_block: u32,
}

/// Allocator parameters for one launch, with the stream ordering of its buffers held until
/// this is dropped: drop it only after queueing the kernel that uses [`AllocContext::params`].
#[derive(Debug)]
pub struct AllocContext<'a> {
    params: GhSlabAllocContext,
    _order: Vec<DeviceAddress<'a>>,
}

impl AllocContext<'_> {
    /// The allocator as a kernel parameter.
    pub fn params(&self) -> GhSlabAllocContext {
        self.params
    }
}

/// Decodes addresses to device pointers on the host, as the kernels do.
#[derive(Debug, Clone)]
pub struct SlabDecoder {
    variant: Variant,
    /// (slab array base, memory blocks) of each super block, or of the one light array.
    bases: Vec<(u64, u32)>,
}

impl SlabDecoder {
    /// The device pointer of the slab at `address`; None if the address lies outside the
    /// allocator.
    pub fn pointer(&self, address: u32) -> Option<u64> {
        let (array, index) = match self.variant {
            Variant::Light => (0, u64::from(address)),
            Variant::Regular => {
                let split = SlabAddress::decode(address)?;
                (split.super_block as usize, split.index_in_super_block())
            }
        };
        let &(base, blocks) = self.bases.get(array)?;
        let inside =
            address != INVALID_SLAB && index < u64::from(blocks) * u64::from(GH_SLABS_PER_BLOCK);
        inside.then(|| base + index * u64::from(GH_SLAB_WORDS) * 4)
    }
}

impl BlockMemory {
    fn new(stream: &Stream, blocks: u32) -> Result<Self> {
        let blocks_usize = blocks as usize;
        Ok(Self {
            bitmaps: DeviceBuffer::zeroed(stream, blocks_usize * GH_BITMAP_WORDS as usize)?,
            slabs: DeviceBuffer::zeroed(
                stream,
                blocks_usize * (GH_SLABS_PER_BLOCK * GH_SLAB_WORDS) as usize,
            )?,
            blocks,
        })
    }

    fn bytes(&self) -> usize {
        self.bitmaps.size_bytes() + self.slabs.size_bytes()
    }
}

impl SlabAlloc {
    /// Reserves `options.initial_slabs` slabs (at least one memory block) on the stream's
    /// device.
    pub fn new(stream: &Stream, options: SlabAllocOptions) -> Result<Self> {
        let blocks = growth::blocks_for(options.initial_slabs);
        let storage = match options.variant {
            Variant::Regular => {
                let sizes = growth::initial_super_blocks(blocks).ok_or(
                    SlabAllocError::AddressSpaceFull {
                        slabs: options.initial_slabs,
                    },
                )?;
                let mut super_blocks = Vec::with_capacity(sizes.len());
                let mut first_block = 0;
                for size in sizes {
                    super_blocks.push(SuperBlock {
                        memory: BlockMemory::new(stream, size)?,
                        first_block,
                    });
                    first_block += size;
                }
                let table = upload_table(stream, &super_blocks)?;
                Storage::Regular {
                    super_blocks,
                    table,
                }
            }
            Variant::Light => {
                let blocks = u32::try_from(blocks)
                    .ok()
                    .filter(|&b| growth::next_light_blocks(u64::from(b) - 1).is_some())
                    .ok_or(SlabAllocError::AddressSpaceFull {
                        slabs: options.initial_slabs,
                    })?;
                Storage::Light {
                    memory: BlockMemory::new(stream, blocks)?,
                }
            }
        };
        Ok(Self {
            variant: options.variant,
            storage,
            launches: AtomicU32::new(0),
        })
    }

    /// Regular or light.
    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// Memory blocks reserved.
    pub fn memory_blocks(&self) -> u64 {
        self.block_memories().map(|m| u64::from(m.blocks)).sum()
    }

    /// Slabs reserved, in use or not.
    pub fn slabs_reserved(&self) -> u64 {
        self.memory_blocks() * u64::from(GH_SLABS_PER_BLOCK)
    }

    /// Device bytes this allocator holds: slabs, bitmaps, and the super block table.
    pub fn bytes_reserved(&self) -> usize {
        let table = match &self.storage {
            Storage::Regular { table, .. } => table.size_bytes(),
            Storage::Light { .. } => 0,
        };
        self.block_memories().map(BlockMemory::bytes).sum::<usize>() + table
    }

    /// Slabs in use now, counted on the device; waits for the count.
    pub fn slabs_in_use(&self, stream: &Stream) -> Result<u64> {
        let mut total = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        for memory in self.block_memories() {
            launch::popcount(stream, &memory.bitmaps, &mut total)?;
        }
        Ok(total.to_host(stream)?[0])
    }

    /// The allocator as a kernel parameter, reporting exhaustion through `exhausted` (an
    /// [`Exhaustion`]'s address), with a fresh seed so that this launch's warps pick other
    /// resident blocks than the last launch's.
    pub fn context<'a>(
        &'a self,
        stream: &'a Stream,
        exhausted: DeviceAddress<'a>,
    ) -> AllocContext<'a> {
        let seed = self
            .launches
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9);
        let mut params = GhSlabAllocContext {
            exhausted: exhausted.address as *mut u32,
            total_blocks: self.memory_blocks() as u32,
            seed,
            ..GhSlabAllocContext::default()
        };
        let mut order = vec![exhausted];
        match &self.storage {
            Storage::Regular {
                super_blocks,
                table,
            } => {
                let table = table.address(stream);
                params.variant = GH_SLAB_ALLOC_REGULAR;
                params.super_blocks = table.address as *const _;
                params.super_block_count = super_blocks.len() as u32;
                order.push(table);
                // The kernels reach super blocks through the table; their ordering guards
                // come along so that growth-time copies finish before kernels start.
                for block in super_blocks {
                    order.push(block.memory.bitmaps.address(stream));
                    order.push(block.memory.slabs.address(stream));
                }
            }
            Storage::Light { memory } => {
                let bitmaps = memory.bitmaps.address(stream);
                let slabs = memory.slabs.address(stream);
                params.variant = GH_SLAB_ALLOC_LIGHT;
                params.light_bitmaps = bitmaps.address as *mut u32;
                params.light_slabs = slabs.address as *mut u32;
                order.extend([bitmaps, slabs]);
            }
        }
        AllocContext {
            params,
            _order: order,
        }
    }

    /// A host-side decoder of this allocator's addresses; valid until it grows.
    pub fn decoder(&self, stream: &Stream) -> SlabDecoder {
        let bases = self
            .block_memories()
            .map(|m| (m.slabs.address(stream).address, m.blocks))
            .collect();
        SlabDecoder {
            variant: self.variant,
            bases,
        }
    }

    /// Queues one allocation per element of `addresses` chosen by `fill`, served as `claim`
    /// says, writing each slab's address (and, when given, its device pointer into
    /// `pointers`). Elements the
    /// device could not serve hold [`INVALID_SLAB`], and the returned [`Exhaustion`] says
    /// so once the stream gets there. Does not grow: see [`SlabAlloc::allocate`].
    pub fn allocate_into(
        &self,
        stream: &Stream,
        addresses: &mut DeviceBuffer<u32>,
        pointers: Option<&mut DeviceBuffer<u64>>,
        fill: Fill,
        claim: Claim,
    ) -> Result<Exhaustion> {
        if let Some(pointers) = &pointers
            && pointers.len() != addresses.len()
        {
            return Err(gpuhash_core::Error::LengthMismatch {
                what: "allocate_into: addresses and pointers",
                left: addresses.len(),
                right: pointers.len(),
            }
            .into());
        }
        let mut exhaustion = Exhaustion::new(stream)?;
        let context = self.context(stream, exhaustion.address(stream));
        launch::allocate(
            stream,
            context.params(),
            addresses,
            pointers,
            fill == Fill::All,
            claim == Claim::Runs,
        )?;
        drop(context);
        Ok(exhaustion)
    }

    /// One slab for every element of `addresses`, growing as often as needed. On an error
    /// (out of device memory, address space full) every slab this call took is returned
    /// and `addresses` holds only [`INVALID_SLAB`]: the allocator holds what it held before.
    pub fn allocate(&mut self, stream: &Stream, addresses: &mut DeviceBuffer<u32>) -> Result<()> {
        let mut fill = Fill::All;
        while self
            .allocate_into(stream, addresses, None, fill, Claim::Runs)?
            .happened(stream)?
        {
            fill = Fill::Invalid;
            if let Err(error) = self.grow(stream) {
                self.deallocate(stream, addresses)?;
                addresses.copy_from_host(stream, &vec![INVALID_SLAB; addresses.len()])?;
                return Err(error);
            }
        }
        Ok(())
    }

    /// Returns every slab in `addresses` to the allocator, skipping [`INVALID_SLAB`].
    /// Addresses that are not slabs in use here are left alone and counted in
    /// [`SlabAllocError::ForeignAddresses`]; the others are freed all the same.
    pub fn deallocate(&self, stream: &Stream, addresses: &DeviceBuffer<u32>) -> Result<()> {
        let mut rejected = DeviceBuffer::<u64>::zeroed(stream, 1)?;
        let mut unused = Exhaustion::new(stream)?;
        let context = self.context(stream, unused.address(stream));
        launch::deallocate(stream, context.params(), addresses, &mut rejected)?;
        drop(context);
        match rejected.to_host(stream)?[0] {
            0 => Ok(()),
            count => Err(SlabAllocError::ForeignAddresses { count }),
        }
    }

    /// Doubles the slabs reserved. Out of device memory, or a full address space, is an
    /// error and leaves the allocator as it was.
    pub fn grow(&mut self, stream: &Stream) -> Result<()> {
        let slabs = self.slabs_reserved();
        let total_blocks = self.memory_blocks();
        match &mut self.storage {
            Storage::Regular {
                super_blocks,
                table,
            } => {
                let blocks = growth::next_super_block(super_blocks.len(), total_blocks)
                    .ok_or(SlabAllocError::AddressSpaceFull { slabs })?;
                let memory = BlockMemory::new(stream, blocks)?;
                super_blocks.push(SuperBlock {
                    memory,
                    first_block: total_blocks as u32,
                });
                match upload_table(stream, super_blocks) {
                    Ok(new_table) => *table = new_table,
                    Err(error) => {
                        super_blocks.pop();
                        return Err(error);
                    }
                }
            }
            Storage::Light { memory } => {
                let blocks = growth::next_light_blocks(total_blocks)
                    .ok_or(SlabAllocError::AddressSpaceFull { slabs })?;
                let mut larger = BlockMemory::new(stream, blocks)?;
                larger.bitmaps.copy_from_at(stream, 0, &memory.bitmaps)?;
                larger.slabs.copy_from_at(stream, 0, &memory.slabs)?;
                *memory = larger;
            }
        }
        Ok(())
    }

    /// Marks every slab free again, keeping the memory reserved.
    pub fn reset(&mut self, stream: &Stream) -> Result<()> {
        let memories: Vec<&mut BlockMemory> = match &mut self.storage {
            Storage::Regular { super_blocks, .. } => {
                super_blocks.iter_mut().map(|s| &mut s.memory).collect()
            }
            Storage::Light { memory } => vec![memory],
        };
        for memory in memories {
            memory.bitmaps.fill_zero(stream)?;
        }
        Ok(())
    }

    fn block_memories(&self) -> Box<dyn Iterator<Item = &BlockMemory> + '_> {
        match &self.storage {
            Storage::Regular { super_blocks, .. } => {
                Box::new(super_blocks.iter().map(|s| &s.memory))
            }
            Storage::Light { memory } => Box::new(std::iter::once(memory)),
        }
    }
}

/// Uploads the super block table in the layout of `GhSuperBlock` (checked by bindgen's
/// layout test: 24 bytes, fields at 0, 8, 16, 20), little-endian as every CUDA host is.
fn upload_table(stream: &Stream, super_blocks: &[SuperBlock]) -> Result<DeviceBuffer<u64>> {
    let words: Vec<u64> = super_blocks
        .iter()
        .flat_map(|s| {
            let bitmaps = s.memory.bitmaps.address(stream).address;
            let slabs = s.memory.slabs.address(stream).address;
            [
                bitmaps,
                slabs,
                u64::from(s.memory.blocks) | (u64::from(s.first_block) << 32),
            ]
        })
        .collect();
    Ok(DeviceBuffer::from_host(stream, &words)?)
}
