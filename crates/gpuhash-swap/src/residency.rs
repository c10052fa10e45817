//! The children and where each one is: its image on the host always, its table on the
//! device while resident. Paging in rebuilds a child from its image; paging out writes a
//! changed child's image back, and drops an unchanged one.

use std::sync::Arc;

use gpuhash_core::image::{Image, TableImage};
use gpuhash_core::table::Map;
use gpuhash_core::{Device, Error, Stream};

use crate::policy::Lru;

/// Paging counts since the table was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwapStats {
    /// Children rebuilt on the device from their images.
    pub page_ins: u64,
    /// Changed children whose images were written back to the host.
    pub page_outs: u64,
    /// Unchanged children dropped from the device with nothing written back.
    pub drops: u64,
}

/// A child table: its host image, and its device table while resident.
struct Child<T> {
    /// The image the child was last written to (stale while the resident table is dirty).
    image: Arc<TableImage>,
    /// Entries the image holds.
    image_len: usize,
    resident: Option<Resident<T>>,
}

struct Resident<T> {
    table: T,
    /// Changed since it came in: its image must be written back before it leaves.
    dirty: bool,
}

/// Every child, the resident set and the counts.
pub(crate) struct Residency<T> {
    children: Vec<Child<T>>,
    lru: Lru,
    empty: Arc<TableImage>,
    host_budget: Option<u64>,
    stats: SwapStats,
}

/// Bytes an image holds.
fn image_bytes(image: &TableImage) -> u64 {
    image.sections().iter().map(|s| s.len() as u64).sum()
}

impl<T: Map + Image> Residency<T> {
    /// `children` empty children, each the image `empty`, none resident; at most
    /// `resident` at once.
    pub(crate) fn new(
        empty: TableImage,
        children: usize,
        resident: usize,
        host_budget: Option<u64>,
    ) -> Result<Self, T::Error> {
        let empty = Arc::new(empty);
        let needed = image_bytes(&empty) * children as u64;
        if host_budget.is_some_and(|budget| needed > budget) {
            return Err(Error::InvalidInput(format!(
                "a host budget of {host_budget:?} bytes holds no {children} empty children of {} bytes",
                image_bytes(&empty)
            ))
            .into());
        }
        let children = (0..children)
            .map(|_| Child {
                image: Arc::clone(&empty),
                image_len: 0,
                resident: None,
            })
            .collect();
        Ok(Self {
            children,
            lru: Lru::new(resident),
            empty,
            host_budget,
            stats: SwapStats::default(),
        })
    }

    pub(crate) fn stats(&self) -> SwapStats {
        self.stats
    }

    pub(crate) fn count(&self) -> usize {
        self.children.len()
    }

    /// Child `index` on the device, paged in (and the least recently used paged out) as
    /// needed. `changes` marks it dirty. Work on the device that used a child being paged
    /// out is waited for first.
    pub(crate) fn table(
        &mut self,
        device: &Device,
        stream: &Stream,
        index: usize,
        changes: bool,
    ) -> Result<&T, T::Error> {
        if !self.lru.is_resident(index) {
            if let Some(victim) = self.lru.victim() {
                self.page_out(device, stream, victim)?;
            }
            self.page_in(device, index)?;
        }
        self.lru.touch(index);
        let resident = self.children[index]
            .resident
            .as_mut()
            .expect("the LRU and the children agree on who is resident");
        resident.dirty |= changes;
        Ok(&resident.table)
    }

    fn page_in(&mut self, device: &Device, index: usize) -> Result<(), T::Error> {
        let child = &mut self.children[index];
        let table = T::from_image(device, &child.image)?;
        child.resident = Some(Resident {
            table,
            dirty: false,
        });
        self.stats.page_ins += 1;
        Ok(())
    }

    /// Writes a dirty child's image back (within the host budget) and drops its table;
    /// on an error the child stays resident and unchanged. Waits for the whole device
    /// first: other threads' batches may have left work on the child on their streams.
    fn page_out(&mut self, device: &Device, stream: &Stream, index: usize) -> Result<(), T::Error> {
        device.synchronize()?;
        let held = self.host_bytes();
        let child = &mut self.children[index];
        let resident = child.resident.as_ref().expect("a resident victim");
        if resident.dirty {
            let len = resident.table.len_on(stream)?;
            let image = resident.table.to_image()?;
            let after = held - image_bytes(&child.image) + image_bytes(&image);
            if self.host_budget.is_some_and(|budget| after > budget) {
                return Err(Error::OutOfPinnedMemory.into());
            }
            child.image = Arc::new(image);
            child.image_len = len;
            self.stats.page_outs += 1;
        } else {
            self.stats.drops += 1;
        }
        child.resident = None;
        self.lru.evict(index);
        Ok(())
    }

    /// Host bytes of the children's images.
    fn host_bytes(&self) -> u64 {
        self.children.iter().map(|c| image_bytes(&c.image)).sum()
    }

    /// Entries of every child: resident ones counted on `stream`.
    pub(crate) fn len_on(&self, stream: &Stream) -> Result<usize, T::Error> {
        self.children.iter().try_fold(0, |sum, child| {
            Ok(sum
                + match &child.resident {
                    Some(resident) => resident.table.len_on(stream)?,
                    None => child.image_len,
                })
        })
    }

    /// The resident children's tables.
    pub(crate) fn resident_tables(&self) -> impl Iterator<Item = &T> {
        self.lru
            .resident()
            .filter_map(|index| self.children[index].resident.as_ref())
            .map(|resident| &resident.table)
    }

    /// Empties every child: resident ones cleared in place (and dirty), the others given
    /// the empty image.
    pub(crate) fn clear_on(&mut self, stream: &Stream) -> Result<(), T::Error> {
        for child in &mut self.children {
            match &mut child.resident {
                Some(resident) => {
                    resident.table.clear_on(stream)?;
                    resident.dirty = true;
                }
                None => {
                    child.image = Arc::clone(&self.empty);
                    child.image_len = 0;
                }
            }
        }
        Ok(())
    }
}
