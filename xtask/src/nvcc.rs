//! Finding nvcc, or installing the pinned CUDA 13.0 compiler from PyPI when none is found.
//!
//! The four wheels must come from one release: a mixed set (say nvcc 13.0 with a newer
//! nvvm) emits PTX whose ISA version the release's own ptxas rejects.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace;

/// The release every committed kernel is built with.
pub const PINNED_RELEASE: &str = "13.0";
const PINNED_VERSION: &str = "13.0.88";
const WHEELS: [&str; 4] = [
    "nvidia-cuda-nvcc",
    "nvidia-nvvm",
    "nvidia-cuda-crt",
    "nvidia-cuda-runtime",
];

/// A usable nvcc and the version line it printed.
pub struct Nvcc {
    /// Path of the executable.
    pub path: PathBuf,
    /// nvcc's own `release ..., V...` line.
    pub version: String,
}

/// The first nvcc of release 13.0 among `NVCC`, `PATH`, `/usr/local/cuda/bin`, and the
/// cache under `target/`; installs the pinned wheels into that cache if none is found.
pub fn find_or_install() -> Result<Nvcc, String> {
    let cache = cache_dir();
    let candidates = [
        std::env::var_os("NVCC").map(PathBuf::from),
        Some(PathBuf::from("nvcc")),
        Some(PathBuf::from("/usr/local/cuda/bin/nvcc")),
        Some(cache_nvcc(&cache)),
    ];
    for candidate in candidates.into_iter().flatten() {
        match release_of(&candidate) {
            Some(version) if version.contains(&format!("release {PINNED_RELEASE},")) => {
                return Ok(Nvcc {
                    path: candidate,
                    version,
                });
            }
            Some(version) => {
                println!(
                    "skipping {} ({version}): kernels are built with release {PINNED_RELEASE}",
                    candidate.display()
                );
            }
            None => {}
        }
    }
    install(&cache)?;
    let path = cache_nvcc(&cache);
    let version = release_of(&path)
        .ok_or_else(|| format!("installed nvcc at {} does not run", path.display()))?;
    Ok(Nvcc { path, version })
}

fn cache_dir() -> PathBuf {
    workspace::root()
        .join("target")
        .join(format!("cuda-{PINNED_VERSION}"))
}

fn cache_nvcc(cache: &Path) -> PathBuf {
    cache.join("nvidia/cu13/bin/nvcc")
}

/// nvcc's `release X, VY` line, or None if the path does not run as nvcc.
fn release_of(nvcc: &Path) -> Option<String> {
    let output = Command::new(nvcc).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find(|line| line.contains("release"))
        .map(|line| line.trim().to_string())
}

fn install(cache: &Path) -> Result<(), String> {
    println!(
        "no nvcc of release {PINNED_RELEASE} found: installing {PINNED_VERSION} from PyPI into {}",
        workspace::relative(cache)
    );
    let pinned: Vec<String> = WHEELS
        .iter()
        .map(|w| format!("{w}=={PINNED_VERSION}"))
        .collect();
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--upgrade",
            "--target",
        ])
        .arg(cache)
        .args(&pinned)
        .status()
        .map_err(|e| format!("cannot run python3 -m pip to install nvcc: {e}"))?;
    if !status.success() {
        return Err(format!("pip could not install {}", pinned.join(" ")));
    }
    // pip keeps the wheel's file modes only sometimes; the tools must be executable.
    for dir in ["nvidia/cu13/bin", "nvidia/cu13/nvvm/bin"] {
        for tool in workspace::read_dir_sorted(&cache.join(dir))? {
            if tool.is_file() {
                make_executable(&tool)?;
            }
        }
    }
    Ok(())
}

fn make_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mut permissions = std::fs::metadata(path)
        .map_err(|e| e.to_string())?
        .permissions();
    permissions.set_mode(permissions.mode() | 0o111);
    std::fs::set_permissions(path, permissions)
        .map_err(|e| format!("cannot chmod {}: {e}", path.display()))
}
