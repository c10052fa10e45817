//! [`Comm`]: the GPUs a sharded table spreads over, one rank a GPU, each with a stream of
//! its own and, where there is more than one rank, an NCCL communicator; [`CommId`], what
//! the ranks of several processes share to find each other.

use std::ops::Range;

use gpuhash_core::{Device, Error, Result, Stream};

use crate::launch::{self, RawComm};

/// One GPU of a [`Comm`] that this process drives.
#[derive(Debug)]
pub(crate) struct Rank {
    pub(crate) device: Device,
    /// Where this rank's shard works when a batch comes from another rank.
    pub(crate) stream: Stream,
    /// The rank's NCCL communicator; none in a communicator of one made by
    /// [`Comm::single`], which never calls NCCL.
    pub(crate) nccl: Option<RawComm>,
}

/// The ranks a [`crate::ShardedTable`] spreads over, rank `i` holding shard `i`, and the
/// ones among them this process drives (its *local* ranks).
///
/// - [`Comm::single`]: one rank, no NCCL (its exchanges are copies on the one device).
/// - [`Comm::from_devices`]: every rank in this process, one a device (`ncclCommInitAll`).
/// - [`Comm::from_rank`]: one rank of several processes, possibly on several hosts
///   (`ncclCommInitRank`), each process making its own with the same [`CommId`].
///
/// More than one rank needs `libnccl.so.2` on the loader path ([`nccl_available`]).
#[derive(Debug)]
pub struct Comm {
    /// The local ranks, in order: ranks `first..first + local.len()`.
    local: Vec<Rank>,
    first: usize,
    ranks: usize,
}

/// What identifies one NCCL communicator of several processes (NCCL's unique id, 128
/// bytes): made once, by one process ([`CommId::new`]), and handed to every other by any
/// channel the caller has (a file, a socket, an MPI broadcast) as [`CommId::to_bytes`],
/// read back with [`CommId::from_bytes`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CommId {
    bytes: [u8; COMM_ID_BYTES],
}

/// The length of a [`CommId`] in bytes (NCCL's `NCCL_UNIQUE_ID_BYTES`).
pub const COMM_ID_BYTES: usize = 128;

impl CommId {
    /// A fresh id (`ncclGetUniqueId`): the process that makes it listens for the ranks'
    /// bootstrap on a network interface (NCCL's `NCCL_SOCKET_IFNAME` picks which).
    /// Fails with an error naming the library when NCCL cannot be loaded.
    pub fn new() -> Result<Self> {
        Ok(Self {
            bytes: launch::unique_id()?,
        })
    }

    /// The id's bytes, to send to the other processes.
    pub fn to_bytes(&self) -> [u8; COMM_ID_BYTES] {
        self.bytes
    }

    /// The id another process made, from its [`CommId::to_bytes`].
    pub fn from_bytes(bytes: [u8; COMM_ID_BYTES]) -> Self {
        Self { bytes }
    }
}

impl std::fmt::Debug for CommId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommId(..)")
    }
}

impl Comm {
    /// A communicator of one rank on `device`: every path of a sharded table runs, the
    /// exchanges being copies on the device.
    pub fn single(device: &Device) -> Result<Self> {
        Ok(Self {
            local: vec![Rank {
                device: device.clone(),
                stream: device.new_stream()?,
                nccl: None,
            }],
            first: 0,
            ranks: 1,
        })
    }

    /// A communicator over `devices` (distinct GPUs of this process), rank `i` on
    /// `devices[i]`, every rank local. One device is [`Comm::single`]; more open NCCL, and
    /// fail with an error naming the library when it cannot be loaded
    /// ([`nccl_available`]). An empty list, or a device listed twice, is
    /// [`Error::InvalidInput`].
    pub fn from_devices(devices: &[Device]) -> Result<Self> {
        match devices {
            [] => Err(Error::InvalidInput("Comm::from_devices: no devices".into())),
            [device] => Self::single(device),
            _ => {
                let ordinals: Vec<usize> = devices.iter().map(|d| d.properties().ordinal).collect();
                let mut sorted = ordinals.clone();
                sorted.sort_unstable();
                sorted.dedup();
                if sorted.len() != ordinals.len() {
                    return Err(Error::InvalidInput(format!(
                        "Comm::from_devices: a device listed twice in {ordinals:?}"
                    )));
                }
                let comms = launch::init_all(&ordinals)?;
                let local = devices
                    .iter()
                    .zip(comms)
                    .map(|(device, nccl)| {
                        Ok(Rank {
                            device: device.clone(),
                            stream: device.new_stream()?,
                            nccl: Some(nccl),
                        })
                    })
                    .collect::<Result<_>>()?;
                Ok(Self {
                    local,
                    first: 0,
                    ranks: devices.len(),
                })
            }
        }
    }

    /// Every GPU the driver sees, rank `i` on device `i`.
    pub fn all_devices() -> Result<Self> {
        let devices = (0..Device::count()?)
            .map(Device::new)
            .collect::<Result<Vec<_>>>()?;
        Self::from_devices(&devices)
    }

    /// Rank `rank` of `ranks`, on `device`, in a communicator whose other ranks live in
    /// other processes (of this host or others), each of which calls this with the same
    /// `id` and its own rank (`ncclCommInitRank`: returns once every rank has joined).
    /// Only `device`'s rank is local: a table on this communicator holds that one shard,
    /// and every verb on it is collective (see the crate docs). `ranks` of 1 is allowed
    /// (a communicator of one, through NCCL). A rank not below `ranks` is
    /// [`Error::InvalidInput`]; NCCL missing fails with an error naming the library.
    pub fn from_rank(device: &Device, id: &CommId, rank: usize, ranks: usize) -> Result<Self> {
        if rank >= ranks || i32::try_from(ranks).is_err() {
            return Err(Error::InvalidInput(format!(
                "Comm::from_rank: rank {rank} of {ranks}"
            )));
        }
        let stream = device.new_stream()?;
        let nccl = launch::init_rank(&stream, &id.bytes, rank, ranks)?;
        Ok(Self {
            local: vec![Rank {
                device: device.clone(),
                stream,
                nccl: Some(nccl),
            }],
            first: rank,
            ranks,
        })
    }

    /// How many ranks (GPUs, shards) in all, local or not.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The ranks this process drives: all of them but for [`Comm::from_rank`], whose one
    /// rank it is.
    pub fn local_ranks(&self) -> Range<usize> {
        self.first..self.first + self.local.len()
    }

    /// Whether every rank is local: verbs then run from one caller, and need no other
    /// process.
    pub fn is_whole(&self) -> bool {
        self.local.len() == self.ranks
    }

    /// The device of rank `rank`.
    ///
    /// # Panics
    /// When `rank` is not one of [`Comm::local_ranks`].
    pub fn device(&self, rank: usize) -> &Device {
        &self.local_rank(rank).device
    }

    /// The rank whose device `stream` belongs to, among the local ones;
    /// [`Error::InvalidInput`] for a stream of another device.
    pub fn rank_of(&self, stream: &Stream) -> Result<usize> {
        self.local_of(stream).map(|local| self.first + local)
    }

    /// The local rank (by its place among the local ones) `stream` belongs to.
    pub(crate) fn local_of(&self, stream: &Stream) -> Result<usize> {
        let ordinal = stream.device().properties().ordinal;
        self.local
            .iter()
            .position(|rank| rank.device.properties().ordinal == ordinal)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "a stream of device {ordinal}, which is none of the table's"
                ))
            })
    }

    /// Rank `rank`, which must be local.
    fn local_rank(&self, rank: usize) -> &Rank {
        assert!(
            self.local_ranks().contains(&rank),
            "rank {rank} is not one of this process's ({:?})",
            self.local_ranks()
        );
        &self.local[rank - self.first]
    }

    /// The local ranks, in order.
    pub(crate) fn local_list(&self) -> &[Rank] {
        &self.local
    }

    /// The global rank of the local rank at place `local`.
    pub(crate) fn global(&self, local: usize) -> usize {
        self.first + local
    }

    /// The stream each local rank works on for a batch queued on `caller` (of the local
    /// rank at place `source`): the caller's own on its rank, each other rank's own
    /// stream elsewhere.
    pub(crate) fn streams_for(&self, source: usize, caller: &Stream) -> Vec<Stream> {
        self.local
            .iter()
            .enumerate()
            .map(|(local, r)| {
                if local == source {
                    caller.clone()
                } else {
                    r.stream.clone()
                }
            })
            .collect()
    }

    /// Each local rank's own stream.
    pub(crate) fn own_streams(&self) -> Vec<Stream> {
        self.local.iter().map(|r| r.stream.clone()).collect()
    }

    /// The ranks a collective answer goes to when the local rank at place `source` asks:
    /// that rank alone where every rank is local (one caller), else every rank (each
    /// process asks for itself).
    pub(crate) fn receivers(&self, source: usize) -> Vec<bool> {
        (0..self.ranks)
            .map(|rank| !self.is_whole() || rank == self.global(source))
            .collect()
    }
}

/// Whether the NCCL library can be loaded (`libnccl.so.2` on the loader path), which a
/// communicator of more than one GPU needs.
pub fn nccl_available() -> bool {
    launch::nccl_loaded()
}

/// What to do when [`nccl_available`] says no.
pub fn nccl_missing_help() -> &'static str {
    launch::NCCL_MISSING
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_ids_keep_their_bytes() {
        let bytes: [u8; COMM_ID_BYTES] = std::array::from_fn(|i| (i * 37 % 256) as u8);
        let id = CommId::from_bytes(bytes);
        assert_eq!(id.to_bytes(), bytes);
        assert_eq!(CommId::from_bytes(id.to_bytes()), id);
        assert_ne!(CommId::from_bytes([0; COMM_ID_BYTES]), id);
        assert_eq!(format!("{id:?}"), "CommId(..)");
    }
}
