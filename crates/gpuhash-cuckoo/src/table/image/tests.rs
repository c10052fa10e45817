//! Host-side checks of DyHash images: the state section, and the layout an image records.

use super::*;

fn state_of(options: &CuckooOptions) -> State {
    State {
        initial_capacity: options.initial_capacity as u64,
        initial_buckets: options.initial_buckets.unwrap_or(0),
        subtables: options.subtables as u64,
        alpha: options.alpha,
        beta: options.beta,
        min_buckets: options.min_buckets,
        seed: options.seed,
        max_evictions: options.max_evictions,
        rehash_all: u32::from(options.rehash_all),
        last_copy: u32::from(options.duplicate_keys == DuplicateKeys::LastCopy),
        buckets: [4; MAX_SUBTABLES],
        hash_a: [1; MAX_SUBTABLES],
        ..State::zeroed()
    }
}

#[test]
fn the_state_keeps_the_options() {
    let options = CuckooOptions::with_capacity(12345)
        .initial_buckets(64)
        .subtables(4)
        .alpha(0.2)
        .max_evictions(7)
        .rehash_all(true)
        .duplicate_keys(DuplicateKeys::LastCopy);
    let state = state_of(&options);
    assert_eq!(state.options(BucketLayout::Split, 8, 4).unwrap(), options);
    state.check::<u32>(&options, 32).unwrap();
}

#[test]
fn states_no_table_has_are_refused() {
    let options = CuckooOptions::default();
    let split = BucketLayout::Split;
    let mut bad_options = state_of(&options);
    bad_options.subtables = 9;
    assert!(bad_options.options(split, 4, 8).is_err());
    let mut no_buckets = state_of(&options);
    no_buckets.buckets[1] = 0;
    assert!(no_buckets.check::<u32>(&options, 32).is_err());
    let mut overfull = state_of(&options);
    overfull.counts[0] = 4 * 32 + 1;
    assert!(overfull.check::<u32>(&options, 32).is_err());
    assert!(overfull.check::<u64>(&options, 16).is_err());
    // A packed bucket holds 16 pairs.
    overfull.counts[0] = 4 * 16 + 1;
    assert!(overfull.check::<u32>(&options, 16).is_err());
    overfull.counts[0] = 4 * 16;
    overfull.check::<u32>(&options, 16).unwrap();
    let mut stray = state_of(&options);
    stray.counts[5] = 1;
    assert!(stray.check::<u32>(&options, 32).is_err());
    assert!(one(Vec::new()).is_err());
}

/// A host image of a table of two 4-bucket subtables with `layout` (a
/// `GH_CUCKOO_LAYOUT_*` code), each values array `value_words` words.
fn image_of<K: Key, V: Value>(version: u32, layout: u32, value_words: usize) -> TableImage {
    let options = CuckooOptions::default().subtables(2).alpha(0.2);
    let state = State {
        layout,
        ..state_of(&options)
    };
    let mut image = TableImage::new(ImageHeader {
        layout_version: version,
        ..CuckooTable::<K, V>::image_header()
    });
    image.push_section(bytemuck::bytes_of(&state).to_vec());
    image.push_section(vec![0; 4 * (SIDE_HEADER + size_of::<V>() / 4)]);
    for _ in 0..2 {
        image.push_section(vec![0xff; 4 * 128]);
        image.push_section(vec![0; 4 * value_words]);
        image.push_section(vec![0; 4 * 4]);
        image.push_section(vec![0; 4]);
    }
    image
}

#[test]
fn images_record_the_bucket_layout() {
    use crate::layouts::{GH_CUCKOO_LAYOUT_PACKED as PACKED, GH_CUCKOO_LAYOUT_SPLIT as SPLIT};
    let v = IMAGE_LAYOUT_VERSION;
    // Packed u32 pairs: slot words only, no values; the options keep Auto.
    let packed = CuckooTable::<u32, u32>::check_image(&image_of::<u32, u32>(v, PACKED, 0));
    let packed = packed.unwrap();
    assert_eq!(packed.layout, BucketLayout::Packed);
    assert_eq!(packed.options.layout, BucketLayout::Auto);
    // u32 pairs forced split: 32 values a bucket; the options keep Split.
    let split = CuckooTable::<u32, f32>::check_image(&image_of::<u32, f32>(v, SPLIT, 128));
    let split = split.unwrap();
    assert_eq!(
        (split.layout, split.options.layout),
        (BucketLayout::Split, BucketLayout::Split)
    );
    // Version 1 images hold zero for the layout: split, which still loads.
    let old = CuckooTable::<u32, u32>::check_image(&image_of::<u32, u32>(1, 0, 128)).unwrap();
    assert_eq!(
        (old.layout, old.options.layout),
        (BucketLayout::Split, BucketLayout::Split)
    );
    let wide = CuckooTable::<u64, u32>::check_image(&image_of::<u64, u32>(1, 0, 64)).unwrap();
    assert_eq!(
        (wide.layout, wide.options.layout),
        (BucketLayout::Split, BucketLayout::Auto)
    );
    // Sections sized for the other layout, a layout the pair cannot have, an unknown
    // layout or version: refused.
    assert!(CuckooTable::<u32, u32>::check_image(&image_of::<u32, u32>(v, PACKED, 128)).is_err());
    assert!(CuckooTable::<u32, u32>::check_image(&image_of::<u32, u32>(v, SPLIT, 0)).is_err());
    assert!(CuckooTable::<u64, u32>::check_image(&image_of::<u64, u32>(v, PACKED, 0)).is_err());
    assert!(CuckooTable::<u32, u32>::check_image(&image_of::<u32, u32>(v, 9, 0)).is_err());
    assert!(CuckooTable::<u32, u32>::check_image(&image_of::<u32, u32>(3, PACKED, 0)).is_err());
    assert!(CuckooTable::<u32, u64>::check_image(&image_of::<u32, u32>(v, PACKED, 0)).is_err());
}
