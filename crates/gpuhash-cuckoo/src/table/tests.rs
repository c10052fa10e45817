//! Host-side checks of the table: value widths, layouts, hash coefficients, fastmod.

use super::*;

#[test]
fn the_table_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<CuckooTable<u32, u32>>();
    check::<CuckooTable<u64, [u32; 16]>>();
}

#[test]
fn value_widths_the_table_stores() {
    for bytes in [4, 8, 12, 16, 64] {
        assert!(stores_values_of(bytes), "{bytes}");
    }
    for bytes in [0, 1, 2, 6, 13, 68, 128] {
        assert!(!stores_values_of(bytes), "{bytes}");
    }
    assert_eq!(CuckooTable::<u32, [u8; 12]>::WORDS, 3);
    assert_eq!(CuckooTable::<u64, [u64; 2]>::WORDS, 4);
    let slots = |layout| CuckooTable::<u32, u32>::bucket_slots(layout).unwrap();
    assert_eq!(
        (slots(BucketLayout::Auto), slots(BucketLayout::Split)),
        (16, 32)
    );
    assert_eq!(
        CuckooTable::<u64, u32>::bucket_slots(BucketLayout::Auto).unwrap(),
        16
    );
    assert_eq!(
        CuckooTable::<u32, f32>::bucket_slots(BucketLayout::Packed).unwrap(),
        16
    );
    assert_eq!(
        CuckooTable::<u32, [u32; 1]>::bucket_slots(BucketLayout::Auto).unwrap(),
        16
    );
    assert!(CuckooTable::<u64, u32>::bucket_slots(BucketLayout::Packed).is_err());
    assert!(CuckooTable::<u32, u64>::bucket_slots(BucketLayout::Packed).is_err());
}

#[test]
fn hash_coefficients_are_in_the_family() {
    for i in 0..8 {
        let (a, b) = hash_coefficients::<u32>(7, i);
        assert!(a > 0 && a < PRIME32 && b < PRIME32);
        let (a, b) = hash_coefficients::<u64>(7, i);
        assert!(a > 0 && a < PRIME61 && b < PRIME61);
    }
    assert_ne!(
        hash_coefficients::<u32>(7, 0),
        hash_coefficients::<u32>(7, 1)
    );
}

#[test]
fn fastmod_magic_is_exact() {
    // The kernels compute h mod b as mulhi(magic * h, b) with magic = ceil(2^64 / b).
    for b in [1u64, 2, 3, 7, 1000, 735_843, (1 << 31) - 1] {
        let magic = (u64::MAX / b).wrapping_add(1);
        for h in [0u32, 1, 2, 12345, u32::MAX - 1, u32::MAX] {
            let low = magic.wrapping_mul(u64::from(h));
            let got = ((u128::from(low) * u128::from(b)) >> 64) as u64;
            assert_eq!(got, u64::from(h) % b, "h = {h}, b = {b}");
        }
    }
}
