//! The image round trip: a table's image rebuilds the same table, in memory and through
//! bytes, and a damaged or foreign image is refused.

use std::collections::BTreeSet;

use gpuhash_core::Device;
use gpuhash_core::image::{Image, ImageHeader, TableImage};
use gpuhash_core::table::ErrorKind;

use crate::conformance::{During, check_everything, expect, fresh, run_steps};
use crate::gpu::{device, shared_memory};
use crate::inputs::{SeededRng, adversarial_keys};
use crate::shape::{Shape, Via};
use crate::steps::Step;

/// Checks a table's images on tables that `make` builds (as for [`crate::map_conformance`];
/// any shape): `to_image` / `from_image` and `save` / `load` through a `Vec<u8>` give a
/// table with the same export and lookups, which takes further inserts and removals
/// without touching the original; a damaged image (flipped bytes, truncations) and an
/// image of another table, width or layout version are refused with
/// [`ErrorKind::InvalidInput`]. Takes [`shared_memory`] itself. Prints nothing when the
/// images conform; otherwise panics naming the table type and the failing step.
pub fn image_round_trip<T, Tag, F>(make: F)
where
    T: Shape<Tag> + Image,
    F: Fn(&Device, usize) -> Result<T, T::Error>,
{
    let _memory = shared_memory();
    expect::<T>("image round trip", Via::Host, round_trip(&make));
}

fn round_trip<T: Shape<Tag> + Image, Tag>(
    make: &impl Fn(&Device, usize) -> Result<T, T::Error>,
) -> Result<(), String> {
    let keys = adversarial_keys::<T::Key>();
    let (table, mut model) = fresh(make, keys.len())?;
    let filled = [
        Step::Insert(keys.clone(), 1),
        Step::Remove(keys[..keys.len() / 3].to_vec()),
    ];
    run_steps(&table, Via::Host, &mut model, &filled)?;

    let image = table.to_image().during("to_image")?;
    let copy = T::from_image(device(), &image).during("from_image")?;
    check_everything(&copy, Via::Host, &model).map_err(|why| format!("from_image: {why}"))?;

    let mut bytes = Vec::new();
    table.save(&mut bytes).during("save")?;
    let loaded = T::load(device(), &mut bytes.as_slice()).during("load")?;
    let more = SeededRng::new(8).distinct_keys(2000);
    let changes = [
        Step::Insert(more.clone(), 2),
        Step::Remove(keys[keys.len() / 2..].to_vec()),
        Step::Lookup(more),
    ];
    run_steps(&loaded, Via::Host, &mut model.clone(), &changes)
        .map_err(|why| format!("the loaded table: {why}"))?;
    check_everything(&table, Via::Host, &model)
        .map_err(|why| format!("the original, after changes to its loaded copy: {why}"))?;

    for (what, damaged) in damaged_images(&bytes) {
        refused(T::load(device(), &mut damaged.as_slice()), &what)?;
    }
    for header in foreign_headers(image.header()) {
        let what = format!("an image with header {header:?}");
        refused(T::from_image(device(), &with_header(&image, header)), &what)?;
    }
    Ok(())
}

/// `Ok` if `outcome` is an [`ErrorKind::InvalidInput`].
fn refused<T, E: gpuhash_core::table::TableError>(
    outcome: Result<T, E>,
    what: &str,
) -> Result<(), String> {
    match outcome {
        Err(e) if e.kind() == ErrorKind::InvalidInput => Ok(()),
        Err(e) => Err(format!(
            "{what} gave {e} ({:?}), not InvalidInput",
            e.kind()
        )),
        Ok(_) => Err(format!("{what} was taken for a table")),
    }
}

/// Damaged copies of an image's bytes, each with what was done to it: every byte of the
/// first 64 and the last 16 flipped, and 32 more spread over the rest; truncations to
/// every length up to 64, the last 16 lengths, and 32 spread between.
pub fn damaged_images(bytes: &[u8]) -> impl Iterator<Item = (String, Vec<u8>)> + '_ {
    let flipped = positions(bytes.len()).into_iter().map(|at| {
        let mut damaged = bytes.to_vec();
        damaged[at] = !damaged[at];
        (format!("the image with byte {at} flipped"), damaged)
    });
    let truncated = positions(bytes.len()).into_iter().map(|len| {
        let what = format!("the image cut to {len} of {} bytes", bytes.len());
        (what, bytes[..len].to_vec())
    });
    flipped.chain(truncated)
}

/// Positions below `len`: the first 64, the last 16 and 32 spread between.
fn positions(len: usize) -> BTreeSet<usize> {
    let spread = (0..32).map(|i| i * len / 32);
    (0..64)
        .chain(len.saturating_sub(16)..len)
        .chain(spread)
        .filter(|&at| at < len)
        .collect()
}

/// Headers of other tables: another name, key width, value width, layout version.
pub fn foreign_headers(header: &ImageHeader) -> Vec<ImageHeader> {
    let other = |change: fn(&mut ImageHeader)| {
        let mut h = header.clone();
        change(&mut h);
        h
    };
    vec![
        other(|h| h.table.push_str("-other")),
        other(|h| h.key_bytes ^= 12),
        other(|h| h.value_bytes += 4),
        other(|h| h.layout_version += 1),
    ]
}

/// The image's sections under another header.
fn with_header(image: &TableImage, header: ImageHeader) -> TableImage {
    let mut foreign = TableImage::new(header);
    for section in image.sections() {
        foreign.push_section(section.clone());
    }
    foreign
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TableImage {
        let mut image = TableImage::new(ImageHeader {
            table: "test/map".into(),
            key_bytes: 4,
            value_bytes: 8,
            layout_version: 2,
        });
        image.push_section((0..=255).cycle().take(5000).collect());
        image.push_section(vec![7; 100]);
        image
    }

    #[test]
    fn every_damaged_image_is_refused_by_the_reader() {
        let mut bytes = Vec::new();
        sample().write_to(&mut bytes).unwrap();
        let damaged: Vec<_> = damaged_images(&bytes).collect();
        assert!(damaged.len() > 2 * (64 + 16));
        for (what, damaged) in damaged {
            assert!(
                TableImage::read_from(&mut damaged.as_slice()).is_err(),
                "{what}"
            );
        }
    }

    #[test]
    fn positions_stay_inside_short_and_long_images() {
        assert!(positions(0).is_empty());
        assert_eq!(positions(10), (0..10).collect());
        let long = positions(1 << 20);
        assert_eq!(long.len(), 64 + 16 + 31);
        assert!(long.iter().all(|&at| at < 1 << 20));
    }

    #[test]
    fn foreign_headers_differ_from_the_image_and_keep_its_sections() {
        let image = sample();
        for header in foreign_headers(image.header()) {
            let foreign = with_header(&image, header);
            assert!(foreign.expect(image.header()).is_err());
            assert_eq!(foreign.sections(), image.sections());
        }
        let key_widths: Vec<u32> = foreign_headers(image.header())
            .iter()
            .map(|h| h.key_bytes)
            .collect();
        assert!(key_widths.contains(&8));
    }
}
