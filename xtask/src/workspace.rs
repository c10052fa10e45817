//! Where things live in the repository, and the small file helpers the tasks share.

use std::path::{Path, PathBuf};

/// The workspace root: the parent of this crate's folder.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one folder below the workspace root")
        .to_path_buf()
}

/// One folder of `cuda-src/` and the crate that embeds what it compiles to.
pub struct KernelCrate {
    /// The folder's name, `core` for `cuda-src/core`.
    pub name: String,
    /// `cuda-src/<name>`.
    pub source_dir: PathBuf,
    /// `crates/gpuhash-<name>`, underscores turned into dashes.
    pub crate_dir: PathBuf,
}

impl KernelCrate {
    /// `crates/<crate>/kernels`, where the fat binaries and their stamps go.
    pub fn output_dir(&self) -> PathBuf {
        self.crate_dir.join("kernels")
    }

    /// `cuda-src/include/gpuhash/<name>_layouts.h`, if the crate shares layouts with Rust.
    pub fn layouts_header(&self) -> PathBuf {
        root().join(format!("cuda-src/include/gpuhash/{}_layouts.h", self.name))
    }

    /// `crates/<crate>/src/layouts.rs`, bindgen's output.
    pub fn layouts_rust(&self) -> PathBuf {
        self.crate_dir.join("src/layouts.rs")
    }
}

/// Every folder of `cuda-src/` but `include`, sorted.
pub fn kernel_crates() -> Result<Vec<KernelCrate>, String> {
    let cuda_src = root().join("cuda-src");
    let mut crates = Vec::new();
    for entry in read_dir_sorted(&cuda_src)? {
        let name = file_name(&entry);
        if !entry.is_dir() || name == "include" {
            continue;
        }
        let crate_dir = root()
            .join("crates")
            .join(format!("gpuhash-{}", name.replace('_', "-")));
        if !crate_dir.is_dir() {
            return Err(format!(
                "{} has no crate at {}",
                entry.display(),
                crate_dir.display()
            ));
        }
        crates.push(KernelCrate {
            name,
            source_dir: entry,
            crate_dir,
        });
    }
    Ok(crates)
}

/// The entries of a folder, sorted by path so that every run sees one order.
pub fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut paths = entries
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    paths.sort();
    Ok(paths)
}

/// Every file under `dir`, recursively, sorted.
pub fn files_under(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in read_dir_sorted(dir)? {
        if path.is_dir() {
            files.extend(files_under(&path)?);
        } else {
            files.push(path);
        }
    }
    Ok(files)
}

/// The last component of a path as a string.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A path relative to the workspace root, for messages.
pub fn relative(path: &Path) -> String {
    let root = root();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Reads a file, with the path in the error.
pub fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", relative(path)))
}

/// Writes a file, with the path in the error.
pub fn write(path: &Path, contents: &[u8]) -> Result<(), String> {
    std::fs::write(path, contents).map_err(|e| format!("cannot write {}: {e}", relative(path)))
}

/// 64-bit FNV-1a: a stable fingerprint for stamps (not a defence against tampering).
pub fn fingerprint(chunks: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for chunk in chunks {
        for &byte in chunk.iter() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Separate chunks so that ("ab", "c") and ("a", "bc") differ.
        hash ^= 0xff;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}
