use std::path::Path;

use super::*;

fn flags_of(list: &str) -> Vec<String> {
    nvcc_flags(&parse_targets(list).unwrap())
}

#[test]
fn default_flags_are_those_the_committed_stamps_fingerprint() {
    assert_eq!(
        default_flags().join(" "),
        "-fatbin -O3 -std=c++17 -lineinfo --Werror all-warnings \
         -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75"
    );
}

#[test]
fn machine_and_ptx_targets_become_gencode_pairs() {
    let flags = flags_of(" sm_80 , compute_86,sm_90a");
    assert_eq!(&flags[..COMMON_FLAGS.len()], COMMON_FLAGS);
    assert_eq!(
        &flags[COMMON_FLAGS.len()..],
        [
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode",
            "arch=compute_86,code=compute_86",
            "-gencode",
            "arch=compute_90a,code=sm_90a",
        ]
    );
}

#[test]
fn native_asks_nvcc_to_detect_the_gpu() {
    assert_eq!(parse_targets("native").unwrap(), [Target::Native]);
    assert_eq!(flags_of("native").last().unwrap(), "-arch=native");
}

#[test]
fn bad_lists_are_errors_naming_the_entry() {
    for (list, named) in [
        ("", "empty"),
        (" , ", "empty"),
        ("sm_60", "sm_60"),
        ("compute_70", "compute_70"),
        ("sm_", "sm_"),
        ("sm_8x", "sm_8x"),
        ("sm_+80", "sm_+80"),
        ("sm_80b", "sm_80b"),
        ("80", "80"),
        ("ampere", "ampere"),
        ("native,sm_80", "native"),
    ] {
        let message = parse_targets(list).unwrap_err();
        assert!(message.contains(ARCH_VARIABLE), "{message}");
        assert!(message.contains(named), "{list}: {message}");
    }
}

#[test]
fn every_supported_capability_parses() {
    for capability in 75..=130 {
        for prefix in ["sm_", "compute_"] {
            assert!(parse_targets(&format!("{prefix}{capability}")).is_ok());
        }
    }
}

#[test]
fn crate_names_map_to_their_source_folder() {
    let root = Path::new("/r/cuda-src");
    assert_eq!(source_folder(root, "gpuhash-core"), root.join("core"));
    assert_eq!(
        source_folder(root, "gpuhash-slab-alloc"),
        root.join("slab_alloc")
    );
}

#[test]
fn the_command_puts_both_include_folders_before_the_source() {
    let command = nvcc_command(
        Path::new("/cuda/bin/nvcc"),
        &default_flags(),
        Path::new("/r/cuda-src"),
        Path::new("/r/cuda-src/core/hash.cu"),
        Path::new("/out/hash.fatbin"),
    );
    let args: Vec<String> = command
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let tail = &args[default_flags().len()..];
    assert_eq!(
        tail,
        [
            "-I",
            "/r/cuda-src/include",
            "-I",
            "/r/cuda-src",
            "/r/cuda-src/core/hash.cu",
            "-o",
            "/out/hash.fatbin"
        ]
    );
    assert_eq!(command.get_program(), "/cuda/bin/nvcc");
}
