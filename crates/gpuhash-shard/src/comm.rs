//! [`Comm`]: the GPUs a sharded table spreads over, one rank a GPU, each with a stream of
//! its own and, where there is more than one rank, an NCCL communicator.

use gpuhash_core::{Device, Error, Result, Stream};

use crate::launch::{self, RawComm};

/// One GPU of a [`Comm`].
#[derive(Debug)]
pub(crate) struct Rank {
    pub(crate) device: Device,
    /// Where this rank's shard works when a batch comes from another rank.
    pub(crate) stream: Stream,
    /// The rank's NCCL communicator; none in a communicator of one, which never calls NCCL.
    pub(crate) nccl: Option<RawComm>,
}

/// The GPUs of one process that a [`crate::ShardedTable`] spreads over: rank `i` holds
/// shard `i`.
///
/// [`Comm::single`] is a communicator of one, which needs no NCCL (its exchanges are
/// copies on the one device); [`Comm::from_devices`] opens one NCCL communicator a device
/// (`ncclCommInitAll`), which needs `libnccl.so.2` on the loader path.
#[derive(Debug)]
pub struct Comm {
    ranks: Vec<Rank>,
}

impl Comm {
    /// A communicator of one rank on `device`: every path of a sharded table runs, the
    /// exchanges being copies on the device.
    pub fn single(device: &Device) -> Result<Self> {
        Ok(Self {
            ranks: vec![Rank {
                device: device.clone(),
                stream: device.new_stream()?,
                nccl: None,
            }],
        })
    }

    /// A communicator over `devices` (distinct GPUs of this process), rank `i` on
    /// `devices[i]`. One device is [`Comm::single`]; more open NCCL, and fail with an error
    /// naming the library when it cannot be loaded ([`nccl_available`]). An empty list,
    /// or a device listed twice, is [`Error::InvalidInput`].
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
                let ranks = devices
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
                Ok(Self { ranks })
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

    /// How many ranks (GPUs, shards).
    pub fn ranks(&self) -> usize {
        self.ranks.len()
    }

    /// The device of rank `rank`.
    ///
    /// # Panics
    /// When `rank` is not below [`Comm::ranks`].
    pub fn device(&self, rank: usize) -> &Device {
        &self.ranks[rank].device
    }

    /// The rank whose device `stream` belongs to; [`Error::InvalidInput`] for a stream of
    /// another device.
    pub fn rank_of(&self, stream: &Stream) -> Result<usize> {
        let ordinal = stream.device().properties().ordinal;
        self.ranks
            .iter()
            .position(|rank| rank.device.properties().ordinal == ordinal)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "a stream of device {ordinal}, which is none of the table's"
                ))
            })
    }

    /// The ranks, in order.
    pub(crate) fn rank_list(&self) -> &[Rank] {
        &self.ranks
    }

    /// The stream each rank works on for a batch queued on `caller` (of rank `source`):
    /// the caller's own on its rank, each other rank's own stream elsewhere.
    pub(crate) fn streams_for(&self, source: usize, caller: &Stream) -> Vec<Stream> {
        self.ranks
            .iter()
            .enumerate()
            .map(|(rank, r)| {
                if rank == source {
                    caller.clone()
                } else {
                    r.stream.clone()
                }
            })
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
