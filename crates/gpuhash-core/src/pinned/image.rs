//! Table images in pinned host memory: the sections of a [`TableImage`] laid out in one
//! pinned buffer from a [`PinnedPool`], so that a table moves between the device and the
//! host by one DMA a section, and, when the pool is mapped, kernels read the image where it
//! lies (zero-copy).
//!
//! Sections start at multiples of [`SECTION_ALIGN`] bytes, so that every section is aligned
//! for any key or value type and for the 16-byte loads kernels make of buckets.

use std::ops::Range;

use bytemuck::Pod;
use cudarc::driver::sys;

use super::pending::Access;
use super::{MappedAddress, PinnedPool, PooledPinned};
use crate::image::{ImageHeader, TableImage};
use crate::{DeviceBuffer, Error, Result, Stream};

/// Where each section of a [`PinnedImage`] starts: a multiple of this many bytes.
pub const SECTION_ALIGN: usize = 256;

/// A table's image in one pinned buffer: the header on the host, the sections end to end
/// (each at a multiple of [`SECTION_ALIGN`]) in page-locked memory from a pool.
///
/// Tables write their device arrays into it with [`PinnedImage::download_section`] and
/// rebuild them with [`PinnedImage::upload_section`], one asynchronous DMA each; the host
/// reads a section with [`PinnedImage::section`], which waits for copies into it. Made from
/// a mapped pool ([`PinnedPool::new_mapped`]), its sections also have device addresses
/// ([`PinnedImage::mapped_sections`]) for kernels that read the image in place.
#[derive(Debug)]
pub struct PinnedImage {
    header: ImageHeader,
    memory: PooledPinned<u8>,
    sections: Vec<Range<usize>>,
}

/// The byte ranges of sections of `lens` bytes laid end to end, each aligned; `None` when
/// they overflow.
fn layout(lens: &[usize]) -> Option<Vec<Range<usize>>> {
    let mut at = 0usize;
    lens.iter()
        .map(|&len| {
            let start = at.checked_next_multiple_of(SECTION_ALIGN)?;
            at = start.checked_add(len)?;
            Some(start..at)
        })
        .collect()
}

impl PinnedImage {
    /// Room for sections of `lens` bytes, from `pool`. The bytes are what the pool's last
    /// user left (zeros when newly pinned): every section is to be written before it is
    /// read. [`Error::OutOfPinnedMemory`] when the pool or the host refuses the memory.
    pub fn with_sections(pool: &PinnedPool, header: ImageHeader, lens: &[usize]) -> Result<Self> {
        let sections = layout(lens)
            .ok_or_else(|| Error::InvalidInput("pinned image: sections overflow usize".into()))?;
        let bytes = sections.last().map_or(0, |s| s.end);
        let memory = pool.take::<u8>(bytes)?;
        Ok(Self {
            header,
            memory,
            sections,
        })
    }

    /// A copy of `image` in pinned memory from `pool`.
    pub fn from_image(pool: &PinnedPool, image: &TableImage) -> Result<Self> {
        let lens: Vec<usize> = image.sections().iter().map(Vec::len).collect();
        let mut pinned = Self::with_sections(pool, image.header().clone(), &lens)?;
        for (index, section) in image.sections().iter().enumerate() {
            pinned.section_mut(index)?.copy_from_slice(section);
        }
        Ok(pinned)
    }

    /// A copy of the image in ordinary host memory; waits for copies into it.
    pub fn to_image(&self) -> Result<TableImage> {
        self.memory.wait()?;
        let mut image = TableImage::new(self.header.clone());
        for index in 0..self.sections.len() {
            image.push_section(self.section(index)?.to_vec());
        }
        Ok(image)
    }

    /// The header.
    pub fn header(&self) -> &ImageHeader {
        &self.header
    }

    /// How many sections the image has.
    pub fn section_count(&self) -> usize {
        self.sections.len()
    }

    /// Bytes of the sections (without the alignment between them).
    pub fn bytes(&self) -> u64 {
        self.sections.iter().map(|s| s.len() as u64).sum()
    }

    /// Bytes pinned for the image: its pool's size class.
    pub fn pinned_bytes(&self) -> usize {
        self.memory.capacity_bytes()
    }

    /// The byte range of section `index` in the buffer, or [`Error::InvalidInput`].
    fn range(&self, index: usize) -> Result<Range<usize>> {
        self.sections
            .get(index)
            .cloned()
            .ok_or_else(|| Error::InvalidInput(format!("pinned image: no section {index}")))
    }

    /// Section `index` on the host, once copies into it have run.
    ///
    /// # Panics
    /// As [`PinnedBuffer`](super::PinnedBuffer)'s `Deref`, when waiting for a copy fails;
    /// [`PinnedImage::to_image`] gives that error as a value.
    pub fn section(&self, index: usize) -> Result<&[u8]> {
        let range = self.range(index)?;
        Ok(&self.memory[range])
    }

    /// Section `index` to write on the host, once every copy on the image has run.
    pub fn section_mut(&mut self, index: usize) -> Result<&mut [u8]> {
        let range = self.range(index)?;
        Ok(&mut self.memory[range])
    }

    /// Section `index` as values of `T`, or [`Error::InvalidInput`] if it is not a whole
    /// number of them.
    pub fn section_as<T: Pod>(&self, index: usize) -> Result<&[T]> {
        bytemuck::try_cast_slice(self.section(index)?).map_err(|_| {
            Error::InvalidInput(format!(
                "pinned image: section {index} is not whole values of {} bytes",
                size_of::<T>()
            ))
        })
    }

    /// Section `index` as a new device buffer of `T` values: one DMA queued on `stream`,
    /// returning at once (the image is borrowed by the copy until it has run).
    pub fn upload_section<T: Pod>(&self, stream: &Stream, index: usize) -> Result<DeviceBuffer<T>> {
        let range = self.typed_range::<T>(index)?;
        let mut target = DeviceBuffer::<T>::unfilled(stream, range.len() / size_of::<T>().max(1))?;
        if range.is_empty() {
            return Ok(target);
        }
        let host = self.memory.range_ptr(&range, "upload_section")?;
        self.memory.pending.queue(&stream.inner, Access::Read, || {
            let device = target.address_mut(stream);
            // SAFETY: `device` addresses the new buffer of exactly `range.len()` bytes,
            // allocated until the copy has run (stream-ordered free); `host` addresses the
            // section's bytes, within the pinned buffer (checked by `range_ptr`), which waits
            // for this copy before it is written or freed.
            unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    device.address,
                    host.as_ptr().cast(),
                    range.len(),
                    stream.inner.cu_stream(),
                )
            }
            .result()?;
            Ok(())
        })?;
        Ok(target)
    }

    /// Queues one DMA of all of `source` into section `index`, whose bytes it must fill,
    /// on `stream`, returning at once; reading the section waits for it.
    pub fn download_section<T: Pod>(
        &mut self,
        stream: &Stream,
        index: usize,
        source: &DeviceBuffer<T>,
    ) -> Result<()> {
        let range = self.typed_range::<T>(index)?;
        if range.len() != source.size_bytes() {
            return Err(Error::LengthMismatch {
                what: "download_section: section and device buffer bytes",
                left: range.len(),
                right: source.size_bytes(),
            });
        }
        if range.is_empty() {
            return Ok(());
        }
        let host = self.memory.range_ptr(&range, "download_section")?;
        self.memory.pending.queue(&stream.inner, Access::Write, || {
            let device = source.address(stream);
            // SAFETY: `device` addresses `range.len()` bytes, all of `source` (checked
            // above), live until the copy has run and ordered after other streams' writes;
            // `host` addresses the section within the pinned buffer, which waits for this
            // copy before it is read, written or freed.
            unsafe {
                sys::cuMemcpyDtoHAsync_v2(
                    host.as_ptr().cast(),
                    device.address,
                    range.len(),
                    stream.inner.cu_stream(),
                )
            }
            .result()?;
            Ok(())
        })
    }

    /// The device address of every section, for a kernel on `stream` that reads the image
    /// in place; launch it while the guard lives. [`Error::InvalidInput`] unless the image
    /// came from a mapped pool.
    pub fn mapped_sections<'a>(
        &'a self,
        stream: &'a Stream,
    ) -> Result<(MappedAddress<'a>, Vec<u64>)> {
        let base = self.memory.mapped_address(stream)?;
        let addresses = self
            .sections
            .iter()
            .map(|s| base.address + s.start as u64)
            .collect();
        Ok((base, addresses))
    }

    /// Blocks until every copy queued on the image has run.
    pub fn wait(&self) -> Result<()> {
        self.memory.wait()
    }

    /// Section `index`'s range, checked to hold whole values of `T`.
    fn typed_range<T>(&self, index: usize) -> Result<Range<usize>> {
        let range = self.range(index)?;
        if range.len() % size_of::<T>().max(1) != 0 {
            return Err(Error::InvalidInput(format!(
                "pinned image: section {index} of {} bytes is not whole values of {} bytes",
                range.len(),
                size_of::<T>()
            )));
        }
        Ok(range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_aligned_and_do_not_overlap() {
        let ranges = layout(&[10, 0, 256, 1]).unwrap();
        assert_eq!(ranges, vec![0..10, 256..256, 256..512, 512..513]);
        assert!(ranges.iter().all(|r| r.start % SECTION_ALIGN == 0));
        assert!(layout(&[usize::MAX, 1]).is_none());
        assert_eq!(layout(&[]).unwrap(), Vec::<Range<usize>>::new());
    }
}
